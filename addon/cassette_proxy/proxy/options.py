"""The addon's options: declared from one table, parsed once into a typed, frozen `RunOptions`.

The table is core/option_table.py, shared with every front end (the CLI's
flags, the launcher's `--set` arguments, the plugin's settings, the warm
proxy's fingerprint). As in mitmproxy's own addons
(`maplocal.parse_map_local_spec`), each row's value is parsed by a pure
function that returns a typed value or raises `ValueError`; the error names
the option, the value and what to write instead. The addon's
`configure()` calls `parse_options` whenever a `cassette_*` option changes, gets
a whole new `RunOptions` (or, for a bad value, an error and no change at all),
and hands each collaborator its part; no hook reads `ctx.options` on a request.

The seal (seal.py) reads the options it needs itself: it is the guard against
a bug in this addon, so it shares none of its state.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.keys.hosts import HostScope
from ..core.keys.key import UNKEYABLE_HEADERS
from ..core.keys.recipe import Recipe, make_recipe
from ..core.option_table import NAMES, OPTIONS
from ..core.secrets import redact
from ..core.traffic.telemetry import TelemetrySinks, parse_sinks
from ..core.traffic.token_exchange import TokenEndpoints

__all__ = ["NAMES", "OPTIONS", "RunOptions", "declare", "parse_options"]


def declare(loader: Any) -> None:
    """Every option of the table (core/option_table.py), as `load(loader)` declares them."""
    for option in OPTIONS:
        loader.add_option(option.name, option.type, option.addon_default(), option.help, choices=option.choices)


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
    """The `cassette_*` options mitmproxy holds (`ctx.options`, or anything with those attributes), parsed by
    each row's parse function (core/option_table.py); a ValueError names the first option that cannot work, its
    value and what to write instead."""
    value = {
        option.name: _named(option.name, functools.partial(option.parse, getattr(opts, option.name)))
        for option in OPTIONS
    }
    recipe_options = {
        "ignore": value["cassette_ignore"],
        "key_headers": value["cassette_key_headers"],
        "ignore_values": value["cassette_ignore_values"],
        "frameworks": value["cassette_frameworks"],
    }
    return RunOptions(
        mode=value["cassette_mode"],
        root=value["cassette_dir"],
        hosts=value["cassette_hosts"],
        allowed_hosts=value["cassette_allow_hosts"],
        recipe=parse_recipe(recipe_options),
        redact_rules=value["cassette_redact"],
        redact_specs=tuple(opts.cassette_redact),
        record_statuses=value["cassette_record_statuses"],
        repeats=value["cassette_repeats"],
        scope=value["cassette_scope"],
        unattributed=value["cassette_unattributed"],
        session_ignore=value["cassette_session_ignore"],
        upstream_timeout=value["cassette_upstream_timeout"],
        max_size=value["cassette_max_size"],
        preload=value["cassette_preload"],
        report=value["cassette_report"],
        ready_file=value["cassette_ready_file"],
        token_endpoints=value["cassette_token_endpoints"],
        telemetry=_named(
            "cassette_telemetry_sinks",
            lambda: parse_sinks(value["cassette_telemetry"], value["cassette_telemetry_sinks"]),
        ),
        started_by=value["cassette_started_by"],
        route_names=value["cassette_routes"],
        replay_speed=value["cassette_replay_timing"],
        control_token=value["cassette_control_token"],
    )
