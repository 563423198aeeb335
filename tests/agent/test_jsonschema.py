"""Tool arguments against their JSON Schema (Draft 2020-12): readable errors, every keyword enforced,
broken schemas refused when the tool is defined."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError

from agentcore.errors import INVALID_PARAMETERS
from agentcore.jsonschema import MAX_ERRORS, InvalidSchemaError, check_schema, compiled, format_path, validate
from agentcore.messages import ToolCall
from agentcore.runtime import AbortSignal
from agentcore.tool_exec import execute_tool
from agentcore.tools import AgentTool, AgentToolResult


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
def test_types_without_coercion(schema_type: str, good: list[Any], bad: list[Any]) -> None:
    for value in good:
        assert problems(value, {"type": schema_type}) == [], value
    for value in bad:
        assert problems(value, {"type": schema_type}) != [], value


def test_each_error_has_a_json_pointer_to_the_value() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"price": {"type": "number", "minimum": 0}}},
            },
            "a/b": {"type": "string"},
        },
        "required": ["customer"],
        "additionalProperties": False,
    }
    found = problems({"items": [{"price": 3}, {"price": -1}], "a/b": 1, "extra": True}, schema)
    assert sorted(found) == sorted(
        [
            "/items/1/price: -1 is less than the minimum of 0",
            "/a~1b: 1 is not of type 'string'",
            "(root): 'customer' is a required property",
            "(root): Additional properties are not allowed ('extra' was unexpected)",
        ]
    )
    assert format_path(()) == "(root)" and format_path(("a~b", 0)) == "/a~0b/0"


def test_the_error_list_is_bounded() -> None:
    errors = validate(list(range(-25, 0)), {"type": "array", "items": {"minimum": 0}})
    assert len(errors) == MAX_ERRORS + 1
    assert str(errors[0]) == "/0: -25 is less than the minimum of 0"
    assert str(errors[-1]) == f"(root): {25 - MAX_ERRORS} more errors not shown"
    long_value = "x" * 10_000
    (error,) = validate(long_value, {"maxLength": 3})
    assert len(error.message) <= 300 and error.message.endswith("...")


def test_alternatives_say_why_each_failed() -> None:
    any_of = {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]}
    assert problems("x", any_of) == [] and problems(3, any_of) == []
    assert problems(-1, any_of) == [
        "(root): -1 is not valid under any of the given schemas:"
        " (1) -1 is not of type 'string'; (2) -1 is less than the minimum of 0"
    ]


# The keywords the earlier hand-written validator accepted without checking; tools from other
# ecosystems (MCP servers) send them.


def test_if_then_else() -> None:
    schema = {
        "type": "object",
        "if": {"properties": {"country": {"const": "US"}}},
        "then": {"properties": {"zip": {"pattern": "^[0-9]{5}$"}}},
        "else": {"properties": {"zip": {"pattern": "^[A-Z0-9 ]+$"}}},
    }
    assert problems({"country": "US", "zip": "12345"}, schema) == []
    assert problems({"country": "US", "zip": "EH1 1YZ"}, schema) == [
        "/zip: 'EH1 1YZ' does not match '^[0-9]{5}$'"
    ]
    assert problems({"country": "UK", "zip": "EH1 1YZ"}, schema) == []
    assert problems({"country": "UK", "zip": "eh1"}, schema) == ["/zip: 'eh1' does not match '^[A-Z0-9 ]+$'"]


def test_pattern_properties_and_property_names() -> None:
    schema = {
        "type": "object",
        "patternProperties": {"^n_": {"type": "number"}},
        "propertyNames": {"maxLength": 5},
    }
    assert problems({"n_a": 1, "b": "x"}, schema) == []
    assert problems({"n_a": "one"}, schema) == ["/n_a: 'one' is not of type 'number'"]
    assert problems({"toolong": 1}, schema) == ["(root): 'toolong' is too long"]


def test_dependent_required_and_contains() -> None:
    dependent = {"type": "object", "dependentRequired": {"card": ["expiry"]}}
    assert problems({"card": "4111"}, dependent) == ["(root): 'expiry' is a dependency of 'card'"]
    assert problems({"card": "4111", "expiry": "12/30"}, dependent) == []
    contains = {"type": "array", "contains": {"const": "main"}, "minContains": 1}
    assert problems(["dev", "main"], contains) == []
    assert problems(["dev"], contains) == ["(root): ['dev'] does not contain items matching the given schema"]


def test_a_schema_naming_draft_07_is_read_as_draft_07() -> None:
    # zod-to-json-schema (behind many MCP servers) emits draft-07, where a list under "items" is a tuple.
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"pair": {"type": "array", "items": [{"type": "string"}, {"type": "number"}]}},
    }
    check_schema(schema)
    assert problems({"pair": ["a", "b"]}, schema) == ["/pair/1: 'b' is not of type 'number'"]
    with pytest.raises(InvalidSchemaError, match="Draft 2020-12"):  # undeclared: 2020-12, no tuple form
        check_schema({k: v for k, v in schema.items() if k != "$schema"})


def test_refs_to_defs() -> None:
    schema = {
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
        "type": "object",
        "properties": {"points": {"type": "array", "items": {"$ref": "#/$defs/Point"}}},
    }
    assert problems({"points": [{"x": 1}, {"y": 2}]}, schema) == ["/points/1: 'x' is a required property"]


# ---------------------------------------------------------------------------- broken schemas


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "strin"}, "at /type: 'strin' is not valid"),
        ({"properties": {"a": {"minimum": "0"}}}, "at /properties/a/minimum: '0' is not of type 'number'"),
        ({"required": "name"}, "at /required: 'name' is not of type 'array'"),
        ({"$ref": "#/$defs/Missing"}, "$ref '#/$defs/Missing' does not resolve within the schema"),
        ({"properties": {"a": {"$ref": "#nowhere"}}}, "$ref '#nowhere' does not resolve"),
    ],
)
def test_a_broken_schema_is_refused_when_the_tool_is_defined(schema: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidSchemaError, match=reason.replace("$", r"\$")):
        check_schema(schema)
    with pytest.raises(PydanticValidationError) as refused:
        AgentTool(name="t", description="d", parameters=schema, execute=lambda *_: AgentToolResult())
    assert refused.value.errors()[0]["loc"] == ("parameters",)
    assert "not a valid JSON Schema" in str(refused.value) or "does not resolve" in str(refused.value)


async def test_a_remote_ref_is_not_fetched_and_fails_when_reached() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}}
    check_schema(schema)  # nothing resolves it at definition time, and nothing is fetched
    assert validate({}, schema) == []
    with pytest.raises(InvalidSchemaError, match="does not resolve"):
        validate({"a": 1}, schema)
    tool = AgentTool(name="t", description="d", parameters=schema, execute=lambda *_: AgentToolResult())
    result = await execute_tool(tool, ToolCall(id="c", name="t", arguments={"a": 1}), AbortSignal(), print)
    assert result.is_error and result.details["error_code"] == INVALID_PARAMETERS
    assert "  - (root): the tool's parameter schema cannot be used:" in result.content[0].text  # type: ignore[union-attr]


def test_a_schema_is_compiled_once_whatever_its_key_order() -> None:
    first = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    again = {"required": ["q"], "properties": {"q": {"type": "string"}}, "type": "object"}
    assert compiled(first) is compiled(again)
    assert compiled(first) is not compiled({**first, "required": []})


# ------------------------------------------------------ agreement with pydantic on its own schemas


class Grape(BaseModel):
    name: str = Field(min_length=1, max_length=20)
    share: float = Field(ge=0, le=100)


class WineQuery(BaseModel):
    colour: Literal["red", "white", "rosé"]
    vintage: int | None = Field(default=None, ge=1900, le=2030)
    grapes: list[Grape] = Field(default_factory=list, max_length=3)
    organic: bool = False


def test_a_pydantic_generated_schema() -> None:
    schema = WineQuery.model_json_schema()  # $defs / $ref, anyOf with null, enum, bounds
    check_schema(schema)
    assert (
        problems({"colour": "red", "vintage": None, "grapes": [{"name": "Syrah", "share": 60}]}, schema) == []
    )
    assert problems({"colour": "blue", "grapes": [{"name": "", "share": 101}], "organic": 1}, schema) == [
        "/colour: 'blue' is not one of ['red', 'white', 'rosé']",
        "/grapes/0/name: '' should be non-empty",
        "/grapes/0/share: 101 is greater than the maximum of 100",
        "/organic: 1 is not of type 'boolean'",
    ]
