"""Work on a big request body, done by a separate process: its key, its miss's closest recordings, its cassette.

A 50 MB prompt parsed, walked and encoded again on mitmproxy's event loop held
every other client for a second or more (benchmarks/big_request.py), and a
thread would not help: `json` and `re` hold the GIL throughout. So the proxy
hands a body above BIG_REQUEST_BYTES to a worker process (from a thread, so
its event loop only waits on a future): the body travels through an unnamed
temporary file, written in one call during which the GIL is free; the job is
one JSON object on stdin; the answer one JSON object on stdout. The worker runs
the very functions the proxy runs for a small body (`key.request_key`,
`recipe.stored_request`, `redact`, `miss.closest`, `cassette_file.dumps`), with
settings rebuilt from the same values, so a big request gets the key, the miss
answer and the cassette a small one would. A frozen mitmdump (no Python to run
a worker with) does the same work in the calling thread.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..files.atomic_write import write_atomic
from ..files.cassette_file import dumps, large_json_as_text, new_cassette
from ..keys.key import RequestFacts, request_key
from ..keys.recipe import Recipe, make_recipe, stored_request
from ..reading.miss import closest
from ..secrets import redact
from .replay_worker import WORKER_NICENESS

BIG_REQUEST_BYTES = 1024 * 1024
"""Request bodies from this size on are keyed, diffed and stored by a worker: parsing one on the event loop costs
about 20 ms per MB, for every other client."""

WORKER_PYTHON = None if getattr(sys, "frozen", False) else sys.executable
PACKAGE_PARENT = str(Path(__file__).resolve().parents[3])
WORKER_CODE = "import sys; sys.path.insert(0, sys.argv.pop(1)); from cassette_proxy.core.workers.request_worker import main; main()"


class WorkerError(Exception):
    """The worker could not do its job (it crashed, or its answer was not JSON); the message says what it printed."""


def facts_fields(facts: RequestFacts) -> dict[str, Any]:
    """The facts but the body, as JSON: what a job sends of its request (the body goes through the file)."""
    return {name: value for name, value in facts._asdict().items() if name != "body"}


def run(job: dict[str, Any], body: bytes, extra: bytes = b"") -> dict[str, Any]:
    """Do `job` on `body` (and `extra`, the response body a record job stores) in a worker process; blocking, so
    call it from a thread. Raises WorkerError when the worker fails."""
    if WORKER_PYTHON is None:
        return perform(job, body + extra)
    with tempfile.TemporaryFile() as file:
        file.write(body)
        file.write(extra)
        file.flush()
        done = subprocess.run(
            [WORKER_PYTHON, "-I", "-c", WORKER_CODE, PACKAGE_PARENT, str(file.fileno())],
            input=json.dumps(job).encode(),
            capture_output=True,
            pass_fds=(file.fileno(),),
            check=False,
        )
    try:
        answer: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        problem = done.stderr.decode(errors="replace").strip()[-500:]
        raise WorkerError(f"the request worker failed (exit code {done.returncode}): {problem}") from None
    return answer


def key_job(facts: RequestFacts, recipe: Recipe) -> dict[str, Any]:
    """The job of keying `facts` under `recipe`: the recipe goes as its settings, which the worker builds the same
    recipe from (its framework presets too, places and all)."""
    return {"job": "key", "facts": facts_fields(facts), "recipe": recipe.settings()}


async def key_in_worker(facts: RequestFacts, recipe: Recipe) -> str:
    """`recipe.key_cache().key(facts)`, computed by a worker."""
    key: str = (await asyncio.to_thread(run, key_job(facts, recipe), facts.body))["key"]
    return key


async def closest_in_worker(
    facts: RequestFacts,
    key_headers: Sequence[str],
    redact_specs: Sequence[str],
    recipe: dict[str, Any],
    folder: Path,
    root: Path,
) -> list[dict[str, Any]]:
    """`miss.closest` for this request's stored, redacted form (as `answers.miss` builds it), by a worker;
    `recipe`: the run's key options, as `make_recipe` takes them."""
    job = {
        "job": "miss",
        "facts": facts_fields(facts),
        "stored_headers": list(key_headers),
        "redact": list(redact_specs),
        "recipe": recipe,
        "folder": str(folder),
        "root": str(root),
    }
    nearest: list[dict[str, Any]] = (await asyncio.to_thread(run, job, facts.body))["nearest"]
    return nearest


def write_in_worker(cassette: dict[str, Any], facts: RequestFacts, redact_specs: Sequence[str], path: Path) -> None:
    """Store `cassette` (whose request lacks its body: `stored_request` of the facts without it) with the request
    built from `facts`, redacted and written as `Recorder` writes any cassette; OSError when the write failed.
    Blocking: the recorder's writer thread calls it."""
    response = dict(cassette["response"])
    in_file = isinstance(response.get("body"), str)  # a big answer stored as text: through the file, not JSON
    extra = response.pop("body").encode("utf-8", "surrogatepass") if in_file else b""
    job = {
        "job": "record",
        "facts": facts_fields(facts),
        "body_length": len(facts.body),
        "stored_headers": list(cassette["request"].get("headers", {})),
        "redact": list(redact_specs),
        "key": cassette["key"],
        "response": response,
        "response_body_in_file": in_file,
        "recorded_with": cassette["recorded_with"],
        "keyed_with": cassette.get("keyed_with"),
        "path": str(path),
    }
    try:
        answer = run(job, facts.body, extra)
    except WorkerError as e:
        raise OSError(str(e)) from None
    if "written" not in answer:
        raise OSError(answer.get("write_error") or f"the request worker answered {answer!r}")


def perform(job: dict[str, Any], data: bytes) -> dict[str, Any]:
    """The job's answer; `data`: the request body, then (a record job) the response body."""
    length = job.get("body_length", len(data))
    fields = job["facts"]
    facts = RequestFacts(**{**fields, "query": [tuple(pair) for pair in fields["query"]], "body": data[:length]})
    if job["job"] == "key":
        recipe = make_recipe(**job["recipe"])
        return {"key": request_key(facts, recipe.key_headers, recipe.paths, recipe.patterns)}
    request = stored_request(facts, job["stored_headers"])
    rules = redact.parse_rules(job["redact"])
    if job["job"] == "miss":
        # Redacted like the recordings it is compared with: the diff shows real changes, and no secret.
        request["body"] = redact.redacted(request["body"], ("request", "body"), rules)
        recipe = make_recipe(**job["recipe"])
        return {"nearest": closest(Path(job["folder"]), Path(job["root"]), request, recipe)}
    return _record(job, request, rules, data[length:])


def _record(
    job: dict[str, Any], request: dict[str, Any], rules: tuple[redact.Rule, ...], response_body: bytes
) -> dict[str, Any]:
    response = dict(job["response"])
    if job.get("response_body_in_file"):
        response["body"] = response_body.decode("utf-8", "surrogatepass")
    cassette = new_cassette(job["key"], request, response, job["recorded_with"], job["keyed_with"])
    try:
        write_atomic(Path(job["path"]), dumps(large_json_as_text(redact.as_stored(cassette, rules))))
    except OSError as e:
        return {"write_error": e.strerror or str(e)}
    return {"written": True}


def main() -> None:
    os.nice(WORKER_NICENESS)
    job = json.loads(sys.stdin.buffer.read())
    with os.fdopen(int(sys.argv[1]), "rb") as file:
        file.seek(0)
        data = file.read()
    sys.stdout.write(json.dumps(perform(job, data)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
