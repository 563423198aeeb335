"""Tool arguments checked against their JSON Schema (Draft 2020-12) by the ``jsonschema`` library.

The one place every tool's arguments are validated (local tools, tools from MCP servers): ``validate``
returns the readable errors (a JSON Pointer to the value and what is wrong with it, at most
``MAX_ERRORS``), ``check_schema`` refuses a schema that is not valid Draft 2020-12 when a tool is
defined rather than when a model first calls it. A schema that names its draft in ``$schema`` (MCP
servers built on zod send draft-07) is read as that draft. ``coerce`` first repairs a model's small
type slips as pi does (AJV's ``coerceTypes``, see ``agentcore.coercion``). ``format`` is an annotation
only, as the draft specifies by default.

A tool's schema is the same on every call, so its validator is compiled once and kept (keyed by the
schema's canonical JSON, which holds for equal schemas built afresh per call).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson
import referencing
import referencing.exceptions
from jsonschema import Draft202012Validator
from jsonschema import SchemaError as _InvalidSchema
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing.jsonschema import DRAFT202012, specification_with

from .coercion import coerce_arguments

__all__ = [
    "MAX_ERRORS",
    "ROOT",
    "InvalidSchemaError",
    "SchemaError",
    "check_schema",
    "coerce",
    "compiled",
    "format_path",
    "validate",
]

# A model that got everything wrong needs the first few errors to correct itself, not hundreds.
MAX_ERRORS = 10
_MAX_MESSAGE_CHARS = 300
ROOT = "(root)"

Schema = Mapping[str, Any] | bool


class InvalidSchemaError(ValueError):
    """A tool's ``parameters`` is not a valid JSON Schema (Draft 2020-12)."""


@dataclass(frozen=True)
class SchemaError:
    """One failure: where (``path``, keys and indexes from the arguments' root) and what."""

    path: tuple[str | int, ...]
    message: str

    def __str__(self) -> str:
        return f"{format_path(self.path)}: {self.message}"


def format_path(path: tuple[str | int, ...]) -> str:
    """``("items", 0, "price")`` -> ``/items/0/price`` (a JSON Pointer); the empty path is ``(root)``."""
    if not path:
        return ROOT
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def check_schema(schema: Schema) -> None:
    """Raise ``InvalidSchemaError`` unless ``schema`` is valid Draft 2020-12 whose local ``$ref``s
    resolve; compiles and keeps its validator for ``validate``."""
    compiled(schema)


def compiled(schema: Schema) -> Validator:
    """The validator of ``schema``, compiled on first use and kept; raises ``InvalidSchemaError``."""
    return _validator(_canonical(schema))


def coerce(instance: Any, schema: Schema) -> Any:
    """``instance`` with a model's small type slips coerced as pi's validator coerces them (a copy;
    ``instance`` itself when it is valid or nothing can be coerced). Raises ``InvalidSchemaError``."""
    validator = compiled(schema)
    try:
        return coerce_arguments(instance, validator)
    except referencing.exceptions.Unresolvable:
        return instance  # ``validate`` says why


def validate(instance: Any, schema: Schema, *, limit: int = MAX_ERRORS) -> list[SchemaError]:
    """Every way ``instance`` breaks ``schema`` (empty when it is valid), at most ``limit`` of them
    plus one entry saying how many more there were. Raises ``InvalidSchemaError`` for a bad schema."""
    validator = compiled(schema)
    found: list[SchemaError] = []
    more = 0
    try:
        for error in validator.iter_errors(instance):
            if len(found) < limit:
                found.append(SchemaError(tuple(error.absolute_path), _describe(error)))
            else:
                more += 1
    except referencing.exceptions.Unresolvable as exc:
        # A $ref that resolves nowhere (a remote one: nothing is fetched) shows only when reached.
        raise InvalidSchemaError(f"the schema's $ref does not resolve: {exc}") from None
    if more:
        found.append(SchemaError((), f"{more} more error{'s' if more > 1 else ''} not shown"))
    return found


def _canonical(schema: Schema) -> bytes:
    try:
        return orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:
        raise InvalidSchemaError(f"the schema is not JSON: {exc}") from None


@lru_cache(maxsize=1024)
def _validator(canonical: bytes) -> Validator:
    schema = orjson.loads(canonical)
    draft = validator_for(schema, default=Draft202012Validator)
    try:
        draft.check_schema(schema)
    except _InvalidSchema as exc:
        where = format_path(tuple(exc.absolute_path))
        dialect = "Draft 2020-12" if draft is Draft202012Validator else schema["$schema"]
        raise InvalidSchemaError(f"not a valid JSON Schema ({dialect}) at {where}: {exc.message}") from None
    _check_local_refs(schema)
    return draft(schema)


def _check_local_refs(schema: Any) -> None:
    """Resolve every ``#...`` ``$ref`` outside a nested ``$id`` now, so a dangling one is refused when
    the tool is defined (a ``$ref`` elsewhere is checked when validation reaches it)."""
    dialect = schema.get("$schema", "") if isinstance(schema, dict) else ""
    specification = specification_with(dialect, default=DRAFT202012)
    resolver = referencing.Registry().with_resource("", specification.create_resource(schema)).resolver()
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
            continue
        if not isinstance(node, dict) or (node is not schema and "$id" in node):
            continue
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            try:
                resolver.lookup(ref)
            except referencing.exceptions.Unresolvable:
                raise InvalidSchemaError(f"$ref {ref!r} does not resolve within the schema") from None
        # Values under these keywords are data, not schemas: a "$ref" key there is no reference.
        pending.extend(
            value for key, value in node.items() if key not in ("const", "enum", "default", "examples")
        )


def _describe(error: ValidationError) -> str:
    message = error.message
    if error.context:
        # anyOf / oneOf: the first reason each alternative failed, so the model sees what would fit.
        reasons: dict[Any, str] = {}
        for sub in error.context:
            branch = sub.relative_schema_path[0] if sub.relative_schema_path else 0
            where = f"{format_path(tuple(sub.relative_path))}: " if sub.relative_path else ""
            reasons.setdefault(branch, f"({len(reasons) + 1}) {where}{sub.message}")
        message += ": " + "; ".join(reasons.values())
    if len(message) > _MAX_MESSAGE_CHARS:
        message = message[: _MAX_MESSAGE_CHARS - 3] + "..."
    return message
