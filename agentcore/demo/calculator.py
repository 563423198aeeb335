"""A ``calculator`` tool: arithmetic evaluated by walking Python's AST, never ``eval``.

Only numbers, ``+ - * / // % **``, unary signs, parentheses, the constants ``pi`` and ``e`` and a
short list of functions are accepted; any other node (names, attributes, strings, comprehensions,
lambdas...) is refused before anything runs. The expression comes from a model, which may have
read it from a user, so it is untrusted input: besides refusing code, the walk bounds how large an
integer may grow, since ``9**9**9`` is valid arithmetic that would pin a worker's CPU for hours.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..runtime import AbortSignal
from ..tools import AgentTool, AgentToolResult, ToolUpdateCallback

Number = int | float

# 4096 bits is about 1,233 decimal digits: far beyond any sensible calculation, yet cheap to compute
# and below Python's 4,300-digit limit on int-to-str conversion.
MAX_INTEGER_BITS = 4096
MAX_EXPRESSION_LENGTH = 500

_BINARY_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY_OPERATORS: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _round(value: Number, digits: Number | None = None) -> Number:
    if digits is None:
        return round(value)
    # round(5, -10**9) computes 10**(10**9) internally and never returns, so bound the digits.
    if not isinstance(digits, int) or abs(digits) > 100:
        raise CalculationError("round() takes a whole number of digits between -100 and 100")
    return round(value, digits)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "floor": math.floor,
    "ceil": math.ceil,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}


class CalculationError(ValueError):
    """The expression is refused or cannot be computed; the message says why, for the model to read."""


def _checked(value: Any) -> Number:
    """Reject results that are not a finite real number or an integer too large to be useful."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        # e.g. (-8) ** 0.5, which Python answers with a complex number.
        raise CalculationError("the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculationError("the result is too large (overflow)")
    if isinstance(value, int) and value.bit_length() > MAX_INTEGER_BITS:
        raise CalculationError(f"the result is too large (more than {MAX_INTEGER_BITS} bits)")
    return value


def _power(base: Number, exponent: Number) -> Number:
    # Estimate before computing: the point is never to start the huge computation at all.
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if (abs(base).bit_length() - 1) * exponent > MAX_INTEGER_BITS:
            raise CalculationError(f"the result is too large (more than {MAX_INTEGER_BITS} bits)")
    return _checked(base**exponent)


def _evaluate_node(node: ast.expr) -> Number:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise CalculationError(f"only numbers are allowed, not {node.value!r}")
        return _checked(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPERATORS:
        left, right = _evaluate_node(node.left), _evaluate_node(node.right)
        if isinstance(node.op, ast.Pow):
            return _power(left, right)
        return _checked(_BINARY_OPERATORS[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY_OPERATORS:
        return _checked(_UNARY_OPERATORS[type(node.op)](_evaluate_node(node.operand)))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        if node.keywords:
            raise CalculationError(f"{node.func.id}() takes positional arguments only")
        arguments = [_evaluate_node(argument) for argument in node.args]
        return _checked(_FUNCTIONS[node.func.id](*arguments))
    allowed = f"allowed functions: {', '.join(_FUNCTIONS)}; constants: {', '.join(_CONSTANTS)}"
    if isinstance(node, ast.Name):
        raise CalculationError(f"unknown name {node.id!r}; {allowed}")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        raise CalculationError(f"unknown function {node.func.id!r}; {allowed}")
    raise CalculationError(
        f"{ast.unparse(node)!r} is not arithmetic; use numbers, + - * / // % ** and parentheses"
    )


def evaluate(expression: str) -> Number:
    """Evaluate an arithmetic expression; raise ``CalculationError`` saying why one is refused."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CalculationError(f"the expression is longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CalculationError(f"not a valid expression ({exc.msg})") from None
    try:
        return _evaluate_node(tree.body)
    except CalculationError:
        raise
    except ZeroDivisionError:
        raise CalculationError("division by zero") from None
    except OverflowError:
        raise CalculationError("the result is too large (overflow)") from None
    except (TypeError, ValueError) as exc:  # math domain errors, wrong argument counts
        raise CalculationError(str(exc)) from None
    except RecursionError:
        raise CalculationError("the expression is nested too deeply") from None


def format_number(value: Number) -> str:
    # 15 significant digits hide binary noise: 0.1 + 0.2 reads 0.3, not 0.30000000000000004.
    return str(value) if isinstance(value, int) else f"{value:.15g}"


class CalculatorParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    expression: str = Field(
        min_length=1,
        max_length=MAX_EXPRESSION_LENGTH,
        description="Arithmetic to evaluate, e.g. '6 * 48.50 * 0.9' or 'round(sqrt(2), 3)'. "
        f"Operators + - * / // % ** and parentheses; functions {', '.join(_FUNCTIONS)}; constants pi, e.",
    )


def _calculate(
    tool_call_id: str, params: CalculatorParams, signal: AbortSignal | None, on_update: ToolUpdateCallback
) -> AgentToolResult:
    try:
        result = evaluate(params.expression)
    except CalculationError as exc:
        return AgentToolResult.text(f"Cannot evaluate {params.expression!r}: {exc}", is_error=True)
    text = f"{params.expression.strip()} = {format_number(result)}"
    return AgentToolResult.text(text, details={"expression": params.expression, "result": result})


def calculator_tool() -> AgentTool:
    return AgentTool(
        name="calculator",
        label="Calculator",
        description="Evaluate an arithmetic expression exactly. Use it for any sum, total, average or "
        "percentage instead of doing arithmetic in your head.",
        parameters=CalculatorParams,
        execute=_calculate,
        timeout_seconds=10.0,
    )
