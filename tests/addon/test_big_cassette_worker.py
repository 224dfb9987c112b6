"""The Replayer builds a big cassette's replay in a worker process; what it answers with is what the in-process
path builds, and the worker's failures surface as the same errors. In the proxy's environment (mitmproxy)."""

from __future__ import annotations

import asyncio
import json

import pytest
from cassette_proxy.core.files.safe_read import CassetteError
from cassette_proxy.core.workers.replay_cache import ReplayCache
from cassette_proxy.proxy import replay as replay_module
from cassette_proxy.proxy.replay import BIG_CASSETTE_BYTES, Replayer

KEY = "0123456789abcdef0123456789abcdef"


def write_cassette(path, body_format: str, body, headers: dict | None = None) -> str:
    cassette = {
        "cassette_format": 1,
        "key": KEY,
        "request": {"method": "POST", "url": "https://h/v1/x", "headers": {}, "body_format": "json", "body": {}},
        "response": {"status": 201, "headers": headers or {"content-type": "application/json"},
                     "body_format": body_format, "body": body},
    }  # fmt: skip
    path.write_text(json.dumps(cassette, indent=2, ensure_ascii=False))
    return str(path)


@pytest.fixture
def workers(monkeypatch) -> list:
    """The worker processes started, by their arguments."""
    started = []
    real = asyncio.create_subprocess_exec

    async def counting(*args, **kwargs):
        started.append(args)
        return await real(*args, **kwargs)

    monkeypatch.setattr(replay_module.asyncio, "create_subprocess_exec", counting)
    return started


BIG = {"data": [{"i": i, "text": f"ligne {i} ✓ 😀", "f": i / 3} for i in range(20_000)]}


@pytest.mark.parametrize(
    "body_format, body",
    [
        ("json", BIG),
        ("text", "é" * BIG_CASSETTE_BYTES),
        ("events", [{"ms": i, "text": f"data: {i}\n\n"} for i in range(60_000)]),
    ],
)
def test_a_big_cassette_is_built_by_a_worker_exactly_as_in_process(tmp_path, workers, body_format, body):
    path = write_cassette(tmp_path / f"{KEY}.json", body_format, body, {"content-type": "x/y", "x-note": "grün"})
    expected = ReplayCache().load(path)

    replayer = Replayer()
    built = asyncio.run(replayer.load(path))
    again = asyncio.run(replayer.load(path))

    assert len(workers) == 1  # once: the second load is the cache's
    assert built.body == expected.body
    assert built.header_fields == expected.header_fields
    assert built.cassette["response"]["status"] == 201
    assert built.cassette["response"]["body_format"] == body_format
    assert again is built


def test_a_small_cassette_needs_no_worker(tmp_path, workers):
    path = write_cassette(tmp_path / f"{KEY}.json", "json", {"ok": True})
    assert asyncio.run(Replayer().load(path)).body == b'{"ok": true}'
    assert workers == []


def test_a_worker_refuses_a_broken_cassette_as_the_proxy_would(tmp_path, workers):
    path = write_cassette(tmp_path / f"{KEY}.json", "json", BIG)
    with open(path, "r+b") as f:
        f.truncate(BIG_CASSETTE_BYTES + 10)
    with pytest.raises(CassetteError, match="invalid JSON") as error:
        asyncio.run(Replayer().load(path))
    assert str(tmp_path) in str(error.value)
    assert len(workers) == 1


def test_a_worker_that_dies_is_an_error_naming_the_cassette(tmp_path, monkeypatch):
    path = write_cassette(tmp_path / f"{KEY}.json", "json", BIG)
    monkeypatch.setattr(replay_module, "WORKER_CODE", "import sys; sys.stderr.write('killed'); sys.exit(9)")
    with pytest.raises(OSError, match=r"replay worker failed.*exit code 9.*killed") as error:
        asyncio.run(Replayer().load(path))
    assert path in str(error.value)


def test_a_timed_replay_of_a_big_stream_keeps_its_events(tmp_path, workers):
    events = [{"ms": i, "text": f"data: {i}\n\n"} for i in range(60_000)]
    path = write_cassette(tmp_path / f"{KEY}.json", "events", events)
    replayer = Replayer()
    replayer.speed = 1.0
    assert asyncio.run(replayer.load(path)).cassette["response"]["body"] == events
    assert workers == []


def test_a_worker_whose_client_went_away_does_not_outlive_it(tmp_path, monkeypatch):
    """A client that disconnects mid-read cancels the load; the worker, stuck on its full pipe, is killed."""
    path = write_cassette(tmp_path / f"{KEY}.json", "json", BIG)
    stuck = 'import sys, time; sys.stdout.write(\'{"response": {}, "body_length": 1000000000}\\n\'); sys.stdout.flush(); time.sleep(120)'
    monkeypatch.setattr(replay_module, "WORKER_CODE", stuck)
    workers = []
    real = asyncio.create_subprocess_exec

    async def keep(*args, **kwargs):
        workers.append(await real(*args, **kwargs))
        return workers[-1]

    monkeypatch.setattr(replay_module.asyncio, "create_subprocess_exec", keep)

    async def client_gives_up() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(Replayer().load(path), 1)
        assert workers[0].returncode is not None  # reaped: killed after the grace period, not left running

    asyncio.run(client_gives_up())
