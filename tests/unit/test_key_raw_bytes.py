"""A request we cannot read as text still gets a key: from its raw bytes, deterministically, never an exception.

An exception inside the `request` hook makes mitmproxy forward the request
upstream, so a key that raises is a leak in replay mode. Hosts are keyed as DNS
sees them (`API.OpenAI.com.` is `api.openai.com`); credential query parameters
(presigned and SAS URLs included) are never part of the key or the stored URL. Such requests sent byte for byte
through a real mitmdump: test_bad_input.py::test_a_request_not_readable_as_text_records_and_replays_and_is_never_forwarded_in_replay.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

import pytest
from cassette_proxy.core.files.location import relative_name
from cassette_proxy.core.keys.body import multipart_parts
from cassette_proxy.core.keys.key import RequestFacts, identity, request_key
from cassette_proxy.core.keys.url import normal_host, origin, public_query, public_url
from hypothesis import given
from hypothesis import strategies as st


def from_wire(raw: bytes) -> str:
    """How mitmproxy hands a request's bytes to the addon: UTF-8, with `surrogateescape` for the rest."""
    return raw.decode("utf-8", "surrogateescape")


def request(
    path: str = "/v1/chat/completions", query=(), headers=None, body=b"", content_type="", host="api.openai.com"
):
    return RequestFacts("POST", "https", host, 443, path, list(query), headers or {}, body, content_type)


@given(
    path=st.binary(max_size=60),
    raw_query=st.binary(max_size=60),
    query=st.lists(st.tuples(st.binary(max_size=10), st.binary(max_size=10)), max_size=4),
    headers=st.dictionaries(st.binary(min_size=1, max_size=12), st.binary(max_size=30), max_size=4),
    body=st.binary(max_size=200),
    content_type=st.binary(max_size=60) | st.sampled_from([b"multipart/form-data; boundary=\xff", b"multipart/x"]),
    text=st.text(st.characters(exclude_categories=()), max_size=20),
)
def test_any_bytes_in_path_query_headers_and_body_give_a_key_and_never_raise(
    path, raw_query, query, headers, body, content_type, text
):
    decoded_query = parse_qsl(from_wire(raw_query), keep_blank_values=True, errors="surrogateescape")
    facts = request(
        path="/" + from_wire(path) + text,
        query=[*decoded_query, *((from_wire(k), from_wire(v)) for k, v in query), (text, text)],
        headers={from_wire(k).lower(): from_wire(v) for k, v in headers.items()} | {"x-text": text},
        body=body,
        content_type=from_wire(content_type),
        host=text or "api.openai.com",
    )
    key_headers = [*(from_wire(k) for k in headers), "x-text"]
    identity(facts, key_headers)
    key = request_key(facts, key_headers)
    assert re.fullmatch(r"[0-9a-f]{32}", key)
    assert request_key(facts, key_headers) == key  # deterministic
    relative_name(facts.scheme, facts.host, facts.port, facts.path, key)


def test_a_query_that_is_not_utf8_is_keyed_and_shown_by_its_raw_bytes():
    ff, fe = request(query=[("x", from_wire(b"\xff"))]), request(query=[("x", from_wire(b"\xfe"))])
    assert public_url(ff) == "https://api.openai.com/v1/chat/completions?x=%FF"
    assert request_key(ff) != request_key(fe)


def test_a_multipart_content_type_holding_a_raw_0xff_is_keyed_by_the_body_bytes():
    content_type = from_wire(b"multipart/form-data; boundary=\xff")
    body = b"--\xff\r\ncontent-disposition: form-data; name=a\r\n\r\n1\r\n--\xff--\r\n"
    assert multipart_parts(body, content_type) is None or isinstance(multipart_parts(body, content_type), list)
    ident = identity(request(body=body, content_type=content_type))
    assert ident["body"] is not None
    assert request_key(request(body=body, content_type=content_type)) != request_key(
        request(body=body + b"x", content_type=content_type)
    )


@pytest.mark.parametrize(
    ("host", "normal"),
    [
        ("API.OpenAI.com.", "api.openai.com"),
        ("api.openai.com", "api.openai.com"),
        ("bücher.example", "xn--bcher-kva.example"),
        ("BÜCHER.example.", "xn--bcher-kva.example"),
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "::1"),
        ("a..ü", "a..ü"),  # IDNA refuses an empty label: left as it is, never an exception
        ("ü" * 70 + ".example", "ü" * 70 + ".example"),  # a label over 63 characters
        (".", "."),
        ("\udcff.example", "\udcff.example"),
    ],
)
def test_hosts_are_normalised_as_dns_sees_them(host, normal):
    assert normal_host(host) == normal


def test_a_trailing_dot_or_upper_case_host_gets_the_same_key_and_folder():
    plain, dotted = request(host="api.openai.com"), request(host="API.OpenAI.com.")
    assert request_key(plain) == request_key(dotted)
    assert origin("https", "API.OpenAI.com.", 443) == "https://api.openai.com"
    key = request_key(plain)
    assert relative_name("https", "API.OpenAI.com.", 443, "/v1/x", key) == relative_name(
        "https", "api.openai.com", 443, "/v1/x", key
    )
    assert relative_name("https", "bücher.example", 443, "/", key).startswith("xn--bcher-kva.example/")


@given(host=st.text(st.characters(exclude_categories=()), max_size=80))
def test_normal_host_never_raises(host):
    assert isinstance(normal_host(host), str)


PRESIGNED = {
    "aws": "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAFAKEFAKEFAKE1234%2F20250101%2Fus-east-1%2Fs3"
    "%2Faws4_request&X-Amz-Date=20250101T000000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host"
    "&X-Amz-Security-Token=FAKEsessionTOKEN&X-Amz-Signature=0123456789abcdef",
    "gcs": "X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=fake%40project.iam.gserviceaccount.com"
    "&X-Goog-Date=20250101T000000Z&X-Goog-Expires=900&X-Goog-SignedHeaders=host&X-Goog-Signature=abcdef0123",
    "azure-sas": "sv=2021-08-06&ss=b&srt=o&sp=r&se=2025-01-01T00%3A00%3A00Z&st=2024-12-31&spr=https&sig=FAKE%2Bsig%3D",
    "s3-v2": "AWSAccessKeyId=AKIAFAKEFAKEFAKE1234&Expires=1700000000&Signature=FAKEv2sig",
    "firebase": "auth=FAKEfirebaseTOKEN",
    "oauth": "access_token=FAKEaccess&refresh_token=FAKErefresh",
    "keys": "key=FAKEgeminiKEY&api_key=FAKE1&apikey=FAKE2&token=FAKE3&client_secret=FAKE4",
}


@pytest.mark.parametrize("name", sorted(PRESIGNED))
def test_presigned_and_sas_credentials_are_neither_keyed_nor_stored(name):
    query = parse_qsl(PRESIGNED[name] + "&page=2", keep_blank_values=True)
    url = public_url(request(query=query))
    assert url == "https://api.openai.com/v1/chat/completions?Expires=1700000000&page=2" or url.endswith("?page=2")
    for fake in ("FAKE", "AKIA", "fake%40", "0123456789abcdef"):
        assert fake not in url
    other = parse_qsl(PRESIGNED[name].replace("FAKE", "OTHER").replace("2025", "2026") + "&page=2")
    assert request_key(request(query=query)) == request_key(request(query=other))


def test_sas_fields_count_outside_a_sas_url():
    """`sp`, `se`, `st` are ordinary parameters of some APIs: dropped only next to `sig`."""
    assert public_query([("sp", "1"), ("st", "2")]) == [("sp", "1"), ("st", "2")]
    assert public_query([("sp", "1"), ("sig", "x")]) == []
