"""The cassette file: layout, format round trip, atomic writes, validation. Pure logic, no proxy."""

import json
from pathlib import PurePosixPath

import pytest
from cassette_proxy.core.files import atomic_write
from cassette_proxy.core.files.atomic_write import write_atomic
from cassette_proxy.core.files.cassette_file import (
    body_fields,
    decode_body,
    dumps,
    large_json_as_text,
    load,
    stored_headers,
)
from cassette_proxy.core.files.location import relative_name
from cassette_proxy.core.files.safe_read import CassetteError
from cassette_proxy.core.workers.replay_cache import ReplayCache
from hypothesis import given
from hypothesis import strategies as st
from samples import SAMPLE_KEY, minimal

KEY = SAMPLE_KEY
cassette = minimal


def test_layout_groups_by_host_and_path():
    assert relative_name("https", "API.OpenAI.com", 443, "/v1/chat/completions", KEY) == (
        f"api.openai.com/v1/chat/completions/{KEY}.json"
    )
    assert relative_name("http", "localhost", 11434, "/api/chat", KEY) == f"localhost_11434/api/chat/{KEY}.json"


@pytest.mark.parametrize(
    "path", ["/../../etc/passwd", "/v1/../../x", "/./.././", "/a/%2e%2e/b", "/v1beta/models/g:gen"]
)
def test_paths_built_from_request_data_stay_inside_the_folder(path, tmp_path):
    relative = PurePosixPath(relative_name("https", "../evil", 443, path, KEY))
    resolved = (tmp_path / relative).resolve()
    assert resolved.is_relative_to(tmp_path)
    assert ".." not in relative.parts


def test_a_key_that_is_not_hex_is_refused():
    with pytest.raises(ValueError):
        relative_name("https", "h", 443, "/", "../../x")


@given(st.binary(max_size=200), st.sampled_from(["application/json", "text/plain", "application/octet-stream", ""]))
def test_body_round_trip_is_exact_for_text_and_bytes(body, content_type):
    fields = body_fields(body, content_type)
    decoded = decode_body(fields["body_format"], fields["body"])
    if fields["body_format"] == "json":
        assert json.loads(decoded) == json.loads(body)
    else:
        assert decoded == body


def test_json_bodies_are_stored_parsed_for_review():
    assert body_fields(b'{"a": [1, 2]}', "application/json; charset=utf-8") == {
        "body_format": "json",
        "body": {"a": [1, 2]},
    }
    assert body_fields(b"123", "text/plain")["body_format"] == "text"
    assert body_fields(b"\xff\xfe", "application/octet-stream")["body_format"] == "base64"


def test_secret_and_hop_by_hop_response_headers_are_dropped():
    kept = stored_headers(
        [("Content-Type", "application/json"), ("Set-Cookie", "a=b"), ("OpenAI-Organization", "org-x"),
         ("Content-Length", "3"), ("Content-Encoding", "gzip"), ("x-request-id", "r1"), ("Vary", "a"), ("vary", "b")]
    )  # fmt: skip
    assert kept == {"content-type": "application/json", "x-request-id": "r1", "vary": "a, b"}


def test_file_round_trip(tmp_path):
    path = tmp_path / "a" / f"{KEY}.json"
    write_atomic(path, dumps(cassette()))
    assert load(path) == cassette() | {"recorded_at": load(path)["recorded_at"]}
    assert path.read_text().startswith("{\n  ")  # pretty-printed, reviewable


def test_atomic_write_leaves_no_temp_file_and_replaces_whole(tmp_path):
    path = tmp_path / f"{KEY}.json"
    write_atomic(path, b"old")
    write_atomic(path, b"new")
    assert path.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_a_failed_write_keeps_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / f"{KEY}.json"
    write_atomic(path, b"old")

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_write.os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        write_atomic(path, b"new")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"{not json", "invalid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[]", "not a JSON object"),
        (json.dumps({**cassette(), "cassette_format": 99}).encode(), "cassette_format is 99"),
        (json.dumps({k: v for k, v in cassette().items() if k != "response"}).encode(), "'response'"),
        (json.dumps({**cassette(), "response": {"headers": {}}}).encode(), "response.status"),
        (json.dumps(cassette(body_format="mp3")).encode(), "unknown response.body_format"),
        (json.dumps(cassette(headers=[["a", "b"]])).encode(), "response.headers"),
    ],
)
def test_unusable_files_name_the_file_and_the_problem(tmp_path, content, problem):
    path = tmp_path / f"{KEY}.json"
    path.write_bytes(content)
    with pytest.raises(CassetteError) as error:
        load(path)
    assert problem in str(error.value)
    assert str(path) in str(error.value)


def test_the_replay_cache_rereads_a_rewritten_cassette(tmp_path):
    path = tmp_path / f"{KEY}.json"
    write_atomic(path, dumps(cassette(body={"answer": 1})))
    cache = ReplayCache()
    assert cache.load(path)[1] == b'{"answer": 1}'
    assert cache.load(path)[0] is cache.load(path)[0]  # parsed once
    write_atomic(path, dumps(cassette(body={"answer": 2})))  # another proxy re-records it
    assert cache.load(path)[1] == b'{"answer": 2}'


def test_the_replay_cache_refuses_a_body_that_does_not_match_its_format(tmp_path):
    path = tmp_path / f"{KEY}.json"
    path.write_text(json.dumps(cassette(body_format="base64", body="not base64!")))
    with pytest.raises(CassetteError, match="does not match its body_format"):
        ReplayCache().load(path)


def test_a_replay_carries_its_headers_as_wire_fields_with_the_body_length(tmp_path):
    path = tmp_path / f"{KEY}.json"
    write_atomic(path, dumps(cassette(headers={"content-type": "application/json", "x-request-id": "é"})))
    replay = ReplayCache().load(str(path))
    assert replay.body == b'{"ok": true}'
    assert replay.header_fields == (
        (b"content-type", b"application/json"),
        (b"x-request-id", "é".encode()),
        (b"content-length", b"12"),
    )


def test_a_header_http_cannot_carry_makes_the_cassette_unusable(tmp_path):
    path = tmp_path / f"{KEY}.json"
    path.write_text(json.dumps(cassette(headers={"x-note": "\ud800"})))  # a lone surrogate, as JSON allows
    with pytest.raises(CassetteError, match="cannot carry"):
        ReplayCache().load(str(path))


def test_the_replay_cache_stays_bounded(tmp_path):
    cache = ReplayCache(size=2)
    paths = [tmp_path / f"{i:032x}.json" for i in range(3)]
    for path in paths:
        write_atomic(path, dumps(cassette()))
        cache.load(path)
    assert len(cache._entries) == 2


def test_the_replay_cache_keeps_a_byte_budget_and_no_huge_body(tmp_path):
    cache = ReplayCache(max_bytes=4000)
    paths = []
    for i in range(5):
        path = tmp_path / f"{i:032x}.json"
        write_atomic(path, dumps(cassette(body_format="text", body=str(i) * 900)))
        paths.append(str(path))
        cache.load(str(path))
    assert cache.bytes <= 4000
    assert list(cache._entries) == paths[1:]  # the oldest made room
    huge = tmp_path / f"{9:032x}.json"
    write_atomic(huge, dumps(cassette(body_format="text", body="h" * 1001)))  # above a quarter of the budget
    assert cache.load(str(huge)).body == b"h" * 1001
    assert str(huge) not in cache._entries
    assert cache.bytes == sum(len(replay.body) for _, replay in cache._entries.values())


@given(st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=30))  # fmt: skip
def test_a_large_json_body_stored_as_text_replays_the_same_bytes(value):
    stored = cassette(body=value)
    as_text = large_json_as_text(stored, limit=0)
    assert as_text["response"]["body_format"] == "text"
    assert decode_body("text", as_text["response"]["body"]) == decode_body("json", value)
    assert stored["response"]["body_format"] == "json"  # the original is left as it was


def test_only_a_json_body_above_the_limit_is_stored_as_text():
    small = cassette(body={"a": "x" * 100})
    assert large_json_as_text(small, limit=200) is small
    assert large_json_as_text(cassette(body_format="text", body="y" * 500), limit=200)["response"]["body"] == "y" * 500
    assert large_json_as_text(cassette(body={"a": "x" * 300}), limit=200)["response"]["body_format"] == "text"
