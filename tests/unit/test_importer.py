"""The import conversion on its own (core/migration/importer.py): cassettes serialised by VCR.py's own serializers and by
langchain_tests' serializer, HAR entries, and the rules the proxy applies when it records (key and its settings,
statuses, sequences, collisions, redaction, dates), and what `load` would refuse."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import brotli
import pytest
from cassette_proxy.core.defaults import DEFAULT_KEY_HEADERS
from cassette_proxy.core.files.atomic_write import write_atomic
from cassette_proxy.core.files.cassette_file import dumps, parse
from cassette_proxy.core.files.location import MAX_NAME, relative_name, short_name
from cassette_proxy.core.keys.body import parse_ignore_paths
from cassette_proxy.core.keys.key import RequestFacts, identity, key_of
from cassette_proxy.core.keys.recipe import make_recipe
from cassette_proxy.core.keys.volatile import parse_value_patterns
from cassette_proxy.core.migration import importer
from cassette_proxy.core.migration.recording_formats import read_recording
from vcr.request import Request
from vcr.serialize import serialize
from vcr.serializers import jsonserializer, yamlserializer

API = "https://api.openai.com/v1/chat/completions"
SETTINGS = importer.import_settings()


def vcr_text(interactions: list[tuple[Request, dict]], serializer=yamlserializer) -> bytes:
    """A cassette as VCR.py writes it: its own request objects and serializer."""
    return serialize(
        {"requests": [r for r, _ in interactions], "responses": [r for _, r in interactions]}, serializer
    ).encode()


def chat_request(prompt: str, url: str = API, **headers: str) -> Request:
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}]}).encode()
    return Request("POST", url, body, {"content-type": "application/json", "authorization": "Bearer sk-x", **headers})


def response(body: bytes | str, status: int = 200, **headers: str) -> dict:
    all_headers = {"content-type": ["application/json"], **{k: [v] for k, v in headers.items()}}
    return {"status": {"code": status, "message": "OK"}, "headers": all_headers, "body": {"string": body}}


def answer(text: str) -> bytes:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()


def run_plan(tmp_path: Path, *texts: bytes, settings=SETTINGS, replace: bool = False, **file) -> list[importer.Outcome]:
    files = []
    for n, text in enumerate(texts):
        kind, entries = read_recording(text, f"file{n}.yaml")
        files.append(importer.RecordingFile(f"file{n}.yaml", kind, entries, **file))
    return importer.plan(files, settings, tmp_path, replace=replace)


def written(outcomes: list[importer.Outcome]) -> dict[str, dict]:
    return {o.relative: json.loads(o.data) for o in outcomes if o.data is not None}


@pytest.mark.parametrize("serializer", [yamlserializer, jsonserializer], ids=["yaml", "json"])
def test_both_vcr_serializers_give_the_key_of_the_same_request_facts(serializer, tmp_path):
    text = vcr_text([(chat_request("hi", API + "?b=2&key=AIzaSECRET&a=1"), response(answer("hello")))], serializer)
    [outcome] = run_plan(tmp_path, text)
    facts = RequestFacts(
        method="POST",
        scheme="https",
        host="api.openai.com",
        port=443,
        path="/v1/chat/completions",
        query=[("b", "2"), ("key", "AIzaSECRET"), ("a", "1")],
        headers={"content-type": "application/json"},
        body=chat_request("hi").body,
        content_type="application/json",
    )
    cassette = json.loads(outcome.data)
    assert cassette["key"] == key_of(identity(facts, DEFAULT_KEY_HEADERS))
    assert cassette["request"]["url"] == API + "?a=1&b=2"  # sorted, the credential gone
    assert outcome.relative == f"api.openai.com/v1/chat/completions/{cassette['key']}.json"
    assert cassette["response"]["body"] == json.loads(answer("hello"))


def test_key_headers_are_folded_like_mitmproxy_and_others_never_stored(tmp_path):
    interaction = {
        "request": {"method": "POST", "uri": "https://api.anthropic.com/v1/messages", "body": "{}",
                    "headers": {"Anthropic-Beta": ["a", "b"], "x-api-key": ["sk-ant-secret"]}},
        "response": response(b"{}"),
    }  # fmt: skip
    text = yamlserializer.serialize({"version": 1, "interactions": [interaction]}).encode()
    [outcome] = run_plan(tmp_path, text)
    cassette = json.loads(outcome.data)
    assert cassette["request"]["headers"] == {"anthropic-beta": "a, b"}  # as mitmproxy's Headers folds a repeat
    assert "sk-ant-secret" not in outcome.data.decode()


def test_gzip_and_br_bodies_are_stored_decoded_and_an_sse_body_as_its_events(tmp_path):
    sse = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
    text = vcr_text(
        [
            (chat_request("gzip"), response(gzip.compress(answer("zipped")), **{"content-encoding": "gzip"})),
            (chat_request("br"), response(brotli.compress(answer("brotli")), **{"Content-Encoding": "br"})),
            (
                chat_request("stream"),
                {**response(gzip.compress(sse), **{"content-encoding": "gzip"}), "headers": {
                    "Content-Type": ["text/event-stream; charset=utf-8"], "Content-Encoding": ["gzip"]}},
            ),
        ]
    )  # fmt: skip
    assert b"!!binary" in text
    bodies = [c["response"] for c in written(run_plan(tmp_path, text)).values()]
    assert bodies[0]["body"]["choices"][0]["message"]["content"] == "zipped"
    assert bodies[1]["body"]["choices"][0]["message"]["content"] == "brotli"
    assert bodies[2]["body_format"] == "events"
    assert bodies[2]["body"] == [
        {"ms": 0, "text": 'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'},
        {"ms": 0, "text": "data: [DONE]\n\n"},
    ]
    assert all("content-encoding" not in b["headers"] for b in bodies)


def test_a_body_that_decompresses_past_the_limit_is_refused_not_inflated(tmp_path, monkeypatch):
    monkeypatch.setattr(importer, "MAX_RECORDING_BYTES", 1000)
    bomb = gzip.compress(b"0" * 100_000)  # 100 kB from 150 bytes
    text = vcr_text([(chat_request("bomb"), response(bomb, **{"content-encoding": "gzip"}))])
    [outcome] = run_plan(tmp_path, text)
    assert outcome.action == "invalid" and "decompresses to more than 1000 bytes" in outcome.detail


def test_repeated_requests_become_a_sequence_and_only_trailing_repeats_are_left_out(tmp_path):
    same = chat_request("again?")
    answers = ["A", "A", "B", "B"]  # replay must give A, A, B, B: keep 1=A 2=A 3=B, the 4th repeats the 3rd
    outcomes = run_plan(tmp_path, vcr_text([(same, response(answer(a))) for a in answers]))
    assert [o.action for o in outcomes] == ["imported", "imported", "imported", "repeat"]
    files = written(outcomes)
    key = outcomes[0].relative.rsplit("/", 1)[1].removesuffix(".json")
    contents = {Path(name).name: c["response"]["body"]["choices"][0]["message"]["content"] for name, c in files.items()}
    assert contents == {f"{key}.json": "A", f"{key}.2.json": "A", f"{key}.3.json": "B"}


def test_a_different_answer_in_a_second_file_collides_and_the_same_one_is_a_duplicate(tmp_path):
    first = vcr_text([(chat_request("q"), response(answer("one")))])
    same = vcr_text([(chat_request("q"), response(answer("one")))])
    other = vcr_text([(chat_request("q"), response(answer("two")))])
    outcomes = run_plan(tmp_path, first, same, other)
    assert [o.action for o in outcomes] == ["imported", "duplicate", "collided"]
    assert "file0.yaml#1 holds a different answer to the same request and was kept there" in outcomes[2].detail
    assert outcomes[2].detail.endswith('they differ in: choices[0].message.content: "one" → "two"')
    assert outcomes[2].relative == outcomes[0].relative  # where the kept one is


def test_a_collision_of_answers_that_differ_only_in_a_made_up_id_says_so(tmp_path):
    # llm-anthropic's test_prompt and test_async_prompt: one request, the same reply, each with its own message id.
    def streamed(message_id: str) -> dict:
        start = {"type": "message_start", "message": {"id": message_id, "content": []}}
        pad = " " * (2 if message_id.endswith("a") else 7)  # Anthropic pads its events, differently each time
        events = f"event: message_start\ndata: {json.dumps(start)}{pad}\n\nevent: message_stop\ndata: {{}}\n\n"
        return response(events, **{"content-type": "text/event-stream"})

    outcomes = run_plan(
        tmp_path, *(vcr_text([(chat_request("q"), streamed(i))]) for i in ("msg_01aaaa", "msg_01bbbb"))
    )  # fmt: skip
    assert [o.action for o in outcomes] == ["imported", "collided"]
    # read as the client reads the events: the padding inside them is no difference
    assert outcomes[1].detail.endswith('they differ in: [0].data.message.id: "msg_01aaaa" → "msg_01bbbb"')
    on_disk = run_plan(tmp_path / "again", vcr_text([(chat_request("q"), streamed("msg_01aaaa"))]))
    proxy_made = {"recorded_with": {"cassette_proxy": "0.1.0", "mitmproxy": "11.0.2"}}  # recorded, not imported
    write_atomic(tmp_path / "again" / on_disk[0].relative, dumps(json.loads(on_disk[0].data) | proxy_made))
    [again] = run_plan(tmp_path / "again", vcr_text([(chat_request("q"), response(answer("two")))]))
    assert again.action == "collided" and "already holds a different answer (body events → json)" in again.detail


def test_answers_that_differ_only_in_volatile_headers_are_duplicates_and_a_content_type_is_not(tmp_path):
    dated = response(answer("one"), age="10", expires="Tue, 04 Mar 2025 05:06:07 GMT", **{"x-request-id": "req_1"})
    later = response(answer("one"), age="99", expires="Wed, 05 Mar 2025 05:06:07 GMT", **{"x-request-id": "req_2"})
    as_text = {**response(answer("one")), "headers": {"content-type": ["text/plain"]}}
    outcomes = run_plan(
        tmp_path, *(vcr_text([(chat_request("q"), r)]) for r in (dated, later, as_text))
    )  # fmt: skip
    assert [o.action for o in outcomes] == ["imported", "duplicate", "collided"]
    assert "only its headers differ: expires, x-request-id" in outcomes[1].detail  # `age` is never stored
    trailing = run_plan(tmp_path, vcr_text([(chat_request("q"), dated), (chat_request("q"), later)]))
    assert [o.action for o in trailing] == ["imported", "repeat"]  # not a sequence of two


def test_a_cassette_already_on_disk_is_kept_when_it_answers_the_same_and_collides_otherwise(tmp_path):
    text = vcr_text([(chat_request("q"), response(answer("one")))])
    [first] = run_plan(tmp_path, text)
    proxy_made = {
        "recorded_at": "2026-01-01T00:00:00+00:00",
        "recorded_with": {"cassette_proxy": "0.1.0", "mitmproxy": "11.0.2"},
    }
    recorded = json.loads(first.data) | proxy_made  # the same request, recorded by the proxy
    write_atomic(tmp_path / first.relative, dumps(recorded))
    assert run_plan(tmp_path, text)[0].action == "present"
    changed = vcr_text([(chat_request("q"), response(answer("two")))])
    assert run_plan(tmp_path, changed)[0].action == "collided"
    replaced = run_plan(tmp_path, changed, replace=True)[0]
    assert replaced.action == "replaced" and b'"two"' in replaced.data


@pytest.mark.parametrize(
    ("status", "kept"),
    [(200, True), (201, True), (400, True), (404, True), (422, True), (401, False), (429, False), (500, False)],
)
def test_the_statuses_kept_are_the_proxys_record_statuses(status, kept, tmp_path):
    [outcome] = run_plan(tmp_path, vcr_text([(chat_request("q"), response(b'{"error": {}}', status=status))]))
    assert (outcome.action == "imported") is kept
    if not kept:
        assert outcome.action == "skipped"
        assert f"status {status} is not among the statuses the proxy records" in outcome.detail
        assert f"--record-status {status}" in outcome.detail


def test_record_statuses_and_hosts_follow_the_settings(tmp_path):
    text = vcr_text(
        [
            (chat_request("q", "https://cdn.example.com/x?key=SECRET"), response(b"{}")),
            (chat_request("q"), response(b'{"error": {}}', status=500)),
        ]
    )
    skipped = run_plan(tmp_path, text)
    assert [o.action for o in skipped] == ["skipped", "skipped"]
    assert "host cdn.example.com is not under cassette control" in skipped[0].detail
    assert "SECRET" not in skipped[0].detail
    asked = importer.import_settings(hosts=["*"], record_statuses=["2xx", "5xx"])
    assert [o.action for o in run_plan(tmp_path, text, settings=asked)] == ["imported", "imported"]


@pytest.mark.parametrize(
    ("status", "headers", "problem"),
    [
        (0, {}, "status 0 is not an HTTP status"),
        (999, {}, "status 999 is not an HTTP status"),
        (200, {"x-note": "a\r\nset-cookie: injected=1"}, "holds a CR, LF or NUL character"),
        (200, {"bad name": "x"}, "is not an HTTP header name"),
    ],
    ids=["status-0", "status-999", "crlf-in-value", "space-in-name"],
)
def test_what_the_proxy_would_refuse_is_never_written(status, headers, problem, tmp_path):
    text = vcr_text([(chat_request("q"), response(answer("x"), status=status, **headers))])
    settings = importer.import_settings(record_statuses=["1xx", "2xx", "3xx", "4xx", "5xx"])
    [outcome] = run_plan(tmp_path, text, settings=settings)
    assert outcome.action == "invalid" and outcome.data is None
    assert problem in outcome.detail


def test_every_written_cassette_passes_the_proxys_own_validation(tmp_path):
    """The check by construction: whatever the recording held, the bytes written are what `load` accepts."""
    sse = b"event: response.created\ndata: {}\n\n"
    text = vcr_text(
        [
            (chat_request("json"), response(answer("x"))),
            (chat_request("sse"), {**response(sse), "headers": {"content-type": ["text/event-stream"]}}),
            (chat_request("bytes"), {**response(b"\xff\xfe\x00"), "headers": {"content-type": ["image/png"]}}),
        ]
    )
    outcomes = run_plan(tmp_path, text)
    assert [o.action for o in outcomes] == ["imported"] * 3
    for outcome in outcomes:
        parse(outcome.relative, outcome.data)


def test_key_settings_are_taken_as_run_takes_them_and_written_as_keyed_with(tmp_path):
    """--key-header adds to the defaults, --ignore-value takes a preset by name (resolved as the addon resolves
    it), and `keyed_with` is exactly what the recorder writes for the same settings."""

    def request(trace: str, call: str) -> Request:
        body = {"model": "m", "metadata": {"trace_id": trace}, "messages": [{"tool_call_id": call}]}
        return Request("POST", API, json.dumps(body).encode(), {"content-type": "application/json", "x-tenant": "t1"})

    settings = importer.import_settings(
        key_headers=["X-Tenant"], ignore=["metadata.trace_id"], ignore_values=["pydantic-ai"]
    )
    first, second = f"pyd_ai_{'a' * 32}", f"pyd_ai_{'b' * 32}"
    outcomes = run_plan(
        tmp_path,
        vcr_text([(request("1", first), response(answer("x"))), (request("2", second), response(answer("x")))]),
        settings=settings,
    )
    assert [o.action for o in outcomes] == ["imported", "repeat"]  # the trace id and the made-up id are not keyed
    cassette = json.loads(outcomes[0].data)
    recipe = make_recipe(["metadata.trace_id"], [*DEFAULT_KEY_HEADERS, "x-tenant"], ["pydantic-ai"])
    assert cassette["keyed_with"] == recipe.to_json()
    assert cassette["keyed_with"]["key_headers"] == [*DEFAULT_KEY_HEADERS, "x-tenant"]
    assert cassette["keyed_with"]["ignore_values"] == [r"pyd_ai_[0-9a-f]{32}"]  # the preset's expression
    assert cassette["request"]["headers"] == {"x-tenant": "t1"}
    facts = RequestFacts("POST", "https", "api.openai.com", 443, "/v1/chat/completions", [], {"x-tenant": "t1"},
                         request("1", first).body, "application/json")  # fmt: skip
    paths, patterns = parse_ignore_paths(["metadata.trace_id"]), parse_value_patterns(["pydantic-ai"])
    assert cassette["key"] == key_of(identity(facts, recipe.key_headers, paths, patterns))


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"key_headers": ["authorization"]}, "--key-header: 'authorization' carries a credential"),
        ({"ignore_values": ["("]}, "--ignore-value: value pattern '(' is not a regular expression"),
        ({"ignore": ["messages..id"]}, "--ignore: invalid ignore path 'messages..id'"),
        ({"record_statuses": ["2xy"]}, "--record-status: '2xy' is not a status"),
        ({"redacted_url": "api.example.com/v1"}, "--redacted-url: 'api.example.com/v1' is not an http(s) URL"),
        ({"redacted_headers": ["anthropic-version"]}, "--redacted-header: 'anthropic-version' is not NAME=VALUE"),
    ],
)
def test_bad_settings_name_the_flag_and_the_value(arguments, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        importer.import_settings(**arguments)


def test_a_redaction_that_changes_the_request_is_flagged_as_the_recorder_flags_it(tmp_path):
    text = vcr_text([(chat_request("mail me at me@example.com"), response(answer("x")))])
    [outcome] = run_plan(tmp_path, text, settings=importer.import_settings(redact_specs=["pii"]))
    cassette = json.loads(outcome.data)
    assert cassette["request"]["body"]["messages"][0]["content"] == "mail me at [REDACTED:email]"
    assert cassette["keyed_with"]["request_redacted"] is True
    [plain] = run_plan(tmp_path, vcr_text([(chat_request("hello"), response(answer("x")))]))
    assert "request_redacted" not in json.loads(plain.data)["keyed_with"]


def test_recorded_at_comes_from_the_recording_never_from_the_clock(tmp_path):
    dated = response(answer("x"), date="Tue, 04 Mar 2025 05:06:07 GMT")
    outcomes = run_plan(tmp_path, vcr_text([(chat_request("a"), dated), (chat_request("b"), response(answer("x")))]))
    assert [json.loads(o.data)["recorded_at"] for o in outcomes] == ["2025-03-04T05:06:07+00:00", importer.UNDATED]


def test_pydantic_ai_parsed_bodies_and_old_httpx_responses_are_read(tmp_path):
    text = yamlserializer.serialize(
        {
            "version": 1,
            "interactions": [
                {
                    "request": {"method": "POST", "uri": API, "headers": {"content-type": ["application/json"]},
                                "parsed_body": {"model": "m", "messages": []}},
                    "response": {"status": {"code": 200, "message": "OK"},
                                 "headers": {"content-type": ["application/json"]}, "parsed_body": {"id": "p"}},
                },
                {
                    "request": {"method": "POST", "uri": API, "body": '{"model": "old"}',
                                "headers": {"content-type": ["application/json"]}},
                    "response": {"status_code": 200, "http_version": "HTTP/1.1",
                                 "headers": {"content-type": ["application/json"]}, "content": '{"id": "old"}'},
                },
            ],
        }
    ).encode()  # fmt: skip
    bodies = [(c["request"]["body"], c["response"]["body"]) for c in written(run_plan(tmp_path, text)).values()]
    assert bodies == [({"model": "m", "messages": []}, {"id": "p"}), ({"model": "old"}, {"id": "old"})]


CASSETTER_FILE = """\
version: 1
interactions:
- request:
    method: POST
    uri: https://api.openai.com/v1/chat/completions
    headers:
      content-type:
      - application/json
    body:
      type: json
      content:
        model: gpt-4o-mini
        messages:
        - role: user
          content: hi
  response:
    status: 200
    headers:
      content-type:
      - application/json
    body:
      type: json
      content:
        choices:
        - message:
            role: assistant
            content: hello
  recorded_at: 2026-03-06T19:45:41.733856+00:00
- request:
    method: POST
    uri: https://api.openai.com/v1/chat/completions
    headers:
      content-type:
      - application/json
    body:
      type: json
      content:
        model: gpt-4o-mini
        messages:
        - role: user
          content: stream
  response:
    status: 200
    headers:
      content-type:
      - text/event-stream
    body:
      type: text
      content: "data: {\\"x\\": 1}\\n\\ndata: [DONE]\\n\\n"
  recorded_at: '2026-03-06T19:45:42Z'
- request:
    method: GET
    uri: https://api.openai.com/v1/files/file-1/content
    headers: {}
    body:
      type: none
  response:
    status: 200
    headers:
      content-type:
      - application/octet-stream
    body:
      type: binary
      content: 00ff
        0102
"""


def test_cassetter_files_are_read_with_their_typed_bodies_and_the_proxys_keys(tmp_path):
    """pydantic-ai records with cassetter: VCR's layout, a numeric status and `{type, content}` bodies."""
    outcomes = run_plan(tmp_path, CASSETTER_FILE.encode())
    assert [o.action for o in outcomes] == ["imported"] * 3
    chat, stream, download = (json.loads(o.data) for o in outcomes)
    [same] = run_plan(tmp_path, vcr_text([(chat_request("hi"), response(answer("hello")))]))
    assert chat["key"] == json.loads(same.data)["key"]  # the key of the same request recorded by VCR.py
    assert chat["response"]["body"] == {"choices": [{"message": {"role": "assistant", "content": "hello"}}]}
    assert stream["response"]["body_format"] == "events"
    assert [e["text"] for e in stream["response"]["body"]] == ['data: {"x": 1}\n\n', "data: [DONE]\n\n"]
    assert download["request"]["method"] == "GET" and download["response"]["body_format"] == "base64"
    assert base64.b64decode(download["response"]["body"]) == bytes([0, 255, 1, 2])  # hex, the folded line joined
    assert [c["recorded_at"] for c in (chat, stream)] == ["2026-03-06T19:45:41+00:00", "2026-03-06T19:45:42+00:00"]


def test_a_cassetter_body_of_an_unknown_type_is_invalid_and_named(tmp_path):
    text = CASSETTER_FILE.replace("type: binary", "type: protobuf").encode()
    outcomes = run_plan(tmp_path, text)
    assert [o.action for o in outcomes] == ["imported", "imported", "invalid"]
    assert "'protobuf'" in outcomes[2].detail


def test_har_entries_without_a_response_or_a_body_are_reported(tmp_path):
    def entry(response: dict) -> dict:
        return {"request": {"method": "POST", "url": API, "headers": []}, "response": response}

    har = {"log": {"entries": [entry({"status": 0}), entry({"status": 200, "content": {"size": 40}})]}}
    outcomes = run_plan(tmp_path, json.dumps(har).encode())
    assert [o.action for o in outcomes] == ["skipped", "invalid"]
    assert "status 0" in outcomes[0].detail and "content.text" in outcomes[1].detail


def test_reimporting_a_file_with_new_options_or_content_updates_what_its_earlier_import_wrote(tmp_path):
    def request() -> Request:
        return chat_request("mail me at me@example.com")

    text = vcr_text([(request(), response(answer("one")))])
    [first] = run_plan(tmp_path, text)
    write_atomic(tmp_path / first.relative, first.data)
    assert run_plan(tmp_path, text)[0].action == "unchanged"
    redacting = importer.import_settings(redact_specs=["pii"])
    [updated] = run_plan(tmp_path, text, settings=redacting)  # the e-mail address must not stay on disk
    assert updated.action == "updated" and b"[REDACTED:email]" in updated.data and b"me@example.com" not in updated.data
    assert updated.relative == first.relative  # redaction never changes the key
    rerecorded = vcr_text([(request(), response(answer("two")))])
    assert run_plan(tmp_path, rerecorded)[0].action == "updated"  # the file was re-recorded with VCR


def test_a_har_entry_time_comes_from_started_date_time_else_the_date_header(tmp_path):
    def entry(started: str | None) -> dict:
        return {
            "startedDateTime": started,
            "request": {"method": "POST", "url": API, "headers": [], "postData": {"text": f'{{"n": "{started}"}}'}},
            "response": {"status": 200, "headers": [{"name": "Date", "value": "Tue, 04 Mar 2025 05:06:07 GMT"}],
                         "content": {"mimeType": "application/json", "text": "{}"}},
        }  # fmt: skip

    har = {"log": {"entries": [entry("2024-01-02T03:04:05.678+01:00"), entry("yesterday"), entry(None)]}}
    times = [json.loads(o.data)["recorded_at"] for o in run_plan(tmp_path, json.dumps(har).encode())]
    assert times == ["2024-01-02T02:04:05+00:00", "2025-03-04T05:06:07+00:00", "2025-03-04T05:06:07+00:00"]


def test_an_ndjson_stream_is_stored_as_one_event_per_line(tmp_path):
    lines = b'{"message": {"content": "hi"}, "done": false}\n{"done": true}\n'
    ollama = Request(
        "POST", "http://localhost:11434/api/chat", b'{"model": "llama3"}', {"content-type": "application/json"}
    )
    reply = {**response(lines), "headers": {"content-type": ["application/x-ndjson"]}}
    settings = importer.import_settings(hosts=["localhost"])
    [outcome] = run_plan(tmp_path, vcr_text([(ollama, reply)]), settings=settings)
    assert outcome.relative.startswith("localhost_11434/api/chat/")
    assert json.loads(outcome.data)["response"]["body"] == [
        {"ms": 0, "text": '{"message": {"content": "hi"}, "done": false}\n'},
        {"ms": 0, "text": '{"done": true}\n'},
    ]


def test_har_bodies_are_taken_as_decoded_whatever_content_encoding_says(tmp_path, monkeypatch):
    """Browsers, Polly.js and mitmproxy write the decoded body and keep the `content-encoding: br` header;
    decoding it again must not be tried (nor need brotli)."""
    monkeypatch.setitem(importer._DECODERS, "br", lambda data: pytest.fail("a HAR body was decoded again"))
    entry = {
        "request": {"method": "POST", "url": API, "headers": [{"name": "content-encoding", "value": "br"},
                                                              {"name": "content-type", "value": "application/json"}],
                    "postData": {"mimeType": "application/json", "text": '{"model": "m"}'}},
        "response": {"status": 200, "headers": [{"name": "content-encoding", "value": "br"},
                                                {"name": "content-type", "value": "application/json"}],
                     "content": {"mimeType": "application/json", "text": '{"id": "x"}'}},
    }  # fmt: skip
    [outcome] = run_plan(tmp_path, json.dumps({"log": {"entries": [entry]}}).encode())
    cassette = json.loads(outcome.data)
    assert (cassette["request"]["body"], cassette["response"]["body"]) == ({"model": "m"}, {"id": "x"})


def test_a_vcr_body_in_an_encoding_whose_package_is_missing_is_reported_not_guessed(tmp_path, monkeypatch):
    def missing(data: bytes) -> bytes:
        raise importer.MissingDecoder("the body is br-encoded and the `brotli` package is not installed")

    monkeypatch.setitem(importer._DECODERS, "br", missing)
    text = vcr_text([(chat_request("q"), response(b"\x8b\x00", **{"content-encoding": "br"}))])
    [outcome] = run_plan(tmp_path, text)
    assert outcome.action == "invalid" and "brotli" in outcome.detail


def test_the_test_scope_files_each_interaction_under_its_tests_folder_and_keeps_sequences(tmp_path):
    same = vcr_text([(chat_request("q"), response(answer("one"))), (chat_request("q"), response(answer("two")))])
    other = vcr_text([(chat_request("q"), response(answer("three")))])
    test_scope = importer.import_settings(scope="test")
    files = [
        importer.RecordingFile("a.yaml", *read_recording(same, "a.yaml"), test_ids=("tests/test_a.py::test_a",)),
        importer.RecordingFile("b.yaml", *read_recording(other, "b.yaml"), test_ids=("tests/test_b.py::test_b",)),
    ]
    outcomes = importer.plan(files, test_scope, tmp_path)
    assert [o.action for o in outcomes] == ["imported"] * 3  # the same request, three answers: no collision
    key = json.loads(outcomes[0].data)["key"]
    endpoint = "api.openai.com/v1/chat/completions"
    assert [o.relative for o in outcomes] == [
        f"tests/tests/test_a.py/test_a/{endpoint}/{key}.json",
        f"tests/tests/test_a.py/test_a/{endpoint}/{key}.2.json",
        f"tests/tests/test_b.py/test_b/{endpoint}/{key}.json",
    ]
    lost = importer.RecordingFile("c.yaml", *read_recording(other, "c.yaml"), scope_problem="no test module defines c")
    [skipped] = importer.plan([lost], test_scope, tmp_path)
    assert skipped.action == "skipped" and skipped.detail == "test scope: no test module defines c"


def test_import_keys_with_the_framework_presets_and_the_path_scoped_default_hosts(tmp_path):
    """The presets are on by default as in `cassette run`, so an openai-agents recording keys as the proxy keys
    it; `chatgpt.com` is a default host for Codex's paths only."""

    def agents_request(run: str, url: str = "https://api.openai.com/v1/responses") -> Request:
        body = {"model": "gpt-5", "input": "hi", "prompt_cache_key": f"agents-sdk:run:{run * 32}"}
        return Request("POST", url, json.dumps(body).encode(), {"content-type": "application/json"})

    text = vcr_text([(agents_request("a"), response(answer("x"))), (agents_request("b"), response(answer("x")))])
    assert [o.action for o in run_plan(tmp_path, text)] == ["imported", "repeat"]  # one made-up value: one key
    without = importer.import_settings(frameworks=())
    assert [o.action for o in run_plan(tmp_path, text, settings=without)] == ["imported", "imported"]
    codex = vcr_text(
        [
            (agents_request("c", "https://chatgpt.com/backend-api/codex/responses"), response(answer("x"))),
            (agents_request("c", "https://chatgpt.com/other"), response(answer("x"))),
        ]
    )
    assert [o.action for o in run_plan(tmp_path, codex)] == ["imported", "skipped"]


def test_a_request_whose_name_is_too_long_to_store_is_placed_where_the_proxy_looks_for_it(tmp_path):
    url = "https://api.openai.com/v1" + "".join("/" + chr(97 + i % 26) * 200 for i in range(25))  # 5 KB
    [outcome] = run_plan(tmp_path, vcr_text([(chat_request("hi", url), response(answer("hello")))]))
    key = json.loads(outcome.data)["key"]
    full = relative_name("https", "api.openai.com", 443, url.split("api.openai.com", 1)[1], key)
    assert len(full) > MAX_NAME and outcome.relative == short_name(full)  # as the addon names it (location.py)
