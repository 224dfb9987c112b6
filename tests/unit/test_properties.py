"""Property-based tests: random JSON bodies, bytes, headers and paths through the key and the cassette file format.

Whatever a client sends, computing the key never raises, the cassette written
for it reads back to exactly what was stored, and its path stays inside the
cassette folder.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath

from cassette_proxy.core.files.atomic_write import write_atomic
from cassette_proxy.core.files.cassette_file import (
    DROPPED_HEADERS,
    body_fields,
    decode_body,
    dumps,
    load,
    new_cassette,
    stored_headers,
)
from cassette_proxy.core.files.location import relative_name
from cassette_proxy.core.keys.key import RequestFacts, identity, key_of
from hypothesis import given
from hypothesis import strategies as st

# Strings as JSON can carry them: any code point, lone surrogates included (`"\ud800"` parses to one).
any_text = st.text(st.characters(exclude_categories=()), max_size=30)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | any_text,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(any_text, children, max_size=5),
    max_leaves=25,
)
# What HTTP can carry in a field value: a stored CR, LF or NUL is refused on load (test_cassette_validation.py).
header_values = st.text(st.characters(exclude_categories=(), exclude_characters="\r\n\x00"), max_size=30)
header_names = st.from_regex(r"[a-z][a-z0-9-]{0,15}", fullmatch=True)
content_types = st.sampled_from(
    ["application/json", "application/json; charset=utf-8", "text/plain", "application/octet-stream", "", "x/ndjson"]
)


def facts(body: bytes, content_type: str = "application/json", headers: dict | None = None) -> RequestFacts:
    return RequestFacts("POST", "https", "api.openai.com", 443, "/v1/chat/completions", [], headers or {}, body,
                        content_type)  # fmt: skip


def round_trip(tmp: Path, request_body: bytes, content_type: str, headers: list[tuple[str, str]]) -> dict:
    """Store a request and a response with this body the way the addon does, write the file, read it back."""
    ident = identity(facts(request_body, content_type))
    key = key_of(ident)
    response = {
        "status": 200,
        "headers": stored_headers(headers),
        **body_fields(request_body, content_type),
    }
    request = {"method": "POST", "url": ident["url"], "headers": {}, **body_fields(request_body, content_type)}
    path = tmp / relative_name("https", "api.openai.com", 443, "/v1/chat/completions", key)
    write_atomic(path, dumps(new_cassette(key, request, response, {})))
    loaded = load(path)
    assert loaded["key"] == key
    return loaded


@given(value=json_values)
def test_json_body_round_trips_exactly_through_the_cassette(tmp_path_factory, value):
    body = json.dumps(value).encode()
    loaded = round_trip(tmp_path_factory.mktemp("p"), body, "application/json", [])
    recorded = loaded["response"]
    assert recorded["body_format"] == "json"
    assert json.loads(decode_body("json", recorded["body"])) == value
    assert loaded["request"]["body"] == value


@given(body=st.binary(max_size=300), content_type=content_types)
def test_any_bytes_round_trip_exactly_through_the_cassette(tmp_path_factory, body, content_type):
    recorded = round_trip(tmp_path_factory.mktemp("p"), body, content_type, [])["response"]
    replayed = decode_body(recorded["body_format"], recorded["body"])
    if recorded["body_format"] == "json":
        assert json.loads(replayed) == json.loads(body)
    else:
        assert replayed == body


@given(headers=st.lists(st.tuples(header_names | st.sampled_from(sorted(DROPPED_HEADERS)), header_values), max_size=8))
def test_response_headers_round_trip_and_secrets_are_dropped(tmp_path_factory, headers):
    loaded = round_trip(tmp_path_factory.mktemp("p"), b"{}", "application/json", headers)
    kept = loaded["response"]["headers"]
    assert kept == stored_headers(headers)
    assert not set(kept) & DROPPED_HEADERS
    for name, value in headers:
        if name not in DROPPED_HEADERS:
            assert value in kept[name]


@given(value=json_values, seed=st.randoms(use_true_random=False))
def test_key_ignores_key_order_and_whitespace(value, seed):
    def shuffled(v):
        if isinstance(v, dict):
            items = [(k, shuffled(x)) for k, x in v.items()]
            seed.shuffle(items)
            return dict(items)
        return [shuffled(x) for x in v] if isinstance(v, list) else v

    compact = json.dumps(value, separators=(",", ":")).encode()
    spaced = json.dumps(shuffled(value), indent=3).encode()
    assert key_of(identity(facts(compact))) == key_of(identity(facts(spaced)))


@given(body=st.binary(max_size=200), content_type=content_types,
       headers=st.dictionaries(header_names, any_text, max_size=5), key_headers=st.lists(header_names, max_size=3))  # fmt: skip
def test_key_of_any_request_is_32_hex_and_never_raises(body, content_type, headers, key_headers):
    key = key_of(identity(facts(body, content_type, headers), key_headers))
    assert re.fullmatch(r"[0-9a-f]{32}", key)


@given(host=any_text, path=any_text, port=st.integers(1, 65535), scheme=st.sampled_from(["http", "https"]))
def test_cassette_path_from_any_host_and_path_stays_inside_the_folder(host, path, port, scheme):
    name = relative_name(scheme, host, port, path, "0" * 32)
    relative = PurePosixPath(name)
    assert str(relative) == name  # already in normal form: no empty or `.` segment for a path to collapse
    assert not relative.is_absolute()
    assert ".." not in relative.parts and "." not in relative.parts
    root = Path("/cassettes")
    assert (root / relative).resolve().is_relative_to(root)
    assert relative.name == f"{'0' * 32}.json"
    assert all("/" not in part and "\\" not in part and "\x00" not in part for part in relative.parts)
