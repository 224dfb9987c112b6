"""Upstream failures as JSON errors, for the requests the addon forwards (record and update misses).

mitmproxy answers an upstream it cannot reach with its own `text/html` 502 (an
addon cannot replace that answer from the `error` hook), and it waits for a
silent upstream without limit. SDKs then retry an HTML page twice, or hang.
So, for each forwarded request, `UpstreamGuard`:

- probes the destination (TCP, and TLS with the same trust settings mitmproxy
  uses) once every addon's `request` hook has run, and on failure answers 502
  `cassette_upstream_error` itself, before mitmproxy tries; never for a
  WebSocket upgrade, whose server logs the probe's empty connection as a
  failed handshake (and no WebSocket client retries mitmproxy's HTML 502, the
  reason SDK requests get the JSON one);
- answers 504 `cassette_upstream_error` when no response headers arrived within
  `cassette_upstream_timeout`, by handing mitmproxy that answer in place of the
  upstream's on the waiting HTTP/1 connection (which then closes);
  over TLS or HTTP/2, where an addon cannot feed that answer in, it cuts the
  upstream off at the timeout instead, and mitmproxy sends its own 502 page;
- counts in the run report what mitmproxy answers itself, such as a connection
  reset after the probe succeeded.

Runs inside mitmdump only (it imports mitmproxy).
"""

from __future__ import annotations

import asyncio
import ssl

import certifi
from mitmproxy import ctx, http
from mitmproxy.net.http import http1
from mitmproxy.proxy import events

from ..core.output import logger
from ..core.report import ErrorEntry, ErrorKind, Report
from ..core.secrets.redact import loggable_url
from .errors import error_response
from .state import Outcome, state_of

log = logger(__name__)

UPSTREAM_ERROR = ErrorKind.UPSTREAM.value


def upstream_tls(options) -> ssl.SSLContext:
    """A client TLS context that trusts what mitmproxy's upstream connections trust."""
    if options.ssl_insecure:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    cafile = options.ssl_verify_upstream_trusted_ca
    capath = options.ssl_verify_upstream_trusted_confdir
    return ssl.create_default_context(cafile=cafile or (None if capath else certifi.where()), capath=capath)


async def unreachable(host: str, port: int, tls: ssl.SSLContext | None, timeout: float) -> str | None:
    """Why a connection to host:port fails (TCP, then TLS if given), or None when it succeeds."""
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls else None)
    except TimeoutError:
        return f"no connection to {host}:{port} within {timeout:g} s"
    except ssl.SSLError as e:
        return f"TLS handshake with {host}:{port} failed: {getattr(e, 'verify_message', None) or e.reason or e}"
    except OSError as e:
        return f"cannot connect to {host}:{port}: {e.strerror or e}"
    writer.close()
    return None


class UpstreamGuard:
    """Driven by the cassette addon: it calls `forward` for each forwarded request, and its hooks from its own."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self.timeout = 120
        """cassette_upstream_timeout, in seconds."""
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.tasks: set[asyncio.Task] = set()

    def configure(self, timeout: int) -> None:
        self.timeout = timeout

    def forward(self, flow: http.HTTPFlow) -> None:
        """Hold the flow until the probe has run; the cassette addon calls this for each forwarded request."""
        flow.intercept()
        task = asyncio.get_running_loop().create_task(self._probe_then_resume(flow))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _probe_then_resume(self, flow: http.HTTPFlow) -> None:
        # Yield first: the rest of the `request` hook chain runs meanwhile (also
        # under mitmproxy 12's eager tasks), so the destination is final even if
        # a later addon rewrote it. Through an upstream proxy (`--mode upstream:`)
        # the destination may only be reachable from there: no probe.
        try:
            await asyncio.sleep(0)
            request = flow.request
            upgrade = request.headers.get("upgrade", "").lower() == "websocket"
            if flow.server_conn.via is None and not upgrade:
                tls = upstream_tls(ctx.options) if request.scheme == "https" else None
                problem = await unreachable(request.host, request.port, tls, self.timeout)
                if problem:
                    flow.response = self.give_up(flow, 502, f"upstream unreachable: {problem}")
                    return
            timeout = self.timeout
            self.timers[flow.id] = asyncio.get_running_loop().call_later(timeout, self._expire, flow, timeout)
        finally:
            flow.resume()

    def give_up(self, flow: http.HTTPFlow, status: int, problem: str) -> http.Response:
        """The JSON error for the client; drops what would have been saved, and counts it."""
        url = loggable_url(flow.request.pretty_url.split("?", 1)[0])
        message = f"{problem}; nothing was saved for {flow.request.method} {url}. Check the upstream, then run again."
        state = state_of(flow)
        if state is not None:
            state.target = None
            state.outcome = Outcome.ERROR
        self.report.error(ErrorEntry(ErrorKind.UPSTREAM, message, url=url, status=status))
        log.error(message)
        return error_response(status, UPSTREAM_ERROR, message, url=url, status=status)

    def _expire(self, flow: http.HTTPFlow, timeout: float) -> None:
        self.timers.pop(flow.id, None)
        handler = ctx.master.addons.get("proxyserver").connections.get(flow.client_conn.id)
        if flow.response or flow.error or not flow.live or handler is None:
            return
        problem = f"no response within cassette_upstream_timeout={timeout:g} s"
        event: events.Event
        if flow.server_conn.tls or flow.server_conn.alpn == b"h2":
            # mitmproxy reads the upstream's bytes through TLS and HTTP/2 layers
            # an addon cannot feed: cut the upstream off; the client gets
            # mitmproxy's own 502 page, now instead of never.
            self.give_up(flow, 502, problem)
            event = events.ConnectionClosed(flow.server_conn)
        else:
            # mitmproxy reads this answer as the upstream's, then closes that connection.
            answer = self.give_up(flow, 504, problem)
            answer.headers["connection"] = "close"
            event = events.DataReceived(flow.server_conn, http1.assemble_response(answer))
        task = asyncio.get_running_loop().create_task(handler.server_event(event))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _settle(self, flow: http.HTTPFlow) -> None:
        timer = self.timers.pop(flow.id, None)
        if timer:
            timer.cancel()

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        self._settle(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        state = state_of(flow)
        # Forwarded and not answered by give_up(); a cut-off stream is the recorder's to count.
        if state is not None and state.target is not None and state.recorder is None:
            url = loggable_url(flow.request.pretty_url.split("?", 1)[0])
            message = (
                f"forwarded request failed: {flow.error.msg if flow.error else 'unknown error'}; nothing was saved"
            )
            self.report.error(ErrorEntry(ErrorKind.UPSTREAM, message, url=url))
            log.error(f"{message}: {flow.request.method} {url}")
        self._settle(flow)
