"""`cassette rekey` carries cassettes recorded before the framework presets over to them."""

from __future__ import annotations

import json
import uuid

from cassette_proxy.cli import main
from cassette_proxy.core.files.cassette_file import new_cassette
from cassette_proxy.core.files.location import cassette_files, relative_name
from cassette_proxy.core.keys.recipe import make_recipe, stored_key
from samples import write

BEFORE_PRESETS = {"recipe": 2, "ignore": [], "key_headers": ["anthropic-version", "anthropic-beta", "openai-beta"],
                  "ignore_values": []}  # fmt: skip


def tool_example_cassette(call_id: str) -> dict:
    """A recording of a LangChain few-shot tool example whose made-up id happened to be keyed as sent."""
    request = {"method": "POST", "url": "https://api.openai.com/v1/chat/completions", "headers": {},
               "body_format": "json", "body": {"model": "gpt-4o-mini", "messages": [
                   {"role": "assistant", "content": "", "tool_calls": [
                       {"id": call_id, "type": "function", "function": {"name": "Person", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": call_id, "content": "ok"},
                   {"role": "user", "content": "Mark went to Rome."}]}}  # fmt: skip
    response = {"status": 200, "headers": {"content-type": "application/json"}, "body_format": "json", "body": {}}
    key = stored_key(request, make_recipe(frameworks=()))
    return new_cassette(key, request, response, {"cassette_proxy": "0.1.0"}, BEFORE_PRESETS)


def only_cassette(folder) -> dict:
    [path] = cassette_files(folder)
    return json.loads(path.read_text())


def test_rekey_gives_a_cassette_from_before_the_presets_all_of_them(tmp_path, capsys):
    old = tool_example_cassette(str(uuid.uuid4()))
    write(tmp_path, old, relative_name("https", "api.openai.com", 443, "/v1/chat/completions", old["key"]))

    assert main(["rekey", "--dir", str(tmp_path)]) == 0
    assert "1 moved" in capsys.readouterr().out
    new = only_cassette(tmp_path)
    assert new["keyed_with"]["frameworks"] == ["langchain", "llm", "openai-agents", "pydantic-ai"]
    # the key a run with the default presets computes for a new uuid: the recording now hits
    assert new["key"] == stored_key(tool_example_cassette(str(uuid.uuid4()))["request"], make_recipe()) != old["key"]

    assert main(["rekey", "--dir", str(tmp_path), "--frameworks"]) == 0  # none: back to the key as sent
    capsys.readouterr()
    assert only_cassette(tmp_path)["key"] == old["key"]
    assert only_cassette(tmp_path)["keyed_with"]["frameworks"] == []

    assert main(["rekey", "--dir", str(tmp_path)]) == 0  # recorded with none, said so: kept
    assert "0 moved" in capsys.readouterr().out
    assert only_cassette(tmp_path)["key"] == old["key"]


def test_rekey_keeps_a_responses_websocket_turn_in_the_turns_key_space(tmp_path, capsys):
    """A turn is keyed like its POST twin with `"over": "websocket"`: rekey recomputes that key, not the twin's."""
    from cassette_proxy.core.files.session_file import SESSION_FORMAT, Frame, session_object, stored_frames
    from cassette_proxy.core.sessions.session_turns import turn_key, twin_request

    upgrade = {"method": "GET", "url": "wss://api.openai.com/v1/responses", "headers": {}}
    body = {"model": "gpt-5", "input": "Hi", "prompt_cache_key": "agents-sdk:run:" + "a" * 32}
    request = twin_request(upgrade, body)
    recipe = make_recipe()
    key = turn_key(request, recipe)
    frames = [Frame(True, 0, True, json.dumps({"type": "response.create", **body}).encode()),
              Frame(False, 3, True, b'{"type":"response.completed","response":{"id":"resp_1"}}')]  # fmt: skip
    stored, _ = stored_frames(frames)
    cassette = new_cassette(key, request, {"status": 101, "headers": {}}, {"cassette_proxy": "0.1.0"}, recipe.to_json())
    cassette = {**cassette, "cassette_format": SESSION_FORMAT, "session": session_object(stored, None, ["event_id"])}
    cassette["turn"] = {"over": "websocket", "url": upgrade["url"], "number": 1}
    relative = relative_name("https", "api.openai.com", 443, "/v1/responses", key)
    write(tmp_path, cassette, relative)

    assert main(["rekey", "--dir", str(tmp_path)]) == 0
    [path] = cassette_files(tmp_path)
    assert path.name == f"{key}.json" and key != stored_key(request, recipe)
    assert only_cassette(tmp_path)["turn"]["over"] == "websocket"
