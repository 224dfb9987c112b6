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


def _mode_command(started_by: str, mode: str) -> str:
    """How to start the proxy in `mode` (record, update), in the words of how it was started."""
    return {
        "run": f"cassette run --mode {mode} -- …",
        "serve": f"cassette serve --mode {mode}",
        "pytest": f"pytest --cassette-mode={mode}",
    }.get(started_by, f"--set cassette_mode={mode}")


def record(started_by: str) -> str:
    """How to record what is missing (the rest keeps replaying)."""
    return f"To record it: `{_mode_command(started_by, 'record')}` (records only what is missing)."


def record_session(started_by: str) -> str:
    """How to record a WebSocket session that has no recording: record mode runs it live, the others stay."""
    return (
        f"To record it: `{_mode_command(started_by, 'record')}` (runs the session live and saves it beside the sessions already recorded "
        "for this URL)."
    )


def update_session(started_by: str) -> str:
    """How to record a conversation anew whose recorded start cannot be continued live (a Responses WebSocket turn
    continuing a replayed response): update mode sends every turn live and replaces the recorded ones."""
    return (
        f"To record the conversation anew: `{_mode_command(started_by, 'update')}` (sends all of its turns live and "
        "replaces their recordings)."
    )


def ignore_value(started_by: str, expression: str) -> str:
    """How to key matches of `expression` as placeholders (a value pattern)."""
    return _list_entry(started_by, "ignore-value", "cassette_ignore_values", expression)


def ignore_path(started_by: str, path: str) -> str:
    """How to leave a body field out of the key."""
    return _list_entry(started_by, "ignore", "cassette_ignore", path)


def _list_entry(started_by: str, flag: str, option: str, value: str) -> str:
    """How to add `value` to the list option `option`, whose flag is `--FLAG` (`--cassette-FLAG` for pytest)."""
    quoted = shlex.quote(value)
    return {
        "run": f"`cassette run --{flag} {quoted} -- …`",
        "serve": f"`cassette serve --{flag} {quoted}`",
        "pytest": f"`pytest --cassette-{flag}={quoted}` (or that line under {option} in pytest.ini)",
    }.get(started_by, f"`--set {option}={quoted}`")
