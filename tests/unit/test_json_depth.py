"""JSON we did not write is read bounded in depth (core/files/json_depth.py): the depth measured without recursion
agrees with the plain recursive one on any JSON, a thousand levels are a ValueError, never a RecursionError."""

from __future__ import annotations

import json

import pytest
from cassette_proxy.core.files.json_depth import MAX_DEPTH, TooDeep, loads, nested_deeper
from hypothesis import given
from hypothesis import strategies as st

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(alphabet='[]{}"\\ab'),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4),
    max_leaves=40,
)


def depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


@given(JSON, st.integers(min_value=0, max_value=8))
def test_the_depth_walked_level_by_level_is_the_recursive_one(value, limit):
    assert nested_deeper(value, limit) == (depth(value) > limit)


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 990, 1000, 100_000])
def test_too_deep_is_a_value_error_at_any_depth(levels):
    with pytest.raises(TooDeep, match=f"JSON nested deeper than {MAX_DEPTH} levels"):
        loads("[" * levels + "]" * levels)


def test_as_deep_as_allowed_reads_and_brackets_inside_strings_do_not_count():
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    assert loads(json.dumps({"text": "[" * 5000})) == {"text": "[" * 5000}
