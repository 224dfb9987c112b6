"""`cassette show KEY|FILE`: one cassette in full, readable: request, messages, response (a stream as assembled)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..core.defaults import default_dir
from ..core.files.cassette_file import load
from ..core.files.location import cassette_files
from ..core.files.safe_read import CassetteError, folder_for
from ..core.files.session_file import is_session
from ..core.keys.recipe import RecipeError, recorded_preset_values
from ..core.reading.conversation import MCP, conversation_from, conversation_of, mcp_call
from ..core.reading.session_conversation import session_lines
from ..core.reading.summary import one_line as short
from ..core.reading.summary import summarize_request, summarize_response, turn_lines
from . import add_command
from .ls import size


def show_text(path: Path, root: Path) -> str:
    cassette = load(path, folder_for(path, root))  # the proxy's checks: inside the folder, regular, size-bounded
    request, response = cassette["request"], cassette["response"]
    asked, answered = summarize_request(request), summarize_response(response)
    recorded_with = ", ".join(f"{name} {version}" for name, version in (cassette.get("recorded_with") or {}).items())
    lines = [
        f"file:      {path}",
        f"key:       {cassette['key']}",
        f"recorded:  {cassette.get('recorded_at', '?')}" + (f" with {recorded_with}" if recorded_with else ""),
        f"size:      {size(path)}",
        f"request:   {asked.method} {asked.url}",
    ]
    if is_session(cassette):  # a WebSocket session: its turns, not a response body
        return "\n".join([*lines, *session_lines(cassette)])
    conversation = conversation_of(cassette)
    if conversation.shape == MCP:  # a JSON-RPC call to an MCP server: no model, its method and tool
        lines.append(f"mcp:       {mcp_call(request) or '-'}")
    else:
        lines.append(f"model:     {asked.model or '-'}")
    if conversation.tools:
        lines.append(f"tools:     {', '.join(conversation.tools)}")
    lines += preset_lines(cassette)
    turns = turn_lines(conversation_from(request))
    lines += ["messages:"] + [f"  {role}: {short(text, 200)}" for role, text in turns] if turns else []
    lines += [
        f"response:  {answered.status}" + (f", model {answered.model}" if answered.model else "")
        + (f", finish {answered.finish_reason}" if answered.finish_reason else ""),
        "content:",
        *(f"  {line}" for line in (answered.content or "(no text)").splitlines()),
    ]  # fmt: skip
    return "\n".join(lines)


def preset_lines(cassette: dict) -> list[str]:
    """What the framework presets keyed as placeholders in the request: each value the key did not see."""
    try:
        replaced = recorded_preset_values(cassette)
    except (ValueError, RecipeError) as e:
        return [f"presets:   cannot tell ({e})"]
    if not replaced:
        return []
    return ["presets:   keyed as placeholders, not as sent:"] + [
        f"  {r.path}: {r.placeholder} (preset {r.source})" for r in replaced
    ]


def find(target: str, root: Path) -> list[Path]:
    """A file path as given, else the cassettes whose name starts with the key (or key prefix)."""
    path = Path(target)
    if os.path.lexists(path) and not path.is_dir():  # a symlink or a fifo too: the read says why it refuses it
        return [path]
    found = [p for p in cassette_files(root) if p.name.startswith(target)] if root.is_dir() else []
    exact = [p for p in found if p.stem == target]  # a full key names `<key>.json`, not its `<key>.2.json` repeats
    return exact or found


def run_show(args: argparse.Namespace) -> int:
    found = find(args.target, args.dir)
    if len(found) != 1:
        problem = "matches several cassettes" if found else f"is neither a file nor a key in {args.dir}"
        print(f"cassette show: {args.target!r} {problem}")
        for path in found:
            print(f"  {path}")
        return 2
    try:
        print(show_text(found[0], args.dir))
    except (OSError, CassetteError) as e:
        print(f"cassette show: unreadable cassette: {e}")
        return 1
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    show = add_command(subparsers, "show")
    show.add_argument("target", metavar="KEY|FILE", help="a cassette file, or its key (a prefix is enough)")
    show.add_argument("--dir", type=Path, default=default_dir(), help="cassette folder to look the key up in")
    show.set_defaults(func=run_show)
