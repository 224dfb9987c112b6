"""The preload (`cassette_preload`): a worker process reads the folder's cassettes as the proxy starts, with the
checks of a request's own read, so their first request is answered from memory. What it fills the cache with is
what a request would have built; what it must not load it skips, and a file changed since is read again."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from cassette_proxy.core.defaults import DEFAULT_KEY_HEADERS
from cassette_proxy.core.workers.replay_cache import ReplayCache
from cassette_proxy.proxy import replay as replay_module
from cassette_proxy.proxy.replay import BIG_CASSETTE_BYTES, Replayer


def cassette(status: int = 200, body: object = None, headers: dict | None = None) -> dict:
    return {
        "cassette_format": 2,
        "key": "0" * 32,
        "request": {"method": "POST", "url": "https://h/v1/x", "headers": {}, "body_format": "json", "body": {}},
        "response": {"status": status, "headers": headers or {"content-type": "application/json"},
                     "body_format": "json", "body": {"ok": True} if body is None else body},
    }  # fmt: skip


def write(path, content: dict | bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content, indent=2).encode())
    return str(path)


def replayer_for(root, limit: int = 100) -> tuple[Replayer, int]:
    replayer = Replayer()
    replayer.cache.root = root.resolve()
    loaded = asyncio.run(replayer.preload(limit))
    return replayer, loaded


@pytest.fixture
def no_reads(monkeypatch):
    """Fails any in-process read of a cassette file: after a preload, a hit must come from memory."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"read on the request path: {args[0]}")

    monkeypatch.setattr("cassette_proxy.core.workers.replay_cache.read_limited", refuse)


def test_preloaded_replays_are_what_a_request_would_build(tmp_path, monkeypatch):
    root = tmp_path / "cassettes"
    paths = [
        write(root / "h" / "v1" / "x" / "a.json", cassette(201, {"id": "é ✓", "n": [1, 2.5]}, {"x-note": "grün"})),
        write(root / "h" / "v1" / "x" / "b.json", cassette(404, "plain")),
        write(root / "tests" / "t" / "c.json", cassette(200, [{"ms": 0, "text": "data: 1\n\n"}])),
    ]
    expected = {path: ReplayCache(root=root.resolve()).load(path) for path in paths}
    replayer, loaded = replayer_for(root)

    assert loaded == 3
    monkeypatch.setattr("cassette_proxy.core.workers.replay_cache.read_limited", lambda *a, **k: 1 / 0)
    for path in paths:
        built = asyncio.run(replayer.load(path))
        assert built.body == expected[path].body
        assert built.header_fields == expected[path].header_fields
        assert built.cassette["response"]["status"] == expected[path].cassette["response"]["status"]


def test_what_a_request_would_refuse_is_not_preloaded(tmp_path):
    root = tmp_path / "cassettes"
    outside = write(tmp_path / "outside.json", cassette())
    good = write(root / "h" / "good.json", cassette())
    broken = write(root / "h" / "broken.json", b'{"cassette_format": 2, "key": ')
    bad_header = write(root / "h" / "inject.json", cassette(headers={"x": "a\r\nset-cookie: b"}))
    write(root / "h" / "notes.txt", b"not a cassette")
    write(root / ".git" / "hidden.json", cassette())
    big = write(root / "h" / "big.json", cassette(body="x" * BIG_CASSETTE_BYTES))
    os.symlink(outside, root / "h" / "link.json")
    os.mkfifo(root / "h" / "fifo.json")

    replayer, loaded = replayer_for(root)

    assert loaded == 1
    assert good in replayer.cache
    for path in (broken, bad_header, big, str(root / "h" / "link.json"), str(root / "h" / "fifo.json")):
        assert path not in replayer.cache
    assert str(root / ".git" / "hidden.json") not in replayer.cache
    # Not preloaded is not hidden: the request's own read still refuses them, with the usual error.
    with pytest.raises(Exception, match="outside the cassette folder"):
        asyncio.run(replayer.load(str(root / "h" / "link.json")))
    with pytest.raises(Exception, match="invalid JSON"):
        asyncio.run(replayer.load(broken))


def test_a_cassette_changed_after_the_preload_is_read_again(tmp_path):
    root = tmp_path / "cassettes"
    path = write(root / "h" / "a.json", cassette(body={"version": 1}))
    replayer, _ = replayer_for(root)
    replaced = root / "h" / "a.json.tmp"
    write(replaced, cassette(body={"version": 2}))
    os.replace(replaced, path)  # as a recording proxy writes it: a new file

    assert asyncio.run(replayer.load(path)).body == b'{"version": 2}'


def test_the_preload_stops_at_its_limit(tmp_path):
    root = tmp_path / "cassettes"
    for i in range(10):
        write(root / "h" / f"{i}.json", cassette())
    replayer, loaded = replayer_for(root, limit=4)
    assert loaded == 4
    assert sum(str(root.resolve() / "h" / f"{i}.json") in replayer.cache for i in range(10)) == 4


def test_an_empty_or_absent_folder_starts_no_worker(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(replay_module.asyncio, "create_subprocess_exec", lambda *a, **k: started.append(a))
    (tmp_path / "empty").mkdir()
    assert replayer_for(tmp_path / "empty")[1] == 0
    assert replayer_for(tmp_path / "absent")[1] == 0
    assert started == []


def test_a_hit_after_the_preload_reads_no_file(tmp_path, no_reads):
    root = tmp_path / "cassettes"
    path = write(root / "h" / "a.json", cassette(body={"from": "memory"}))
    replayer, _ = replayer_for(root)
    assert asyncio.run(replayer.load(path)).body == b'{"from": "memory"}'


def test_the_preload_stops_at_its_byte_budget(tmp_path):
    import io

    from cassette_proxy.core.workers.replay_worker import preload

    root = tmp_path / "cassettes"
    for i in range(5):
        write(root / "h" / f"{i}.json", cassette(body="x" * 1000))
    out = io.BytesIO()
    assert preload(str(root), 1 << 20, 100, 1 << 20, out, budget=2500) == 3
    assert out.getvalue().count(b'"path"') == 3


def sdk_like_request(url: str, body: dict, headers: dict[str, str]):
    """A request as the openai/anthropic Python SDKs send it (httpx: compact JSON, non-ASCII as UTF-8)."""
    from mitmproxy import http

    raw = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    fields = {"content-type": "application/json", "user-agent": "OpenAI/Python 9", **headers}
    return http.Request.make("POST", url, raw, fields)


@pytest.mark.parametrize(
    "url, body, headers",
    [
        ("https://api.openai.com/v1/chat/completions",
         {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "héllo ✓"}], "temperature": 0.5}, {}),
        ("https://api.anthropic.com/v1/messages",
         {"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "model": "m"},
         {"anthropic-version": "2023-06-01", "anthropic-beta": "a, b"}),
        ("https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-06-01",
         {"messages": [{"role": "user", "content": "q"}]}, {}),
    ],
)  # fmt: skip
@pytest.mark.parametrize(
    "options",
    [
        {"ignore": [], "key_headers": list(DEFAULT_KEY_HEADERS), "ignore_values": []},
        {"ignore": ["metadata.trace_id", "messages.*.id"], "key_headers": [*DEFAULT_KEY_HEADERS, "X-Tenant"],
         "ignore_values": ["pydantic-ai", r"run-\d+"]},
    ],
    ids=["defaults", "key-settings"],
)  # fmt: skip
def test_the_preload_keys_the_request_an_sdk_sends_for_each_cassette(
    tmp_path, monkeypatch, url, body, headers, options
):
    """The facts the worker sends are exactly those the proxy reads from the SDK's request: its first sight
    finds its key in the key cache, computed by the same function with the run's recipe (built in the worker
    from the same option values)."""
    from cassette_proxy.core.files.cassette_file import dumps, new_cassette
    from cassette_proxy.core.files.location import relative_name
    from cassette_proxy.core.keys import key as key_module
    from cassette_proxy.core.keys.key import KeyCache
    from cassette_proxy.core.keys.recipe import make_recipe, stored_request
    from cassette_proxy.core.keys.url import normal_host
    from cassette_proxy.proxy.facts import request_facts

    recipe = make_recipe(options["ignore"], options["key_headers"], options["ignore_values"])
    read_headers = frozenset(h.encode() for h in [*recipe.key_headers, "content-type", "content-encoding"])
    body = {**body, "metadata": {"trace_id": "run-7", "note": "run-12 of pydantic-ai"}}
    request = sdk_like_request(url, body, {**headers, "x-tenant": "acme"})
    facts = request_facts(request, read_headers, normal_host(request.host))
    key = KeyCache(recipe.key_headers, recipe.paths, recipe.patterns).key(facts)
    root = tmp_path / "cassettes"
    response = {"status": 200, "headers": {}, "body_format": "json", "body": {"ok": True}}
    stored = new_cassette(key, stored_request(facts, recipe.key_headers), response, {}, recipe.to_json())
    write(root / relative_name(facts.scheme, facts.host, facts.port, facts.path, key), dumps(stored))

    keys = KeyCache(recipe.key_headers, recipe.paths, recipe.patterns)
    replayer = Replayer()
    replayer.cache.root = root.resolve()
    asyncio.run(replayer.preload(10, options, keys.remember))

    assert replayer.preloaded_keys == 1
    monkeypatch.setattr(key_module, "request_key", lambda *a, **k: pytest.fail("the key was computed again"))
    assert keys.key(facts) == key


def test_a_preloaded_request_key_must_be_the_cassettes_own(tmp_path):
    """A cassette whose stored request does not key to its own name (edited, redacted) gives no request key."""
    from cassette_proxy.core.keys.key import KeyCache
    from cassette_proxy.core.keys.recipe import make_recipe

    recipe = make_recipe()
    options = {"ignore": [], "key_headers": list(DEFAULT_KEY_HEADERS), "ignore_values": []}
    root = tmp_path / "cassettes"
    write(root / "h" / "a.json", cassette())  # its key is 000…0, which no request keys to
    keys = KeyCache(recipe.key_headers, recipe.paths, recipe.patterns)
    replayer = Replayer()
    replayer.cache.root = root.resolve()
    assert asyncio.run(replayer.preload(10, options, keys.remember)) == 1
    assert replayer.preloaded_keys == 0


def test_a_preloaded_stream_keeps_its_events_for_a_timed_replay(tmp_path):
    """`cassette_replay_timing` plays a stream's recorded events: the preloaded entry must hold them, as the
    entry a request's own read makes does."""
    root = tmp_path / "cassettes"
    events = [{"ms": 0, "text": "data: 1\n\n"}, {"ms": 120, "text": "data: [DONE]\n\n"}]
    stream = cassette(headers={"content-type": "text/event-stream"})
    stream["response"].update(body_format="events", body=events)
    path = write(root / "h" / "s.json", stream)
    expected = ReplayCache(root=root.resolve()).load(path)
    replayer, _ = replayer_for(root)

    preloaded = asyncio.run(replayer.load(path))

    assert preloaded.cassette["response"]["body"] == events == expected.cassette["response"]["body"]
    assert preloaded.body == expected.body == b"data: 1\n\ndata: [DONE]\n\n"
