"""The small JSON Schema validator used for tool arguments."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError

from agentcore.jsonschema import format_path, validate


def problems(instance: Any, schema: Any) -> list[str]:
    return [str(error) for error in validate(instance, schema)]


@pytest.mark.parametrize(
    ("schema_type", "good", "bad"),
    [
        ("integer", [0, -3, 2.0], [1.5, True, "1", None]),
        ("number", [0, 1.5, -2], [True, "1.5", None]),
        ("boolean", [True, False], [0, 1, "true"]),
        ("null", [None], [0, "", False]),
        ("string", ["", "x"], [1, None, []]),
        ("array", [[], [1, "a"]], [{}, "[]"]),
        ("object", [{}, {"a": 1}], [[], "{}", None]),
    ],
)
def test_types(schema_type: str, good: list[Any], bad: list[Any]) -> None:
    for value in good:
        assert problems(value, {"type": schema_type}) == [], value
    for value in bad:
        assert problems(value, {"type": schema_type}) != [], value


def test_union_of_types_and_type_message() -> None:
    schema = {"type": ["string", "null"]}
    assert problems(None, schema) == [] and problems("a", schema) == []
    assert problems(3, schema) == ["root: must be string or null, got integer"]


def test_object_keywords_report_each_path() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2, "maxLength": 5},
            "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}, "maxItems": 2},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    found = problems({"name": "x", "tags": ["ok", "No!", "z"], "extra": 1}, schema)
    assert found == [
        "age: is required",
        "name: must have at least 2 characters, got 1",
        "tags: must have at most 2 items, got 3",
        "tags[1]: must match pattern '^[a-z]+$'",
        "extra: is not an allowed property",
    ]


def test_additional_properties_schema() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert problems({"a": 1, "b": 2}, schema) == []
    assert problems({"a": "x"}, schema) == ["a: must be integer, got string"]


def test_numeric_bounds_enum_const() -> None:
    assert problems(0, {"type": "integer", "minimum": 1}) == ["root: must be >= 1, got 0"]
    assert problems(11, {"maximum": 10}) == ["root: must be <= 10, got 11"]
    assert problems(1, {"exclusiveMinimum": 1}) != []
    assert problems(10, {"exclusiveMaximum": 10}) != []
    assert problems(7, {"multipleOf": 5}) != [] and problems(10, {"multipleOf": 5}) == []
    assert problems("red", {"enum": ["red", "white"]}) == []
    assert problems("rosé", {"enum": ["red", "white"]}) == ["root: must be one of 'red', 'white', got 'rosé'"]
    assert problems(True, {"enum": [1]}) != []  # JSON true is not 1
    assert problems(1.0, {"const": 1}) == []
    assert problems(2, {"const": 1}) == ["root: must be 1, got 2"]


def test_array_keywords() -> None:
    assert problems([], {"minItems": 1}) == ["root: must have at least 1 items, got 0"]
    assert problems([1, 1], {"uniqueItems": True}) != []
    assert problems([1, "a"], {"prefixItems": [{"type": "integer"}, {"type": "string"}]}) == []
    assert problems(["a", 1], {"prefixItems": [{"type": "integer"}]}) == ["[0]: must be integer, got string"]


def test_combinators() -> None:
    any_of = {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]}
    assert problems("x", any_of) == [] and problems(3, any_of) == []
    assert problems(-1, any_of) == [
        "root: must match at least one of anyOf: (1) must be string, got integer; (2) must be >= 0, got -1"
    ]
    one_of = {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    assert problems(1.5, one_of) == []
    assert problems(1, one_of) == ["root: must match exactly one of oneOf, matched 2"]
    all_of = {"allOf": [{"minimum": 0}, {"maximum": 5}]}
    assert problems(9, all_of) == ["root: must be <= 5, got 9"]
    assert problems("a", {"not": {"type": "string"}}) != []


def test_refs_to_defs_and_broken_refs() -> None:
    schema = {
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
        "type": "object",
        "properties": {"points": {"type": "array", "items": {"$ref": "#/$defs/Point"}}},
    }
    assert problems({"points": [{"x": 1}, {"y": 2}]}, schema) == ["points[1].x: is required"]
    assert problems(1, {"$ref": "#/$defs/Nope"}) == ["root: $ref '#/$defs/Nope' does not resolve"]
    assert problems(1, {"$ref": "http://example.com/s"}) != []


def test_boolean_schemas_and_paths() -> None:
    assert problems(1, True) == [] and problems(1, False) == ["root: no value is allowed here"]
    assert format_path(()) == "root"
    assert format_path(("items", 0, "name")) == "items[0].name"


# ------------------------------------------------------ agreement with pydantic on its own schemas


class Grape(BaseModel):
    name: str = Field(min_length=1, max_length=20)
    share: float = Field(ge=0, le=100)


class WineQuery(BaseModel):
    colour: Literal["red", "white", "rosé"]
    vintage: int | None = Field(default=None, ge=1900, le=2030)
    grapes: list[Grape] = Field(default_factory=list, max_length=3)
    organic: bool = False


SCHEMA = WineQuery.model_json_schema()

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 2100)
    | st.floats(-5, 200, allow_nan=False)
    | st.text(max_size=3),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=8,
)
grape = st.fixed_dictionaries(
    {"name": st.text(max_size=22), "share": st.integers(-5, 105) | st.floats(-5, 105, allow_nan=False)}
)
queries = st.fixed_dictionaries(
    {"colour": st.sampled_from(["red", "white", "rosé", "blue"])},
    optional={
        "vintage": st.none() | st.integers(1800, 2100) | st.text(max_size=2),
        "grapes": st.lists(grape | json_values, max_size=4),
        "organic": st.booleans() | st.integers(0, 1),
    },
)


def pydantic_accepts(value: Any) -> bool:
    try:
        WineQuery.model_validate(value, strict=True)
    except PydanticValidationError:
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(queries)
def test_agrees_with_pydantic_strict_on_its_generated_schema(value: dict[str, Any]) -> None:
    assert (validate(value, SCHEMA) == []) == pydantic_accepts(value), value
