"""Replay: a cassette on disk becomes the response, without the upstream.

The `Replayer` answers a flow with a cassette from the `ReplayCache`, whole
or (for a stream with `cassette_replay_timing`) through the timed-replay server.
A large cassette is read and parsed by a worker process (core/workers/replay_worker.py),
never on the event loop that serves every other client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mitmproxy import http
from mitmproxy.net.http import status_codes

from ..core.defaults import DEFAULT_PRELOAD
from ..core.files.cassette_file import load
from ..core.keys.key import ExactFacts
from ..core.keys.volatile import Replaced
from ..core.output import logger
from ..core.workers.replay_cache import Replay, ReplayCache, replay_of, stamp_of
from ..core.workers.replay_worker import exact_of, presets_of, replay_from
from .state import FlowState
from .timed_replay import TimedReplayServer, TimedStream

BIG_CASSETTE_BYTES = 1024 * 1024
"""Cassette files from this size on are built by a worker process: parsing one on the event loop
(about 10 ms per MB, holding the GIL) would stall every other client for that long."""

log = logger(__name__)

WORKERS = 2
"""Replay workers at once: each holds a few times its cassette's size in memory while it works."""

REPLAY_CACHE_SIZE = 512
"""Replays kept for the cassettes requests have read, beyond those preloaded."""


WORKER_PYTHON = None if getattr(sys, "frozen", False) else sys.executable
"""A frozen mitmdump (the standalone binary) is no Python to run a worker with: it parses on the loop."""
PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
WORKER_CODE = "import sys; sys.path.insert(0, sys.argv.pop(1)); from cassette_proxy.core.workers.replay_worker import main; main()"


Remember = Callable[[ExactFacts, str, tuple[Replaced, ...]], None]
"""The key cache's `remember`: a request's exact facts, its key, the values the presets replaced in it."""


class Replayer:
    """Answers flows from cassettes; owns the timed-replay server."""

    def __init__(self) -> None:
        self.cache = ReplayCache(size=REPLAY_CACHE_SIZE + DEFAULT_PRELOAD)
        self.timed = TimedReplayServer()
        self.speed: float | None = None
        """cassette_replay_timing: None sends a stream at once, else the speed factor of its recorded gaps."""
        self.workers = asyncio.Semaphore(WORKERS)
        self.preloader: asyncio.subprocess.Process | None = None
        self.preloaded_keys = 0
        """Request keys the preload computed (see replay_worker.sdk_request)."""

    def configure(self, root: Path, max_size: int, cache_size: int, speed: float | None) -> None:
        """The cassette folder, the largest file read, how many replays are kept, the pace of a replayed stream."""
        self.cache.configure(root, max_size, cache_size)
        self.speed = speed

    async def load(self, path: str) -> Replay | None:
        """The cassette at `path` ready to answer with, or None when there is none; CassetteError/OSError if unusable."""
        try:
            status = os.stat(path)
            stamp = stamp_of(status)
            if status.st_size < BIG_CASSETTE_BYTES or WORKER_PYTHON is None:
                return self.cache.load(path, status)
            if self.speed is not None:
                # A timed stream needs its events, which a worker does not send back: built here.
                replay = self.cache.lookup(path, stamp)
                recorded = replay.cassette["response"] if replay is not None else {}
                if replay is None or (recorded.get("body_format") == "events" and "body" not in recorded):
                    replay = replay_of(path, load(path, self.cache.root, self.cache.max_size))
                    self.cache.store(path, stamp, replay)
                return replay
            replay = self.cache.lookup(path, stamp)
            if replay is None:
                replay = await self._build_in_worker(path)
                self.cache.store(path, stamp, replay)
            return replay
        except FileNotFoundError:
            return None

    async def preload(self, limit: int, recipe: dict | None = None, remember: Remember | None = None) -> int:
        """Fill the cache with up to `limit` of the folder's cassettes (each below BIG_CASSETTE_BYTES) before their
        first request; how many. Built by a worker process with the same checks as a request's own read.

        A run sees most cassettes once, so reading one on its first request is the cost a CI run feels; the
        worker does that work on the other core while the test runner starts. An entry is used only while its
        file's stamp (taken before the worker read it) is unchanged, so a file changed since is read again.

        `recipe` (the run's key options: ignore, key_headers, ignore_values, frameworks, as `make_recipe` takes them) and
        `remember` (the key cache's): the worker also sends the facts an SDK would send for each cassette, keyed
        with that recipe, and `remember` keeps them.
        """
        root = self.cache.root
        if WORKER_PYTHON is None or limit <= 0 or root is None or not _has_entries(root):
            return 0
        prefix = f"{root}{os.sep}"
        self.preloader = worker = await asyncio.create_subprocess_exec(
            WORKER_PYTHON, "-I", "-c", WORKER_CODE, PACKAGE_PARENT, "--preload", str(root), str(self.cache.max_size),
            str(limit), str(BIG_CASSETTE_BYTES), *([json.dumps(recipe)] if recipe is not None else []),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            limit=1024 * 1024,
        )  # fmt: skip
        loaded = 0
        stdout = _pipe(worker.stdout)
        try:
            while line := await stdout.readline():
                head = json.loads(line)
                body = await stdout.readexactly(head["body_length"])
                path = head["path"]
                if not path.startswith(prefix):
                    raise ValueError(f"the preload worker named {path!r}, outside {root}")
                if path not in self.cache:  # a request may have read it meanwhile
                    self.cache.store(path, tuple(head["stamp"]), replay_from(Path(path), head, body))
                if remember is not None and "sdk_request" in head:
                    presets = presets_of(head["sdk_request_presets"])
                    remember(exact_of(head["sdk_request"]), head["sdk_request_key"], presets)
                    self.preloaded_keys += 1
                loaded += 1
                if loaded % 64 == 0:
                    await asyncio.sleep(0)  # buffered records are read without waiting: let the clients in
        except BaseException:
            self.stop_preload()
            raise
        finally:
            await _end(worker)
            self.preloader = None
        return loaded

    async def preload_logged(self, limit: int, recipe: dict, remember: Remember) -> None:
        """`preload`, its outcome in the log; a failure leaves the cache as it was (each cassette is then read on
        its first request)."""
        began = time.monotonic()
        try:
            loaded = await self.preload(limit, recipe, remember)
        except Exception as e:
            log.warning(
                f"cassette: preloading the cassettes failed ({type(e).__name__}: {e}); each is read on its first request"
            )
            return
        if loaded:
            log.info(
                f"cassette: preloaded {loaded} cassettes ({self.preloaded_keys} request keys) "
                f"in {time.monotonic() - began:.2f} s"
            )

    def stop_preload(self) -> None:
        if self.preloader is not None and self.preloader.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.preloader.kill()

    async def _build_in_worker(self, path: str) -> Replay:
        assert WORKER_PYTHON is not None, "load() builds here only with a Python to run the worker"
        async with self.workers:
            worker = await asyncio.create_subprocess_exec(
                WORKER_PYTHON, "-I", "-c", WORKER_CODE, PACKAGE_PARENT, path, str(self.cache.root or ""),
                str(self.cache.max_size),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                limit=1024 * 1024,
            )  # fmt: skip
            stdout, stderr = _pipe(worker.stdout), _pipe(worker.stderr)
            try:
                head = json.loads(await stdout.readline() or b"null")
                if not isinstance(head, dict):
                    raise ValueError("no answer")
                body = await stdout.readexactly(head.get("body_length", 0))
            except (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
                await _end(worker)
                problem = (await stderr.read()).decode(errors="replace").strip()[-500:]
                raise OSError(
                    f"{path}: the replay worker failed ({e}; exit code {worker.returncode}): {problem}"
                ) from None
            finally:
                # Also when the client went away mid-read (cancelled): a worker nobody reads would block on
                # its full pipe forever, holding its memory.
                await _end(worker)
        return replay_from(Path(path), head, body)

    async def answer(self, flow: http.HTTPFlow, state: FlowState, replay: Replay) -> None:
        recorded = replay.cassette["response"]
        if recorded.get("body_format") == "events" and self.speed is not None:
            await self._route_to_timed_replay(flow, state, recorded, self.speed)
            return
        # The constructor, not `Response.make`: the headers come ready, content-length included,
        # which saves `make` converting them and looking them up again on every hit.
        status = recorded["status"]
        now = time.time()
        reason = status_codes.RESPONSES.get(status, "").encode()
        flow.response = http.Response(b"HTTP/1.1", status, reason, replay.header_fields, replay.body, None, now, now)

    async def _route_to_timed_replay(
        self, flow: http.HTTPFlow, state: FlowState, recorded: dict[str, Any], speed: float
    ) -> None:
        """Send the flow to the in-proxy server that plays the events at their offsets.

        A response made here would reach the client in one piece; only a
        response from a server can be streamed over time (see timed_replay.py).
        """
        await self.timed.start()
        stream = TimedStream(recorded["status"], recorded.get("headers", {}), recorded["body"], speed)
        request = flow.request
        request.scheme, request.host, request.port = "http", "127.0.0.1", self.timed.port
        request.path = self.timed.register(stream)
        state.timed_replay = True


def _pipe(stream: asyncio.StreamReader | None) -> asyncio.StreamReader:
    assert stream is not None, "the worker is started with this stream as a pipe"
    return stream


def _has_entries(folder: Path) -> bool:
    """The folder exists and is not empty (a process for an empty folder would cost more than it saves)."""
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is not None
    except OSError:
        return False


async def _end(worker: asyncio.subprocess.Process, grace: float = 2.0) -> None:
    """Reap a replay worker, killing it if it has not exited within `grace` seconds.

    It exits by itself once it has written its answer; one stuck on a full pipe (its client went away
    before the body was read) would otherwise hold its memory forever. Not killed at once: on Python
    3.11, `kill()` polls, which can reap the process before asyncio's child watcher does, and the
    exit code is lost.
    """
    if worker.returncode is not None:
        return
    try:
        await asyncio.wait_for(asyncio.shield(worker.wait()), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            worker.kill()
        await worker.wait()
