"""A `cassette drift` run: the planned requests re-sent through a scratch proxy, compared, reported, accepted.

The scratch proxy is started in update mode and records into a private folder
(the cassette folder is only read, unless `Outputs.write`); each re-recording
is compared with its cassette (core/drift/drift.py) and the results reported worst
first (core/drift/drift_report.py). Requests run in a thread pool, the same key one
at a time (the proxy writes one file per key), within a request budget, each
429 waited out as the provider asks. Every message, and each output whole, is
scrubbed of the credentials (core/secrets/scrub.py).

A run ends whatever the providers do: each request is bounded in silence, in
total time and in size (resend.py); a signal (SIGTERM from a CI step's
timeout, SIGINT, SIGHUP) stops the scratch proxy, and the report is written
whatever happened, the requests not compared listed as not checked.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from http.client import HTTPException
from pathlib import Path

from ..core.drift.credentials import Credential
from ..core.drift.drift import Severity, compare
from ..core.drift.drift_report import DriftReport, Outcome, Result, render_markdown, render_text
from ..core.files.atomic_write import write_atomic
from ..core.files.cassette_file import load
from ..core.files.safe_read import CassetteError
from ..core.files.stream_events import stream_kind
from ..core.keys.hosts import HostScope
from ..core.keys.recipe import Recipe
from ..core.record_statuses import DEFAULT_RECORD_STATUSES, parse_record_statuses
from ..core.secrets.scrub import scrub
from . import launcher
from .drift_plan import Job, Selection, gather, plan, unchecked
from .errors import LauncherError
from .resend import AnswerLimit, Received, retry_after, send

ALL_STATUSES = ("1xx", "2xx", "3xx", "4xx", "5xx")
"""The scratch proxy keeps every answer, so an error is read from its redacted re-recording like any other."""
WRITABLE = parse_record_statuses(DEFAULT_RECORD_STATUSES)
"""`--write` accepts what a record run would keep: never a 401, a 429 or a 5xx."""
STREAM_WRITE_WAIT = 15.0
"""Seconds a finished stream's re-recording may take to appear (the proxy writes it as the stream ends)."""
WHOLE_WRITE_WAIT = 2.0
"""A whole answer's re-recording is written before the answer is sent on: this only covers a slow disk."""


@dataclass
class Policy:
    """How hard to try: concurrency, the request budget, retries after a 429, the wait each may take."""

    concurrency: int = 4
    max_requests: int | None = None
    retries: int = 2
    max_wait: float = 60.0
    timeout: float = 120.0
    max_time: float = 600.0
    max_bytes: int = 64 * 1024 * 1024
    stopping: threading.Event = field(default_factory=threading.Event, repr=False)
    """Set when the run stops: a worker waiting out a 429 stops waiting."""


class Budget:
    """`--max-requests`: requests sent across the workers, retries included."""

    def __init__(self, limit: int | None) -> None:
        self.left = limit
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            if self.left is None:
                return True
            if self.left <= 0:
                return False
            self.left -= 1
            return True


# -- checking: send, retry after a 429, read the re-recording, compare --------------------------------------------

Sender = Callable[[Job], Received]


def check(job: Job, sender: Sender, scratch: Path, kept: Path, budget: Budget, policy: Policy) -> None:
    """Fill `job.result`: re-send (retrying a 429 as the provider asks), then compare the re-recording."""
    result, target = job.result, scratch / job.scratch
    received = None
    for attempt in range(policy.retries + 1):
        if not budget.take():
            message = "over --max-requests" if not attempt else "over --max-requests while waiting out a 429"
            unchecked(result, message, Outcome.SKIPPED if not attempt else Outcome.RATE_LIMITED)
            return
        target.unlink(missing_ok=True)  # an earlier answer to the same request (update mode overwrites)
        try:
            received = sender(job)
        except AnswerLimit as e:
            unchecked(result, f"{e}: cut off, not compared")
            return
        except (OSError, HTTPException, ValueError) as e:  # ValueError: http.client refusing a header
            unchecked(result, scrub(f"the request failed: {e or type(e).__name__}"))
            return
        result.attempts += 1
        if received.status != 429:
            break
        wait = retry_after(received.headers)
        wait = 2.0**attempt if wait is None else wait
        if attempt == policy.retries or wait > policy.max_wait:
            why = f"retry-after {wait:.0f} s is over --max-wait" if wait > policy.max_wait else "retries used up"
            unchecked(result, f"429 after {result.attempts} attempt(s) ({why}); not drift", Outcome.RATE_LIMITED)
            return
        if policy.stopping.wait(wait):
            unchecked(result, "cassette drift stopped while it waited out a 429")
            return
    assert received is not None
    if result.attempts > 1:
        result.message = (
            f"answered after {result.attempts - 1} 429(s), each waited out (retry-after, else 1 s doubling)"
        )
    if not _compare(job, received, scratch, kept):
        target.unlink(missing_ok=True)


def _compare(job: Job, received: Received, scratch: Path, kept: Path) -> bool:
    """Compare the re-recording with the cassette; True when it was kept for --write."""
    result, target = job.result, scratch / job.scratch
    own = _proxy_error(received)
    if own:
        unchecked(result, scrub(f"the proxy answered {received.status} itself: {own}"))
        return False
    streamed = stream_kind(received.headers.get("content-type", "")) is not None
    deadline = time.monotonic() + (STREAM_WRITE_WAIT if streamed else WHOLE_WRITE_WAIT)
    while not target.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        new = load(target, scratch)
    except FileNotFoundError:
        unchecked(result, f"answered {received.status}, but the proxy kept no re-recording at {job.scratch} "
                   "(a stream cut off, or key settings given to mitmdump directly)")  # fmt: skip
        return False
    except (OSError, CassetteError) as e:
        unchecked(result, f"the re-recording is unreadable: {e}")
        return False
    result.findings = [
        replace(f, old=scrub(f.old), new=scrub(f.new), detail=scrub(f.detail))
        for f in compare(job.cassette["response"], new["response"])
    ]
    result.outcome = Outcome.DRIFT if result.findings else Outcome.SAME
    if not result.findings:
        return False
    job.rerecording = kept / f"{id(job)}.json"
    os.replace(target, job.rerecording)
    return True


def _proxy_error(received: Received) -> str:
    """The message of an answer the proxy made itself (`cassette_*` error types: an unreachable upstream)."""
    if received.status < 400 or not received.body.startswith(b"{"):
        return ""
    try:
        error = json.loads(received.body).get("error")
    except (ValueError, AttributeError):
        return ""
    if isinstance(error, dict) and str(error.get("type", "")).startswith("cassette_"):
        return str(error.get("message", ""))
    return ""


# -- the run ----------------------------------------------------------------------------------------------------------


class Stopped(Exception):
    """A signal asked drift to stop: the proxy is stopped and the report written before it exits 128 + signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextmanager
def stopped_by_signals() -> Iterator[None]:
    """SIGTERM, SIGINT and SIGHUP raise Stopped in the main thread (their defaults would end the process and leave
    the scratch proxy running); a second signal while stopping is ignored, so the stop itself is not cut short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            raise Stopped(signum)

    previous = {number: signal.signal(number, stop) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _not_checked(job: Job, why: str) -> Result:
    """A job's result as it stands: final once checked, else a copy saying why it was not (a worker still
    running may go on writing the original)."""
    if job.checked:
        return job.result
    return replace(job.result, outcome=Outcome.ERROR, findings=[], message=f"not checked: {why}")


def recheck(settings: launcher.Settings, jobs: list[Job], policy: Policy, private: Path) -> None:
    """Start the scratch proxy, re-send every job (one worker per request, the same key one at a time), stop it."""
    scratch, kept = private / "rerecorded", private / "kept"
    kept.mkdir()
    statuses = [arg for status in ALL_STATUSES for arg in ("--set", f"cassette_record_statuses={status}")]
    settings = replace(
        settings,
        cassette_dir=scratch,
        mode="update",  # every request reaches the provider, even a second one with the same key
        extra_args=[*settings.extra_args, *statuses, "--set", "cassette_repeats=reuse"],
    )
    proxy = launcher.start(settings)
    pool = ThreadPoolExecutor(max_workers=policy.concurrency)
    try:
        groups: dict[str, list[Job]] = {}
        for job in jobs:
            groups.setdefault(job.scratch, []).append(job)
        budget = Budget(policy.max_requests)

        def sender(job: Job) -> Received:
            return send(proxy.url, proxy.ca_bundle, job.facts, job.headers, policy.timeout, policy.max_time,
                        policy.max_bytes)  # fmt: skip

        def check_group(group: list[Job]) -> None:
            for job in group:
                try:
                    check(job, sender, scratch, kept, budget, policy)
                except Exception as e:  # a bug of ours: this cassette's error, seen in the report, not a lost run
                    unchecked(job.result, scrub(f"cassette drift failed on it: {type(e).__name__}: {e}"))
                # A check the stop cut short (its proxy gone) says nothing of the provider: not checked.
                job.checked = not policy.stopping.is_set()

        list(pool.map(check_group, groups.values()))
    finally:
        # Interrupted (a signal, a bug): the requests not sent yet never will be, and the proxy goes first: its end
        # fails the requests in flight at once, rather than each waiting out its --timeout.
        policy.stopping.set()
        pool.shutdown(wait=False, cancel_futures=True)
        try:
            proxy.stop()
        except Stopped:  # a signal during the stop: stop it all the same (a second signal is ignored)
            proxy.stop()
            raise


def write_accepted(jobs: list[Job]) -> list[str]:
    """Put each drifted re-recording a record run would keep in its cassette's place; the lines to print."""
    lines = []
    for job in jobs:
        if job.rerecording is None:
            continue
        status = next((finding.new for finding in job.result.findings if finding.field == "status"), None)
        if status is not None and (not status.isdigit() or int(status) not in WRITABLE):
            lines.append(f"  not written (status {status}): {job.result.cassette}")
            continue
        write_atomic(job.path, job.rerecording.read_bytes())
        job.result.message = "re-recording written (--write)"
        lines.append(f"  written: {job.result.cassette}")
    return lines


@dataclass(frozen=True)
class Outputs:
    """What a run leaves besides the table it prints: the exit status's threshold, the reports, the re-recordings."""

    fail_on: Severity
    """Drift of this severity or worse exits 1 (core/drift/drift_report.py)."""
    report: Path | None = None
    """Where the JSON report goes (`--report`)."""
    markdown: Path | None = None
    """Where the Markdown summary goes (`--markdown`)."""
    write: bool = False
    """Put the drifted re-recordings a record run would keep in their cassettes' place (`--write`)."""


def _outside(path: Path | None, root: Path, flag: str) -> None:
    if path is not None and path.resolve().is_relative_to(root.resolve()):
        raise LauncherError(f"{flag} {path}: inside the cassette folder {root}; write it elsewhere")


def run(settings: launcher.Settings, selection: Selection, recipe: Recipe, rules: Sequence[Credential],
        policy: Policy, outputs: Outputs, environ: Mapping[str, str]) -> int:  # fmt: skip
    """Check the selected cassettes of `settings.cassette_dir` under `recipe`, re-sending with the credentials
    `environ` and `rules` give; print the table, write the outputs; the exit status (128 + the signal that
    stopped it)."""
    root = settings.cassette_dir
    if not root.is_dir():
        raise LauncherError(f"{root} is not a folder: pass the cassette folder with --dir or CASSETTE_DIR")
    _outside(outputs.report, root, "--report")
    _outside(outputs.markdown, root, "--markdown")
    chosen, results = gather(selection, root)
    if not chosen and not results:
        raise LauncherError(f"no cassette in {root} matches the selection")
    scope = HostScope(settings.controlled_hosts())
    jobs: list[Job] = []
    for item in chosen:
        planned = plan(item, recipe, scope, environ, list(rules))
        if isinstance(planned, Job):
            jobs.append(planned)
        else:
            results.append(planned)
    written: list[str] = []
    try:
        with (
            stopped_by_signals(),
            tempfile.TemporaryDirectory(prefix="cassette-drift-", ignore_cleanup_errors=True) as private,
        ):
            if jobs:
                recheck(settings, jobs, policy, Path(private))
            if outputs.write:
                written = write_accepted(jobs)
    except Stopped as e:
        why = f"cassette drift was stopped by {e} before its answer was compared"
        _report(outputs, root, [*results, *(_not_checked(job, why) for job in jobs)], written)
        print(f"cassette: drift stopped by {e}: its proxy is stopped, the report lists what was not checked",
              file=sys.stderr)  # fmt: skip
        return 128 + e.signum
    except BaseException as e:  # the proxy did not start, a bug of ours: the report still says what was checked
        why = scrub(f"cassette drift failed before its answer was compared ({type(e).__name__}: {e})")
        _report(outputs, root, [*results, *(_not_checked(job, why) for job in jobs)], written)
        raise
    return _report(outputs, root, [*results, *(job.result for job in jobs)], written)


def _report(outputs: Outputs, root: Path, results: list[Result], written: list[str]) -> int:
    """Print the table, write `--report` and `--markdown` (each scrubbed whole); the exit status."""
    report = DriftReport(str(root), outputs.fail_on, datetime.now(UTC).isoformat(timespec="seconds"), results)
    if outputs.report:
        write_atomic(outputs.report, scrub(json.dumps(report.to_json(), indent=2) + "\n").encode("utf-8"))
    if outputs.markdown:
        write_atomic(outputs.markdown, scrub(render_markdown(report)).encode("utf-8"))
    print(scrub(render_text(report)))
    if outputs.write:
        print(f"\n--write: {sum(line.startswith('  written') for line in written)} re-recording(s) written into {root}")
        print("\n".join(written))
    return report.exit_status()
