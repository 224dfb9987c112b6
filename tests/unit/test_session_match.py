"""Matching a live session against a recording: what equals, what misses, what the client is told."""

import json

import pytest
from cassette_proxy.core.key import parse_ignore_paths
from cassette_proxy.core.session_file import Frame, Session
from cassette_proxy.core.session_match import (
    GEMINI,
    OPENAI,
    MatchSettings,
    Miss,
    SessionScript,
    close_reason,
    message_digest,
    miss_event,
    shape_of,
)
from cassette_proxy.core.volatile import parse_value_patterns
from session_samples import client, realtime_frames, server

DEFAULTS = MatchSettings()


def script(frames, settings=DEFAULTS, **session):
    return SessionScript(Session(tuple(frames), None, settings.session_ignore, **session), settings)


def payload(message: dict) -> bytes:
    return json.dumps(message).encode()


def recorded_client_messages(frames):
    return [json.loads(f.payload) for f in frames if f.from_client]


def test_the_session_is_cut_at_its_client_messages():
    played = script(realtime_frames("Say hello", "Hello there"))
    assert [json.loads(f.payload)["type"] for f in played.opening] == ["session.created"]
    assert [len(replies) for _, _, replies in played.turns] == [1, 1, 4]


def test_the_same_messages_with_other_event_ids_and_spacing_match():
    frames = realtime_frames()
    played = script(frames)
    for i, message in enumerate(recorded_client_messages(frames)):
        result = played.answer(json.dumps({**message, "event_id": f"evt_live_{i}"}, indent=2).encode())
        assert not isinstance(result, Miss)
    assert played.finished


def test_a_changed_user_text_is_a_miss_with_the_field_diff():
    frames = realtime_frames("Say hello")
    played = script(frames)
    first, second, _ = recorded_client_messages(frames)
    played.answer(payload(first))
    changed = json.loads(json.dumps(second).replace("Say hello", "Say goodbye"))
    miss = played.answer(payload(changed))
    assert isinstance(miss, Miss)
    assert miss.number == 2
    assert miss.differences == ['item.content[0].text: "Say hello" → "Say goodbye"']
    assert "client message 2" in miss.message("a/b.json") and "Say goodbye" in miss.message("a/b.json")


def test_a_message_beyond_the_recording_is_a_miss():
    frames = realtime_frames()
    played = script(frames)
    for message in recorded_client_messages(frames):
        played.answer(payload(message))
    miss = played.answer(payload({"type": "response.create"}))
    assert isinstance(miss, Miss) and miss.number == 4 and miss.recorded_count == 3
    assert "recorded only 3 client messages" in miss.message("x.json")


def test_event_ids_count_when_the_session_ignore_list_is_emptied():
    frames = realtime_frames()
    played = script(frames, MatchSettings(session_ignore=()))
    miss = played.answer(payload({**recorded_client_messages(frames)[0], "event_id": "evt_other"}))
    assert isinstance(miss, Miss) and miss.differences == ['event_id: "evt_a" → "evt_other"']


def test_cassette_ignore_paths_value_patterns_and_equal_numbers_apply():
    frames = [client(0, {"type": "x", "metadata": {"trace": "t1"}, "n": 1.0, "call": "pyd_ai_" + "a" * 32})]
    settings = MatchSettings(parse_ignore_paths(["metadata.trace"]), tuple(parse_value_patterns(["pydantic-ai"])))
    live = {"type": "x", "metadata": {"trace": "t2"}, "n": 1, "call": "pyd_ai_" + "b" * 32}
    assert not isinstance(script(frames, settings).answer(payload(live)), Miss)
    assert isinstance(script(frames).answer(payload(live)), Miss)


def test_text_and_binary_messages_are_compared_whole():
    frames = [Frame(True, 0, True, b"plain words"), Frame(True, 1, False, b"\xff\x01")]
    played = script(frames)
    assert not isinstance(played.answer(b"plain words"), Miss)
    miss = played.answer(b"\xff\x02")
    assert isinstance(miss, Miss) and "2 bytes with sha256" in miss.differences[0]


def test_a_redacted_message_matches_by_its_digest_under_the_same_settings():
    settings = MatchSettings()
    real = payload({"type": "session.update", "session": {"instructions": "key sk-abc"}})
    stored = Frame(True, 0, True, payload({"type": "session.update", "session": {"instructions": "key [REDACTED]"}}))
    digest = message_digest(real, settings)
    played = script([stored], settings, digests={0: digest}, digest_settings=settings.fingerprint)
    assert not isinstance(played.answer(real), Miss)
    other = MatchSettings(session_ignore=())
    played = script([stored], other, digests={0: digest}, digest_settings=settings.fingerprint)
    miss = played.answer(real)
    assert isinstance(miss, Miss) and "redacted when stored" in miss.differences[-1]


@pytest.mark.parametrize(
    ("url", "first", "shape"),
    [
        ("https://generativelanguage.googleapis.com/ws/x.BidiGenerateContent?", {}, GEMINI),
        ("http://127.0.0.1:9/live", {"setup": {"model": "m"}}, GEMINI),
        ("https://api.openai.com/v1/realtime?model=m", {"type": "session.update"}, OPENAI),
    ],
)
def test_the_error_shape_follows_the_api(url, first, shape):
    assert shape_of(url, [server(0, {}), client(1, first)]) == shape


def test_the_miss_event_is_in_each_apis_error_shape():
    openai = miss_event(OPENAI, "cassette_miss: …", {"cassette": "c.json"}, "evt_7")
    assert openai["type"] == "error" and openai["event_id"]
    assert openai["error"]["type"] == openai["error"]["code"] == "cassette_miss"
    assert openai["error"]["event_id"] == "evt_7" and openai["error"]["cassette"] == "c.json"
    gemini = miss_event(GEMINI, "cassette_miss: …", {"cassette": "c.json"})
    assert gemini["code"] == 409 and gemini["message"].startswith("cassette_miss")  # what google-genai raises


def test_a_close_reason_fits_a_control_frame():
    reason = close_reason("cassette_miss: " + "é" * 200)
    assert len(reason.encode()) <= 123 and reason.startswith("cassette_miss: é")
    assert close_reason("short") == "short"
