"""The encoders and decoders built once (core/fast_json.py) give exactly what the stdlib calls give: a cassette's
name is the hash of this output, so one differing byte would orphan every recording."""

from __future__ import annotations

import json
import math

import pytest
from cassette_proxy.core import fast_json
from cassette_proxy.core.keys.body import canonical_number
from hypothesis import given
from hypothesis import strategies as st

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()  # lone surrogates included: the UTF-8 step is the caller's
)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5)
)

ENCODERS = [
    {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False, "allow_nan": True},  # the key's
    {"ensure_ascii": False},  # a replayed JSON body's
    {},
    {"sort_keys": True},
]


@pytest.mark.parametrize("options", ENCODERS, ids=lambda o: ",".join(sorted(o)) or "defaults")
@given(value=values)
def test_an_encoder_built_once_writes_what_the_stdlib_writes(options, value):
    assert fast_json.encoder(**options)(value) == json.JSONEncoder(**options).encode(value)


def test_an_encoder_built_once_is_reused_across_calls_without_state():
    encode = fast_json.encoder(sort_keys=True)
    first = encode({"b": [1, {"d": 2, "c": 3}], "a": None})
    for _ in range(3):
        assert encode({"b": [1, {"d": 2, "c": 3}], "a": None}) == first == '{"a": null, "b": [1, {"c": 3, "d": 2}]}'


def test_an_indented_encoder_is_the_stdlibs_own():
    assert fast_json.encoder(indent=2)({"a": [1]}) == json.dumps({"a": [1]}, indent=2)


def same(a, b) -> bool:
    """Equal, with NaN equal to NaN and the types the same (1 is not 1.0 here)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@given(value=values, encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-32", "text"]))
def test_a_decoder_built_once_reads_what_json_loads_reads(value, encoding):
    text = json.dumps(value)
    raw = text if encoding == "text" else text.encode(encoding)
    loads = fast_json.decoder(parse_float=canonical_number)
    assert same(loads(raw), json.loads(raw, parse_float=canonical_number))


@pytest.mark.parametrize(
    "raw", [b"", b"{", b'{"a": 1} x', "\ufeff{}", b"\xff\xfe\x00", b'"\xed\xa0\x80"', b"[" * 100_000]
)
def test_a_decoder_built_once_refuses_what_json_loads_refuses(raw):
    loads = fast_json.decoder(parse_float=canonical_number)
    try:
        expected = json.loads(raw, parse_float=canonical_number)
    except (ValueError, RecursionError) as e:
        with pytest.raises(type(e)):
            loads(raw)
    else:
        assert same(loads(raw), expected)


@given(value=values)
def test_the_indented_writer_writes_what_the_stdlib_writes(value):
    assert fast_json.indented(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_the_indented_writer_takes_what_the_stdlib_takes_and_refuses_the_rest():
    value = {"t": (1, 2.5), 7: "int key", 2.5: "float key", None: [], True: {}, "nan": math.nan, "inf": -math.inf}
    assert fast_json.indented(value) == json.dumps(value, indent=2, ensure_ascii=False)
    for bad in ({"a": {1, 2}}, {(1, 2): "tuple key"}):
        with pytest.raises(TypeError):
            json.dumps(bad, indent=2)
        with pytest.raises(TypeError):
            fast_json.indented(bad)
