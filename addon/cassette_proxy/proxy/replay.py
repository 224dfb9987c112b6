"""Replay: a cassette on disk becomes the response, without the upstream.

The `Replayer` answers a flow with a cassette from the `ReplayCache`, whole
or (for a stream with `cassette_replay_timing`) through the timed-replay server.
"""

from __future__ import annotations

import time

from mitmproxy import http
from mitmproxy.net.http import status_codes

from ..core.replay_cache import Replay, ReplayCache
from .state import FlowState
from .timed_replay import TimedReplayServer, TimedStream


class Replayer:
    """Answers flows from cassettes; owns the timed-replay server."""

    def __init__(self) -> None:
        self.cache = ReplayCache()
        self.timed = TimedReplayServer()
        self.speed: float | None = None
        """cassette_replay_timing: None sends a stream at once, else the speed factor of its recorded gaps."""

    def load(self, path: str) -> Replay | None:
        """The cassette at `path` ready to answer with, or None when there is none; CassetteError/OSError if unusable."""
        try:
            return self.cache.load(path)
        except FileNotFoundError:
            return None

    async def answer(self, flow: http.HTTPFlow, state: FlowState, replay: Replay) -> None:
        recorded = replay.cassette["response"]
        if recorded.get("body_format") == "events" and self.speed is not None:
            await self._route_to_timed_replay(flow, state, recorded)
            return
        # The constructor, not `Response.make`: the headers come ready, content-length included,
        # which saves `make` converting them and looking them up again on every hit.
        status = recorded["status"]
        now = time.time()
        reason = status_codes.RESPONSES.get(status, "").encode()
        flow.response = http.Response(b"HTTP/1.1", status, reason, replay.header_fields, replay.body, None, now, now)

    async def _route_to_timed_replay(self, flow: http.HTTPFlow, state: FlowState, recorded: dict) -> None:
        """Send the flow to the in-proxy server that plays the events at their offsets.

        A response made here would reach the client in one piece; only a
        response from a server can be streamed over time (see timed_replay.py).
        """
        await self.timed.start()
        stream = TimedStream(recorded["status"], recorded.get("headers", {}), recorded["body"], self.speed)
        request = flow.request
        request.scheme, request.host, request.port = "http", "127.0.0.1", self.timed.port
        request.path = self.timed.register(stream)
        state.timed_replay = True
