"""The `vcr` fixture's object (core/migration/vcr_cassette.py): a test's interactions through the proxy read as VCR.py's
Cassette, one entry per recording in the order of first use, every replay counted."""

from __future__ import annotations

import base64

import pytest
from cassette_proxy.core.files.cassette_file import body_fields, dumps, events_fields, new_cassette
from cassette_proxy.core.files.safe_read import CassetteError
from cassette_proxy.core.migration.vcr_cassette import RecordedCassette, Request

URL = "https://api.openai.com/v1/chat/completions"


def write(path, response: dict, prompt: str = "hi"):
    path.parent.mkdir(parents=True, exist_ok=True)
    request = {
        "method": "POST",
        "url": URL,
        "headers": {"anthropic-version": "1"},
        **body_fields(prompt.encode(), "text/plain"),
    }
    path.write_bytes(dumps(new_cassette("k", request, response, {})))
    return str(path)


def played(outcome: str, cassette: str, body: bytes = b'{"q": 1}') -> dict:
    request = {
        "method": "POST",
        "uri": URL,
        "headers": {"Content-Type": "application/json"},
        "body_base64": base64.b64encode(body).decode(),
    }
    return {"outcome": outcome, "cassette": cassette, "request": request}


def test_a_stream_reads_as_its_events_joined_and_each_replay_counts(tmp_path):
    events = events_fields([{"ms": 0, "text": "data: one\n\n"}, {"ms": 5, "text": "data: [DONE]\n\n"}])
    stream = write(tmp_path / "a.json", {"status": 200, "headers": {"content-type": "text/event-stream"}, **events})
    vcr = RecordedCassette(lambda: [played("hit", stream), played("hit", stream)], list, tmp_path, "replay")
    [request] = vcr.requests
    assert request.headers["content-type"] == request.headers["CONTENT-TYPE"] == "application/json"
    assert request.body == b'{"q": 1}' and request.path == "/v1/chat/completions" and request.port == 443
    assert vcr.responses == [
        {"status": {"code": 200, "message": "OK"}, "headers": {"content-type": ["text/event-stream"]},
         "body": {"string": b"data: one\n\ndata: [DONE]\n\n"}}
    ]  # fmt: skip
    assert (vcr.play_count, vcr.all_played, len(vcr), vcr.record_mode) == (2, True, 1, "none")


def test_recordings_not_used_yet_come_after_the_used_ones_unplayed(tmp_path):
    used = write(tmp_path / "t" / "a.json", {"status": 200, "headers": {}, **body_fields(b"A", "text/plain")})
    unused = tmp_path / "t" / "b.json"
    write(unused, {"status": 404, "headers": {}, **body_fields(b"B", "text/plain")}, prompt="other")
    vcr = RecordedCassette(
        lambda: [played("recorded", used)], lambda: [unused, tmp_path / "t" / "a.json"], tmp_path, "record"
    )
    assert [r["body"]["string"] for r in vcr.responses] == [b"A", b"B"]
    assert vcr.requests[1].body == b"other" and vcr.requests[1].headers["anthropic-version"] == "1"
    assert (vcr.play_count, vcr.all_played, vcr.record_mode) == (0, False, "new_episodes")
    assert vcr.responses[1]["status"] == {"code": 404, "message": "Not Found"}
    assert vcr.responses_of(Request("POST", URL, {}, b"other")) == [vcr.responses[1]]
    with pytest.raises(KeyError):
        vcr.responses_of(Request("GET", URL, {}, b""))


def test_a_cassette_outside_the_cassette_folder_is_refused(tmp_path):
    outside = write(
        tmp_path / "elsewhere" / "a.json", {"status": 200, "headers": {}, **body_fields(b"A", "text/plain")}
    )
    vcr = RecordedCassette(lambda: [played("hit", outside)], list, tmp_path / "cassettes", "replay")
    with pytest.raises(CassetteError, match="outside the cassette folder"):
        assert vcr.responses
