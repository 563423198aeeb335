"""Tool-call arguments while they stream (lenient) and when they end (strict)."""

from __future__ import annotations

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
    # A finished string must be one JSON object and nothing else: NaN is not JSON, nor is a tail.
    assert parse_final_arguments('{"a": NaN}') == {RAW_ARGUMENTS_KEY: '{"a": NaN}'}
    assert parse_final_arguments('{"a": 1} {"b": 2}') == {RAW_ARGUMENTS_KEY: '{"a": 1} {"b": 2}'}
