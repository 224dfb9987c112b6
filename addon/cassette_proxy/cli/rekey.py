"""Recompute every cassette's key from its stored request under the given settings (each one not given: what the
cassette was recorded with) and the current key recipe; rename the files (sequence files <key>.N.json included)
and print what moved. Nothing is written if any cassette cannot be rekeyed or two would collide with different
responses.

`cassette rekey`: carry recordings over to other key settings, or to a newer key recipe.

Changing `cassette_ignore`, the key headers or the value patterns changes
every key, and a new key recipe changes some: without this, every cassette
would have to be re-recorded against the live API. Each cassette stores its
request as keyed and the settings it was keyed with (`keyed_with`), so its key
under other settings can be computed from the file alone.

Nothing is changed unless every cassette can be rekeyed: an unreadable file,
a request stored redacted, a key header the recording did not keep, or two
cassettes that would share a name but answer differently stop the command
before it writes anything.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..core.defaults import DEFAULT_KEY_HEADERS, default_dir
from ..core.files.atomic_write import write_atomic
from ..core.files.cassette_file import FORMAT_VERSION, dumps, load
from ..core.files.location import cassette_files, endpoint_dir, repeat_path, short_endpoint
from ..core.files.safe_read import CassetteError, read_limited
from ..core.files.session_file import is_session
from ..core.keys.frameworks import DEFAULT_FRAMEWORKS, PRESETS
from ..core.keys.key import identity, key_of
from ..core.keys.recipe import Recipe, RecipeError, facts_of, make_recipe, recipe_of
from ..launch.launcher import LauncherError
from . import add_command

_NAME = re.compile(r"^([0-9a-f]{32})(?:\.([1-9][0-9]*))?\.json$")
FORMAT_1_RECIPE = make_recipe()
"""What a cassette_format 1 file was most likely keyed with: the defaults (pass the flags if you changed them)."""


@dataclass(frozen=True)
class Overrides:
    """The settings given on the command line; None keeps what each cassette was recorded with."""

    ignore: Sequence[str] | None = None
    key_headers: Sequence[str] | None = None
    """Added to the default key headers, as `cassette run --key-header` does."""
    ignore_values: Sequence[str] | None = None
    frameworks: Sequence[str] | None = None
    """The framework presets; None keeps a cassette's, and gives one recorded before presets existed all of them."""

    def applied_to(self, recorded: Recipe, has_frameworks: bool = True) -> Recipe:
        """`has_frameworks`: whether the cassette's `keyed_with` names its framework presets at all."""
        if self.frameworks is not None:
            frameworks: Sequence[str] = self.frameworks
        else:
            frameworks = recorded.frameworks if has_frameworks else DEFAULT_FRAMEWORKS
        return make_recipe(
            recorded.ignore if self.ignore is None else [p for p in self.ignore if p.strip()],
            recorded.key_headers if self.key_headers is None else [*DEFAULT_KEY_HEADERS, *self.key_headers],
            recorded.ignore_values if self.ignore_values is None else [v for v in self.ignore_values if v.strip()],
            frameworks,
        )


@dataclass
class Entry:
    """One cassette file and where it belongs under the new settings."""

    source: PurePosixPath
    target: PurePosixPath
    cassette: dict


@dataclass
class Plan:
    entries: list[Entry]
    problems: list[str]

    def groups(self) -> dict[PurePosixPath, list[Entry]]:
        grouped: dict[PurePosixPath, list[Entry]] = {}
        for entry in self.entries:
            grouped.setdefault(entry.target, []).append(entry)
        return grouped


def plan(root: Path, overrides: Overrides) -> Plan:
    """Where every cassette under `root` belongs; problems instead for those that cannot be rekeyed."""
    entries, problems = [], []
    for path in cassette_files(root):
        relative = PurePosixPath(path.relative_to(root).as_posix())
        try:
            entries.append(_entry(path, root, relative, overrides))
        except (CassetteError, ValueError) as e:
            problems.append(f"{relative}: {e.problem if isinstance(e, CassetteError) else e}")
    result = Plan(entries, problems)
    for target, group in result.groups().items():
        responses = {dumps(entry.cassette["response"]) for entry in group}
        if len(responses) > 1:
            sources = ", ".join(str(entry.source) for entry in group)
            problems.append(
                f"{sources} would all become {target} but answer differently: delete the ones you do not want, "
                "or keep settings that tell their requests apart"
            )
    return result


def _entry(path: Path, root: Path, relative: PurePosixPath, overrides: Overrides) -> Entry:
    match = _NAME.match(path.name)
    if not match:
        raise ValueError("not a cassette name (<32 hex>.json or <32 hex>.<n>.json)")
    cassette = load(path, root)  # rekey rewrites what it reads: a symlink out of the folder is refused, not copied in
    recorded = recipe_of(cassette) or FORMAT_1_RECIPE
    keyed_with = cassette.get("keyed_with") or {}
    target_recipe = overrides.applied_to(recorded, "frameworks" in keyed_with)
    if keyed_with.get("request_redacted"):
        raise ValueError(
            "its request was changed by a redaction rule when stored, so its key cannot be recomputed; re-record it"
        )
    unknown = [h for h in target_recipe.key_headers if h not in recorded.key_headers]
    if unknown:
        raise ValueError(
            f"the recording did not keep the header(s) {', '.join(unknown)}, so they cannot be keyed; re-record it"
        )
    facts = facts_of(cassette["request"])
    keyed = identity(facts, target_recipe.key_headers, target_recipe.paths, target_recipe.patterns)
    if "turn" in cassette:  # a Responses WebSocket turn: its POST twin's identity, in the turns' key space
        keyed = {**keyed, "over": "websocket"}
    key = key_of(keyed)
    endpoint, folder = endpoint_dir(facts.scheme, facts.host, facts.port, facts.path), relative.parent.as_posix()
    # As recorded: the endpoint folder, or its short form for a name too long to store (location.short_name).
    stored = next((f for f in (endpoint, short_endpoint(endpoint)) if folder == f or folder.endswith(f"/{f}")), None)
    if stored is None:
        raise ValueError(f"is not in the folder its request URL names ({endpoint}/)")
    base = PurePosixPath(folder[: len(folder) - len(stored)])
    target = base / repeat_path(f"{stored}/{key}.json", int(match.group(2) or 1))
    updated = {
        **cassette,
        "cassette_format": cassette["cassette_format"] if is_session(cassette) else FORMAT_VERSION,
        "key": key,
        "keyed_with": target_recipe.to_json(),
    }
    return Entry(relative, target, dict(_ordered(updated)))


def _ordered(cassette: dict) -> list[tuple[str, object]]:
    """The fields in the order the proxy writes them, so a rekeyed file diffs only where it changed."""
    order = ["cassette_format", "key", "keyed_with", "recorded_at", "recorded_with", "request", "response"]
    return sorted(cassette.items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order))


def apply(root: Path, result: Plan, dry_run: bool = False) -> list[str]:
    """Write every cassette to its new name and remove the old names; the lines to print."""
    lines, moved, merged, rewritten, unchanged = [], 0, 0, 0, 0
    verb = "would move" if dry_run else "moved"
    sources = {entry.source for entry in result.entries}
    targets = set()
    for target, group in sorted(result.groups().items()):
        targets.add(target)
        kept = next((entry for entry in group if entry.source == target), group[0])
        data = dumps(kept.cassette)
        old = read_limited(root / target, root) if target in sources else None
        if old != data:
            if not dry_run:
                write_atomic(root / target, data)
            if kept.source == target:
                rewritten += 1
        elif kept.source == target:
            unchanged += 1
        for entry in group:
            if entry.source == target:
                continue
            if entry is kept:
                moved += 1
                lines.append(f"{verb} {entry.source} → {target}")
            else:
                merged += 1
                lines.append(f"{'would merge' if dry_run else 'merged'} {entry.source} into {target} (same response)")
    if not dry_run:
        for source in sorted(sources - targets):
            (root / source).unlink()
    summary = f"{moved} moved, {merged} merged, {rewritten} rewritten in place (keyed_with), {unchanged} unchanged"
    lines.append(f"cassette rekey: {summary}" + (" (dry run: nothing written)" if dry_run else ""))
    return lines


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, "rekey", __doc__)
    parser.add_argument("--dir", help="Cassette folder; defaults to $CASSETTE_DIR, else ./cassettes.")
    parser.add_argument(
        "--ignore", action="append", metavar="PATH",
        help="Ignore path (repeatable), replacing the recorded ignore set; --ignore '' for none.",
    )  # fmt: skip
    parser.add_argument(
        "--key-header", action="append", metavar="NAME",
        help="Key header on top of the defaults (repeatable), replacing the recorded extra ones.",
    )  # fmt: skip
    parser.add_argument(
        "--ignore-value", action="append", metavar="REGEX",
        help="Value pattern or preset (repeatable), replacing the recorded ones; --ignore-value '' for none.",
    )  # fmt: skip
    parser.add_argument(
        "--frameworks", nargs="*", metavar="NAME", choices=sorted(PRESETS),
        help="Framework presets (cassette_frameworks), replacing the recorded ones; --frameworks with no name for "
        "none. Not given: each cassette keeps its own, and one recorded before the presets existed gets all of them.",
    )  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help="Print what would move; write nothing.")
    parser.set_defaults(func=rekey)


def rekey(args: argparse.Namespace) -> int:
    root = Path(args.dir) if args.dir else default_dir()
    if not root.is_dir():
        raise LauncherError(f"cassette folder {str(root)!r} does not exist; pass --dir")
    overrides = Overrides(args.ignore, args.key_header, args.ignore_value, args.frameworks)
    try:
        overrides.applied_to(FORMAT_1_RECIPE)
    except RecipeError as e:
        flag = "--ignore-value" if e.option == "cassette_ignore_values" else "--ignore"
        raise LauncherError(f"{flag}: {str(e).split(': ', 1)[1]}") from None
    result = plan(root, overrides)
    if result.problems:
        for problem in result.problems:
            print(f"cassette rekey: {problem}", file=sys.stderr)
        print(f"cassette rekey: nothing changed ({len(result.problems)} problems)", file=sys.stderr)
        return 1
    for line in apply(root, result, args.dry_run):
        print(line)
    return 0
