"""The addon's options: declared from one table, parsed once into a typed, frozen `RunOptions`.

As in mitmproxy's own addons (`maplocal.parse_map_local_spec`), each option's
value is parsed by a pure function that returns a typed value or raises
`ValueError` naming the option, the value and what to write instead. The addon's
`configure()` calls `parse_options` whenever a `cassette_*` option changes, gets
a whole new `RunOptions` (or, for a bad value, an error and no change at all),
and hands each collaborator its part; no hook reads `ctx.options` on a request.

The seal (seal.py) reads the options it needs itself: it is the guard against
a bug in this addon, so it shares none of its state.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import redact
from ..core.attribution import UNATTRIBUTED
from ..core.cassette_file import DEFAULT_MAX_SIZE
from ..core.defaults import (
    DEFAULT_DIR,
    DEFAULT_HOSTS,
    DEFAULT_KEY_HEADERS,
    DEFAULT_MODE,
    DEFAULT_REPEATS,
    DIR_VAR,
    MODE_VAR,
    MODES,
    REPEATS,
    REPLAY_TIMING_VAR,
)
from ..core.frameworks import DEFAULT_FRAMEWORKS, PRESETS
from ..core.hints import DEFAULT_STARTER, STARTERS
from ..core.hosts import HostScope
from ..core.key import UNKEYABLE_HEADERS, parse_ignore_paths
from ..core.per_test import DEFAULT_SCOPE, SCOPES
from ..core.recipe import Recipe, make_recipe
from ..core.record_statuses import DEFAULT_RECORD_STATUSES, parse_record_statuses
from ..core.session_match import DEFAULT_SESSION_IGNORE
from ..core.telemetry import TelemetrySinks, parse_sinks
from ..core.token_exchange import TokenEndpoints, parse_endpoints
from .control_channel import CONTROL_HOST, TOKEN_VAR
from .replay import DEFAULT_PRELOAD
from .routes import parse_route_names
from .timed_replay import parse_replay_timing


@dataclass(frozen=True)
class Option:
    name: str
    type: Any
    default: Any
    """The value, or a function of no arguments giving it (an environment variable read when the addon loads);
    a tuple is declared as a list, as mitmproxy's `Sequence[str]` options hold."""
    help: str
    choices: Sequence[str] | None = None


def _from_env(variable: str, fallback: str) -> Callable[[], str]:
    return lambda: os.environ.get(variable) or fallback


OPTIONS: tuple[Option, ...] = (
    Option(
        "cassette_mode",
        str,
        _from_env(MODE_VAR, DEFAULT_MODE),
        "replay: answer from disk only, a miss answers 409; record: replay what exists, forward and save "
        "what is missing; update: forward everything in scope and overwrite; off: plain passthrough. "
        f"Defaults to ${MODE_VAR}, else {DEFAULT_MODE}.",
        MODES,
    ),
    Option(
        "cassette_dir",
        str,
        _from_env(DIR_VAR, DEFAULT_DIR),
        f"Folder holding the cassettes (one JSON file per interaction). Defaults to ${DIR_VAR}, else ./{DEFAULT_DIR}.",
    ),
    Option(
        "cassette_hosts",
        Sequence[str],
        DEFAULT_HOSTS,
        "Hosts under cassette control, as globs (`*` for all), or HOST/PATH for some paths of a host "
        "(chatgpt.com/backend-api/codex/*); traffic to others passes through untouched (in replay mode only to "
        "loopback hosts and those in cassette_allow_hosts).",
    ),
    Option(
        "cassette_allow_hosts",
        Sequence[str],
        (),
        "Hosts outside cassette_hosts that a replay run may still reach (globs), e.g. an image CDN the suite "
        "downloads from; any other non-loopback host answers 403 cassette_offline in replay mode.",
    ),
    Option(
        "cassette_token_endpoints",
        Sequence[str],
        (),
        "More OAuth token endpoints, as HOST/PATH globs (e.g. sts.example.com/oauth2/token), on top of Google's and "
        "Microsoft's: never stored; in replay mode answered with a placeholder token.",
    ),
    Option(
        "cassette_telemetry",
        bool,
        True,
        "Answer the known telemetry sinks (openai-agents' traces, LangSmith, Langfuse, Logfire) offline in replay "
        "mode, and in every mode never record, key or miss them; false treats them as any other request.",
    ),
    Option(
        "cassette_telemetry_sinks",
        Sequence[str],
        (),
        "More telemetry sinks, as HOST/PATH globs (e.g. otel-collector.example.com/v1/traces): answered like the "
        "known ones (an empty OTLP success), on top of them.",
    ),
    Option(
        "cassette_started_by",
        str,
        DEFAULT_STARTER,
        "How this proxy was started, so that hints name what the user types: mitmdump (--set options), run "
        "(`cassette run`), serve (`cassette serve`), pytest (the plugin). The launcher and the plugin set it.",
        STARTERS,
    ),
    Option(
        "cassette_routes",
        Sequence[str],
        (),
        "Names of the reverse listeners, NAME=PORT (the launcher sets them): the report counts requests per route.",
    ),
    Option(
        "cassette_allow_clients",
        Sequence[str],
        (),
        "Networks (CIDR) whose clients may use the proxy besides this machine's, e.g. 172.16.0.0/12 for a "
        "docker-compose test stack; every other non-loopback client is refused.",
    ),
    Option(
        "cassette_ignore",
        Sequence[str],
        (),
        "JSON body fields left out of the key, as dotted paths: a number for one list item, `*` for every "
        "item or field (e.g. metadata.trace_id, messages.*.id, messages.0.name). Empty: every field counts.",
    ),
    Option(
        "cassette_key_headers",
        Sequence[str],
        DEFAULT_KEY_HEADERS,
        "Request headers that are part of the key because they change what the API does.",
    ),
    Option(
        "cassette_ignore_values",
        Sequence[str],
        (),
        "Volatile values by shape: regular expressions whose matches inside any JSON string value are keyed as "
        "numbered placeholders (pyd_ai_…#1), e.g. client-made tool-call ids; on top of cassette_frameworks.",
    ),
    Option(
        "cassette_frameworks",
        Sequence[str],
        DEFAULT_FRAMEWORKS,
        "Framework presets: the values these agent frameworks make up on every run are keyed as numbered "
        f"placeholders, so their runs replay ({'; '.join(f'{p.name}: {p.invents}' for p in PRESETS.values())}). "
        "All by default; list the ones to keep, or set it empty (--set cassette_frameworks=) for none.",
    ),
    Option(
        "cassette_session_ignore",
        Sequence[str],
        DEFAULT_SESSION_IGNORE,
        "Fields of a WebSocket session's client messages left out of matching, as cassette_ignore paths (which "
        "apply too); by default event_id, the id OpenAI Realtime clients make up for each event.",
    ),
    Option(
        "cassette_record_statuses",
        Sequence[str],
        DEFAULT_RECORD_STATUSES,
        "Upstream statuses saved as cassettes (numbers, or classes such as 2xx); others pass through unsaved. "
        "The default keeps deterministic client errors, never 401/403/408/409/429/5xx.",
    ),
    Option(
        "cassette_upstream_timeout",
        int,
        120,
        "Seconds a recorded request may wait for the upstream's response headers (and for its connection); "
        "then the client gets 504 cassette_upstream_error and nothing is saved.",
    ),
    Option(
        "cassette_report",
        str | None,
        None,
        "Write a JSON run report (hits, misses, recorded, upstream, passthrough, errors) to this path on shutdown.",
    ),
    Option(
        "cassette_ready_file",
        str | None,
        None,
        'Once the proxy listens, write {"pid": ..., "listen": [...]} to this path atomically; '
        "how a launcher learns the port of `-p 0`.",
    ),
    Option(
        "cassette_redact",
        Sequence[str],
        (),
        "Redaction rules applied to what a cassette stores (never to the key or to what the client gets), on top "
        "of the built-in secret rules: a rule name (email, phone, card, pii) or /[target/]regex/replacement, "
        "e.g. /request.body.messages.*.content/acct_[0-9]+/[REDACTED:account].",
    ),
    Option(
        "cassette_repeats",
        str,
        DEFAULT_REPEATS,
        "reuse: identical requests always get the same recorded response; sequence: the n-th identical request "
        "of a run records and replays the n-th response (<key>.json, <key>.2.json, ...), repeating the last one "
        "past the end.",
        REPEATS,
    ),
    Option(
        "cassette_max_size",
        int,
        DEFAULT_MAX_SIZE,
        "The largest cassette file, in bytes, the proxy reads (checked before reading); a larger one answers "
        "500 cassette_invalid. Default 256 MiB, far above any real response.",
    ),
    Option(
        "cassette_preload",
        int,
        DEFAULT_PRELOAD,
        "In replay and record modes, how many cassettes (each below 1 MB) a worker process reads and checks as "
        "the proxy starts, so that their first request is answered from memory (a run sees most requests once); "
        "0: none. Any file changed afterwards is read again.",
    ),
    Option(
        "cassette_replay_timing",
        str,
        _from_env(REPLAY_TIMING_VAR, "none"),
        "How a replayed stream (SSE, NDJSON) is paced: none sends all its events at once; recorded waits the "
        "recorded time before each event; a number is a speed factor (2 = twice as fast, 0.5 = half as fast). "
        f"Defaults to ${REPLAY_TIMING_VAR}, else none.",
    ),
    Option(
        "cassette_scope",
        str,
        DEFAULT_SCOPE,
        "shared: one recording per distinct request, whichever test sent it; test: a test's recordings live under "
        "tests/<module>/<test>/ and only that test replays them (needs a runner that announces its tests, "
        "e.g. the pytest plugin). Requests outside any test are always shared.",
        SCOPES,
    ),
    Option(
        "cassette_unattributed",
        str,
        "refuse",
        "What a request in the test scope gets when no test can be named for it (tests of several runners run and "
        "it carries no x-cassette-test header or cassette-test baggage member): refuse answers 428 "
        "cassette_unattributed and counts an error; shared records and replays it in the shared scope, with a "
        "line in the run's test notices.",
        UNATTRIBUTED,
    ),
    Option(
        "cassette_control_token",
        str,
        _from_env(TOKEN_VAR, ""),
        f"The secret a test runner sends to http://{CONTROL_HOST}/ to announce its tests; set by the launcher "
        f"through ${TOKEN_VAR} (never logged). Empty: every control request is refused.",
    ),
)

NAMES = frozenset(option.name for option in OPTIONS)


def declare(loader: Any) -> None:
    """Every option of the table, as `load(loader)` declares them."""
    for option in OPTIONS:
        default = option.default() if callable(option.default) else option.default
        default = list(default) if isinstance(default, tuple) else default
        loader.add_option(option.name, option.type, default, option.help, choices=option.choices)


@dataclass(frozen=True)
class RunOptions:
    """Every `cassette_*` option, parsed: what the run follows outside any test (a test's own options go on top,
    control_channel.py)."""

    mode: str
    root: Path
    """cassette_dir, resolved: every cassette path is checked to lie inside it."""
    hosts: HostScope
    allowed_hosts: HostScope
    recipe: Recipe
    """The key settings: cassette_ignore, cassette_key_headers, cassette_ignore_values, cassette_frameworks (a worker
    process rebuilds it from `recipe.settings()`)."""
    redact_rules: tuple[redact.Rule, ...]
    redact_specs: tuple[str, ...]
    """cassette_redact as given, for a worker process to parse alike."""
    record_statuses: frozenset[int]
    repeats: str
    scope: str
    unattributed: str
    session_ignore: tuple[str, ...]
    upstream_timeout: int
    max_size: int
    preload: int
    report: Path | None
    ready_file: Path | None
    token_endpoints: TokenEndpoints
    telemetry: TelemetrySinks
    started_by: str
    route_names: Mapping[int, str]
    replay_speed: float | None
    """cassette_replay_timing: None sends a stream at once, else the speed factor of its recorded gaps."""
    control_token: str

    # Computed once per run, not per request: every hit reads both.
    @functools.cached_property
    def root_prefix(self) -> str:
        return f"{self.root}{os.sep}"

    @functools.cached_property
    def read_headers(self) -> frozenset[bytes]:
        """The request headers a hit reads: the key headers, and what says how the body is written."""
        return frozenset(h.encode() for h in [*self.recipe.key_headers, "content-type", "content-encoding"])


def parse_choice(name: str, value: str, choices: Sequence[str], what: str = "choice") -> str:
    if value not in choices:
        raise ValueError(f"{name}: {value!r} is not a {what}; use one of {', '.join(choices)}")
    return value


def parse_host_globs(name: str, globs: Sequence[str], required: bool = False) -> HostScope:
    if any(not glob.strip() for glob in globs) or (required and not globs):
        raise ValueError(f"{name}: {list(globs)!r} must list host globs (`*` for every host)")
    return HostScope(globs)


def parse_at_least(name: str, value: int, least: int, unit: str) -> int:
    if not value >= least:
        raise ValueError(f"{name}: {value!r} must be {unit}")
    return value


def parse_cassette_dir(value: str) -> Path:
    root = Path(value).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise ValueError(f"cassette_dir: {value!r} exists and is not a folder")
    return root


def parse_output_file(name: str, value: str | None) -> Path | None:
    """A file the proxy writes: its folder must exist (checked at start, not at shutdown when it is too late)."""
    if not value:
        return None
    path = Path(value).expanduser().resolve()
    if not path.parent.is_dir():
        raise ValueError(f"{name}: the folder of {value!r} does not exist")
    return path


def parse_recipe(options: Mapping[str, list[str]]) -> Recipe:
    recipe = make_recipe(**options)  # RecipeError, a ValueError, names the option
    if refused := sorted(UNKEYABLE_HEADERS.intersection(recipe.key_headers)):
        raise ValueError(
            f"cassette_key_headers: {refused[0]!r} carries a credential or changes on every request "
            "(AWS SigV4): as a key header it would be stored in every cassette and never match; remove it"
        )
    return recipe


def _named(name: str, parse: Callable[[], Any]) -> Any:
    """`parse()`, with a ValueError's message prefixed by the option's name."""
    try:
        return parse()
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None


def parse_options(opts: Any) -> RunOptions:
    """The `cassette_*` options mitmproxy holds (`ctx.options`, or anything with those attributes), parsed; a
    ValueError names the first option that cannot work, its value and what to write instead."""
    recipe_options = {
        "ignore": list(opts.cassette_ignore),
        "key_headers": list(opts.cassette_key_headers),
        "ignore_values": list(opts.cassette_ignore_values),
        "frameworks": list(opts.cassette_frameworks),
    }
    session_ignore = tuple(path.strip() for path in opts.cassette_session_ignore)
    _named("cassette_session_ignore", lambda: parse_ignore_paths(session_ignore))
    return RunOptions(
        mode=parse_choice("cassette_mode", opts.cassette_mode, MODES, "mode"),
        root=parse_cassette_dir(opts.cassette_dir),
        hosts=parse_host_globs("cassette_hosts", opts.cassette_hosts, required=True),
        allowed_hosts=parse_host_globs("cassette_allow_hosts", opts.cassette_allow_hosts),
        recipe=parse_recipe(recipe_options),
        redact_rules=_named("cassette_redact", lambda: redact.parse_rules(opts.cassette_redact)),
        redact_specs=tuple(opts.cassette_redact),
        record_statuses=_named(
            "cassette_record_statuses", lambda: parse_record_statuses(opts.cassette_record_statuses)
        ),
        repeats=parse_choice("cassette_repeats", opts.cassette_repeats, REPEATS),
        scope=parse_choice("cassette_scope", opts.cassette_scope, SCOPES),
        unattributed=parse_choice("cassette_unattributed", opts.cassette_unattributed, UNATTRIBUTED),
        session_ignore=session_ignore,
        upstream_timeout=parse_at_least(
            "cassette_upstream_timeout", opts.cassette_upstream_timeout, 1, "a whole number of seconds above 0"
        ),
        max_size=parse_at_least("cassette_max_size", opts.cassette_max_size, 1, "a number of bytes above 0"),
        preload=parse_at_least("cassette_preload", opts.cassette_preload, 0, "0 or more"),
        report=parse_output_file("cassette_report", opts.cassette_report),
        ready_file=parse_output_file("cassette_ready_file", opts.cassette_ready_file),
        token_endpoints=_named("cassette_token_endpoints", lambda: parse_endpoints(opts.cassette_token_endpoints)),
        telemetry=_named(
            "cassette_telemetry_sinks",
            lambda: parse_sinks(opts.cassette_telemetry, opts.cassette_telemetry_sinks),
        ),
        started_by=parse_choice("cassette_started_by", opts.cassette_started_by, STARTERS),
        route_names=_named("cassette_routes", lambda: parse_route_names(opts.cassette_routes)),
        replay_speed=_named("cassette_replay_timing", lambda: parse_replay_timing(opts.cassette_replay_timing)),
        control_token=opts.cassette_control_token,
    )
