"""Which test a request belongs to, carried on the requests of a Python process (core/traffic/attribution.py).

`cassette run` and the pytest plugin put this folder on PYTHONPATH, so every Python
process they start loads it (sitecustomize.py beside it), whichever environment it
runs from: it needs nothing but the standard library, and patches only what the
process imports itself, when it imports it.

- httpx and httpx2 (the transports of the OpenAI, Anthropic and most LLM SDKs): every request
  gets `x-cassette-test`, the test of the current context, else the test the pytest
  plugin announced in this process (empty between tests); none in a process that
  announces nothing and handles no carried request.
- uvicorn: the ASGI app it serves runs each incoming request with that request's
  carrier (`x-cassette-test`, or the `cassette-test` member of W3C `baggage`) as the
  current context, so the calls the server makes carry the test that caused them.

The proxy takes the header off before keying, recording or forwarding.
"""

from __future__ import annotations

import contextvars
import importlib.machinery
import sys
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

HEADER = "x-cassette-test"
_carried: contextvars.ContextVar[str | None] = contextvars.ContextVar("cassette_test", default=None)
_announced: list[str] | None = None
"""This process's current test (the pytest plugin's); None: it announces none."""


def value() -> str | None:
    """The `x-cassette-test` value of a request sent now, or None for no header."""
    carried = _carried.get()
    if carried is not None:
        return carried
    if _announced is None:
        return None
    return ",".join(quote(test, safe="") for test in _announced)


def announce(test: str | None) -> None:
    """The test that runs now in this process (None: none, between tests)."""
    global _announced
    _announced = [test] if test is not None else []


def incoming(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """An incoming request's carrier, from its raw (ASGI) headers."""
    baggage = None
    for name, raw in headers:
        lower = name.lower()
        if lower == HEADER.encode():
            return raw.decode("latin-1")
        if lower == b"baggage":
            baggage = raw.decode("latin-1")
    if baggage is None:
        return None
    for member in baggage.split(","):
        key, sep, rest = member.partition("=")
        if sep and key.strip() == "cassette-test":
            return rest.split(";", 1)[0].strip()
    return None


class CarryingApp:
    """An ASGI app whose requests run with their carrier as the current context."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        carried = incoming(scope.get("headers") or ()) if scope.get("type") in ("http", "websocket") else None
        if carried is None:
            await self.app(scope, receive, send)
            return
        token = _carried.set(carried)
        try:
            await self.app(scope, receive, send)
        finally:
            _carried.reset(token)


def _patch_httpx(module: Any) -> None:
    def with_header(request: Any) -> None:
        carried = value()
        if carried is not None and HEADER not in request.headers:
            request.headers[HEADER] = carried

    sync, asynchronous = module.HTTPTransport.handle_request, module.AsyncHTTPTransport.handle_async_request

    def handle_request(self: Any, request: Any) -> Any:
        with_header(request)
        return sync(self, request)

    async def handle_async_request(self: Any, request: Any) -> Any:
        with_header(request)
        return await asynchronous(self, request)

    module.HTTPTransport.handle_request = handle_request
    module.AsyncHTTPTransport.handle_async_request = handle_async_request


def _patch_uvicorn(module: Any) -> None:
    load = module.Config.load

    def carrying_load(self: Any) -> None:
        load(self)
        if not isinstance(self.loaded_app, CarryingApp):
            self.loaded_app = CarryingApp(self.loaded_app)

    module.Config.load = carrying_load


PATCHES: dict[str, Callable[[Any], None]] = {
    "httpx._transports.default": _patch_httpx,
    "httpx2._transports.default": _patch_httpx,  # the fork of httpx that newer OpenAI SDKs use
    "uvicorn.config": _patch_uvicorn,
}


class _AfterImport:
    """A meta-path finder that patches a module of PATCHES right after it is first executed."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        patch = PATCHES.get(name)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        execute = spec.loader.exec_module

        def exec_and_patch(module: Any) -> None:
            execute(module)
            patch(module)

        spec.loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


_installed = False


def install() -> None:
    """Patch what PATCHES names: now if the process imported it already, else when it does."""
    global _installed
    if _installed:
        return
    _installed = True
    for name, patch in PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, _AfterImport())
