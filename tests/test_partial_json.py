from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcore.providers.partial_json import (
    RAW_ARGUMENTS_KEY,
    invalid_arguments,
    parse_final_arguments,
    parse_partial_json,
)


def test_prefixes_of_a_tool_call():
    assert parse_partial_json("") == {}
    assert parse_partial_json('{"ci') == {}
    assert parse_partial_json('{"city": "Ed') == {"city": "Ed"}
    assert parse_partial_json('{"city": "Edinburgh", "days": 3') == {"city": "Edinburgh", "days": 3}
    assert parse_partial_json('{"city": "Edinburgh", "days": 3, "units": ') == {
        "city": "Edinburgh",
        "days": 3,
    }
    assert parse_partial_json('{"flags": [true, fal') == {"flags": [True]}
    assert parse_partial_json('{"a": {"b": [1, {"c": "d') == {"a": {"b": [1, {"c": "d"}]}}


def test_half_written_escapes_are_dropped():
    assert parse_partial_json('{"path": "C:\\\\dir\\') == {"path": "C:\\dir"}
    assert parse_partial_json('{"s": "caf\\u00') == {"s": "caf"}
    assert parse_partial_json('{"s": "caf\\u00e9') == {"s": "café"}


def test_non_objects_give_empty_dict():
    assert parse_partial_json("[1, 2") == {}
    assert parse_partial_json('"text') == {}
    assert parse_partial_json("nonsense") == {}


def test_final_arguments_are_strict():
    assert parse_final_arguments('{"a": 1}') == {"a": 1}
    assert parse_final_arguments("") == {}
    broken = parse_final_arguments('{"a": 1')
    assert broken == {RAW_ARGUMENTS_KEY: '{"a": 1'}
    assert invalid_arguments(broken) == '{"a": 1'
    assert invalid_arguments({"a": 1}) is None
    assert parse_final_arguments("[1]") == {RAW_ARGUMENTS_KEY: "[1]"}


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5))
def test_every_prefix_parses_and_the_whole_round_trips(obj):
    text = orjson.dumps(obj).decode()
    for end in range(len(text)):
        assert isinstance(parse_partial_json(text[:end]), dict)
    assert parse_partial_json(text) == obj
    assert parse_final_arguments(text) == obj
