"""The key: the request's identity. Pure logic, no proxy."""

import json
import random

import pytest
from cassette_proxy.core.keys.body import parse_ignore_paths
from cassette_proxy.core.keys.key import KeyCache, RequestFacts, header_key_value, identity, request_key
from cassette_proxy.core.keys.url import SAS_QUERY_PARAMS, SECRET_QUERY_PARAMS
from hypothesis import assume, given
from hypothesis import strategies as st

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, min_size=1, max_size=6)
# Objects three levels deep, drawn level by level: key order at every level is what the permutation and the key
# cache properties need, not bulk, and drawing `json_objects` (a recursive strategy that draws again whatever
# exceeds max_leaves) was most of their time.


def one_level_deeper(inner):
    return inner | st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)


json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
nested_objects = st.dictionaries(
    st.text(max_size=8), one_level_deeper(one_level_deeper(json_scalars)), min_size=1, max_size=4
)


def facts(body=b"", method="POST", host="api.openai.com", port=443, scheme="https", path="/v1/chat/completions",
          query=(), headers=None, content_type="application/json") -> RequestFacts:  # fmt: skip
    return RequestFacts(method, scheme, host, port, path, list(query), headers or {}, body, content_type)


def encoded(value) -> bytes:
    return json.dumps(value).encode()


def numbers_by_value(value):
    """The value with whole-number floats as integers: `1.0` and `1` are the same number to the key."""
    if isinstance(value, dict):
        return {k: numbers_by_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [numbers_by_value(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def shuffled(value, rng: random.Random):
    """The same JSON value with every object's keys in another order (arrays untouched)."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rng) for v in value]
    return value


@given(nested_objects, st.randoms())
def test_any_permutation_of_object_keys_gives_the_same_key(body, rng):
    assert request_key(facts(encoded(body))) == request_key(facts(encoded(shuffled(body, rng))))


@given(json_objects, st.text(max_size=8), json_values)
def test_any_changed_value_gives_another_key(body, name, value):
    changed = {**body, name: value}
    assume(json.dumps(numbers_by_value(changed), sort_keys=True) != json.dumps(numbers_by_value(body), sort_keys=True))
    assert request_key(facts(encoded(body))) != request_key(facts(encoded(changed)))


@given(st.lists(json_values, min_size=2, max_size=5, unique_by=lambda v: json.dumps(v, sort_keys=True)))
def test_array_order_counts(items):
    assert request_key(facts(encoded({"messages": items}))) != request_key(
        facts(encoded({"messages": list(reversed(items))}))
    )


@given(st.text(min_size=1, max_size=10), st.text(max_size=10), st.text(max_size=10))
def test_a_changed_query_value_gives_another_key(name, before, after):
    # Credential parameters (signatures, keys, SAS fields) are never keyed: a re-signed URL must replay.
    assume(before != after and name.lower() not in SECRET_QUERY_PARAMS | SAS_QUERY_PARAMS)
    assert request_key(facts(query=[(name, before)])) != request_key(facts(query=[(name, after)]))


@given(
    st.sampled_from(["anthropic-version", "anthropic-beta", "openai-beta"]), st.text(max_size=10), st.text(max_size=10)
)
def test_a_changed_key_header_gives_another_key(header, before, after):
    assume(header_key_value(header, before) != header_key_value(header, after))
    key_headers = ["anthropic-version", "anthropic-beta", "openai-beta"]
    assert request_key(facts(headers={header: before}), key_headers) != request_key(
        facts(headers={header: after}), key_headers
    )


@given(json_objects, json_values, json_values)
def test_ignored_paths_do_not_count(body, trace_a, trace_b):
    ignore = parse_ignore_paths(["metadata.trace_id", "messages.*.id"])
    a = {**body, "metadata": {"trace_id": trace_a, "user": "u"}, "messages": [{"id": trace_a, "content": "hi"}]}
    b = {**body, "metadata": {"trace_id": trace_b, "user": "u"}, "messages": [{"id": trace_b, "content": "hi"}]}
    assert request_key(facts(encoded(a)), ignore=ignore) == request_key(facts(encoded(b)), ignore=ignore)


def test_ignored_paths_leave_other_fields_counting():
    ignore = parse_ignore_paths(["messages.*.id"])
    a = {"messages": [{"id": 1, "content": "hi"}]}
    b = {"messages": [{"id": 1, "content": "hello"}]}
    assert request_key(facts(encoded(a)), ignore=ignore) != request_key(facts(encoded(b)), ignore=ignore)


def test_a_one_word_prompt_change_misses():
    a = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Say hello to the team"}]}
    b = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Say hello to the world"}]}
    assert request_key(facts(encoded(a))) != request_key(facts(encoded(b)))


def test_whitespace_and_key_order_in_json_text_do_not_count():
    a = b'{"model": "gpt-4o", "stream": false}'
    b = b'{\n  "stream":false,"model":"gpt-4o"\n}'
    assert request_key(facts(a)) == request_key(facts(b))


def test_stream_true_and_false_are_different_requests():
    assert request_key(facts(encoded({"stream": True}))) != request_key(facts(encoded({"stream": False})))


@pytest.mark.parametrize(
    "change",
    [
        {"method": "PUT"},
        {"host": "api.anthropic.com"},
        {"path": "/v1/completions"},
        {"scheme": "http", "port": 80},
        {"port": 8443},
    ],
)
def test_method_host_path_scheme_and_port_count(change):
    body = encoded({"model": "m"})
    assert request_key(facts(body)) != request_key(facts(body, **change))


def test_default_ports_are_left_out_so_explicit_and_implicit_agree():
    assert identity(facts(port=443))["url"] == "https://api.openai.com/v1/chat/completions"
    assert identity(facts(scheme="http", port=80))["url"] == "http://api.openai.com/v1/chat/completions"
    assert identity(facts(port=8443))["url"] == "https://api.openai.com:8443/v1/chat/completions"


def test_host_case_does_not_count():
    assert request_key(facts(host="API.OpenAI.com")) == request_key(facts(host="api.openai.com"))


def test_secret_query_parameters_are_neither_keyed_nor_shown():
    with_key = facts(query=[("key", "AIza-fake-secret"), ("alt", "sse")])
    other_key = facts(query=[("alt", "sse"), ("key", "another-secret")])
    assert request_key(with_key) == request_key(other_key)
    assert "secret" not in identity(with_key)["url"]
    assert identity(with_key)["url"].endswith("?alt=sse")


def test_query_parameter_order_does_not_count():
    assert request_key(facts(query=[("a", "1"), ("b", "2")])) == request_key(facts(query=[("b", "2"), ("a", "1")]))


def test_non_key_headers_do_not_count():
    a = facts(headers={"user-agent": "OpenAI/Python 1", "x-stainless-retry-count": "0", "authorization": "Bearer a"})
    b = facts(headers={"user-agent": "OpenAI/Python 2", "x-stainless-retry-count": "2", "authorization": "Bearer b"})
    assert request_key(a, ["anthropic-version"]) == request_key(b, ["anthropic-version"])


def test_header_names_are_case_insensitive():
    key_headers = ["Anthropic-Version"]
    assert request_key(facts(headers={"ANTHROPIC-VERSION": "2023-06-01"}), key_headers) == request_key(
        facts(headers={"anthropic-version": "2023-06-01"}), key_headers
    )


def multipart(boundary: str, text: str) -> tuple[bytes, str]:
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nfine-tune\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\n'
        f"Content-Type: application/jsonl\r\n\r\n{text}\r\n--{boundary}--\r\n"
    ).encode()
    return body, f"multipart/form-data; boundary={boundary}"


def test_multipart_is_keyed_on_parts_not_on_the_random_boundary():
    body_a, type_a = multipart("boundary-aaaa", '{"x": 1}')
    body_b, type_b = multipart("boundary-bbbb", '{"x": 1}')
    body_c, type_c = multipart("boundary-cccc", '{"x": 2}')
    assert request_key(facts(body_a, content_type=type_a)) == request_key(facts(body_b, content_type=type_b))
    assert request_key(facts(body_a, content_type=type_a)) != request_key(facts(body_c, content_type=type_c))


def test_other_bodies_are_keyed_on_their_bytes():
    assert request_key(facts(b"\x00\x01", content_type="application/octet-stream")) != request_key(
        facts(b"\x00\x02", content_type="application/octet-stream")
    )


def test_the_key_is_32_hex_characters_of_the_documented_recipe():
    import hashlib

    ident = identity(facts(b'{"b": 1, "a": [2, 1]}', headers={"anthropic-version": "v"}), ["anthropic-version"])
    assert ident == {
        "method": "POST",
        "url": "https://api.openai.com/v1/chat/completions",
        "headers": {"anthropic-version": "v"},
        "body": {"json": {"b": 1, "a": [2, 1]}},
    }
    canonical = json.dumps(ident, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert (
        request_key(facts(b'{"b": 1, "a": [2, 1]}', headers={"anthropic-version": "v"}), ["anthropic-version"])
        == (hashlib.sha256(canonical.encode()).hexdigest()[:32])
    )


@pytest.mark.parametrize("spec", ["", "a..b", ".a", "a."])
def test_invalid_ignore_paths_are_refused(spec):
    with pytest.raises(ValueError, match="invalid ignore path"):
        parse_ignore_paths([spec])


@given(nested_objects, nested_objects, st.randoms())
def test_the_key_cache_gives_the_key_computed_afresh(first, second, rng):
    cache = KeyCache(["openai-beta"], parse_ignore_paths(["metadata"]), size=2)
    requests = [facts(encoded(first)), facts(encoded(second), headers={"openai-beta": "assistants=v2"})]
    requests.append(facts(encoded(shuffled(first, rng)), query=[("api-version", "1")]))
    for request in requests * 2:  # the second time from the cache, or after an eviction
        assert cache.key(request) == request_key(request, ["openai-beta"], parse_ignore_paths(["metadata"]))


def test_the_key_cache_stays_bounded_and_skips_large_bodies():
    cache = KeyCache([], (), size=3, max_body=100)
    for i in range(5):
        cache.key(facts(encoded({"i": i})))
    cache.key(facts(encoded({"text": "x" * 200})))
    assert len(cache._keys) == 3
    assert all(len(exact[7]) <= 100 for exact in cache._keys)


def test_repeated_slashes_in_the_path_are_one_request_as_both_routes_send_google_genais_live_url():
    live = "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
    forward = facts(method="GET", host="generativelanguage.googleapis.com", path="/" + live)  # `//ws/…`
    reverse = facts(method="GET", host="generativelanguage.googleapis.com", path=live)
    assert request_key(forward) == request_key(reverse)
    assert identity(forward)["url"] == "https://generativelanguage.googleapis.com" + live
    assert request_key(facts(path="/v1/chat/completions/")) != request_key(facts())  # a trailing one still counts
