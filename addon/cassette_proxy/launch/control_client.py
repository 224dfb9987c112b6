"""The runner's side of the control channel (proxy/control_channel.py): tell the proxy which test runs.

No mitmproxy import: this runs in the test process. A request in absolute form
straight to the proxy's listener, so no proxy variable, NO_PROXY entry or DNS
can send it elsewhere; the proxy answers it itself. One connection is kept
open between calls: a runner announces every test, and a new connection per
call cost about twice the call itself.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

CONTROL_URL = "http://cassette.control"
"""The reserved origin the addon answers itself; reachable only through the proxy."""
CONTROL_URL_VAR = "CASSETTE_CONTROL_URL"
CONTROL_TOKEN_VAR = "CASSETTE_CONTROL_TOKEN"
TOKEN_HEADER = "x-cassette-control-token"


class ControlError(Exception):
    """The proxy refused or could not act on a control call; the message is the proxy's."""


class ControlClient:
    def __init__(self, proxy_url: str, token: str, timeout: float = 30, runner: str | None = None) -> None:
        """`runner`: this process's name among several sharing the proxy (xdist workers inside `cassette run`);
        its tests run one at a time, each start ending the one before. None: the proxy's only runner."""
        parts = urlsplit(proxy_url)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"not a proxy URL: {proxy_url!r} (expected http://HOST:PORT)")
        self.host, self.port = parts.hostname, parts.port
        self.token = token
        self.timeout = timeout
        self.runner = {"runner": runner, "exclusive": True} if runner is not None else {}
        self._connection: http.client.HTTPConnection | None = None

    def start(
        self,
        test: str,
        options: Mapping[str, Any] | None = None,
        resume: bool = False,
        played: bool = False,
        own_loop: bool = False,
    ) -> dict:
        """Requests from now on belong to `test` and follow its options (mode, ignore, repeats, scope, ...); with
        `played`, the proxy keeps what they were answered with for `played()` (the pytest plugin's `vcr` fixture);
        with `own_loop` (the test runs on an event loop of its own), each answer closes its connection."""
        body = {"test": test, "options": dict(options or {}), "resume": resume, **self.runner}
        if played:
            body["played"] = True
        if own_loop:
            body["own_loop"] = True
        return self.call("/v1/test/start", body)

    def played(self, test: str) -> dict:
        """The running test's requests so far and the cassette that answered each (proxy/played.py)."""
        return self.call("/v1/test/played", {"test": test})

    def end(self, test: str) -> dict:
        """Requests from now on belong to no test."""
        return self.call("/v1/test/end", {"test": test, **self.runner})

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def call(self, path: str, body: dict) -> dict:
        payload = json.dumps(body).encode()
        headers = {"content-type": "application/json", TOKEN_HEADER: self.token}
        for attempt in (1, 2):
            reused = self._connection is not None
            if self._connection is None:
                self._connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self._connection.request("POST", CONTROL_URL + path, body=payload, headers=headers)
                response = self._connection.getresponse()
                data = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if reused and attempt == 1:
                    continue  # the proxy closed the kept connection between calls: once more on a new one
                raise
            except BaseException:
                self.close()
                raise
            if response.will_close:
                self.close()
            break
        try:
            answer = json.loads(data)
        except ValueError:
            answer = {"error": {"message": data[:300].decode(errors="replace")}}
        if response.status != 200:
            message = answer.get("error", {}).get("message") if isinstance(answer, dict) else None
            raise ControlError(message or f"the proxy answered {response.status} to {path}")
        return answer
