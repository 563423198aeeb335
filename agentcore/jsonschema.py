"""A small JSON Schema validator for tool arguments.

Covers what tool schemas use in practice, pydantic-generated ones included: ``type`` (one or a list),
``properties``/``required``/``additionalProperties``, ``enum``/``const``, ``items``/``prefixItems``,
numeric and length bounds, ``pattern``, ``anyOf``/``oneOf``/``allOf``/``not`` and local ``$ref``
(``#/$defs/...``, ``#/definitions/...``). No coercion: the arguments a model sends are JSON already,
and a string where a number belongs is the model's mistake to be told about. Unknown keywords
(``title``, ``description``, ``default``, ``format``) are ignored, as the specification allows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["SchemaError", "validate", "format_path"]


@dataclass(frozen=True)
class SchemaError:
    """One failure: where (``path``, a tuple of keys and indexes) and what (``message``)."""

    path: tuple[str | int, ...]
    message: str

    def __str__(self) -> str:
        return f"{format_path(self.path)}: {self.message}"


def format_path(path: tuple[str | int, ...]) -> str:
    """``("items", 0, "name")`` -> ``items[0].name``; the empty path is ``root``."""
    if not path:
        return "root"
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def validate(instance: Any, schema: Mapping[str, Any] | bool) -> list[SchemaError]:
    """Every way ``instance`` breaks ``schema`` (empty when it is valid)."""
    root = schema if isinstance(schema, Mapping) else {}
    return list(_check(instance, schema, root, ()))


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _json_type(value: Any) -> str:
    # bool before int: in Python True is an int, in JSON it is not a number.
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _is_type(value: Any, expected: str) -> bool:
    actual = _json_type(value)
    if expected == actual:
        return True
    if expected == "number":
        return actual == "integer"
    if expected == "integer":
        # JSON does not distinguish 1 from 1.0.
        return actual == "number" and math.isfinite(value) and float(value).is_integer()
    return False


def _resolve(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any] | bool:
    if not ref.startswith("#"):
        raise ValueError(f"only local $ref is supported, got {ref!r}")
    node: Any = root
    for raw in ref[1:].split("/"):
        if not raw:
            continue
        key = raw.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or key not in node:
            raise ValueError(f"$ref {ref!r} does not resolve")
        node = node[key]
    if not isinstance(node, Mapping | bool):
        raise ValueError(f"$ref {ref!r} does not point at a schema")
    return node


def _same(a: Any, b: Any) -> bool:
    # enum/const compare JSON values: 1 == 1.0 but True != 1.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check(
    value: Any, schema: Mapping[str, Any] | bool, root: Mapping[str, Any], path: tuple[str | int, ...]
) -> Iterator[SchemaError]:
    if schema is True:
        return
    if schema is False:
        yield SchemaError(path, "no value is allowed here")
        return
    assert isinstance(schema, Mapping)

    if "$ref" in schema:
        try:
            target = _resolve(str(schema["$ref"]), root)
        except ValueError as exc:
            yield SchemaError(path, str(exc))
            return
        yield from _check(value, target, root, path)

    expected = schema.get("type")
    if expected is not None:
        types = [expected] if isinstance(expected, str) else list(expected)
        if not any(_is_type(value, t) for t in types):
            yield SchemaError(path, f"must be {' or '.join(types)}, got {_json_type(value)}")
            # The remaining keywords would only repeat the type error in other words.
            return

    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        options = ", ".join(_short(option) for option in schema["enum"])
        yield SchemaError(path, f"must be one of {options}, got {_short(value)}")
    if "const" in schema and not _same(value, schema["const"]):
        yield SchemaError(path, f"must be {_short(schema['const'])}, got {_short(value)}")

    kind = _json_type(value)
    if kind in ("integer", "number"):
        yield from _check_number(value, schema, path)
    elif kind == "string":
        yield from _check_string(value, schema, path)
    elif kind == "array":
        yield from _check_array(value, schema, root, path)
    elif kind == "object":
        yield from _check_object(value, schema, root, path)

    yield from _check_combinators(value, schema, root, path)


def _check_number(
    value: float, schema: Mapping[str, Any], path: tuple[str | int, ...]
) -> Iterator[SchemaError]:
    if "minimum" in schema and value < schema["minimum"]:
        yield SchemaError(path, f"must be >= {schema['minimum']}, got {value}")
    if "maximum" in schema and value > schema["maximum"]:
        yield SchemaError(path, f"must be <= {schema['maximum']}, got {value}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        yield SchemaError(path, f"must be > {schema['exclusiveMinimum']}, got {value}")
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        yield SchemaError(path, f"must be < {schema['exclusiveMaximum']}, got {value}")
    step = schema.get("multipleOf")
    if step and not float(value / step).is_integer():
        yield SchemaError(path, f"must be a multiple of {step}, got {value}")


def _check_string(
    value: str, schema: Mapping[str, Any], path: tuple[str | int, ...]
) -> Iterator[SchemaError]:
    if "minLength" in schema and len(value) < schema["minLength"]:
        yield SchemaError(path, f"must have at least {schema['minLength']} characters, got {len(value)}")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        yield SchemaError(path, f"must have at most {schema['maxLength']} characters, got {len(value)}")
    if "pattern" in schema and not _compiled(str(schema["pattern"])).search(value):
        yield SchemaError(path, f"must match pattern {schema['pattern']!r}")


def _check_array(
    value: list[Any], schema: Mapping[str, Any], root: Mapping[str, Any], path: tuple[str | int, ...]
) -> Iterator[SchemaError]:
    if "minItems" in schema and len(value) < schema["minItems"]:
        yield SchemaError(path, f"must have at least {schema['minItems']} items, got {len(value)}")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        yield SchemaError(path, f"must have at most {schema['maxItems']} items, got {len(value)}")
    prefix = schema.get("prefixItems") or []
    for index, item_schema in enumerate(prefix[: len(value)]):
        yield from _check(value[index], item_schema, root, (*path, index))
    items = schema.get("items")
    if items is not None:
        for index in range(len(prefix), len(value)):
            yield from _check(value[index], items, root, (*path, index))
    if schema.get("uniqueItems"):
        seen: list[Any] = []
        for item in value:
            if any(_same(item, other) for other in seen):
                yield SchemaError(path, f"must not contain duplicates (repeated {_short(item)})")
                break
            seen.append(item)


def _check_object(
    value: Mapping[str, Any], schema: Mapping[str, Any], root: Mapping[str, Any], path: tuple[str | int, ...]
) -> Iterator[SchemaError]:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in value:
            yield SchemaError((*path, name), "is required")
    additional = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            yield from _check(item, properties[key], root, (*path, key))
        elif additional is False:
            yield SchemaError((*path, key), "is not an allowed property")
        elif isinstance(additional, Mapping):
            yield from _check(item, additional, root, (*path, key))
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        yield SchemaError(path, f"must have at least {schema['minProperties']} properties")
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        yield SchemaError(path, f"must have at most {schema['maxProperties']} properties")


def _check_combinators(
    value: Any, schema: Mapping[str, Any], root: Mapping[str, Any], path: tuple[str | int, ...]
) -> Iterator[SchemaError]:
    for sub in schema.get("allOf") or []:
        yield from _check(value, sub, root, path)
    if "anyOf" in schema:
        failures = [list(_check(value, sub, root, path)) for sub in schema["anyOf"]]
        if all(failures):
            yield SchemaError(path, f"must match at least one of anyOf: {_alternatives(failures)}")
    if "oneOf" in schema:
        failures = [list(_check(value, sub, root, path)) for sub in schema["oneOf"]]
        matched = sum(1 for errors in failures if not errors)
        if matched == 0:
            yield SchemaError(path, f"must match exactly one of oneOf: {_alternatives(failures)}")
        elif matched > 1:
            yield SchemaError(path, f"must match exactly one of oneOf, matched {matched}")
    if "not" in schema and not list(_check(value, schema["not"], root, path)):
        yield SchemaError(path, "must not match the schema in 'not'")


def _alternatives(failures: list[list[SchemaError]]) -> str:
    # The first error of each branch says enough to see why none fitted.
    return "; ".join(f"({index + 1}) {errors[0].message}" for index, errors in enumerate(failures))
