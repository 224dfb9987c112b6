"""The import conversion on its own (addon/importer.py): cassettes serialised by VCR.py's own serializers, HAR
entries, and the rules the proxy applies when it records (key, sequences, collisions, redaction, dates)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import brotli
import pytest
from cassette_proxy.core import importer
from cassette_proxy.core.atomic_write import write_atomic
from cassette_proxy.core.cassette_file import dumps
from cassette_proxy.core.key import RequestFacts, identity, key_of, parse_ignore_paths
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


def run_plan(tmp_path: Path, *texts: bytes, settings=SETTINGS, replace: bool = False) -> list[importer.Outcome]:
    files = []
    for n, text in enumerate(texts):
        kind, entries = importer.read_recording(text, f"file{n}.yaml")
        files.append(importer.RecordingFile(f"file{n}.yaml", kind, entries))
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
    assert cassette["key"] == key_of(identity(facts, ("anthropic-version", "anthropic-beta", "openai-beta")))
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
    assert "file0.yaml#1 holds a different answer to the same request" in outcomes[2].detail


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


def test_out_of_scope_hosts_and_error_statuses_are_skipped_unless_asked(tmp_path):
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
    assert "status 500" in skipped[1].detail
    asked = importer.import_settings(hosts=["*"], keep_errors=True)
    assert [o.action for o in run_plan(tmp_path, text, settings=asked)] == ["imported", "imported"]


def test_ignore_key_headers_and_redaction_follow_the_suites_options(tmp_path):
    def request(trace: str) -> Request:
        body = json.dumps({"model": "m", "metadata": {"trace_id": trace}, "messages": [{"content": "me@example.com"}]})
        return Request("POST", API, body.encode(), {"content-type": "application/json", "x-tenant": "t1"})

    settings = importer.import_settings(ignore=["metadata.trace_id"], key_headers=["x-tenant"], redact_specs=["pii"])
    outcomes = run_plan(
        tmp_path,
        vcr_text([(request("1"), response(answer("x"))), (request("2"), response(answer("x")))]),
        settings=settings,
    )
    assert [o.action for o in outcomes] == ["imported", "repeat"]  # the trace id is not in the key
    cassette = json.loads(outcomes[0].data)
    assert cassette["request"]["headers"] == {"x-tenant": "t1"}
    assert cassette["request"]["body"]["messages"][0]["content"] == "[REDACTED:email]"
    real = RequestFacts("POST", "https", "api.openai.com", 443, "/v1/chat/completions", [], {"x-tenant": "t1"},
                        request("1").body, "application/json")  # fmt: skip
    assert cassette["key"] == key_of(identity(real, ["x-tenant"], parse_ignore_paths(["metadata.trace_id"])))


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


def test_a_cassette_with_code_running_yaml_tags_is_refused():
    text = b"interactions:\n- !!python/object/apply:os.system ['echo owned']\nversion: 1\n"
    with pytest.raises(importer.UnreadableRecording, match="neither JSON nor YAML a VCR cassette can hold"):
        importer.read_recording(text, "evil.yaml")


@pytest.mark.parametrize(
    ("text", "kind", "message"),
    [
        (b'{"hello": 1}', "auto", 'not a VCR cassette \\("interactions": \\[...\\]\\) or a HAR file'),
        (b'{"log": {"entries": []}}', "vcr", r"not a VCR cassette .* \(it looks like har\)"),
        (b"\xff\xfe", "auto", "not UTF-8 text"),
    ],
)
def test_files_that_are_not_recordings_say_what_was_expected(text, kind, message):
    with pytest.raises(importer.UnreadableRecording, match=message):
        importer.read_recording(text, "f.json", kind)


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
