"""The replay of a large cassette, built in a separate process: `python -m cassette_proxy.core.replay_worker PATH ROOT
MAX_SIZE`.

Reading, parsing and re-encoding a 50 MB cassette takes the proxy's CPU for a
second or more, and a thread would not help: `json.loads` and `json.dumps`
hold the GIL throughout, so every other client would wait. A process has its
own GIL; the proxy only reads the finished body from a pipe, without blocking
its event loop. The worker validates exactly as the proxy does (the same `load`: inside ROOT, a regular file,
at most MAX_SIZE bytes, every field checked).

Its output: one JSON line, then the body's bytes:
  {"response": <the cassette's response without its body>, "body_length": n}
  {"error": "missing" | "unusable" | "unreadable", "problem": "..."}
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .cassette_file import DEFAULT_MAX_SIZE, CassetteError, load
from .replay_cache import Replay, replay_of, wire_fields


def reply(path: Path, root: Path | None = None, max_size: int = DEFAULT_MAX_SIZE) -> tuple[dict, bytes]:
    """The head line's object and the body, for the cassette at `path`."""
    try:
        replay = replay_of(path, load(path, root, max_size))
    except FileNotFoundError:
        return {"error": "missing", "problem": "no such file"}, b""
    except CassetteError as e:
        return {"error": "unusable", "problem": e.problem}, b""
    except OSError as e:
        return {"error": "unreadable", "problem": str(e)}, b""
    response = {name: value for name, value in replay.cassette["response"].items() if name != "body"}  # events too
    return {"response": response, "body_length": len(replay.body)}, replay.body


def replay_from(path: Path, head: dict, body: bytes) -> Replay:
    """The `Replay` a worker's output stands for; raises what `ReplayCache.load` would have raised."""
    error = head.get("error")
    if error == "missing":
        raise FileNotFoundError(str(path))
    if error == "unusable":
        raise CassetteError(path, head["problem"])
    if error is not None:
        raise OSError(f"{path}: {head.get('problem')}")
    response = head["response"]
    return Replay({"response": response}, body, wire_fields(path, response.get("headers", {}), len(body)))


def main() -> None:
    path, root, max_size = Path(sys.argv[1]), Path(sys.argv[2]) if sys.argv[2] else None, int(sys.argv[3])
    head, body = reply(path, root, max_size)
    out = sys.stdout.buffer
    out.write(json.dumps(head).encode() + b"\n")
    out.write(body)
    out.flush()


if __name__ == "__main__":
    main()
