"""Re-send a stored request through a running proxy: how `cassette drift` asks the live providers again.

The request is rebuilt from what its key was computed from (recipe.facts_of:
method, URL, the key headers' values, the body), plus the credentials given.
Nothing else a cassette holds reaches the wire: cassettes arrive in pull
requests and could carry any header, so only the run's key headers are copied,
never a credential or a hop-by-hop header. Standard library only: this runs in
the user's environment, beside neither mitmproxy nor an SDK.
"""

from __future__ import annotations

import http.client
import re
import ssl
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from .. import __version__
from ..core.keys.key import UNKEYABLE_HEADERS, RequestFacts
from ..core.keys.url import DEFAULT_PORTS

USER_AGENT = f"cassette-proxy-drift/{__version__}"
_LINE_BREAK = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
"""What a header value may not hold (a tab is allowed): a CR or LF would end the header, and forge the next one."""
HOP_BY_HOP = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade",
                        "te", "trailer", "proxy-authorization", "proxy-connection", "expect"})  # fmt: skip


CHUNK = 64 * 1024


class AnswerLimit(OSError):
    """The answer went on past the total time or the size allowed (an endless stream, a runaway body): not read
    to its end; the message says which limit and its flag."""


@dataclass(frozen=True)
class Received:
    status: int
    headers: dict[str, str]
    """Lower-case names; a repeated header's values joined with `, `."""
    body: bytes


def request_headers(facts: RequestFacts, key_headers: Iterable[str], credentials: Mapping[str, str]) -> dict[str, str]:
    """What goes on the wire besides the body: the key headers the cassette holds, the content type, the
    credentials; `accept-encoding: identity`, as the recorder asks upstreams for plain text anyway."""
    keyed = {name.lower() for name in key_headers} - UNKEYABLE_HEADERS - HOP_BY_HOP
    headers = {name.lower(): value for name, value in facts.headers.items() if name.lower() in keyed}
    if facts.body or facts.method.upper() in ("POST", "PUT", "PATCH"):
        headers["content-type"] = facts.content_type or "application/octet-stream"
    headers.update({"accept-encoding": "identity", "user-agent": USER_AGENT})
    headers.update({name.lower(): value for name, value in credentials.items()})
    for name, value in headers.items():
        if _LINE_BREAK.search(value):  # http.client's own refusal would print the value
            raise ValueError(f"its {name} header holds a line break or control character (value not shown)")
    return headers


def target(facts: RequestFacts) -> str:
    """The path and query to ask for (origin form)."""
    query = urlencode(facts.query)
    return facts.path + (f"?{query}" if query else "")


def send(
    proxy_url: str,
    ca_bundle: Path,
    facts: RequestFacts,
    headers: Mapping[str, str],
    timeout: float,
    max_time: float = 600.0,
    max_bytes: int = 64 * 1024 * 1024,
) -> Received:
    """One request through the forward proxy at `proxy_url`: HTTPS through a CONNECT tunnel whose certificate
    the proxy's CA (in `ca_bundle`) signs, plain HTTP in absolute form. Raises OSError (and http.client's
    errors, which are OSErrors or HTTPException) when the exchange fails.

    `timeout` bounds each silence; `max_time` the whole exchange and `max_bytes` the body, read in chunks: an
    upstream sending a chunk every 50 ms forever meets neither a silence nor an end, and is cut off at
    `max_time` (AnswerLimit)."""
    deadline = time.monotonic() + max_time
    proxy = urlsplit(proxy_url)
    if proxy.hostname is None:
        raise OSError(f"the proxy URL {proxy_url!r} names no host")
    port = facts.port or DEFAULT_PORTS[facts.scheme]
    connection: http.client.HTTPConnection
    if facts.scheme == "https":
        context = ssl.create_default_context(cafile=str(ca_bundle))
        connection = http.client.HTTPSConnection(
            proxy.hostname, proxy.port, timeout=min(timeout, max_time), context=context
        )
        connection.set_tunnel(facts.host, port)
        path = target(facts)
    else:
        connection = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=min(timeout, max_time))
        host = facts.host if port == DEFAULT_PORTS["http"] else f"{facts.host}:{port}"
        path = f"http://{host}{target(facts)}"
    try:
        connection.request(facts.method, path, body=facts.body or None, headers=dict(headers))
        sock = connection.sock  # the response reads through it even once http.client lets go of it
        response = connection.getresponse()
        body = _read_bounded(response, sock, timeout, deadline, max_time, max_bytes)
        received: dict[str, str] = {}
        for name, value in response.getheaders():
            name = name.lower()
            received[name] = f"{received[name]}, {value}" if name in received else value
        return Received(response.status, received, body)
    finally:
        connection.close()


def _read_bounded(response: http.client.HTTPResponse, sock: object, timeout: float, deadline: float,
                  max_time: float, max_bytes: int) -> bytes:  # fmt: skip
    """The body, chunk by chunk, each read waiting at most the silence allowed or the time left."""
    chunks: list[bytes] = []
    size = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AnswerLimit(f"the answer was still arriving after --max-time {max_time:g} s (an endless stream?)")
        if hasattr(sock, "settimeout"):
            sock.settimeout(min(timeout, left))
        try:
            chunk = response.read1(CHUNK)
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise AnswerLimit(
                    f"the answer was still arriving after --max-time {max_time:g} s (an endless stream?)"
                ) from None
            raise
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > max_bytes:
            raise AnswerLimit(f"the answer passed --max-bytes {max_bytes} bytes before its end")
        chunks.append(chunk)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the provider asks to wait: `retry-after-ms` (OpenAI), else `retry-after` in seconds or as a date."""
    milliseconds = headers.get("retry-after-ms", "").strip()
    try:
        if milliseconds:
            return max(0.0, float(milliseconds) / 1000)
    except ValueError:
        pass
    value = headers.get("retry-after", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
