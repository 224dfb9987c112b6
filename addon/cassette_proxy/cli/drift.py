"""`cassette drift`: re-send the recorded requests to the live providers and say what changed, worst first.

Replay proves the requests are unchanged; it cannot see a retired model, a new
response shape or a changed answer. This re-sends each selected cassette's
request through a proxy started in update mode, which records into a scratch
folder (the cassette folder is only read, unless `--write`), compares each
re-recording with its cassette (core/drift.py: status, shape, behaviour,
text) and prints a table; `--report` and `--markdown` keep it for a scheduled
job, `--write` accepts the drifted re-recordings into the cassette folder for
review. Credentials come from the environment (core/credentials.py), the key
and host settings are `cassette run`'s own flags (proxy_flags.py); every
message, and each output whole, is scrubbed of them (core/scrub.py).

Drift ends whatever the providers do: each request is bounded in silence
(`--timeout`), in total time (`--max-time`) and in size (`--max-bytes`); a
signal (SIGTERM from a CI step's timeout, SIGINT, SIGHUP) stops the scratch
proxy, and the report is written whatever happened, the requests not compared
listed as not checked.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from http.client import HTTPException
from pathlib import Path
from urllib.parse import urlsplit

from ..core.atomic_write import write_atomic
from ..core.cassette_file import CassetteError, load
from ..core.credentials import Credential, CredentialError, credential_headers, parse_rule
from ..core.defaults import DEFAULT_KEY_HEADERS
from ..core.drift import SEVERITY_NAMES, compare, parse_severity
from ..core.drift_report import DriftReport, Outcome, Result, render_markdown, render_text
from ..core.hosts import HostScope
from ..core.key import RequestFacts
from ..core.location import cassette_files, endpoint_dir, relative_name
from ..core.recipe import Recipe, facts_of, make_recipe, recipe_of, stored_key
from ..core.record_statuses import DEFAULT_RECORD_STATUSES, parse_record_statuses
from ..core.scrub import scrub
from ..core.session_file import is_session
from ..core.stream_events import stream_kind
from ..core.summary import one_line, summarize_request
from ..launch import launcher
from ..launch.resend import AnswerLimit, Received, request_headers, retry_after, send
from . import proxy_flags

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


@dataclass
class Job:
    """One cassette to re-send, and where the scratch proxy will record its re-recording."""

    path: Path
    cassette: dict
    facts: RequestFacts
    headers: dict[str, str]
    scratch: str
    """The re-recording's path relative to the scratch folder (the shared location of the same key)."""
    result: Result
    rerecording: Path | None = None
    """Where the re-recording was kept, once checked."""
    checked: bool = False
    """`result` is final: set once its check ended before the run was stopped."""


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


# -- selection ----------------------------------------------------------------------------------------------------


def _test_folder(relative: str, request: dict) -> str | None:
    """`tests/<module>/<test>` of a per-test cassette (per_test.py), else None."""
    if not relative.startswith("tests/"):
        return None
    try:
        facts = facts_of(request)
    except ValueError:
        return None
    folder, sep, _ = relative.rpartition(f"/{endpoint_dir(facts.scheme, facts.host, facts.port, facts.path)}/")
    return folder if sep else None


def glob_for_tests(pattern: str) -> str:
    """A test id glob (`tests/test_app.py::TestChat::test_*`) as a glob on test folders (per_test.test_dir)."""
    module, sep, name = pattern.partition("::")
    return f"tests/{module}/{name.replace('::', '.')}" if sep else f"tests/*{pattern}"


def selected(args: argparse.Namespace, relative: str, cassette: dict, now: datetime) -> bool:
    request = cassette["request"]
    if args.paths and not any(fnmatch.fnmatchcase(relative, glob) for glob in args.paths):
        return False
    if args.select_host and (urlsplit(str(request.get("url", ""))).hostname or "") not in HostScope(args.select_host):
        return False
    if args.select_test:
        folder = _test_folder(relative, request)
        if folder is None or not any(fnmatch.fnmatchcase(folder, glob_for_tests(g)) for g in args.select_test):
            return False
    if args.older_than is not None:
        try:
            recorded = datetime.fromisoformat(str(cassette.get("recorded_at")))
        except ValueError:
            return True  # an unknown age may be any age: checked
        recorded = recorded if recorded.tzinfo else recorded.replace(tzinfo=UTC)
        return recorded <= now - timedelta(days=args.older_than)
    return True


def _result_for(relative: str, cassette: dict) -> Result:
    asked = summarize_request(cassette["request"])
    return Result(
        cassette=relative,
        request=f"{asked.method} {asked.url.split('://', 1)[-1].split('?', 1)[0]}",
        model=asked.model,
        prompt=one_line(asked.first_user_message, 120),
        recorded_at=str(cassette.get("recorded_at", "")),
    )


# -- planning: what can be re-sent, and how -----------------------------------------------------------------------


def plan(job_input: tuple[Path, str, dict], recipe: Recipe, scope: HostScope, environ: Mapping[str, str],
         rules: list[Credential]) -> Job | Result:  # fmt: skip
    """A Job for a cassette that can be re-sent as it was recorded, else a Result saying why not."""
    path, relative, cassette = job_input
    result = _result_for(relative, cassette)
    request = cassette["request"]
    if is_session(cassette):  # re-sending its upgrade as a plain GET would compare nothing
        return _unchecked(result, "a WebSocket session: drift re-sends HTTP requests only", Outcome.SKIPPED)
    if (cassette.get("keyed_with") or {}).get("request_redacted"):
        return _unchecked(result, "its stored request was redacted: re-sending it would send the placeholders")
    try:
        facts = facts_of(request)
        key = stored_key(request, recipe)
    except ValueError as e:
        return _unchecked(result, f"its request cannot be re-sent: {e}")
    if key != cassette["key"]:
        try:
            recorded = recipe_of(cassette)
        except ValueError as e:
            return _unchecked(result, f"its keyed_with is unreadable ({e}): it cannot be re-sent as recorded")
        why = "; ".join(recipe.differences(recorded)) if recorded else "its key settings are not stored"
        why = why or "the same settings, an older key recipe: `cassette rekey` updates it"
        return _unchecked(result, f"keyed differently under this run's key settings ({why}): pass the --ignore, "
                          "--key-header and --ignore-value it was recorded with")  # fmt: skip
    if facts.host not in scope:
        # A reverse route's target joined the recording run's scope without any --hosts: name the host to pass.
        return _unchecked(result, f"{facts.host} is not under cassette control in this run: pass --hosts "
                          f"{facts.host} (with the other hosts to check), as for a recording made through a "
                          "--reverse route to it")  # fmt: skip
    try:
        credentials = credential_headers(facts.host, environ, rules)
    except CredentialError as e:
        return _unchecked(result, str(e))
    if credentials and facts.scheme != "https":
        return _unchecked(result, f"refusing to send credentials for {facts.host} over plain HTTP ({facts.scheme}://)")
    try:
        headers = request_headers(facts, recipe.key_headers, credentials)
    except ValueError as e:
        return _unchecked(result, f"its request cannot be re-sent: {e}")
    return Job(
        path=path,
        cassette=cassette,
        facts=facts,
        headers=headers,
        scratch=relative_name(facts.scheme, facts.host, facts.port, facts.path, key),
        result=result,
    )


def _unchecked(result: Result, message: str, outcome: Outcome = Outcome.ERROR) -> Result:
    result.outcome, result.message = outcome, message
    return result


# -- checking: send, retry after a 429, read the re-recording, compare --------------------------------------------

Sender = Callable[[Job], Received]


def check(job: Job, sender: Sender, scratch: Path, kept: Path, budget: Budget, policy: Policy) -> None:
    """Fill `job.result`: re-send (retrying a 429 as the provider asks), then compare the re-recording."""
    result, target = job.result, scratch / job.scratch
    received = None
    for attempt in range(policy.retries + 1):
        if not budget.take():
            message = "over --max-requests" if not attempt else "over --max-requests while waiting out a 429"
            _unchecked(result, message, Outcome.SKIPPED if not attempt else Outcome.RATE_LIMITED)
            return
        target.unlink(missing_ok=True)  # an earlier answer to the same request (update mode overwrites)
        try:
            received = sender(job)
        except AnswerLimit as e:
            _unchecked(result, f"{e}: cut off, not compared")
            return
        except (OSError, HTTPException, ValueError) as e:  # ValueError: http.client refusing a header
            _unchecked(result, scrub(f"the request failed: {e or type(e).__name__}"))
            return
        result.attempts += 1
        if received.status != 429:
            break
        wait = retry_after(received.headers)
        wait = 2.0**attempt if wait is None else wait
        if attempt == policy.retries or wait > policy.max_wait:
            why = f"retry-after {wait:.0f} s is over --max-wait" if wait > policy.max_wait else "retries used up"
            _unchecked(result, f"429 after {result.attempts} attempt(s) ({why}); not drift", Outcome.RATE_LIMITED)
            return
        if policy.stopping.wait(wait):
            _unchecked(result, "cassette drift stopped while it waited out a 429")
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
        _unchecked(result, scrub(f"the proxy answered {received.status} itself: {own}"))
        return False
    streamed = stream_kind(received.headers.get("content-type", "")) is not None
    deadline = time.monotonic() + (STREAM_WRITE_WAIT if streamed else WHOLE_WRITE_WAIT)
    while not target.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        new = load(target, scratch)
    except FileNotFoundError:
        _unchecked(result, f"answered {received.status}, but the proxy kept no re-recording at {job.scratch} "
                   "(a stream cut off, or key settings given to mitmdump directly)")  # fmt: skip
        return False
    except (OSError, CassetteError) as e:
        _unchecked(result, f"the re-recording is unreadable: {e}")
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


# -- the command --------------------------------------------------------------------------------------------------


def gather(args: argparse.Namespace, root: Path) -> tuple[list[tuple[Path, str, dict]], list[Result]]:
    """The selected cassettes, read and validated, oldest first; unreadable ones (that the globs select) as errors."""
    now = datetime.now(UTC)
    chosen, unreadable = [], []
    for path in cassette_files(root):
        relative = path.relative_to(root).as_posix()
        if args.paths and not any(fnmatch.fnmatchcase(relative, glob) for glob in args.paths):
            continue
        try:
            cassette = load(path, root)
        except (OSError, CassetteError) as e:
            unreadable.append(_unchecked(Result(relative, "?"), f"unreadable cassette: {e}"))
            continue
        if selected(args, relative, cassette, now):
            chosen.append((path, relative, cassette))
    chosen.sort(key=lambda item: (str(item[2].get("recorded_at", "")), item[1]))
    return chosen, unreadable


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
                    _unchecked(job.result, scrub(f"cassette drift failed on it: {type(e).__name__}: {e}"))
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


def _outside(path: Path | None, root: Path, flag: str) -> None:
    if path is not None and path.resolve().is_relative_to(root.resolve()):
        raise launcher.LauncherError(f"{flag} {path}: inside the cassette folder {root}; write it elsewhere")


def run_drift(args: argparse.Namespace) -> int:
    try:
        rules = [parse_rule(spec) for spec in args.credential]
        recipe = make_recipe(args.ignore, [*DEFAULT_KEY_HEADERS, *args.key_header], args.ignore_value)
    except ValueError as e:
        raise launcher.LauncherError(str(e)) from None
    settings = proxy_flags.settings_from_arguments(args, os.environ)
    root = settings.cassette_dir
    if not root.is_dir():
        raise launcher.LauncherError(f"{root} is not a folder: pass the cassette folder with --dir or CASSETTE_DIR")
    _outside(args.drift_report, root, "--report")
    _outside(args.markdown, root, "--markdown")
    chosen, results = gather(args, root)
    if not chosen and not results:
        raise launcher.LauncherError(f"no cassette in {root} matches the selection")
    scope = HostScope(settings.controlled_hosts())
    jobs: list[Job] = []
    for item in chosen:
        planned = plan(item, recipe, scope, os.environ, rules)
        if isinstance(planned, Job):
            jobs.append(planned)
        else:
            results.append(planned)
    policy = Policy(args.concurrency, args.max_requests, args.retries, args.max_wait, args.timeout, args.max_time,
                    args.max_bytes)  # fmt: skip
    written: list[str] = []
    try:
        with (
            stopped_by_signals(),
            tempfile.TemporaryDirectory(prefix="cassette-drift-", ignore_cleanup_errors=True) as private,
        ):
            if jobs:
                recheck(settings, jobs, policy, Path(private))
            if args.write:
                written = write_accepted(jobs)
    except Stopped as e:
        why = f"cassette drift was stopped by {e} before its answer was compared"
        _report(args, root, [*results, *(_not_checked(job, why) for job in jobs)], written)
        print(f"cassette: drift stopped by {e}: its proxy is stopped, the report lists what was not checked",
              file=sys.stderr)  # fmt: skip
        return 128 + e.signum
    except BaseException as e:  # the proxy did not start, a bug of ours: the report still says what was checked
        why = scrub(f"cassette drift failed before its answer was compared ({type(e).__name__}: {e})")
        _report(args, root, [*results, *(_not_checked(job, why) for job in jobs)], written)
        raise
    return _report(args, root, [*results, *(job.result for job in jobs)], written)


def _report(args: argparse.Namespace, root: Path, results: list[Result], written: list[str]) -> int:
    """Print the table, write `--report` and `--markdown` (each scrubbed whole); the exit status."""
    report = DriftReport(str(root), parse_severity(args.fail_on), datetime.now(UTC).isoformat(timespec="seconds"),
                         results)  # fmt: skip
    if args.drift_report:
        write_atomic(args.drift_report, scrub(json.dumps(report.to_json(), indent=2) + "\n").encode("utf-8"))
    if args.markdown:
        write_atomic(args.markdown, scrub(render_markdown(report)).encode("utf-8"))
    print(scrub(render_text(report)))
    if args.write:
        print(f"\n--write: {sum(line.startswith('  written') for line in written)} re-recording(s) written into {root}")
        print("\n".join(written))
    return report.exit_status()


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text} is below {minimum}")
        return value

    return parse


def _seconds(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "drift",
        help="re-send the recorded requests to the live providers and report what changed, worst first",
        description="Re-send the recorded requests to the live providers through a proxy that records into a "
        "scratch folder (the cassette folder is only read, unless --write), compare each answer with its cassette "
        "and print a table, worst first: status, shape, behaviour, text. Exit status: 1 for drift at or above "
        "--fail-on, 3 when a cassette could not be checked (or none was), 2 for a usage error, else 0. Credentials "
        "come from each SDK's usual variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, ...).",
    )
    parser.add_argument("paths", nargs="*", metavar="GLOB", help="cassettes to check: globs on their paths "
                        "relative to the folder (api.openai.com/**); default: every cassette")  # fmt: skip
    proxy_flags.add_folder_and_hosts(parser)
    proxy_flags.add_key_settings(parser)
    parser.add_argument("--select-host", action="append", default=[], metavar="GLOB",
                        help="only cassettes whose request went to a host matching GLOB; repeatable")  # fmt: skip
    parser.add_argument("--select-test", action="append", default=[], metavar="GLOB",
                        help="only per-test cassettes of tests matching GLOB (a test id, e.g. "
                        "'tests/test_chat.py::test_*'); repeatable")  # fmt: skip
    parser.add_argument("--older-than", type=_seconds, metavar="DAYS",
                        help="only cassettes recorded at least DAYS days ago")  # fmt: skip
    parser.add_argument("--fail-on", choices=SEVERITY_NAMES, default="behaviour",
                        help="exit 1 when drift of this severity or worse is found (default behaviour: a changed "
                        "text alone is listed, and exits 0)")  # fmt: skip
    parser.add_argument("--report", dest="drift_report", type=Path, metavar="FILE", help="also write the JSON report")
    parser.add_argument("--markdown", type=Path, metavar="FILE",
                        help="also write a Markdown summary, for a job summary or an issue comment")  # fmt: skip
    parser.add_argument("--write", action="store_true",
                        help="put the drifted re-recordings in their cassettes' place, for review as a change "
                        "(choose them with the selection); never a 401, 429 or 5xx answer")  # fmt: skip
    parser.add_argument("--credential", action="append", default=[], metavar="HOST=[HEADER:]VARIABLE",
                        help="the credential for hosts the providers' table does not cover: $VARIABLE sent as a "
                        "bearer token, or in HEADER; repeatable")  # fmt: skip
    parser.add_argument("--concurrency", type=_count(1), default=4, metavar="N",
                        help="requests in flight at once (default 4)")  # fmt: skip
    parser.add_argument("--max-requests", type=_count(0), metavar="N",
                        help="send at most N requests, retries included; the rest are listed as skipped")  # fmt: skip
    parser.add_argument("--retries", type=_count(0), default=2, metavar="N", help="retries of a 429 answer (default 2)")
    parser.add_argument(
        "--max-wait",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="the longest retry-after waited for; a longer one ends the retries (default 60)",
    )
    parser.add_argument("--timeout", type=_seconds, default=120.0, metavar="SECONDS",
                        help="seconds an answer may stay silent (default 120)")  # fmt: skip
    parser.add_argument("--max-time", type=_seconds, default=600.0, metavar="SECONDS",
                        help="seconds a request may take in all, its answer included: a stream still arriving "
                        "then is cut off and listed as not checked (default 600)")  # fmt: skip
    parser.add_argument("--max-bytes", type=_count(1), default=64 * 1024 * 1024, metavar="BYTES",
                        help="the largest answer read; a larger one is cut off and listed as not checked "
                        "(default 67108864, 64 MiB)")  # fmt: skip
    proxy_flags.add_mitmdump(parser)
    # What proxy_flags.settings_from_arguments reads and drift does not take: the scratch proxy is its own.
    parser.set_defaults(func=run_drift, mode="update", reverse=[], report=None, allow_host=[], proxy_ca_only=True)
