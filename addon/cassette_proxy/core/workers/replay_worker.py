"""Replays built in a separate process: of one large cassette (`python -m cassette_proxy.core.workers.replay_worker PATH ROOT
MAX_SIZE`), or of a folder's cassettes before their first request (`... --preload ROOT MAX_SIZE LIMIT BELOW`:
at most LIMIT cassettes, each below BELOW bytes, and PRELOAD_BYTES of bodies).

Reading, parsing and re-encoding a 50 MB cassette takes the proxy's CPU for a
second or more, and a thread would not help: `json.loads` and `json.dumps`
hold the GIL throughout, so every other client would wait. A process has its
own GIL; the proxy only reads the finished body from a pipe, without blocking
its event loop. The worker validates exactly as the proxy does (the same `load`: inside ROOT, a regular file,
at most MAX_SIZE bytes, every field checked).

Its output: one JSON line, then the body's bytes:
  {"response": <the cassette's response without its body>, "body_length": n}
  {"error": "missing" | "unusable" | "unreadable", "problem": "..."}
With --preload, one such record per usable cassette, each head also naming the file ("path") and its
`stamp` taken before it was read (a file changed afterwards no longer matches it, and is read again).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any, BinaryIO

from ..files.cassette_file import load
from ..files.safe_read import DEFAULT_MAX_SIZE, CassetteError
from ..keys.key import ExactFacts, exact_facts, keyed
from ..keys.recipe import Recipe, facts_of, make_recipe
from ..keys.volatile import Replaced
from .replay_cache import Replay, replay_of, stamp_of, wire_fields

WORKER_NICENESS = 10
"""How much lower than the proxy a worker runs (`os.nice`), one request's or the preload: with fewer free cores
than busy processes, the event loop that serves every other client comes first, and the request that made the work
(or, for the preload, nobody yet) waits."""

PRELOAD_BYTES = 64 * 1024 * 1024
"""The bodies a preload sends at most: the replay cache holds 256 MB in all, and a run's later reads need room."""


def reply(path: Path, root: Path | None = None, max_size: int = DEFAULT_MAX_SIZE) -> tuple[dict[str, Any], bytes]:
    """The head line's object and the body, for the cassette at `path`."""
    try:
        replay = replay_of(path, load(path, root, max_size))
    except FileNotFoundError:
        return {"error": "missing", "problem": "no such file"}, b""
    except CassetteError as e:
        return {"error": "unusable", "problem": e.problem}, b""
    except OSError as e:
        return {"error": "unreadable", "problem": str(e)}, b""
    return {"response": head_of(replay), "body_length": len(replay.body)}, replay.body


def head_of(replay: Replay) -> dict[str, Any]:
    """The response without its body (the events of a stream too): the body travels as bytes."""
    return {name: value for name, value in replay.cassette["response"].items() if name != "body"}


def sdk_request(cassette: dict[str, Any], recipe: Recipe) -> tuple[list[Any], list[list[str]]] | None:
    """The exact facts (`key.exact_facts`, as JSON) of the request an httpx-based SDK sends for this cassette
    (openai, anthropic and most Python clients; Node's JSON.stringify writes the same bytes): the stored JSON
    body in compact form, `content-type: application/json`, the stored key headers. Only when those facts key,
    under the run's recipe, to this very cassette; None otherwise (another body format, a redacted request).
    The proxy's key cache then answers that request's first sight; any other request is keyed as usual.
    With them, the values the framework presets replaced in that request (`key.keyed`), as `presets_of` reads
    them: the run report lists them, and the first sight need not parse the body for them either.
    """
    request = cassette["request"]
    if request.get("body_format") != "json":
        return None
    try:
        facts = facts_of(request)
        body = json.dumps(request["body"], ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except (ValueError, TypeError):  # UnicodeEncodeError (a lone surrogate) is a ValueError
        return None
    headers = {**{name.lower(): value for name, value in facts.headers.items()}, "content-type": "application/json"}
    facts = facts._replace(body=body, headers=headers, content_type="application/json")
    key, presets = keyed(facts, recipe.key_headers, recipe.paths, recipe.patterns)
    if key != cassette.get("key"):
        return None
    exact = list(exact_facts(facts))
    exact[7] = body.decode("utf-8")  # JSON carries text; `exact_of` encodes it back
    return exact, [[r.path, r.source, r.placeholder] for r in presets]


def presets_of(sent: list[list[str]]) -> tuple[Replaced, ...]:
    """The preset values of a worker's `sdk_request` again."""
    return tuple(Replaced(path, source, placeholder, preset=True) for path, source, placeholder in sent)


def exact_of(sent: list[Any]) -> ExactFacts:
    """`key.exact_facts` again from a worker's `sdk_request` (JSON made its tuples lists, its body text)."""
    method, scheme, host, port, path, query, headers, body, content_type = sent
    query, headers = tuple(map(tuple, query)), tuple(map(tuple, headers))
    return method, scheme, host, port, path, query, headers, body.encode("utf-8"), content_type


def replay_from(path: Path, head: dict[str, Any], body: bytes) -> Replay:
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


def preload(
    root: str,
    max_size: int,
    limit: int,
    below: int,
    out: BinaryIO,
    budget: int = PRELOAD_BYTES,
    recipe: Recipe | None = None,
) -> int:
    """Write the records of up to `limit` usable cassettes under `root` smaller than `below` bytes, until their
    bodies reach `budget` bytes; how many. With the run's `recipe`, each record also carries `sdk_request` (see
    `sdk_request`), so that the request's first sight need not compute its key either.

    Folders are walked without following symlinks (a symlinked cassette file is checked by `load`, as on a
    request); hidden folders and names are skipped, as are unusable cassettes: a request for one gets the usual
    error from the proxy's own read.
    """
    written = 0
    for folder, folders, names in os.walk(root):
        folders[:] = [name for name in folders if not name.startswith(".")]
        for name in names:
            if not name.endswith(".json") or name.startswith("."):
                continue
            path = os.path.join(folder, name)
            try:
                status = os.stat(path)
            except OSError:
                continue
            if not stat.S_ISREG(status.st_mode) or status.st_size >= below:
                continue
            try:
                cassette = load(Path(path), Path(root), max_size)
                replay = replay_of(path, cassette)
            except (OSError, CassetteError):
                continue
            body = replay.body
            # The response as the replay cache keeps it: a stream's events too, which a timed replay plays.
            response = replay.cassette["response"]
            head = {"response": response, "body_length": len(body), "path": path, "stamp": stamp_of(status)}
            if recipe is not None and (request := sdk_request(cassette, recipe)) is not None:
                head["sdk_request"], head["sdk_request_presets"] = request
                head["sdk_request_key"] = cassette["key"]
            out.write(json.dumps(head).encode() + b"\n")
            out.write(body)
            written += 1
            budget -= len(body)
            if written >= limit or budget <= 0:
                return written
    return written


def main() -> None:
    out = sys.stdout.buffer
    # Below the proxy, and below the command it serves: a preload starts with the proxy, while the test runner
    # imports its suite on the same cores, and is worth less than that start (a cassette it has not read yet is
    # read on its first request, as without a preload).
    os.nice(WORKER_NICENESS)
    if sys.argv[1] == "--preload":
        recipe = None
        if len(sys.argv) > 6:  # the run's key options, exactly as the addon gave them to `make_recipe`
            settings = json.loads(sys.argv[6])
            recipe = make_recipe(**settings)
        preload(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), out, recipe=recipe)
        out.flush()
        return
    path, root, max_size = Path(sys.argv[1]), Path(sys.argv[2]) if sys.argv[2] else None, int(sys.argv[3])
    head, body = reply(path, root, max_size)
    out.write(json.dumps(head).encode() + b"\n")
    out.write(body)
    out.flush()


if __name__ == "__main__":
    main()
