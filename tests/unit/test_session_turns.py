"""The Responses API's WebSocket mode read turn by turn: each `response.create` keyed like its `POST` twin."""

import json

from cassette_proxy.core.files.session_file import Session
from cassette_proxy.core.keys.key import request_key
from cassette_proxy.core.keys.recipe import facts_of, make_recipe, stored_identity
from cassette_proxy.core.reading.miss import identity_differences, miss_body
from cassette_proxy.core.sessions.session_match import RESPONSES, Miss, miss_event
from cassette_proxy.core.sessions.session_turns import (
    TURN_REFERENCE,
    TurnChoice,
    create_body,
    is_responses_socket,
    split_turns,
    turn_identity,
    turn_key,
    twin_request,
    unknown_continuation,
)
from session_samples import client, server

UPGRADE = {
    "method": "GET",
    "url": "wss://api.openai.com/v1/responses",
    "headers": {},
    "body_format": "text",
    "body": "",
}
RECIPE = make_recipe()


def create(text: str, **fields) -> dict:
    return {"type": "response.create", "model": "gpt-5", "input": [{"role": "user", "content": text}], **fields}


def answer(response_id: str, text: str, ms: int = 10) -> list:
    response = {"id": response_id, "object": "response", "status": "in_progress", "output": []}
    return [
        server(ms, {"type": "response.created", "response": response, "sequence_number": 0}),
        server(ms + 1, {"type": "response.output_text.delta", "delta": text, "sequence_number": 1}),
        server(ms + 2, {"type": "response.completed", "response": {**response, "status": "completed"}}),
    ]


def key_of_message(message: dict, recipe=RECIPE) -> str:
    body = create_body(json.dumps(message).encode())
    assert body is not None
    return turn_key(twin_request(UPGRADE, body), recipe)


def test_only_a_responses_url_is_read_as_turns():
    assert is_responses_socket("wss://api.openai.com/v1/responses")
    assert is_responses_socket("ws://127.0.0.1:8080//v1/responses?x=1")
    assert not is_responses_socket("wss://api.openai.com/v1/realtime?model=gpt-realtime")


def test_a_response_create_is_its_post_body_less_its_type():
    assert create_body(json.dumps(create("Hi")).encode()) == {
        "model": "gpt-5",
        "input": [{"role": "user", "content": "Hi"}],
    }
    assert create_body(b'{"type": "response.cancel"}') is None
    assert create_body(b"not json") is None
    request = twin_request(UPGRADE, {"model": "gpt-5"})
    assert request["method"] == "POST" and request["url"] == "https://api.openai.com/v1/responses"
    assert request["body_format"] == "json" and request["body"] == {"model": "gpt-5"}


def test_a_turn_is_keyed_like_its_http_twin_in_its_own_key_space():
    request = twin_request(UPGRADE, create_body(json.dumps(create("Hi")).encode()))
    http = stored_identity(request, RECIPE)
    turn = turn_identity(request, RECIPE)
    assert {k: v for k, v in turn.items() if k != "over"} == http
    assert turn_key(request, RECIPE) != request_key(facts_of(request), RECIPE.key_headers)


def test_key_order_and_spacing_do_not_change_a_turns_key_its_text_does():
    a = key_of_message(create("Hi"))
    reordered = dict(reversed(list(create("Hi").items())))
    assert key_of_message(reordered) == a
    assert key_of_message(create("Hello")) != a


def test_the_openai_agents_preset_keys_a_fresh_prompt_cache_key_alike():
    first = create("Hi", prompt_cache_key="agents-sdk:run:" + "a" * 32)
    second = create("Hi", prompt_cache_key="agents-sdk:run:" + "b" * 32)
    assert key_of_message(first) == key_of_message(second)
    without = make_recipe(frameworks=())
    assert key_of_message(first, without) != key_of_message(second, without)


def test_the_ignore_set_applies_to_a_turn_as_to_a_body():
    recipe = make_recipe(ignore=("metadata",))
    assert key_of_message(create("Hi", metadata={"run": "1"}), recipe) == key_of_message(
        create("Hi", metadata={"run": "2"}), recipe
    )


def test_a_connection_splits_into_its_turns_each_up_to_its_terminal_event():
    frames = [
        client(1, create("Hi")),
        *answer("resp_1", "Hello", 5),
        client(20, create("And then?", previous_response_id="resp_1")),
        *answer("resp_2", "Done", 25),
    ]
    turns = split_turns(frames)
    assert turns is not None and turns.opening == []
    first, second = turns.turns
    assert (first.number, first.complete, first.response_id, first.previous_response_id) == (1, True, "resp_1", None)
    assert (second.number, second.response_id, second.previous_response_id) == (2, "resp_2", "resp_1")
    assert len(first.answer) == 3 and all(not f.from_client for f in first.answer)


def test_a_turn_without_its_terminal_event_is_incomplete_and_an_error_ends_one():
    cut = split_turns([client(1, create("Hi")), *answer("resp_1", "Hello")[:2]])
    assert cut is not None and not cut.turns[0].complete
    failed = split_turns([client(1, create("Hi")), server(3, {"type": "error", "error": {"message": "bad"}})])
    assert failed is not None and failed.turns[0].complete


def test_a_connection_with_another_client_message_is_not_read_as_turns():
    frames = [client(1, create("Hi")), client(2, {"type": "response.cancel"}), *answer("resp_1", "Hello")]
    assert split_turns(frames) is None


def test_a_continuation_of_an_id_the_provider_never_made_is_named():
    body = create_body(json.dumps(create("More", previous_response_id="resp_replayed")).encode())
    assert unknown_continuation(body, {"resp_live"}) == "resp_replayed"
    assert unknown_continuation(body, {"resp_replayed"}) is None
    assert unknown_continuation(create_body(json.dumps(create("First")).encode()), set()) is None


def test_a_missed_turn_is_a_responses_error_event_with_the_http_misses_diff():
    recorded = twin_request(UPGRADE, create_body(json.dumps(create("Say hello")).encode()))
    live = twin_request(UPGRADE, create_body(json.dumps(create("Say hi")).encode()))
    diff = identity_differences(turn_identity(recorded, RECIPE), turn_identity(live, RECIPE))
    assert diff == ['input[0].content: "Say hello" → "Say hi"']
    nearest = [{"cassette": "api.openai.com/v1/responses/abc.json", "differences": diff}]
    key = turn_key(live, RECIPE)
    body = miss_body(key, "POST", live["url"], f"api.openai.com/v1/responses/{key}.json", "replay", nearest)
    message = body["error"]["message"]
    event = miss_event(
        RESPONSES, message, {"cassette": nearest[0]["cassette"], "message_number": 2, "differences": diff}
    )
    assert event["type"] == "error" and event["error"]["code"] == "cassette_miss"
    assert 'input[0].content: "Say hello" → "Say hi"' in event["error"]["message"]
    assert event["error"]["message_number"] == 2 and event["status"] == 409
    json.dumps(event)  # sent as a text message


def recording(message: dict, response_id: str, text: str) -> Session:
    return Session((client(0, message), *answer(response_id, text, 2)), None, ())


class Folder:
    """Turn recordings by key, as the proxy finds them beside each other, and the misses it was asked about."""

    def __init__(self, *recordings: tuple[str, Session]) -> None:
        self.by_key = {}
        self.misses = []
        for name, session in recordings:
            body = create_body(session.frames[0].payload)
            self.by_key[turn_key(twin_request(UPGRADE, body), RECIPE)] = (name, session)

    def lookup(self, key):
        return self.by_key.get(key)

    def missed(self, key, request, number):
        self.misses.append((key, number))
        return "nearest.json", f"cassette_miss: turn {number}", ["input[0].content: changed"]


def test_each_turn_is_answered_from_its_own_recording_and_a_continuation_is_keyed_by_the_turn_it_continues():
    first = create("Hi")
    folder = Folder(("a.json", recording(first, "resp_A", "Hello")))
    key_a = next(iter(folder.by_key))
    # The follow-up was recorded in another connection, after a live answer with another id.
    follow = create("More", previous_response_id=TURN_REFERENCE + key_a)
    folder.by_key[key_of_message(follow)] = ("b.json", recording(follow, "resp_B", "Done"))
    given = {}
    choice = TurnChoice(UPGRADE, RECIPE, folder.lookup, folder.missed, given)
    _, replies = choice.answer(json.dumps(first).encode())
    assert json.loads(replies[-1].payload)["type"] == "response.completed" and given == {"resp_A": key_a}
    # The client continues from the id it was given (resp_A): keyed as the turn it continues.
    live = json.dumps(create("More", previous_response_id="resp_A")).encode()
    result = choice.answer(live)
    assert not isinstance(result, Miss)
    assert choice.played == ["a.json", "b.json"] and choice.matched == 2
    assert choice.turn(2) == (0, result[1])


def test_a_turn_with_no_recording_misses_with_its_nearest_and_its_number():
    folder = Folder(("a.json", recording(create("Hi"), "resp_A", "Hello")))
    choice = TurnChoice(UPGRADE, RECIPE, folder.lookup, folder.missed, {})
    choice.answer(json.dumps(create("Hi")).encode())
    miss = choice.answer(json.dumps(create("Changed")).encode())
    assert isinstance(miss, Miss) and miss.number == 2 and miss.message("ignored") == "cassette_miss: turn 2"
    assert choice.cassette == "nearest.json" and folder.misses[0][1] == 2
    other = TurnChoice(UPGRADE, RECIPE, folder.lookup, folder.missed, {}).answer(b'{"type": "response.cancel"}')
    assert isinstance(other, Miss) and "not a `response.create`" in other.message("x")
