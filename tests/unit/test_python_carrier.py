"""The Python carrier (launch/python_site/cassette_carrier.py): what a process's httpx requests say about their test,
and how a uvicorn app's incoming request's test becomes the context of the calls it makes."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
import pytest
from cassette_proxy.launch.client_env import PYTHON_SITE

sys.path.append(str(PYTHON_SITE))
import cassette_carrier


class Headers(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = str(self.headers.get("x-cassette-test")).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    """A loopback server that answers with the x-cassette-test header it got ('None': none)."""
    http = HTTPServer(("127.0.0.1", 0), Headers)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{http.server_address[1]}/"
    http.shutdown()
    http.server_close()


@pytest.fixture(autouse=True)
def carrier(monkeypatch):
    cassette_carrier.install()
    monkeypatch.setattr(cassette_carrier, "_announced", None)


def get(url: str) -> str:
    with httpx.Client(trust_env=False) as client:
        return client.get(url).text


def test_a_process_that_announces_nothing_sends_no_header(server):
    assert get(server) == "None"


def test_the_announced_test_goes_on_every_request_and_between_tests_an_empty_one(server):
    cassette_carrier.announce("tests/test_app.py::test_a[x y]")
    assert get(server) == "tests%2Ftest_app.py%3A%3Atest_a%5Bx%20y%5D"
    cassette_carrier.announce(None)
    assert get(server) == ""


def test_an_incoming_requests_test_is_the_context_of_the_calls_the_app_makes(server):
    cassette_carrier.announce("the server's own process announces nothing like this")
    seen = []

    async def app(scope, receive, send):
        async with httpx.AsyncClient(trust_env=False) as client:
            seen.append((await client.get(server)).text)

    wrapped = cassette_carrier.CarryingApp(app)
    asyncio.run(wrapped({"type": "http", "headers": [(b"x-cassette-test", b"t.py%3A%3Atest_b")]}, None, None))
    asyncio.run(wrapped({"type": "http", "headers": [(b"baggage", b"k=v,cassette-test=t.py%3A%3Atest_c;p=1")]}, 0, 0))
    assert seen == ["t.py%3A%3Atest_b", "t.py%3A%3Atest_c"]


@pytest.mark.parametrize(
    ("headers", "carried"),
    [
        ([(b"X-Cassette-Test", b"a")], "a"),
        ([(b"baggage", b"cassette-test=b")], "b"),
        ([(b"baggage", b"other=1")], None),
        ([], None),
    ],
)
def test_the_incoming_carrier_is_read_from_raw_headers(headers, carried):
    assert cassette_carrier.incoming(headers) == carried
