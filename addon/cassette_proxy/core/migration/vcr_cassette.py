"""A test's requests and answers in VCR.py's `Cassette` shape: the object the pytest plugin's `vcr` fixture gives.

Suites written for pytest-recording read their test's cassette: `vcr.requests[0].body`
(what was sent), `vcr.responses` (`{"status": {"code", "message"}, "headers", "body":
{"string"}}`), `vcr.play_count`, `vcr.all_played`, `vcr.data`, `vcr.responses_of(r)`,
`vcr.record_mode`. langchain_tests' `test_stream_time` asks `if not vcr.responses` before
it sends anything. Behind the proxy the same object is made of:

- the interactions the proxy answered for this test so far (proxy/played.py): the
  request as it went through the proxy (credentials dropped, redacted as on disk)
  and the cassette file that answered it or that it was recorded into;
- with the test scope, the test's own recordings on disk that it has not used yet,
  which VCR.py's cassette holds from the start too.

One entry per cassette file, in the order of first use (VCR.py's cassette holds each
recording once however often it plays); `play_count` counts every replay. Read again
on every access, so a test sees the requests it sent a moment ago.
"""

from __future__ import annotations

import base64
import http
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..files.cassette_file import decode_body, load
from ..files.safe_read import CassetteError

RECORD_MODES = {"replay": "none", "record": "new_episodes", "update": "all", "off": "all"}
"""Our mode in VCR.py's words (`RecordMode` is a `str` enum, so `vcr.record_mode == RecordMode.NONE` holds)."""


class Headers(MutableMapping[str, str]):
    """Header names as sent, looked up in any case (VCR.py's `HeadersDict`)."""

    def __init__(self, items: Mapping[str, str] | None = None) -> None:
        self._items: dict[str, tuple[str, str]] = {}
        for name, value in (items or {}).items():
            self[name] = value

    def __getitem__(self, name: str) -> str:
        return self._items[name.lower()][1]

    def __setitem__(self, name: str, value: str) -> None:
        self._items[name.lower()] = (name, value)

    def __delitem__(self, name: str) -> None:
        del self._items[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return repr(dict(self.items()))


class Request:
    """One request as VCR.py's `Request` shows it: `method`, `uri` (`url`), `headers`, `body` (bytes), and the URL's
    parts (`scheme`, `host`, `port`, `path`, `query`)."""

    def __init__(self, method: str, uri: str, headers: Mapping[str, str], body: bytes) -> None:
        self.method = method
        self.uri = uri
        self.headers = Headers(headers)
        self.body = body

    @property
    def url(self) -> str:
        return self.uri

    @property
    def scheme(self) -> str:
        return urlsplit(self.uri).scheme

    protocol = scheme

    @property
    def host(self) -> str:
        return urlsplit(self.uri).hostname or ""

    @property
    def port(self) -> int:
        parts = urlsplit(self.uri)
        return parts.port or (443 if parts.scheme == "https" else 80)

    @property
    def path(self) -> str:
        return urlsplit(self.uri).path

    @property
    def query(self) -> list[tuple[str, str]]:
        return sorted(parse_qsl(urlsplit(self.uri).query, keep_blank_values=True))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        return (self.method, self.uri, self.body) == (other.method, other.uri, other.body)

    __hash__ = None  # type: ignore[assignment]  # mutable, as VCR.py's

    def __repr__(self) -> str:
        return f"<Request ({self.method}) {self.uri}>"


def response_of(cassette: Mapping[str, Any]) -> dict[str, Any]:
    """A stored response in VCR.py's shape; a streamed body is its events' texts joined, as the client read it."""
    response = cassette["response"]
    status = response["status"]
    try:
        message = http.HTTPStatus(status).phrase
    except ValueError:
        message = ""
    body = b"" if "session" in cassette else decode_body(response.get("body_format", "text"), response.get("body", ""))
    return {
        "status": {"code": status, "message": message},
        "headers": {name: [value] for name, value in response.get("headers", {}).items()},
        "body": {"string": body},
    }


def stored_request_of(cassette: Mapping[str, Any]) -> Request:
    """The request a cassette stores (its key headers only), for a recording the test has not used yet."""
    request = cassette["request"]
    body = decode_body(request.get("body_format", "text"), request.get("body", ""))
    return Request(request["method"], request["url"], request.get("headers", {}), body)


class Entry:
    __slots__ = ("cassette", "plays", "request", "response")

    def __init__(self, cassette: str, request: Request, response: dict[str, Any], plays: int) -> None:
        self.cassette, self.request, self.response, self.plays = cassette, request, response, plays


class RecordedCassette:
    """The `vcr` fixture's object for one test.

    `fetch` returns the proxy's interactions for the test (played.py's answer), `unused` the paths of the test's
    own recordings on disk (empty outside the test scope), `root` the cassette folder every file must lie in.
    """

    def __init__(
        self,
        fetch: Callable[[], list[dict[str, Any]]],
        unused: Callable[[], list[Path]],
        root: Path,
        mode: str,
    ) -> None:
        self._fetch = fetch
        self._unused = unused
        self._root = root
        self.record_mode = RECORD_MODES.get(mode, "none")
        self.write_protected = mode == "replay"

    def _entries(self) -> list[Entry]:
        entries: dict[str, Entry] = {}
        for interaction in self._fetch():
            path = interaction["cassette"]
            hit = interaction["outcome"] == "hit"
            if path in entries:
                entries[path].plays += hit
                continue
            sent = interaction["request"]
            request = Request(sent["method"], sent["uri"], sent["headers"], base64.b64decode(sent["body_base64"]))
            entries[path] = Entry(path, request, response_of(self._load(path)), int(hit))
        for path in self._unused():
            if str(path) not in entries:
                cassette = self._load(path)
                if "request" in cassette and "response" in cassette:
                    entries[str(path)] = Entry(str(path), stored_request_of(cassette), response_of(cassette), 0)
        return list(entries.values())

    def _load(self, path: str | Path) -> dict[str, Any]:
        try:
            return load(path, root=self._root)
        except FileNotFoundError:
            raise CassetteError(path, "was answered from or recorded into, and is gone") from None

    @property
    def data(self) -> list[tuple[Request, dict[str, Any]]]:
        return [(e.request, e.response) for e in self._entries()]

    @property
    def requests(self) -> list[Request]:
        return [e.request for e in self._entries()]

    @property
    def responses(self) -> list[dict[str, Any]]:
        return [e.response for e in self._entries()]

    @property
    def play_count(self) -> int:
        return sum(e.plays for e in self._entries())

    @property
    def play_counts(self) -> Counter[int]:
        return Counter({i: e.plays for i, e in enumerate(self._entries()) if e.plays})

    @property
    def all_played(self) -> bool:
        return all(e.plays for e in self._entries())

    def responses_of(self, request: Request) -> list[dict[str, Any]]:
        """The answers recorded for a request like this one (method, URL and body; else method and URL)."""
        entries = self._entries()
        found = [e.response for e in entries if e.request == request] or [
            e.response for e in entries if (e.request.method, e.request.uri) == (request.method, request.uri)
        ]
        if not found:
            raise KeyError(f"no recording of {request!r} in this test's cassette")
        return found

    def __len__(self) -> int:
        return len(self._entries())

    def __contains__(self, request: object) -> bool:
        return any(e.request == request for e in self._entries())

    def __repr__(self) -> str:
        return f"<RecordedCassette: {len(self)} recordings, record_mode {self.record_mode}>"
