"""Key recipe 2: equal numbers, set-valued headers, list indexes, value patterns, and the stored request. Pure logic."""

import json
import math
import random
from decimal import Decimal

import pytest
from cassette_proxy.core.keys.key import (
    KeyCache,
    RequestFacts,
    exact_facts,
    identity,
    keyed,
    preset_values,
    request_key,
)
from cassette_proxy.core.keys.recipe import RecipeError, make_recipe, stored_key, stored_request
from cassette_proxy.core.keys.volatile import PRESETS, literal_prefix, parse_value_patterns
from cassette_proxy.core.record_statuses import parse_record_statuses
from cassette_proxy.core.workers.request_worker import key_job, perform
from hypothesis import assume, example, given
from hypothesis import strategies as st


def facts(body=b"", headers=None, content_type="application/json", query=()) -> RequestFacts:
    return RequestFacts("POST", "https", "api.openai.com", 443, "/v1/chat/completions", list(query), headers or {},
                        body, content_type)  # fmt: skip


def key_of_text(text: str, **recipe) -> str:
    r = make_recipe(**recipe)
    return request_key(facts(text.encode()), r.key_headers, r.paths, r.patterns)


def with_number(number_text: str) -> str:
    return '{"model": "m", "temperature": ' + number_text + ', "n": [' + number_text + "]}"


def spellings_of_integer(n: int) -> list[str]:
    """Ways clients write one whole number: JavaScript `1`, Python `1.0`, exponents, trailing zeros."""
    digits = str(abs(n))
    sign = "-" if n < 0 else ""
    scientific = f"{sign}{digits[0]}.{digits[1:] or '0'}e{len(digits) - 1}"
    return [str(n), f"{n}.0", f"{n}.000", f"{n}e0", f"{n}E+0", f"{n * 10}e-1", scientific]


def spellings_of_float(x: float) -> list[str]:
    """Ways to write one double: its repr, 17 significant digits, an exponent form, trailing zeros."""
    exact = Decimal(repr(x))
    texts = [repr(x), f"{x:.17g}", f"{exact:e}", f"{exact:E}"]
    if "e" not in repr(x) and "." in repr(x):
        texts.append(repr(x) + "000")
    return [t if any(c in t for c in ".eE") else t + ".0" for t in texts]


@given(st.integers(min_value=-(2**53), max_value=2**53))
@example(1)
@example(100)
@example(0)
def test_equal_whole_numbers_in_any_spelling_give_equal_keys(n):
    keys = {key_of_text(with_number(text)) for text in spellings_of_integer(n)}
    assert len(keys) == 1


@given(st.floats(allow_nan=False, allow_infinity=False))
@example(0.5)
@example(0.1)
@example(1e-7)
def test_equal_doubles_in_any_spelling_give_equal_keys(x):
    keys = {key_of_text(with_number(text)) for text in spellings_of_float(x)}
    assert len(keys) == 1


@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False, allow_infinity=False))
@example(0.5, 0.5000000000000001)
@example(1.0, 1.5)
@example(100.0, 1e2 + 1)
def test_different_numbers_keep_different_keys(x, y):
    assume(x != y)
    assert key_of_text(with_number(repr(x))) != key_of_text(with_number(repr(y)))


@pytest.mark.parametrize(
    ("a", "b"),
    [("1", "1.0"), ("1", "1e0"), ("100", "1e2"), ("100", "100.0"), ("0.5", "5e-1"), ("0.5", "0.50"), ("-0.0", "0"),
     ("99999999999999991611392", "1e23")],
)  # fmt: skip
def test_the_issue_examples_key_alike(a, b):
    assert key_of_text(with_number(a)) == key_of_text(with_number(b))


def test_whole_numbers_key_as_integers_in_the_identity():
    ident = identity(facts(b'{"temperature": 1.0, "max_tokens": 1e2, "top_p": 0.50}'))
    assert json.dumps(ident["body"], sort_keys=True) == '{"json": {"max_tokens": 100, "temperature": 1, "top_p": 0.5}}'


def test_beyond_2_53_a_written_integer_is_exact_and_a_fraction_or_exponent_is_a_double():
    """The limit: an integer literal is keyed exactly, `1e23` as the double it denotes (99999999999999991611392)."""
    assert key_of_text(with_number("100000000000000000000000")) != key_of_text(with_number("1e23"))


def test_huge_exponents_do_not_build_huge_integers():
    ident = identity(facts(b'{"x": 1e999999999}'))
    assert ident["body"]["json"]["x"] == math.inf


@pytest.mark.parametrize("header", ["anthropic-beta", "openai-beta"])
def test_set_valued_headers_key_as_sorted_distinct_trimmed_lists(header):
    spellings = ["a, b", "b,a", "a,b,a", " b , a ,"]
    keys = {request_key(facts(headers={header: s}), [header]) for s in spellings}
    assert len(keys) == 1
    assert identity(facts(headers={header: "b, a"}), [header])["headers"] == {header: ["a", "b"]}
    assert request_key(facts(headers={header: "a"}), [header]) != request_key(facts(headers={header: "a,b"}), [header])


def test_other_key_headers_are_not_sets():
    h = "anthropic-version"
    assert request_key(facts(headers={h: "a,b"}), [h]) != request_key(facts(headers={h: "b,a"}), [h])


def test_a_list_index_ignores_that_item_only():
    recipe = make_recipe(ignore=["messages.0.name"])

    def key(messages):
        return request_key(facts(json.dumps({"messages": messages}).encode()), (), recipe.paths)

    assert key([{"name": "a", "c": 1}, {"name": "x"}]) == key([{"name": "b", "c": 1}, {"name": "x"}])
    assert key([{"name": "a"}, {"name": "x"}]) != key([{"name": "a"}, {"name": "y"}])
    assert key([{"name": "a", "c": 1}]) != key([{"name": "a", "c": 2}])


def test_ignored_list_items_keep_the_other_indexes():
    recipe = make_recipe(ignore=["messages.0", "messages.1"])
    a = request_key(facts(b'{"messages": [1, 2, 3]}'), (), recipe.paths)
    b = request_key(facts(b'{"messages": [7, 8, 3]}'), (), recipe.paths)
    c = request_key(facts(b'{"messages": [1, 2, 4]}'), (), recipe.paths)
    assert a == b != c


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("messages..id", "empty segment"),
        ("messages.", "empty segment"),
        ("messages[0].name", "messages.0.name"),
        ("meta*", "whole segment"),
        ("messages.-1.name", "negative"),
        ("model.name", "`model` is never an object or list"),
        ("temperature.x", "`temperature` is never"),
        ("messages.0.role.x", "`role` is always a string"),
    ],
)
def test_ignore_paths_that_cannot_match_are_refused_naming_the_option(path, reason):
    with pytest.raises(RecipeError, match="cassette_ignore") as raised:
        make_recipe(ignore=[path])
    assert reason in str(raised.value) and path in str(raised.value)


PYD = "pyd_ai_" + "0123456789abcdef" * 2
PYD2 = "pyd_ai_" + "fedcba9876543210" * 2


def agent_body(first_id: str, second_id: str, real_call: str = "call_abc") -> bytes:
    return json.dumps(
        {
            "model": "gpt-4o",
            "messages": [
                {"role": "assistant", "tool_calls": [{"id": first_id}, {"id": second_id}, {"id": real_call}]},
                {"role": "tool", "tool_call_id": first_id, "content": "1"},
                {"role": "tool", "tool_call_id": second_id, "content": "2"},
            ],
        }
    ).encode()


def pattern_key(body: bytes, patterns=("pydantic-ai",)) -> str:
    recipe = make_recipe(ignore_values=patterns)
    return request_key(facts(body), (), (), recipe.patterns)


def test_client_made_ids_key_alike_across_runs():
    other_run = ("pyd_ai_" + "1" * 32, "pyd_ai_" + "2" * 32)
    assert pattern_key(agent_body(PYD, PYD2)) == pattern_key(agent_body(*other_run))


def test_placeholders_keep_two_ids_apart_and_one_id_the_same():
    assert pattern_key(agent_body(PYD, PYD2)) != pattern_key(agent_body(PYD, PYD))
    ident = identity(facts(agent_body(PYD, PYD2)), (), (), make_recipe(ignore_values=["pydantic-ai"]).patterns)
    messages = ident["body"]["json"]["messages"]
    assert [c["id"] for c in messages[0]["tool_calls"]] == ["pyd_ai_…#1", "pyd_ai_…#2", "call_abc"]
    assert [m.get("tool_call_id") for m in messages[1:]] == ["pyd_ai_…#1", "pyd_ai_…#2"]


def test_ids_that_do_not_match_still_count():
    assert pattern_key(agent_body(PYD, PYD2, "call_abc")) != pattern_key(agent_body(PYD, PYD2, "call_xyz"))


@given(st.randoms())
def test_placeholder_numbering_does_not_depend_on_field_order(rng):
    body = {"b": PYD, "a": PYD2, "c": [PYD2, PYD]}
    items = list(body.items())
    rng.shuffle(items)
    assert pattern_key(json.dumps(body).encode()) == pattern_key(json.dumps(dict(items)).encode())


def test_presets_and_literal_prefixes():
    assert PRESETS["pydantic-ai"] == r"pyd_ai_[0-9a-f]{32}"
    assert literal_prefix(r"pyd_ai_[0-9a-f]{32}") == "pyd_ai_"
    assert literal_prefix(r"calls?_\w+") == "call"
    assert literal_prefix(r"\d+") == ""


@pytest.mark.parametrize(("spec", "reason"), [("", "empty value pattern"), ("(", "not a regular expression"),
                                              ("x*", "matches the empty string")])  # fmt: skip
def test_value_patterns_that_cannot_work_are_refused_naming_the_option(spec, reason):
    with pytest.raises(RecipeError, match="cassette_ignore_values") as raised:
        make_recipe(ignore_values=[spec])
    assert reason in str(raised.value)


def test_a_recipe_stores_resolved_expressions():
    recipe = make_recipe(["metadata"], ["Anthropic-Version"], ["pydantic-ai"])
    assert recipe.to_json() == {"recipe": 2, "ignore": ["metadata"], "key_headers": ["anthropic-version"],
                                "ignore_values": [PRESETS["pydantic-ai"]],
                                "frameworks": ["langchain", "llm", "openai-agents", "pydantic-ai"]}  # fmt: skip
    assert parse_value_patterns(recipe.ignore_values)[0].label == "pyd_ai_"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(
    st.dictionaries(st.text(max_size=8), json_values, max_size=5),
    st.sampled_from(["application/json", "text/plain", ""]),
    st.dictionaries(st.sampled_from(["anthropic-version", "anthropic-beta", "x-other"]), st.text(max_size=8)),
    st.lists(st.tuples(st.text(max_size=5), st.text(max_size=5)), max_size=3),
)
def test_a_stored_request_gives_the_key_of_the_live_request(body, content_type, headers, query):
    """What rekey and the miss rely on: the cassette alone reproduces the key."""
    assume(
        not any(k.lower() in {"key", "api_key", "api-key", "apikey", "access_token", "token", "sig"} for k, _ in query)
    )
    recipe = make_recipe(["metadata.trace"], ["anthropic-version", "anthropic-beta"], ["pydantic-ai"])
    live = facts(json.dumps(body).encode(), headers, content_type, query)
    stored = json.loads(json.dumps(stored_request(live, recipe.key_headers)))  # as written to disk and read back
    assert stored_key(stored, recipe) == request_key(live, recipe.key_headers, recipe.paths, recipe.patterns)


def test_a_stored_multipart_request_keeps_its_content_type_and_key():
    boundary = "b-1234"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nfine-tune\r\n--{boundary}--\r\n'
    ).encode()
    live = facts(body, content_type=f"multipart/form-data; boundary={boundary}")
    stored = stored_request(live, ())
    assert stored["content_type"] == live.content_type
    assert stored_key(stored, make_recipe(key_headers=())) == request_key(live)


@given(st.lists(st.dictionaries(st.text(max_size=4), json_values, max_size=3), min_size=1, max_size=3), st.randoms())
def test_the_key_cache_with_value_patterns_gives_the_key_computed_afresh(bodies, rng):
    recipe = make_recipe(["metadata"], ["openai-beta"], ["pydantic-ai"])
    cache = KeyCache(recipe.key_headers, recipe.paths, recipe.patterns, size=2)
    requests = [facts(json.dumps({**b, "id": PYD}).encode()) for b in bodies]
    for request in rng.sample(requests * 2, len(requests) * 2):
        assert cache.key(request) == request_key(request, recipe.key_headers, recipe.paths, recipe.patterns)


@pytest.mark.parametrize(
    ("spec", "included", "excluded"),
    [
        (["2xx", "400", "404", "422"], [200, 201, 299, 400, 404, 422], [401, 403, 408, 409, 429, 500, 503]),
        (["2xx", "429", "5xx"], [200, 429, 500, 599], [400, 404]),
    ],
)
def test_record_statuses(spec, included, excluded):
    statuses = parse_record_statuses(spec)
    assert all(s in statuses for s in included) and not any(s in statuses for s in excluded)


@pytest.mark.parametrize("bad", ["2XX0", "600", "abc", "", "40"])
def test_bad_record_statuses_are_refused(bad):
    with pytest.raises(ValueError, match="is not a status"):
        parse_record_statuses([bad])


def test_random_key_orders_and_numbers_together():
    """A JavaScript client (ints, other key order) and a Python one (floats) send the same request."""
    python = b'{"model": "m", "temperature": 1.0, "max_tokens": 100, "top_p": 0.9}'
    fields = [("top_p", 0.9), ("max_tokens", 100), ("temperature", 1), ("model", "m")]
    random.Random(1).shuffle(fields)
    javascript = ("{" + ",".join(f'"{k}":{json.dumps(v)}' for k, v in fields) + "}").encode()
    assert request_key(facts(python)) == request_key(facts(javascript))


LC_ID = "lc_0f3c0b8e-5c2a-4a8e-9d1e-3c1b7f9a2e11"


@pytest.mark.parametrize(
    "recipe",
    [
        make_recipe(),  # the framework presets, on by default
        make_recipe(["metadata.trace"], ["openai-beta"], ["pydantic-ai", r"run-[0-9]+"], ["langchain"]),
        make_recipe().with_ignore(["metadata.trace", "messages.*.name"]),  # a test's own ignore paths
    ],
)
def test_a_worker_keys_a_request_as_the_recipe_it_was_given(recipe):
    """A big request is keyed by a worker process from the recipe's settings (request_worker.key_job): the key the
    proxy would give it, presets at their places included. A prompt that names a preset (`llm`) is no value of it."""
    body = {
        "model": "m",
        "metadata": {"trace": "run-7"},
        "messages": [
            {"role": "user", "content": "an llm and pydantic-ai, run-12", "name": "x"},
            {"role": "assistant", "tool_calls": [{"id": LC_ID, "type": "function"}]},
            {"role": "tool", "tool_call_id": LC_ID, "content": f"pyd_ai_{'a' * 32} {LC_ID}"},
        ],
    }
    request = facts(json.dumps(body).encode(), headers={"openai-beta": "b,a"})
    assert perform(key_job(request, recipe), request.body)["key"] == recipe.key_cache().key(request)


def test_a_tests_ignore_paths_come_on_top_of_the_runs_once_each():
    run = make_recipe(["metadata"], frameworks=["langchain"])
    test = run.with_ignore([" metadata", "messages.*.id"])
    assert test.paths == (("metadata",), ("messages", "*", "id"))
    assert test.ignore == ("metadata", "messages.*.id")
    assert (test.key_headers, test.patterns) == (run.key_headers, run.patterns)
    assert make_recipe(**test.settings()) == test
    with pytest.raises(ValueError, match="empty segment"):
        run.with_ignore(["messages..id"])


PRESET_BODIES = [
    {"model": "m", "messages": [{"role": "user", "content": "no id here"}]},
    {"messages": [{"role": "assistant", "tool_calls": [{"id": LC_ID}]}, {"role": "tool", "tool_call_id": LC_ID}]},
    {"messages": [{"role": "tool", "tool_call_id": f"pyd_ai_{'b' * 32}", "content": f"pyd_ai_{'c' * 32}"}]},
    {"input": [{"type": "function_call", "call_id": LC_ID}], "prompt_cache_key": f"agents-sdk:run:{'d' * 32}"},
    {"messages": [{"role": "tool", "tool_call_id": "call_1", "content": "the id of an llm"}]},  # no preset's shape
]


@pytest.mark.parametrize("body", PRESET_BODIES)
@pytest.mark.parametrize(
    "recipe", [make_recipe(), make_recipe(["messages.0"], (), [r"run-[0-9]+"]), make_recipe(frameworks=())]
)
def test_one_walk_gives_the_key_and_what_the_presets_replaced(body, recipe):
    """`keyed` (one parse, one walk) answers what `request_key` and `preset_values` answer apart, and so does the
    key cache, from a fresh entry and from one the preload sent with its presets or without them."""
    request = facts(json.dumps(body).encode())
    both = request_key(request, *_parts(recipe)), preset_values(request, recipe.paths, recipe.patterns)
    assert keyed(request, *_parts(recipe)) == both
    assert recipe.key_cache().keyed(request) == both
    for sent in (None, both[1]):
        cache = recipe.key_cache()
        cache.remember(exact_facts(request), both[0], sent)
        assert cache.keyed(request) == both
        assert cache.keyed(request) == both  # kept


def _parts(recipe):
    return recipe.key_headers, recipe.paths, recipe.patterns
