"""Matching a live session against a recording: what equals, what misses, what the client is told."""

import json

import pytest
from cassette_proxy.core.files.session_file import Frame, Session
from cassette_proxy.core.keys.body import parse_ignore_paths
from cassette_proxy.core.keys.volatile import parse_value_patterns
from cassette_proxy.core.sessions.session_match import (
    GEMINI,
    OPENAI,
    MatchSettings,
    Miss,
    SessionChoice,
    SessionScript,
    close_reason,
    made_up_ids,
    message_digest,
    miss_event,
    same_conversation,
    shape_of,
)
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


def choice(*texts: str) -> SessionChoice:
    """One recorded conversation per user text, all to one URL: `s0.json`, `s1.json`, …"""
    return SessionChoice([(f"s{i}.json", script(realtime_frames(text, f"Answer {i}"))) for i, text in enumerate(texts)])


def answers(played: SessionChoice, text: str) -> list[str]:
    """The text deltas a client sending the conversation of `text` is answered with."""
    deltas = []
    for message in recorded_client_messages(realtime_frames(text)):
        result = played.answer(payload({**message, "event_id": "evt_live"}))
        assert not isinstance(result, Miss), result
        deltas += [json.loads(f.payload).get("delta", "") for f in result[1]]
    return [d for d in deltas if d]


@pytest.mark.parametrize("order", [("Say hello", "Say goodbye"), ("Say goodbye", "Say hello")])
def test_conversations_sharing_a_url_and_their_first_message_each_get_their_own_answer(order):
    """Two tests to one model: the same `session.update`, another user text at message 2; any order."""
    for text in order:
        played = choice("Say hello", "Say goodbye")
        expected = "0" if text == "Say hello" else "1"
        assert answers(played, text) == ["Answer ", f"{expected} "]
        assert played.cassette == f"s{expected}.json" and played.finished


def test_a_conversation_matching_none_misses_with_the_nearest_ones_diff():
    played = choice("Say hello", "Say goodbye", "Say hi")
    first, second, _ = recorded_client_messages(realtime_frames("Say hi"))
    assert not isinstance(played.answer(payload(first)), Miss)
    miss = played.answer(payload(json.loads(json.dumps(second).replace("Say hi", "Say hiya"))))
    assert isinstance(miss, Miss) and miss.number == 2
    assert miss.differences == ['item.content[0].text: "Say hi" → "Say hiya"']
    assert played.cassette == "s2.json"  # the nearest: one difference, as the others have
    message = miss.message(played.cassette, "To record it: `x`.", played.candidates)
    assert "s2.json (the nearest of the 3 sessions recorded for this URL)" in message
    assert message.endswith("To record it: `x`.")


def test_a_longer_conversation_sharing_the_prefix_is_not_finished_with_the_shorter():
    short = realtime_frames("Say hello")
    longer = [*short, client(500, {"type": "response.create"}), server(600, {"type": "response.done"})]
    played = SessionChoice([("short.json", script(short)), ("long.json", script(longer))])
    for message in recorded_client_messages(short):
        assert not isinstance(played.answer(payload(message)), Miss)
    assert not played.finished and played.cassette == "short.json"
    _, replies = played.answer(payload({"type": "response.create"}))
    assert played.cassette == "long.json" and played.finished
    assert [json.loads(f.payload)["type"] for f in replies] == ["response.done"]


def test_a_conversation_is_the_same_when_every_client_message_matches_and_none_is_left():
    frames = realtime_frames("Say hello")
    session = Session(tuple(frames), None, DEFAULTS.session_ignore)
    messages = [payload({**m, "event_id": "other"}) for m in recorded_client_messages(frames)]
    assert same_conversation(session, messages, DEFAULTS)
    assert not same_conversation(session, messages[:2], DEFAULTS)  # a prefix is another conversation
    assert not same_conversation(session, [*messages, payload({"type": "x"})], DEFAULTS)


def test_a_waiting_client_is_led_by_a_recording_that_answered_it_there():
    """Gemini: one client sent `setup` and its text back to back, another waited for `setupComplete`."""
    setup, text = {"setup": {"model": "m"}}, {"clientContent": {"turns": []}}
    eager = [client(0, setup), client(1, text), server(5, {"setupComplete": {}}), server(9, {"serverContent": {}})]
    waiting = [client(0, setup), server(5, {"setupComplete": {}}), client(7, text), server(9, {"serverContent": {}})]
    played = SessionChoice([("eager.json", script(eager)), ("waiting.json", script(waiting))])
    assert not isinstance(played.answer(payload(setup)), Miss) and played.cassette == "eager.json"
    played.lead_with_an_answer()
    assert played.cassette == "waiting.json" and played.turn(1) == (0, [waiting[1]])
    assert not played.chosen  # both still match: the next message may yet choose the eager one


def responses_turns(*turns: tuple[str, str]) -> list[Frame]:
    """The Responses API's WebSocket mode: (user text, the response id the server made up) per turn, each turn
    continuing from the one before."""
    frames, previous = [], None
    for i, (text, made_up) in enumerate(turns):
        create = {"type": "response.create", "input": text, **({"previous_response_id": previous} if previous else {})}
        frames += [
            client(10 * i, create),
            server(10 * i + 5, {"type": "response.completed", "response": {"id": made_up}}),
        ]
        previous = made_up
    return frames


def test_a_follow_up_sending_back_the_id_another_recording_made_up_is_read_as_its_own():
    """The first turn is in both recordings: the client got the first one's id, and continues in the second."""
    alone = responses_turns(("Say hello", "resp_a1b2c3d4"))
    followed = responses_turns(("Say hello", "resp_e5f6a7b8"), ("Say more", "resp_c9d0e1f2"))
    played = SessionChoice([("alone.json", script(alone)), ("followed.json", script(followed))])
    assert not isinstance(played.answer(alone[0].payload), Miss)
    assert json.loads(played.turn(1)[1][0].payload)["response"]["id"] == "resp_a1b2c3d4"  # sent to the client
    follow_up = payload({"type": "response.create", "input": "Say more", "previous_response_id": "resp_a1b2c3d4"})
    _, replies = played.answer(follow_up)
    assert played.cassette == "followed.json" and json.loads(replies[0].payload)["response"]["id"] == "resp_c9d0e1f2"
    other = payload({"type": "response.create", "input": "Say more", "previous_response_id": "resp_made_up_9"})
    played = SessionChoice([("alone.json", script(alone)), ("followed.json", script(followed))])
    played.answer(alone[0].payload), played.turn(1)
    assert isinstance(played.answer(other), Miss)  # only the ids the client was given are read as another's


def test_only_values_that_look_made_up_are_ids_never_words():
    sent = [server(0, {"id": "resp_a1b2c3", "text": "Hello", "status": "in_progress", "n": "call_1a2b3c"})]
    recorded = [server(0, {"id": "resp_d4e5f6", "text": "Goodbye", "status": "completed", "n": "call_1a2b3c"})]
    assert made_up_ids(sent, recorded) == {"resp_a1b2c3": "resp_d4e5f6"}
