"""Every `cassette_*` option, declared once for every front end: one row each.

A row gives the addon's declaration (name, type, default, help, choices), the
function that parses its value, and how each front end spells it: the
launcher's `Settings` field and its `--set` values, the `cassette run` /
`cassette serve` flag, the pytest plugin's ini setting and command-line
option, and whether (in what normal form) it is part of a warm proxy's
fingerprint. From it are made the addon's option registration and parsing
(proxy/options.py), the CLI's flags (cli/proxy_flags.py), the launcher's
`--set` arguments and the flags that start the same proxy (launch/launcher.py,
launch/outer_proxy.py), the plugin's `addini` and settings (pytest_plugin.py)
and the warm proxy's fingerprint (launch/warm_proxy.py).

Pure: no mitmproxy, no argparse, no pytest, so that the CLI, the launcher and
the plugin read it without loading the proxy. Adding an option is a row here
(and its parse function); docs/contributing.md says what else to check.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .defaults import (
    CONTROL_HOST,
    CONTROL_TOKEN_VAR,
    DEFAULT_DIR,
    DEFAULT_HOSTS,
    DEFAULT_KEY_HEADERS,
    DEFAULT_MODE,
    DEFAULT_PRELOAD,
    DEFAULT_REPEATS,
    DIR_VAR,
    MODE_VAR,
    MODES,
    REPEATS,
    REPLAY_TIMING_VAR,
)
from .files.safe_read import DEFAULT_MAX_SIZE
from .hints import DEFAULT_STARTER, STARTERS
from .keys.body import parse_ignore_paths
from .keys.frameworks import DEFAULT_FRAMEWORKS, PRESETS
from .keys.hosts import HostScope
from .record_statuses import DEFAULT_RECORD_STATUSES, parse_record_statuses
from .secrets.redact import parse_rules
from .sessions.session_match import DEFAULT_SESSION_IGNORE
from .traffic.attribution import UNATTRIBUTED
from .traffic.per_test import DEFAULT_SCOPE, SCOPES
from .traffic.token_exchange import parse_endpoints

PREFIX = "cassette_"


@dataclass(frozen=True)
class Flag:
    """A command-line flag (`cassette run` / `cassette serve`, or the plugin's pytest option). Its argparse shape
    follows the option's type: a list is repeated (`action="append"`), or takes several words with `nargs` ("+":
    added to, "*": replaces, and no word at all says none); a true-by-default bool is a `--no-…` switch; a string
    takes one value. No flag given: None (the addon's default, or the launcher's)."""

    spelling: str
    help: str
    metavar: str | None = None
    nargs: str | None = None
    choices: Sequence[str] | None = None

    @property
    def dest(self) -> str:
        """The argparse attribute: argparse's own spelling of it (`--key-header` → key_header, `--no-telemetry` →
        telemetry)."""
        return self.spelling.removeprefix("--").removeprefix("no-").replace("-", "_")


@dataclass(frozen=True)
class Ini:
    """The pytest plugin's setting (`pytest.ini`, `[tool.pytest.ini_options]`), named as the option. Its type
    follows the option's: a list is a `linelist`, a bool a `bool`, anything else a string."""

    help: str
    default: Any = None
    """None: pytest's default for the type (an empty list, an empty string, false)."""


@dataclass(frozen=True)
class Option:
    name: str
    """The addon's option, and its `--set NAME=VALUE` spelling."""
    type: Any
    default: Any
    """The addon's default; a tuple is declared as a list, as mitmproxy's `Sequence[str]` options hold."""
    help: str
    parse: Callable[[Any], Any]
    """The option's value → what the run follows, or a ValueError that the addon prefixes with the option's name."""
    choices: Sequence[str] | None = None
    env: str | None = None
    """The environment variable whose value (read when the addon loads) is the default instead of `default`."""
    setting: str | None = None
    """The launcher's `Settings` field that carries it (launch/launcher.py)."""
    to_set: Callable[[Any], list[str]] | None = None
    """That field's value → the `--set NAME=…` values the launcher passes (none: the addon's default); None with a
    setting: the launcher sets it itself (`launcher.command`)."""
    flag: Flag | None = None
    """`cassette run` and `cassette serve`'s flag (cli/proxy_flags.py)."""
    ini: Ini | None = None
    """The pytest plugin's setting; with `pytest_flag`, the flag's values are added to the setting's (a list)."""
    pytest_flag: Flag | None = None
    fingerprint: Callable[[Any], Any] | None = None
    """The setting's value in normal form (two spellings of one behaviour alike): part of the warm proxy's
    fingerprint (launch/warm_proxy.py), and, when the plugin can set it, of what the plugin compares with an
    enclosing `cassette run`'s proxy (launch/outer_proxy.py). None: not part of it."""

    @property
    def short(self) -> str:
        """The name without `cassette_`: the key in a fingerprint."""
        return self.name.removeprefix(PREFIX)

    @property
    def is_list(self) -> bool:
        return bool(self.type == Sequence[str])

    def addon_default(self, environ: Mapping[str, str] | None = None) -> Any:
        """The default as the addon declares it: from `env` when that is set and not empty."""
        environ = os.environ if environ is None else environ
        if self.env and environ.get(self.env):
            return environ[self.env]
        return list(self.default) if isinstance(self.default, tuple) else self.default


# The parse functions: a value → what the run follows; a ValueError's message does not name the option (the addon
# puts its name in front).


def choice(choices: Sequence[str], what: str = "choice") -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in choices:
            raise ValueError(f"{value!r} is not a {what}; use one of {', '.join(choices)}")
        return value

    return parse


def host_globs(required: bool = False) -> Callable[[Sequence[str]], HostScope]:
    def parse(globs: Sequence[str]) -> HostScope:
        if any(not glob.strip() for glob in globs) or (required and not globs):
            raise ValueError(f"{list(globs)!r} must list host globs (`*` for every host)")
        return HostScope(globs)

    return parse


def at_least(least: int, unit: str) -> Callable[[int], int]:
    def parse(value: int) -> int:
        if not value >= least:
            raise ValueError(f"{value!r} must be {unit}")
        return value

    return parse


def cassette_dir(value: str) -> Path:
    root = Path(value).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise ValueError(f"{value!r} exists and is not a folder")
    return root


def output_file(value: str | None) -> Path | None:
    """A file the proxy writes: its folder must exist (checked at start, not at shutdown when it is too late)."""
    if not value:
        return None
    path = Path(value).expanduser().resolve()
    if not path.parent.is_dir():
        raise ValueError(f"the folder of {value!r} does not exist")
    return path


def strings(value: Sequence[str]) -> list[str]:
    """A list taken as given: parsed with others (the key settings make one recipe, proxy/options.py)."""
    return list(value)


def session_ignore(value: Sequence[str]) -> tuple[str, ...]:
    paths = tuple(path.strip() for path in value)
    parse_ignore_paths(paths)
    return paths


def route_names(entries: Sequence[str]) -> dict[int, str]:
    """`cassette_routes` entries `NAME=PORT` (set by the launcher) → {port: name}; ValueError naming a bad one."""
    names: dict[int, str] = {}
    for entry in entries:
        name, sep, port = entry.strip().partition("=")
        if not sep or not name or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{entry!r} is not NAME=PORT (a reverse listener's name and its port, e.g. ollama=8081)")
        names[int(port)] = name
    return names


def replay_timing(value: str) -> float | None:
    """`none` -> None (as fast as possible), `recorded` -> 1.0, a number -> that speed factor (2 = twice as fast)."""
    value = value.strip().lower()
    if value == "none":
        return None
    if value == "recorded":
        return 1.0
    try:
        speed = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is not none, recorded or a speed factor such as 2 or 0.5") from None
    if not 0 < speed < float("inf"):
        raise ValueError(f"{value!r}: a speed factor must be a positive number, such as 2 or 0.5")
    return speed


# How the launcher spells a setting's value as `--set` values, and its normal form in a fingerprint.


def each(values: Sequence[str]) -> list[str]:
    return list(values)


def off_when_false(value: bool) -> list[str]:
    return [] if value else ["false"]


def key_header_values(given: Sequence[str]) -> list[str]:
    """Given key headers are on top of the defaults: none given leaves the addon's default."""
    if not given:
        return []
    return list(dict.fromkeys([*DEFAULT_KEY_HEADERS, *(h.strip().lower() for h in given)]))


def framework_values(given: Sequence[str] | None) -> list[str]:
    """None leaves the addon's default (all); an empty list says none (`cassette_frameworks=`)."""
    if given is None:
        return []
    return list(given) or [""]


def same(value: Any) -> Any:
    return value


def resolved(folder: Path | str) -> str:
    return str(Path(folder).resolve())


def sorted_values(values: Sequence[str]) -> list[str]:
    return sorted(values)


def stripped_paths(values: Sequence[str]) -> list[str]:
    return sorted(p.strip() for p in values if p.strip())


def normal_key_headers(given: Sequence[str]) -> list[str]:
    return sorted({h.strip().lower() for h in [*DEFAULT_KEY_HEADERS, *given] if h.strip()})


def normal_frameworks(given: Sequence[str] | None) -> list[str]:
    return sorted(DEFAULT_FRAMEWORKS if given is None else given)


def normal_hosts(given: Sequence[str]) -> list[str]:
    """Reverse targets join the scope with their routes (compared as routes)."""
    return sorted(given or DEFAULT_HOSTS)


OPTIONS: tuple[Option, ...] = (
    Option(
        "cassette_mode",
        str,
        DEFAULT_MODE,
        "replay: answer from disk only, a miss answers 409; record: replay what exists, forward and save "
        "what is missing; update: forward everything in scope and overwrite; off: plain passthrough. "
        f"Defaults to ${MODE_VAR}, else {DEFAULT_MODE}.",
        choice(MODES, "mode"),
        MODES,
        env=MODE_VAR,
        setting="mode",
        flag=Flag("--mode", "Cassette mode; defaults to $CASSETTE_MODE, else replay.", choices=MODES),
        pytest_flag=Flag("--cassette-mode", "Cassette mode; defaults to $CASSETTE_MODE, else replay.", choices=MODES),
        fingerprint=same,
    ),
    Option(
        "cassette_dir",
        str,
        DEFAULT_DIR,
        f"Folder holding the cassettes (one JSON file per interaction). Defaults to ${DIR_VAR}, else ./{DEFAULT_DIR}.",
        cassette_dir,
        env=DIR_VAR,
        setting="cassette_dir",
        flag=Flag("--dir", "Cassette folder; defaults to $CASSETTE_DIR, else ./cassettes."),
        ini=Ini("Cassette folder, relative to the rootdir.", DEFAULT_DIR),
        pytest_flag=Flag(
            "--cassette-dir", "Cassette folder; defaults to $CASSETTE_DIR, else the cassette_dir setting."
        ),
        fingerprint=resolved,
    ),
    Option(
        "cassette_ignore",
        Sequence[str],
        (),
        "JSON body fields left out of the key, as dotted paths: a number for one list item, `*` for every "
        "item or field (e.g. metadata.trace_id, messages.*.id, messages.0.name). Empty: every field counts.",
        strings,
        setting="ignore",
        to_set=each,
        flag=Flag(
            "--ignore",
            "JSON body field left out of the key (cassette_ignore): messages.*.id, messages.0.name. Repeatable.",
            "PATH",
        ),
        ini=Ini("JSON body fields left out of the key (dotted paths), one a line."),
        pytest_flag=Flag(
            "--cassette-ignore",
            "JSON body field left out of the key, on top of the cassette_ignore setting. Repeatable.",
            "PATH",
        ),
        fingerprint=stripped_paths,
    ),
    Option(
        "cassette_key_headers",
        Sequence[str],
        DEFAULT_KEY_HEADERS,
        "Request headers that are part of the key because they change what the API does.",
        strings,
        setting="key_headers",
        to_set=key_header_values,
        flag=Flag(
            "--key-header",
            f"Request header that is part of the key, on top of {', '.join(DEFAULT_KEY_HEADERS)}. Repeatable.",
            "NAME",
        ),
        ini=Ini("Key headers on top of the defaults, one a line."),
        pytest_flag=Flag(
            "--cassette-key-header",
            "Key header on top of the defaults and the cassette_key_headers setting. Repeatable.",
            "NAME",
        ),
        fingerprint=normal_key_headers,
    ),
    Option(
        "cassette_ignore_values",
        Sequence[str],
        (),
        "Volatile values by shape: regular expressions whose matches inside any JSON string value are keyed as "
        "numbered placeholders (pyd_ai_…#1), e.g. client-made tool-call ids; on top of cassette_frameworks.",
        strings,
        setting="ignore_values",
        to_set=each,
        flag=Flag(
            "--ignore-value",
            "Volatile value pattern (cassette_ignore_values), or a preset such as pydantic-ai: matches in string "
            "values are keyed as numbered placeholders. Repeatable.",
            "REGEX",
        ),
        ini=Ini("Volatile value patterns (regular expressions or presets), one a line."),
        pytest_flag=Flag(
            "--cassette-ignore-value",
            "Volatile value pattern or preset, on top of the cassette_ignore_values setting. Repeatable.",
            "REGEX",
        ),
        fingerprint=sorted_values,
    ),
    Option(
        "cassette_frameworks",
        Sequence[str],
        DEFAULT_FRAMEWORKS,
        "Framework presets: the values these agent frameworks make up on every run are keyed as numbered "
        f"placeholders, so their runs replay ({'; '.join(f'{p.name}: {p.invents}' for p in PRESETS.values())}). "
        "All by default; list the ones to keep, or set it empty (--set cassette_frameworks=) for none.",
        strings,
        setting="frameworks",
        to_set=framework_values,
        flag=Flag(
            "--frameworks",
            "Framework presets to key with (cassette_frameworks), replacing the default of all: "
            f"{', '.join(sorted(PRESETS))}. The values these frameworks make up on every run are keyed as "
            "placeholders; --frameworks with no name turns them all off.",
            "NAME",
            nargs="*",
            choices=sorted(PRESETS),
        ),
        ini=Ini(
            f"Framework presets to key with, one a line ({', '.join(DEFAULT_FRAMEWORKS)}: all by default); "
            "empty for none.",
            list(DEFAULT_FRAMEWORKS),
        ),
        fingerprint=normal_frameworks,
    ),
    Option(
        "cassette_hosts",
        Sequence[str],
        DEFAULT_HOSTS,
        "Hosts under cassette control, as globs (`*` for all), or HOST/PATH for some paths of a host "
        "(chatgpt.com/backend-api/codex/*); traffic to others passes through untouched (in replay mode only to "
        "loopback hosts and those in cassette_allow_hosts).",
        host_globs(required=True),
        setting="hosts",
        flag=Flag(
            "--hosts",
            "Hosts under cassette control (globs, `*` for all); defaults to the known LLM API hosts.",
            "GLOB",
            nargs="+",
        ),
        ini=Ini("Hosts under cassette control (globs); empty: the known LLM API hosts."),
        fingerprint=normal_hosts,
    ),
    Option(
        "cassette_allow_hosts",
        Sequence[str],
        (),
        "Hosts outside cassette_hosts that a replay run may still reach (globs), e.g. an image CDN the suite "
        "downloads from; any other non-loopback host answers 403 cassette_offline in replay mode.",
        host_globs(),
        setting="allow_hosts",
        to_set=each,
        flag=Flag(
            "--allow-host",
            "Host outside the cassette hosts that a replay run may still reach (cassette_allow_hosts), e.g. an "
            "image CDN; every other non-loopback host answers 403 cassette_offline in replay. Repeatable.",
            "GLOB",
        ),
        fingerprint=sorted_values,
    ),
    Option(
        "cassette_token_endpoints",
        Sequence[str],
        (),
        "More OAuth token endpoints, as HOST/PATH globs (e.g. sts.example.com/oauth2/token), on top of Google's and "
        "Microsoft's: never stored; in replay mode answered with a placeholder token.",
        parse_endpoints,
    ),
    Option(
        "cassette_telemetry",
        bool,
        True,
        "Answer the known telemetry sinks (openai-agents' traces, LangSmith, Langfuse, Logfire) offline in replay "
        "mode, and in every mode never record, key or miss them; false treats them as any other request.",
        bool,
        setting="telemetry",
        to_set=off_when_false,
        flag=Flag(
            "--no-telemetry",
            "Treat the known telemetry sinks as any other request (cassette_telemetry=false): recorded when in "
            "scope, refused offline in replay when not.",
        ),
        ini=Ini(
            "Answer the known telemetry sinks (openai-agents' traces, LangSmith, Langfuse, Logfire) offline in replay.",
            True,
        ),
        fingerprint=same,
    ),
    Option(
        "cassette_telemetry_sinks",
        Sequence[str],
        (),
        "More telemetry sinks, as HOST/PATH globs (e.g. otel-collector.example.com/v1/traces): answered like the "
        "known ones (an empty OTLP success), on top of them.",
        strings,
        setting="telemetry_sinks",
        to_set=each,
        flag=Flag(
            "--telemetry-sink",
            "Another telemetry sink (cassette_telemetry_sinks), e.g. otel-collector.example.com/v1/traces: answered "
            "offline in replay like openai-agents' traces, LangSmith, Langfuse and Logfire, never recorded. "
            "Repeatable.",
            "HOST/PATH",
        ),
        ini=Ini("More telemetry sinks, HOST/PATH globs, one a line."),
        fingerprint=sorted_values,
    ),
    Option(
        "cassette_started_by",
        str,
        DEFAULT_STARTER,
        "How this proxy was started, so that hints name what the user types: mitmdump (--set options), run "
        "(`cassette run`), serve (`cassette serve`), pytest (the plugin). The launcher and the plugin set it.",
        choice(STARTERS),
        STARTERS,
        setting="started_by",
    ),
    Option(
        "cassette_routes",
        Sequence[str],
        (),
        "Names of the reverse listeners, NAME=PORT (the launcher sets them): the report counts requests per route.",
        route_names,
    ),
    Option(
        "cassette_allow_clients",
        Sequence[str],
        (),
        "Networks (CIDR) whose clients may use the proxy besides this machine's, e.g. 172.16.0.0/12 for a "
        "docker-compose test stack; every other non-loopback client is refused.",
        strings,
    ),
    Option(
        "cassette_session_ignore",
        Sequence[str],
        DEFAULT_SESSION_IGNORE,
        "Fields of a WebSocket session's client messages left out of matching, as cassette_ignore paths (which "
        "apply too); by default event_id, the id OpenAI Realtime clients make up for each event.",
        session_ignore,
    ),
    Option(
        "cassette_record_statuses",
        Sequence[str],
        DEFAULT_RECORD_STATUSES,
        "Upstream statuses saved as cassettes (numbers, or classes such as 2xx); others pass through unsaved. "
        "The default keeps deterministic client errors, never 401/403/408/409/429/5xx.",
        parse_record_statuses,
    ),
    Option(
        "cassette_upstream_timeout",
        int,
        120,
        "Seconds a recorded request may wait for the upstream's response headers (and for its connection); "
        "then the client gets 504 cassette_upstream_error and nothing is saved.",
        at_least(1, "a whole number of seconds above 0"),
    ),
    Option(
        "cassette_report",
        str | None,
        None,
        "Write a JSON run report (hits, misses, recorded, upstream, passthrough, errors) to this path on shutdown.",
        output_file,
        setting="report",
        flag=Flag("--report", "Also keep the JSON run report at this path."),
    ),
    Option(
        "cassette_ready_file",
        str | None,
        None,
        'Once the proxy listens, write {"pid": ..., "listen": [...]} to this path atomically; '
        "how a launcher learns the port of `-p 0`.",
        output_file,
    ),
    Option(
        "cassette_redact",
        Sequence[str],
        (),
        "Redaction rules applied to what a cassette stores (never to the key or to what the client gets), on top "
        "of the built-in secret rules: a rule name (email, phone, card, pii) or /[target/]regex/replacement, "
        "e.g. /request.body.messages.*.content/acct_[0-9]+/[REDACTED:account].",
        parse_rules,
    ),
    Option(
        "cassette_repeats",
        str,
        DEFAULT_REPEATS,
        "reuse: identical requests always get the same recorded response; sequence: the n-th identical request "
        "of a run records and replays the n-th response (<key>.json, <key>.2.json, ...), repeating the last one "
        "past the end.",
        choice(REPEATS),
        REPEATS,
    ),
    Option(
        "cassette_max_size",
        int,
        DEFAULT_MAX_SIZE,
        "The largest cassette file, in bytes, the proxy reads (checked before reading); a larger one answers "
        "500 cassette_invalid. Default 256 MiB, far above any real response.",
        at_least(1, "a number of bytes above 0"),
    ),
    Option(
        "cassette_preload",
        int,
        DEFAULT_PRELOAD,
        "In replay and record modes, how many cassettes (each below 1 MB) a worker process reads and checks as "
        "the proxy starts, so that their first request is answered from memory (a run sees most requests once); "
        "0: none. Any file changed afterwards is read again.",
        at_least(0, "0 or more"),
    ),
    Option(
        "cassette_replay_timing",
        str,
        "none",
        "How a replayed stream (SSE, NDJSON) is paced: none sends all its events at once; recorded waits the "
        "recorded time before each event; a number is a speed factor (2 = twice as fast, 0.5 = half as fast). "
        f"Defaults to ${REPLAY_TIMING_VAR}, else none.",
        replay_timing,
        env=REPLAY_TIMING_VAR,
    ),
    Option(
        "cassette_scope",
        str,
        DEFAULT_SCOPE,
        "shared: one recording per distinct request, whichever test sent it; test: a test's recordings live under "
        "tests/<module>/<test>/ and only that test replays them (needs a runner that announces its tests, "
        "e.g. the pytest plugin). Requests outside any test are always shared.",
        choice(SCOPES),
        SCOPES,
        ini=Ini(
            "shared (one recording per distinct request) or test (each test's recordings under its own folder).",
            DEFAULT_SCOPE,
        ),
        pytest_flag=Flag(
            "--cassette-scope",
            "shared: one recording per distinct request; test: each test's recordings under its own folder. "
            "Defaults to the cassette_scope setting, else shared.",
            choices=SCOPES,
        ),
    ),
    Option(
        "cassette_unattributed",
        str,
        "refuse",
        "What a request in the test scope gets when no test can be named for it (tests of several runners run and "
        "it carries no x-cassette-test header or cassette-test baggage member): refuse answers 428 "
        "cassette_unattributed and counts an error; shared records and replays it in the shared scope, with a "
        "line in the run's test notices.",
        choice(UNATTRIBUTED),
        UNATTRIBUTED,
    ),
    Option(
        "cassette_control_token",
        str,
        "",
        f"The secret a test runner sends to http://{CONTROL_HOST}/ to announce its tests; set by the launcher "
        f"through ${CONTROL_TOKEN_VAR} (never logged). Empty: every control request is refused.",
        str,
        env=CONTROL_TOKEN_VAR,
    ),
)

BY_NAME: Mapping[str, Option] = {option.name: option for option in OPTIONS}
NAMES = frozenset(BY_NAME)


def with_flag() -> tuple[Option, ...]:
    """The options `cassette run` and `cassette serve` take a flag for, in the table's order."""
    return tuple(option for option in OPTIONS if option.flag is not None)


def in_fingerprint() -> tuple[Option, ...]:
    return tuple(option for option in OPTIONS if option.fingerprint is not None)


def plugin_sets(option: Option) -> bool:
    """Whether the pytest plugin has a setting or a flag for it."""
    return option.ini is not None or option.pytest_flag is not None


def flag_keywords(option: Option, flag: Flag) -> dict[str, Any]:
    """The argparse keywords of `flag` (`add_argument`, or pytest's `addoption`, which takes the same), from its
    option's type (see `Flag`)."""
    if option.type is bool:
        return {"dest": flag.dest, "action": "store_false", "help": flag.help}
    keywords: dict[str, Any] = {}
    if flag.nargs == "+":
        keywords.update(nargs="+", action="extend", default=[])
    elif flag.nargs:
        keywords["nargs"] = flag.nargs
    elif option.is_list:
        keywords.update(action="append", default=[])
    else:
        keywords["default"] = None
    if flag.metavar:
        keywords["metavar"] = flag.metavar
    if flag.choices is not None:
        keywords["choices"] = flag.choices
    return {**keywords, "help": flag.help}


def fingerprint_of(settings: Any, options: Sequence[Option]) -> dict[str, Any]:
    """These options' values in `settings` (the launcher's), in normal form, by short name."""
    out: dict[str, Any] = {}
    for option in options:
        assert option.fingerprint is not None and option.setting is not None
        out[option.short] = option.fingerprint(getattr(settings, option.setting))
    return out


def set_arguments(settings: Any) -> list[str]:
    """The launcher's `--set` arguments for the options spelled from `settings` fields (`to_set`), in the table's
    order; an option whose field says nothing is left to the addon's default."""
    args: list[str] = []
    for option in OPTIONS:
        if option.to_set is not None and option.setting is not None:
            for value in option.to_set(getattr(settings, option.setting)):
                args += ["--set", f"{option.name}={value}"]
    return args


def flag_arguments(option: Option, value: Any) -> list[str]:
    """The `cassette run` arguments that give `value` (a Settings field's) to `option`'s flag."""
    assert option.flag is not None
    flag = option.flag
    if option.type is bool:
        return [] if value == option.default else [flag.spelling]
    if flag.nargs == "*":
        return [] if value is None else [flag.spelling, *value]
    if option.is_list:
        return [word for item in value for word in (flag.spelling, item)]
    if isinstance(value, Path):
        value = resolved(value)
    return [] if value is None else [flag.spelling, str(value)]
