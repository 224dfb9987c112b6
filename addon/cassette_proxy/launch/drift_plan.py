"""What `cassette drift` re-sends: the cassettes a selection chooses, and for each how it is re-sent (a Job) or
why it cannot be (a Result): a WebSocket session, a redacted stored request, other key settings, a host out of
this run's scope, missing credentials, credentials over plain HTTP. Nothing here sends a request or starts a
proxy (drift_run.py does); `cli/drift.py` turns its flags into a `Selection`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

from ..core.drift.credentials import Credential, CredentialError, credential_headers
from ..core.drift.drift_report import Outcome, Result
from ..core.files.cassette_file import load
from ..core.files.location import cassette_files, endpoint_dir, relative_name
from ..core.files.safe_read import CassetteError
from ..core.files.session_file import is_session
from ..core.keys.hosts import HostScope
from ..core.keys.key import RequestFacts
from ..core.keys.recipe import Recipe, facts_of, recipe_of, stored_key
from ..core.reading.summary import one_line, summarize_request
from .resend import request_headers


@dataclass(frozen=True)
class Selection:
    """Which cassettes to check: every one by default; each field given narrows the choice."""

    globs: Sequence[str] = ()
    """Globs on the cassettes' paths relative to the folder (`api.openai.com/**`)."""
    hosts: Sequence[str] = ()
    """Host globs: only cassettes whose request went to a matching host (`--select-host`)."""
    tests: Sequence[str] = ()
    """Test id globs: only per-test cassettes of matching tests (`--select-test`)."""
    older_than: float | None = None
    """Days: only cassettes recorded at least this long ago (`--older-than`)."""


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
    """A test id glob (`tests/test_app.py::TestChat::test_*`) as a glob on test folders (per_test.folder_of_test)."""
    module, sep, name = pattern.partition("::")
    return f"tests/{module}/{name.replace('::', '.')}" if sep else f"tests/*{pattern}"


def selected(selection: Selection, relative: str, cassette: dict, now: datetime) -> bool:
    """Whether the selection chooses this cassette (`relative`: its path in the folder) at `now`."""
    request = cassette["request"]
    if selection.globs and not any(fnmatch.fnmatchcase(relative, glob) for glob in selection.globs):
        return False
    if selection.hosts and (urlsplit(str(request.get("url", ""))).hostname or "") not in HostScope(selection.hosts):
        return False
    if selection.tests:
        folder = _test_folder(relative, request)
        if folder is None or not any(fnmatch.fnmatchcase(folder, glob_for_tests(g)) for g in selection.tests):
            return False
    if selection.older_than is not None:
        try:
            recorded = datetime.fromisoformat(str(cassette.get("recorded_at")))
        except ValueError:
            return True  # an unknown age may be any age: checked
        recorded = recorded if recorded.tzinfo else recorded.replace(tzinfo=UTC)
        return recorded <= now - timedelta(days=selection.older_than)
    return True


def gather(selection: Selection, root: Path) -> tuple[list[tuple[Path, str, dict]], list[Result]]:
    """The selected cassettes, read and validated, oldest first; unreadable ones (that the globs select) as errors."""
    now = datetime.now(UTC)
    chosen, unreadable = [], []
    for path in cassette_files(root):
        relative = path.relative_to(root).as_posix()
        if selection.globs and not any(fnmatch.fnmatchcase(relative, glob) for glob in selection.globs):
            continue
        try:
            cassette = load(path, root)
        except (OSError, CassetteError) as e:
            unreadable.append(unchecked(Result(relative, "?"), f"unreadable cassette: {e}"))
            continue
        if selected(selection, relative, cassette, now):
            chosen.append((path, relative, cassette))
    chosen.sort(key=lambda item: (str(item[2].get("recorded_at", "")), item[1]))
    return chosen, unreadable


# -- planning: what can be re-sent, and how -----------------------------------------------------------------------


def _result_for(relative: str, cassette: dict) -> Result:
    asked = summarize_request(cassette["request"])
    return Result(
        cassette=relative,
        request=f"{asked.method} {asked.url.split('://', 1)[-1].split('?', 1)[0]}",
        model=asked.model,
        prompt=one_line(asked.first_user_message, 120),
        recorded_at=str(cassette.get("recorded_at", "")),
    )


def plan(job_input: tuple[Path, str, dict], recipe: Recipe, scope: HostScope, environ: Mapping[str, str],
         rules: list[Credential]) -> Job | Result:  # fmt: skip
    """A Job for a cassette that can be re-sent as it was recorded, else a Result saying why not."""
    path, relative, cassette = job_input
    result = _result_for(relative, cassette)
    request = cassette["request"]
    if is_session(cassette):  # re-sending its upgrade as a plain GET would compare nothing
        return unchecked(result, "a WebSocket session: drift re-sends HTTP requests only", Outcome.SKIPPED)
    if (cassette.get("keyed_with") or {}).get("request_redacted"):
        return unchecked(result, "its stored request was redacted: re-sending it would send the placeholders")
    try:
        facts = facts_of(request)
        key = stored_key(request, recipe)
    except ValueError as e:
        return unchecked(result, f"its request cannot be re-sent: {e}")
    if key != cassette["key"]:
        try:
            recorded = recipe_of(cassette)
        except ValueError as e:
            return unchecked(result, f"its keyed_with is unreadable ({e}): it cannot be re-sent as recorded")
        why = "; ".join(recipe.differences(recorded)) if recorded else "its key settings are not stored"
        why = why or "the same settings, an older key recipe: `cassette rekey` updates it"
        return unchecked(result, f"keyed differently under this run's key settings ({why}): pass the --ignore, "
                         "--key-header and --ignore-value it was recorded with")  # fmt: skip
    if facts.host not in scope:
        # A reverse route's target joined the recording run's scope without any --hosts: name the host to pass.
        return unchecked(result, f"{facts.host} is not under cassette control in this run: pass --hosts "
                         f"{facts.host} (with the other hosts to check), as for a recording made through a "
                         "--reverse route to it")  # fmt: skip
    try:
        credentials = credential_headers(facts.host, environ, rules)
    except CredentialError as e:
        return unchecked(result, str(e))
    if credentials and facts.scheme != "https":
        return unchecked(result, f"refusing to send credentials for {facts.host} over plain HTTP ({facts.scheme}://)")
    try:
        headers = request_headers(facts, recipe.key_headers, credentials)
    except ValueError as e:
        return unchecked(result, f"its request cannot be re-sent: {e}")
    return Job(
        path=path,
        cassette=cassette,
        facts=facts,
        headers=headers,
        scratch=relative_name(facts.scheme, facts.host, facts.port, facts.path, key),
        result=result,
    )


def unchecked(result: Result, message: str, outcome: Outcome = Outcome.ERROR) -> Result:
    """`result`, not compared: its outcome and why."""
    result.outcome, result.message = outcome, message
    return result
