"""`cassette ls` and `cassette show`: a readable view of the cassettes, one line each or one in full.

A folder of hash-named JSON files tells a reader nothing; these say which
endpoint, model and prompt each file holds, when it was recorded and how big it is.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from . import store
from .summary import conversation, summarize_request, summarize_response

SHORT_KEY = 8


def short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def size(path: Path) -> str:
    n = path.stat().st_size
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MB"


def endpoint(url: str) -> str:
    """`api.openai.com/v1/chat/completions`: the host and path, without scheme and query."""
    return url.split("://", 1)[-1].split("?", 1)[0]


def short_key(path: Path) -> str:
    """The start of the key, plus `.2` for the second recording of a sequence: enough for `cassette show`."""
    return path.stem[:SHORT_KEY] + path.stem[32:]


def ls_line(path: Path) -> str:
    cassette = store.load(path)
    request = summarize_request(cassette["request"])
    return "  ".join(
        [
            short_key(path).ljust(SHORT_KEY + 2),
            str(cassette.get("recorded_at", "?"))[:10].ljust(10),
            size(path).rjust(8),
            short(request.model or "-", 24).ljust(24),
            short(endpoint(request.url), 48).ljust(48),
            short(request.first_user_message, 60),
        ]
    ).rstrip()


def show_text(path: Path) -> str:
    cassette = store.load(path)
    request, response = cassette["request"], cassette["response"]
    asked, answered = summarize_request(request), summarize_response(response)
    recorded_with = ", ".join(f"{name} {version}" for name, version in (cassette.get("recorded_with") or {}).items())
    lines = [
        f"file:      {path}",
        f"key:       {cassette['key']}",
        f"recorded:  {cassette.get('recorded_at', '?')}" + (f" with {recorded_with}" if recorded_with else ""),
        f"size:      {size(path)}",
        f"request:   {asked.method} {asked.url}",
        f"model:     {asked.model or '-'}",
    ]
    turns = conversation(request.get("body") if request.get("body_format") == "json" else None)
    lines += ["messages:"] + [f"  {role}: {short(text, 200)}" for role, text in turns] if turns else []
    lines += [
        f"response:  {answered.status}" + (f", model {answered.model}" if answered.model else "")
        + (f", finish {answered.finish_reason}" if answered.finish_reason else ""),
        "content:",
        *(f"  {line}" for line in (answered.content or "(no text)").splitlines()),
    ]  # fmt: skip
    return "\n".join(lines)


def find(target: str, root: Path) -> list[Path]:
    """A file path as given, else the cassettes whose name starts with the key (or key prefix)."""
    path = Path(target)
    if path.is_file():
        return [path]
    found = [p for p in store.cassette_files(root) if p.name.startswith(target)] if root.is_dir() else []
    exact = [p for p in found if p.stem == target]  # a full key names `<key>.json`, not its `<key>.2.json` repeats
    return exact or found


def run_ls(args: argparse.Namespace) -> int:
    root = args.dir
    if not root.is_dir():
        print(f"cassette ls: {root} is not a folder (pass the cassette folder, or set CASSETTE_DIR)")
        return 2
    broken = 0
    for path in store.cassette_files(root):
        try:
            print(ls_line(path))
        except (OSError, store.CassetteError) as e:
            print(f"{short_key(path).ljust(SHORT_KEY + 2)}  unreadable: {e}")
            broken += 1
    return 1 if broken else 0


def run_show(args: argparse.Namespace) -> int:
    found = find(args.target, args.dir)
    if len(found) != 1:
        problem = "matches several cassettes" if found else f"is neither a file nor a key in {args.dir}"
        print(f"cassette show: {args.target!r} {problem}")
        for path in found:
            print(f"  {path}")
        return 2
    try:
        print(show_text(found[0]))
    except (OSError, store.CassetteError) as e:
        print(f"cassette show: unreadable cassette: {e}")
        return 1
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    ls = subparsers.add_parser("ls", help="one line per cassette: key, recorded date, size, model, endpoint, prompt")
    ls.add_argument("dir", nargs="?", type=Path, default=store.default_dir(), help="cassette folder")
    ls.set_defaults(func=run_ls)
    show = subparsers.add_parser("show", help="one cassette in full, readable: request, messages, response")
    show.add_argument("target", metavar="KEY|FILE", help="a cassette file, or its key (a prefix is enough)")
    show.add_argument("--dir", type=Path, default=store.default_dir(), help="cassette folder to look the key up in")
    show.set_defaults(func=run_show)
