"""What a miss tells the developer: which request had no cassette, and what changed since the closest recordings.

A bare "no match" invites a blind re-record; a field-level diff against the
nearest recorded requests shows the prompt edit that caused the miss.
"""

from __future__ import annotations

import heapq
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from .. import hints
from ..errors import error_body
from ..files.cassette_file import load
from ..files.safe_read import CassetteError
from ..keys.key import RECIPE_VERSION, preset_values
from ..keys.recipe import Recipe, facts_of, recipe_of, stored_identity
from ..traffic.per_test import folder_of_test
from .diff import shown, weighed_differences
from .endpoint_index import EndpointIndexes
from .random_values import only_random_changes

MAX_CANDIDATES = 200
"""Cassettes of the same endpoint compared on a miss (newest first); bounds the miss path on large folders."""

MAX_CLOSEST = 3
MAX_DIFFERENCES = 8
MAX_PER_OTHER_ENDPOINT = 20
MAX_ELSEWHERE = 400
"""Cassettes of other endpoints read on a miss at most, looking for the same request sent to another URL."""
MESSAGE_DIFFERENCES = 3
SEARCH_SECONDS = 0.3
"""The closest-recording search compares no further candidate once it has spent this much CPU time (the client is
waiting for its 409): the closest among those compared is offered. CPU time of the searching thread, not wall
time, so that a loaded machine changes how long a miss takes, not what it says. Each comparison is bounded by
diff.py's limits."""


def newest_cassettes(folder: Path, count: int) -> list[Path]:
    """The `count` most recently written cassettes of a folder, without building a Path for every file in it."""
    try:
        with os.scandir(folder) as entries:
            stamped = [
                (entry.stat().st_mtime_ns, entry.name)
                for entry in entries
                if entry.name.endswith(".json") and not entry.name.startswith(".") and entry.is_file()
            ]
    except OSError:
        return []
    return [folder / name for _, name in heapq.nlargest(count, stamped)]


class ClosestSearch:
    """The closest-recording search with memory: what one miss read, the next does not read again.

    A folder's listing comes from an `EndpointIndex` (re-listed only when the
    folder changed, whichever process changed it), and the cassettes of up to
    MAX_CANDIDATES * 4 small candidates stay parsed, keyed by their file's
    device, inode, mtime and size: a miss after the first stats MAX_CANDIDATES
    files and reads none that has not changed, however large the folder.
    Thread-safe: misses are answered in worker threads.
    """

    def __init__(self) -> None:
        self.indexes = EndpointIndexes()
        self._cassettes: OrderedDict[tuple[str, tuple[int, int, int, int]], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def closest(self, endpoint_dir: Path, root: Path, request: dict[str, Any], recipe: Recipe) -> list[dict[str, Any]]:
        return closest(endpoint_dir, root, request, recipe, self)

    def newest(self, folder: Path, count: int) -> list[Path]:
        return [folder / name for name, _ in self.indexes.of(str(folder)).newest(count)]

    def cassette(self, path: Path, root: Path) -> dict[str, Any]:
        """The cassette at `path` (validated by `load`, inside `root`); callers must not mutate it."""
        # A stat per candidate (a bounded cost): an edit in place keeps the folder's mtime and the file's
        # inode, but not its mtime and size.
        status = os.stat(path)
        stamp = (status.st_dev, status.st_ino, status.st_mtime_ns, status.st_size)
        with self._lock:
            cassette = self._cassettes.get((str(path), stamp))
            if cassette is not None:
                self._cassettes.move_to_end((str(path), stamp))
                return cassette
        cassette = load(path, root)
        if status.st_size <= MAX_CACHED_BYTES:
            with self._lock:
                self._cassettes[(str(path), stamp)] = cassette
                while len(self._cassettes) > MAX_CANDIDATES * 4:
                    self._cassettes.popitem(last=False)
        return cassette


MAX_CACHED_BYTES = 256 * 1024
"""Candidate cassettes up to this size stay parsed between misses."""


def closest(
    endpoint_dir: Path, root: Path, request: dict[str, Any], recipe: Recipe, search: ClosestSearch | None = None
) -> list[dict[str, Any]]:
    """The recordings nearest to this request, each with every cause of the miss it shows.

    Both sides are compared as the key sees them under this run's settings
    (ignored fields left out, value patterns and numbers canonical), so what is
    listed is what made the key differ. When no recording of this endpoint has
    the same body, the nearest is looked for among other endpoints: a changed
    base URL or path is then the cause.
    """
    try:
        current = stored_identity(request, recipe)
    except ValueError:
        return []
    newest = search.newest if search is not None else newest_cassettes
    read = search.cassette if search is not None else load
    deadline = time.thread_time() + SEARCH_SECONDS
    ranked = []
    for path in newest(endpoint_dir, MAX_CANDIDATES):
        if time.thread_time() > deadline:
            break
        compared = _compare(path, root, current, recipe, read)
        if compared is not None:
            ranked.append(compared)
    # Fewest values changed first (then fewest differences listed); a recording that only differs in its settings
    # is the closest of all.
    ranked.sort(
        key=lambda entry: (
            entry["weight"],
            len(entry["differences"]),
            len(entry.get("settings", ())),
            entry["cassette"],
        )
    )
    nearest = ranked[:MAX_CLOSEST]
    if not any(entry["same_body"] for entry in ranked):
        elsewhere = _same_body_elsewhere(root, endpoint_dir, current, recipe, newest, read, deadline)
        if elsewhere is not None:
            nearest = [elsewhere, *nearest[: MAX_CLOSEST - 1]]
    current_presets = _preset_paths(request, recipe)
    for entry in nearest:
        del entry["same_body"], entry["weight"]
        _name_presets(entry, current_presets, root, recipe, read)
        diff = entry["differences"]
        if len(diff) > MAX_DIFFERENCES:
            entry["differences"] = [*diff[:MAX_DIFFERENCES], f"… and {len(diff) - MAX_DIFFERENCES} more"]
    return nearest


def _preset_paths(request: dict[str, Any], recipe: Recipe) -> dict[str, str]:
    """Field path → the framework preset that keyed the value there as a placeholder."""
    try:
        return {r.path: r.source for r in preset_values(facts_of(request), recipe.paths, recipe.patterns)}
    except ValueError:
        return {}


def _name_presets(
    entry: dict[str, Any], current: dict[str, str], root: Path, recipe: Recipe, read: Callable[[Path, Path], Any]
) -> None:
    """A difference at a placeholder says which preset made it one (`"…#1" → "…#2" (placeholder of preset
    langchain)`): a made-up value the preset replaced, whose pairing with the rest changed."""
    try:
        presets = {**_preset_paths(read(root / entry["cassette"], root)["request"], recipe), **current}
    except (OSError, CassetteError, ValueError, KeyError, TypeError):
        presets = current
    if presets:
        entry["differences"] = [_with_preset(line, presets) for line in entry["differences"]]


def _with_preset(line: str, presets: dict[str, str]) -> str:
    preset = presets.get(line.partition(": ")[0])
    return f"{line} (placeholder of preset {preset})" if preset else line


def _compare(
    path: Path, root: Path, current: dict[str, Any], recipe: Recipe, read: Callable[[Path, Path], dict[str, Any]]
) -> dict[str, Any] | None:
    """The differences of one candidate, or None when it cannot be compared: one bad file (unreadable, invalid,
    nested past what the interpreter walks) is left out of the search, never the end of it."""
    try:
        return _compared(path, root, current, recipe, read)
    except (OSError, CassetteError, ValueError, RecursionError):
        return None


def _compared(
    path: Path, root: Path, current: dict[str, Any], recipe: Recipe, read: Callable[[Path, Path], dict[str, Any]]
) -> dict[str, Any]:
    cassette = read(path, root)
    recorded = stored_identity(cassette["request"], recipe)
    recorded_recipe = recipe_of(cassette)
    diff, weight = _weighed_identity_differences(recorded, current)
    settings = recipe.differences(recorded_recipe) if recorded_recipe is not None else []
    if recorded_recipe is not None and (presets := recipe.framework_difference(recorded_recipe, cassette["request"])):
        settings.append(presets)
    keyed_with = cassette.get("keyed_with") or {}
    if not diff and not settings:
        if recorded_recipe is None or keyed_with.get("recipe") != RECIPE_VERSION:
            settings.append(f"recorded by an older key recipe (cassette_format {cassette.get('cassette_format')})")
        elif keyed_with.get("request_redacted"):
            settings.append("its request was redacted when stored, so the stored copy cannot show the difference")
    entry: dict[str, Any] = {"cassette": path.relative_to(root).as_posix(), "differences": diff, "weight": weight}
    if random := only_random_changes(recorded, current):
        entry["random_values"] = [
            {"field": c.field, "looks_like": c.shape.what}
            | ({"pattern": c.shape.expression} if c.shape.expression else {"ignore": c.ignore_path})
            for c in random
        ]
    if settings:
        entry["settings"] = [*settings, "carry recordings over with `cassette rekey` (see docs/key.md)"]
    entry["same_body"] = recorded["body"] == current["body"]
    return entry


def _same_body_elsewhere(
    root: Path,
    endpoint_dir: Path,
    current: dict[str, Any],
    recipe: Recipe,
    newest: Callable[[Path, int], list[Path]],
    read: Callable[[Path, Path], dict[str, Any]],
    deadline: float,
) -> dict[str, Any] | None:
    """The newest recording of another endpoint (method, host or path) with this very body, as keyed."""
    compared_count = 0
    for folder, subfolders, names in os.walk(root):
        # Never into this endpoint's own folder: it was just compared, and listing it again would double
        # the cost of a miss on a large folder (its sub-endpoints are skipped with it).
        subfolders[:] = sorted(d for d in subfolders if os.path.join(folder, d) != str(endpoint_dir))
        if not any(n.endswith(".json") for n in names):
            continue
        for path in newest(Path(folder), MAX_PER_OTHER_ENDPOINT):
            compared_count += 1
            if compared_count > MAX_ELSEWHERE or time.thread_time() > deadline:
                return None
            compared = _compare(path, root, current, recipe, read)
            if compared is not None and compared["same_body"] and compared["differences"]:
                compared["endpoint"] = "other"
                return compared
    return None


def identity_differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What differs between two identities (see key.identity), recorded → current: every cause of a key change."""
    return _weighed_identity_differences(recorded, current)[0]


def _weighed_identity_differences(recorded: dict[str, Any], current: dict[str, Any]) -> tuple[list[str], int]:
    """`identity_differences` and how many values they change (diff.weighed_differences; each difference outside
    a JSON body weighs 1)."""
    out: list[str] = []
    if recorded["method"] != current["method"]:
        out.append(f"method: {recorded['method']} → {current['method']}")
    recorded_url, _, recorded_query = recorded["url"].partition("?")
    current_url, _, current_query = current["url"].partition("?")
    if recorded_url != current_url:
        out.append(f"url: {recorded_url} → {current_url}")
    out.extend(_named_differences("query", _query_values(recorded_query), _query_values(current_query)))
    out.extend(_named_differences("header", recorded["headers"], current["headers"]))
    recorded_body, current_body = recorded["body"], current["body"]
    if isinstance(recorded_body, dict) and isinstance(current_body, dict) and "json" in recorded_body | current_body:
        if "json" in recorded_body and "json" in current_body:
            body_lines, body_weight = weighed_differences(recorded_body["json"], current_body["json"])
            return [*out, *body_lines], len(out) + body_weight
        if recorded_body != current_body:
            out.append("body: " + ("JSON → not JSON" if "json" in recorded_body else "not JSON → JSON"))
    elif recorded_body != current_body:
        out.append(f"body: {_body_kind(recorded_body)} → {_body_kind(current_body)}")
    return out, len(out)


def _body_kind(body: Any) -> str:
    if body is None:
        return "empty"
    if "multipart" in body:
        return "multipart parts " + shown(
            [p.get("name") for p in body["multipart"]] if isinstance(body["multipart"], list) else "?"
        )
    return f"bytes with sha256 {str(body.get('sha256', ''))[:12]}…"


def _query_values(query: str) -> dict[str, Any]:
    values: dict[str, list[str]] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        values.setdefault(name, []).append(value)
    return {name: found[0] if len(found) == 1 else found for name, found in values.items()}


def _named_differences(kind: str, recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    out = []
    for name in sorted(recorded.keys() | current.keys()):
        if name not in current:
            out.append(f"{kind} {name}: removed (was {shown(recorded[name])})")
        elif name not in recorded:
            out.append(f"{kind} {name}: added {shown(current[name])}")
        elif recorded[name] != current[name]:
            out.append(f"{kind} {name}: {shown(recorded[name])} → {shown(current[name])}")
    return out


def miss_body(
    key: str,
    method: str,
    url: str,
    cassette: str,
    mode: str,
    nearest: list[dict[str, Any]],
    scope: str = "shared",
    test: str | None = None,
    started_by: str = hints.DEFAULT_STARTER,
    search_cut: float | None = None,
) -> dict[str, Any]:
    """The 409 body; its message alone (all an SDK shows) names every cause the closest recording shows, and what
    to type (for how the proxy was started: `hints.py`). `search_cut`: the seconds after which the answer stopped
    waiting for the closest-recording search, when it did."""
    if search_cut is not None:
        hint = f"the search for the closest recording took over {search_cut:g} s and was left out of this answer"
    elif nearest:
        first = nearest[0]
        causes = first["differences"][:MESSAGE_DIFFERENCES]
        more = len(first["differences"]) - len(causes)
        changed = "; ".join(causes) + (f" (+{more} more)" if more > 0 else "") if causes else ""
        where = "closest recording (another endpoint)" if first.get("endpoint") == "other" else "closest recording"
        hint = f"{where} {first['cassette']}"
        if changed:
            hint += f" differs in: {changed}"
        if first.get("settings"):
            hint += ("; " if changed else ": ") + "; ".join(first["settings"])
        elif not changed:
            hint += " is the same request as keyed now"
    else:
        hint = "no recording exists for this endpoint yet"
    where = ""
    if test is not None and scope == "test":
        # A renamed or moved test looks here first: say whose folder was searched.
        where = (
            f" in the test scope of test {test} (its recordings live under {folder_of_test(test)}/; "
            "a renamed test loses them unless its folder is renamed too)"
        )
    elif test is not None:
        where = f" for test {test} (shared scope)"
    made_up = _made_up_hint(nearest[0].get("random_values", []), started_by) if nearest else ""
    message = (
        f"cassette miss: no recording for {method} {url} (key {key}) in {mode} mode{where}; {hint}.{made_up} "
        + hints.record(started_by)
    )
    details = {"key": key, "method": method, "url": url, "cassette": cassette, "mode": mode, "scope": scope}
    return error_body("cassette_miss", message, **details, test=test, closest=nearest)


def _made_up_hint(changes: list[dict[str, Any]], started_by: str) -> str:
    """ " Only values that look made up differ (…): key them by shape with `…`", or "" when something real changed."""
    if not changes:
        return ""
    fields = ", ".join(f"{c['field']} ({c['looks_like']})" for c in changes[:MESSAGE_DIFFERENCES])
    patterns = list(dict.fromkeys(c["pattern"] for c in changes if "pattern" in c))
    paths = list(dict.fromkeys(c["ignore"] for c in changes if "ignore" in c))
    ways = (
        [f"key them by shape with {' and '.join(hints.ignore_value(started_by, p) for p in patterns)}"]
        if patterns
        else []
    )
    if paths:
        ways.append(f"leave them out of the key with {' and '.join(hints.ignore_path(started_by, p) for p in paths)}")
    return f" Only values that look made up on each run differ: {fields}. If your code invents them, {'; '.join(ways)}."
