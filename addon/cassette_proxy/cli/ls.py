"""`cassette ls`: one readable line per cassette (key, date, size, model, endpoint, prompt).

A folder of hash-named JSON files tells a reader nothing; these say which
endpoint, model and prompt each file holds, when it was recorded and how big it is.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ..core.defaults import default_dir
from ..core.files.cassette_file import load
from ..core.files.location import cassette_files
from ..core.files.safe_read import CassetteError
from ..core.files.session_file import is_session
from ..core.reading.conversation import MCP, shape_of, turn_number
from ..core.reading.session_conversation import session_conversation
from ..core.reading.summary import RequestSummary, summarize_request
from ..core.reading.summary import one_line as short
from . import add_command

SHORT_KEY = 8


def size(path: Path) -> str:
    n = path.stat().st_size
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MB"


def endpoint(url: str) -> str:
    """`api.openai.com/v1/chat/completions`: the host and path, without scheme and query."""
    return url.split("://", 1)[-1].split("?", 1)[0]


def short_key(path: Path) -> str:
    """The start of the key, plus `.2` for the second recording of a sequence: enough for `cassette show`."""
    return path.stem[:SHORT_KEY] + path.stem[32:]


def ls_line(path: Path, root: Path) -> str:
    cassette = load(path, root)  # the proxy's checks: inside the folder, a regular file, size-bounded
    request = summarize_request(cassette["request"])
    if is_session(cassette):  # a WebSocket session: its model and first user text are in its frames
        request = session_request(cassette, request)
    elif shape_of(str(cassette["request"].get("url", "")), cassette["request"].get("body")) == MCP:
        request = dataclasses.replace(request, model="mcp")  # a JSON-RPC call to an MCP server has no model
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


def session_request(cassette: dict, request: RequestSummary) -> RequestSummary:
    """The upgrade's summary with what the session's messages say: the model (`session.created`, Gemini's
    `setup`) when the URL has none, and the first user text."""
    conversation = session_conversation(cassette)
    texts = [
        part.text for turn in conversation.turns if turn.role == "user" for part in turn.parts if part.kind == "text"
    ]
    first = texts[0] if texts else request.first_user_message
    if (number := turn_number(cassette)) is not None:  # a Responses WebSocket turn: what it adds, its last user text
        first = f"turn {number}: {texts[-1] if texts else request.first_user_message}"
    return dataclasses.replace(request, model=request.model or conversation.model, first_user_message=first)


def run_ls(args: argparse.Namespace) -> int:
    root = args.dir
    if not root.is_dir():
        print(f"cassette ls: {root} is not a folder (pass the cassette folder, or set CASSETTE_DIR)")
        return 2
    broken = 0
    for path in cassette_files(root):
        try:
            print(ls_line(path, root))
        except (OSError, CassetteError) as e:
            print(f"{short_key(path).ljust(SHORT_KEY + 2)}  unreadable: {e}")
            broken += 1
    return 1 if broken else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    ls = add_command(subparsers, "ls")
    ls.add_argument("dir", nargs="?", type=Path, default=default_dir(), help="cassette folder")
    ls.set_defaults(func=run_ls)
