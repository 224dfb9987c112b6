"""Async tests that share one client for the session, each on its own event loop (pytest-asyncio's default), replay
through the plugin: langchain-openai keeps an `lru_cache`d `httpx.AsyncClient` while pytest-asyncio gives every
test a new loop, so a connection to the proxy kept alive by one test belongs to a closed loop in the next ("Event
loop is closed"). The plugin announces such tests as running on their own loop and the proxy closes each of their
connections after its answer; a synchronous test keeps its connection."""

from __future__ import annotations

import pytest
from cassette_command import redirect_args
from harness import FAKE_OPENAI_KEY
from inner_pytest import only_plugins

pytest_plugins = ["pytester"]

SUITE = """
import functools

import httpx
import pytest

URL = "https://api.openai.com/v1/chat/completions"
HEADERS = {{"authorization": "Bearer {key}"}}


def body(prompt):
    return {{"model": "gpt-4o-mini", "messages": [{{"role": "user", "content": prompt}}]}}


@functools.lru_cache
def async_client():
    return httpx.AsyncClient(timeout=30)  # one for the session, as langchain-openai keeps it


@functools.lru_cache
def sync_client():
    return httpx.Client(timeout=30)


async def ask(prompt):
    reply = await async_client().post(URL, json=body(prompt), headers=HEADERS)
    reply.raise_for_status()
    return reply.json()["choices"][0]["message"]["content"]


def client_port(reply):
    return reply.extensions["network_stream"].get_extra_info("client_addr")[1]


async def test_first_loop():
    assert await ask("first") == "echo: first"


async def test_second_loop():
    assert await ask("second") == "echo: second"


def test_sync_keeps_its_connection():
    ports = []
    for prompt in ("sync one", "sync two"):
        reply = sync_client().post(URL, json=body(prompt), headers=HEADERS)
        assert reply.json()["choices"][0]["message"]["content"] == f"echo: {{prompt}}"
        ports.append(client_port(reply))
    assert ports[0] == ports[1], "a synchronous test's requests share one kept-alive connection"


@pytest.mark.asyncio
async def test_third_loop_marked():
    assert await ask("third") == "echo: third"
"""


@pytest.fixture
def async_suite(pytester, monkeypatch, https_upstream):
    monkeypatch.delenv("CASSETTE_MODE", raising=False)
    monkeypatch.setenv("CASSETTE_MITMDUMP_ARGS", redirect_args(https_upstream))
    only_plugins(monkeypatch, "pytest_asyncio.plugin")
    pytester.makeini("[pytest]\ncassette = true\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_async_app=SUITE.format(key=FAKE_OPENAI_KEY))
    return https_upstream


def test_async_tests_sharing_a_client_record_and_replay_each_on_its_own_loop(pytester, async_suite):
    recorded = pytester.runpytest_subprocess("--cassette-mode=record", "-p", "no:cacheprovider")
    recorded.assert_outcomes(passed=4)
    recorded.stdout.fnmatch_lines(["cassette: record: 0 hits, 0 misses, 5 recorded, 5 upstream, 0 passthrough"])

    replayed = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    replayed.assert_outcomes(passed=4)
    replayed.stdout.fnmatch_lines(["cassette: replay: 5 hits, 0 misses, 0 recorded, 0 upstream, 0 passthrough"])
    assert "Event loop is closed" not in replayed.stdout.str()
    assert async_suite.count == 5
