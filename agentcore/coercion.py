"""Tool arguments coerced as pi coerces them: AJV's ``coerceTypes: true``, after dropping ``null`` for
an optional property.

A model's small type slips (``{"a": "6"}`` for a number, ``"true"`` for a boolean, ``null`` for a
property it means to leave out) should not cost a turn. AJV's rules (ajv.js.org, "Type coercion
rules"; ``lib/compile/validate/dataType.ts``), applied only where a ``type`` keyword fails:

==========  =====================================================================================
to          from
==========  =====================================================================================
string      a number (``6`` -> ``"6"``, written as JavaScript writes it) or boolean (``"true"``);
            ``null`` -> ``""``
number      a boolean (0 / 1); ``null`` -> 0; a non-empty string JavaScript reads as a number
            (``"6"``, ``" 6 "``, ``"1e3"``, ``"0x10"``)
integer     as number, when the value has no fraction (``"6.0"`` -> 6; ``"6.5"`` stays refused)
boolean     ``"true"`` / 1 -> true; ``"false"`` / 0 / ``null`` -> false
null        ``""`` / 0 / ``false`` -> null
==========  =====================================================================================

With several types allowed, each is tried in the schema's order until one succeeds; objects and
arrays are never coerced. Inside ``anyOf`` / ``oneOf`` the first branch whose coercion makes the
value valid wins (AJV coerces branch by branch without backtracking). What cannot be coerced is left
as it is, so validation refuses it with its readable path message. One deliberate difference: a
string JavaScript reads as ``Infinity`` is not coerced (it has no JSON form).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

__all__ = ["coerce_arguments", "coerce_value"]

_MISSING = object()
# JavaScript's StringNumericLiteral (``Number(text)``), after trimming its white space.
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")
_RADIX = re.compile(r"0(?:[xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")
_RADIX_BASE = {"x": 16, "o": 8, "b": 2}
# JavaScript's white space and line terminators (what ``Number`` trims).
_JS_SPACE = " \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
# Rounds of validate-then-coerce: each fixes what the last uncovered (a coerced value may reveal a
# nested one); real arguments settle in one or two.
_MAX_ROUNDS = 8


def coerce_arguments(instance: Any, validator: Validator) -> Any:
    """``instance`` with what AJV would coerce coerced (a copy; ``instance`` itself is untouched), or
    ``instance`` itself when it is valid or nothing in it can be coerced."""
    coerced = instance
    for _ in range(_MAX_ROUNDS):
        changes = [
            change
            for error in validator.iter_errors(coerced)
            if (change := _fix(error, validator)) is not None
        ]
        if not changes:
            break
        if coerced is instance:
            coerced = copy.deepcopy(instance)
        for path, value in changes:
            coerced = _set(coerced, path, value)
    return coerced


def _fix(error: ValidationError, validator: Validator) -> tuple[tuple[Any, ...], Any] | None:
    """The change (instance path, new value; ``_MISSING`` removes the property) that repairs
    ``error`` by coercion, or None."""
    if error.validator == "type":
        path = tuple(error.absolute_path)
        if error.instance is None and _optional_property(error, validator):
            return path, _MISSING
        value = coerce_value(error.instance, error.validator_value)
        return None if value is _MISSING else (path, value)
    if error.validator in ("anyOf", "oneOf") and error.context:
        # The first branch whose type error coercion repairs, and that then holds: as AJV, which
        # coerces branch by branch and keeps the first that passes.
        for sub in error.context:
            if sub.validator != "type" or tuple(sub.relative_path):
                continue
            value = coerce_value(sub.instance, sub.validator_value)
            if value is _MISSING:
                continue
            branch = sub.schema
            if validator.evolve(schema=branch).is_valid(value):
                return tuple(error.absolute_path), value
    return None


def _optional_property(error: ValidationError, validator: Validator) -> bool:
    """Whether the value that failed is a property its object schema lists but does not require
    (pi drops ``null`` there rather than coerce it)."""
    schema_path = list(error.absolute_schema_path)
    if len(schema_path) < 3 or schema_path[-3] != "properties" or schema_path[-1] != "type":
        return False
    parent = _schema_at(validator.schema, schema_path[:-3])
    name = schema_path[-2]
    return isinstance(parent, Mapping) and name not in (parent.get("required") or ())


def _schema_at(root: Any, path: list[Any]) -> Any:
    """The subschema at ``path`` (keys from the root schema, local ``$ref``s followed), or None."""
    node = root
    for key in path:
        if key == "$ref" and isinstance(node, Mapping):
            node = _local_ref(root, node.get("$ref"))
            continue
        if isinstance(node, Mapping):
            node = node.get(key)
        elif isinstance(node, list) and isinstance(key, int) and key < len(node):
            node = node[key]
        else:
            return None
    return node


def _local_ref(root: Any, ref: Any) -> Any:
    if not isinstance(ref, str) or not ref.startswith("#"):
        return None
    node = root
    for part in ref[1:].split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping):
            node = node.get(key)
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node


def _set(instance: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return instance if value is _MISSING else value
    parent = instance
    for key in path[:-1]:
        parent = parent[key]
    if value is _MISSING:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return instance


def coerce_value(value: Any, types: Any) -> Any:
    """``value`` coerced to the first of ``types`` (a JSON Schema ``type``) AJV's rules allow, or
    ``_MISSING`` when none does."""
    for kind in [types] if isinstance(types, str) else list(types or ()):
        coerced = _coerce_to(value, kind)
        if coerced is not _MISSING:
            return coerced
    return _MISSING


def _coerce_to(value: Any, kind: str) -> Any:
    is_bool = isinstance(value, bool)
    is_number = isinstance(value, int | float) and not is_bool
    if kind == "string":
        if is_number:
            return _js_string(value)
        if is_bool:
            return "true" if value else "false"
        return "" if value is None else _MISSING
    if kind in ("number", "integer"):
        if is_bool:
            return int(value)
        if value is None:
            return 0
        if isinstance(value, str) and value:
            number = _js_number(value)
            if number is None or (kind == "integer" and not number.is_integer()):
                return _MISSING
            return int(number) if number.is_integer() else number
        return _MISSING
    if kind == "boolean":
        if value == "false" or value is None or (is_number and value == 0):
            return False
        if value == "true" or (is_number and value == 1):
            return True
        return _MISSING
    if kind == "null":
        if value == "" or value is False or (is_number and value == 0):
            return None
        return _MISSING
    return _MISSING


def _js_number(text: str) -> float | None:
    """``Number(text)`` in JavaScript, or None for NaN (and for Infinity, which JSON cannot hold)."""
    body = text.strip(_JS_SPACE)
    if not body:
        return 0.0  # JavaScript reads white space alone as 0 (AJV coerces " " to 0)
    if _RADIX.fullmatch(body):
        return float(int(body[2:], _RADIX_BASE[body[1].lower()]))
    if not _DECIMAL.fullmatch(body):
        return None
    number = float(body)
    return number if math.isfinite(number) else None


def _js_string(number: int | float) -> str:
    """``String(number)`` in JavaScript (ECMAScript's Number::toString): 6.0 -> "6", 1e21 -> "1e+21",
    1e-7 -> "1e-7"."""
    if isinstance(number, int):
        return str(number)
    if not math.isfinite(number):
        return "NaN" if math.isnan(number) else ("Infinity" if number > 0 else "-Infinity")
    if number == 0:
        return "0"
    sign, digits_tuple, exponent = Decimal(repr(abs(number))).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digits_tuple))
    k, n = len(digits), exponent + len(digits)  # n: where the decimal point goes
    minus = "-" if number < 0 else ""
    if k <= n <= 21:
        return minus + digits + "0" * (n - k)
    if 0 < n <= 21:
        return minus + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return minus + "0." + "0" * -n + digits
    mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{minus}{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
