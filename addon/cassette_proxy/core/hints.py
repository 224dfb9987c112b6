"""What to type, in the words of the way the proxy was started (`cassette_started_by`).

A hint that names an addon option ("run with cassette_mode=record") sends a
`cassette run` or pytest user looking for where that option goes. The launcher
and the pytest plugin tell the addon how they started it, and each hint names
the flag that user types.
"""

from __future__ import annotations

import shlex

STARTERS = ("mitmdump", "run", "serve", "pytest")
"""`mitmdump`: started by hand (`--set` options); `run`/`serve`: the `cassette` command; `pytest`: the plugin."""
DEFAULT_STARTER = "mitmdump"


def _record_command(started_by: str) -> str:
    return {
        "run": "cassette run --mode record -- …",
        "serve": "cassette serve --mode record",
        "pytest": "pytest --cassette-mode=record",
    }.get(started_by, "--set cassette_mode=record")


def record(started_by: str) -> str:
    """How to record what is missing (the rest keeps replaying)."""
    return f"To record it: `{_record_command(started_by)}` (records only what is missing)."


def record_session(started_by: str) -> str:
    """How to record a WebSocket session that has no recording: record mode runs it live, the others stay."""
    return (
        f"To record it: `{_record_command(started_by)}` (runs the session live and saves it beside the sessions already recorded "
        "for this URL)."
    )


def _update_command(started_by: str) -> str:
    return {
        "run": "cassette run --mode update -- …",
        "serve": "cassette serve --mode update",
        "pytest": "pytest --cassette-mode=update",
    }.get(started_by, "--set cassette_mode=update")


def update_session(started_by: str) -> str:
    """How to record a conversation anew whose recorded start cannot be continued live (a Responses WebSocket turn
    continuing a replayed response): update mode sends every turn live and replaces the recorded ones."""
    return (
        f"To record the conversation anew: `{_update_command(started_by)}` (sends all of its turns live and "
        "replaces their recordings)."
    )


def ignore_value(started_by: str, expression: str) -> str:
    """How to key matches of `expression` as placeholders (a value pattern)."""
    quoted = shlex.quote(expression)
    return {
        "run": f"`cassette run --ignore-value {quoted} -- …`",
        "serve": f"`cassette serve --ignore-value {quoted}`",
        "pytest": f"`pytest --cassette-ignore-value={quoted}` (or that line under cassette_ignore_values in pytest.ini)",
    }.get(started_by, f"`--set cassette_ignore_values={quoted}`")


def ignore_path(started_by: str, path: str) -> str:
    """How to leave a body field out of the key."""
    quoted = shlex.quote(path)
    return {
        "run": f"`cassette run --ignore {quoted} -- …`",
        "serve": f"`cassette serve --ignore {quoted}`",
        "pytest": f"`pytest --cassette-ignore={quoted}` (or that line under cassette_ignore in pytest.ini)",
    }.get(started_by, f"`--set cassette_ignore={quoted}`")
