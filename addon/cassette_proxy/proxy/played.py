"""What the current test's requests were answered with: the pytest plugin's `vcr` fixture reads it.

Suites written for pytest-recording read the cassette object of their test
(`vcr.requests[0].body`, `vcr.responses`, `vcr.play_count`). Behind the proxy
that object is filled from here: when a runner starts a test with
`"played": true` (control_channel.py), the addon notes each of the test's
requests that a recording answered (a hit) or that went upstream to be
recorded, with the cassette file it was answered from or saved to. Only the
request's parts are kept on the hot path (references, no copy of the body); the
credentials are dropped and the run's redaction applied when the runner asks:

    POST http://cassette.control/v1/test/played   {"test": "<id>"}
    → {"test": "<id>", "interactions": [{"outcome": "hit" | "recorded", "cassette": "<path>", "request": {...}}]}

The runner reads each answer from its cassette file, the redacted form a
reviewer sees. A forwarded request whose answer was not saved (a status
outside `cassette_record_statuses`) is left out, as VCR.py leaves out what it
did not record.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ..core.files.cassette_file import DROPPED_HEADERS, body_fields, decode_body
from ..core.secrets import redact

MAX_KEPT = 10_000
"""Requests kept for one test; past this the answer says `truncated` and the fixture refuses to read it."""


PlayedOutcome = Literal["hit", "recorded"]


@dataclass(frozen=True, slots=True)
class PlayedRequest:
    outcome: PlayedOutcome
    """`hit` (answered from the cassette) or `recorded` (forwarded; its answer saved to the cassette)."""
    method: str
    url: str
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    content_type: str
    cassette: str
    """The cassette file's path, as the proxy opens it."""


class PlayedLog:
    """The current test's answered requests, while a runner asked for them."""

    def __init__(self, wait_for_recordings: Callable[[], object]) -> None:
        self.wait_for_recordings = wait_for_recordings
        self.test: str | None = None
        self.entries: list[PlayedRequest] = []
        self.truncated = False

    def start(self, test: str | None, keep: bool, resume: bool) -> None:
        """A test starts (None: none runs): its log begins empty unless it resumes after a wider fixture."""
        if not (resume and test == self.test):
            self.entries, self.truncated = [], False
        self.test = test if keep else None

    def add(self, test: str | None, played: PlayedRequest) -> None:
        if test is None or test != self.test:
            return
        if len(self.entries) >= MAX_KEPT:
            self.truncated = True
            return
        self.entries.append(played)

    def answer(self, test: str, rules: tuple[redact.Rule, ...]) -> dict:
        """The test's interactions so far, once every recording it started is on disk."""
        if test != self.test:
            return {"test": test, "interactions": None, "current": self.test}
        self.wait_for_recordings()
        interactions = [
            {"outcome": e.outcome, "cassette": e.cassette, "request": stored_request(e, rules)}
            for e in self.entries
            if e.outcome == "hit" or os.path.exists(e.cassette)
        ]
        return {"test": test, "interactions": interactions, "truncated": self.truncated}


def stored_request(played: PlayedRequest, rules: tuple[redact.Rule, ...]) -> dict:
    """The request as it went through the proxy, with what a cassette never stores left out: credentials and
    hop-by-hop headers dropped, the run's redaction rules applied to the URL, the headers and the body."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in played.headers:
        name = raw_name.decode("utf-8", "surrogateescape")
        if name.lower() in DROPPED_HEADERS or name.lower().startswith("x-cassette-"):
            continue
        value = raw_value.decode("utf-8", "surrogateescape")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value  # as HTTP folds them
    fields = body_fields(played.body, played.content_type)
    request = {"method": played.method, "url": played.url, "headers": headers, **fields}
    stored = redact.redact({"request": request}, rules)["request"]
    body = played.body if stored.get("body") == fields["body"] else decode_body(stored["body_format"], stored["body"])
    return {
        "method": stored["method"],
        "uri": stored["url"],
        "headers": stored["headers"],
        "body_base64": base64.b64encode(body).decode("ascii"),
    }
