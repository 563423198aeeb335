"""The tool pipeline, written once: prepare, validate, execute, check the result.

Both the in-process runtime and the Temporal tool activity call ``execute_tool``; whatever happens
(bad arguments, an exception, an abort, a wrong return type) it returns an ``AgentToolResult``, with
``is_error=True`` for failures. A failure's text starts with its error code and its ``details`` carry
``{"error_code": CODE, ...}``, so a model reads why and a program can branch on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, cast

import orjson
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from .errors import (
    EXECUTION_ABORTED,
    EXECUTION_ERROR,
    EXECUTION_TIMEOUT,
    INVALID_PARAMETERS,
    INVALID_TOOL_RESULT,
    ToolUnavailableError,
)
from .jsonschema import ROOT, InvalidSchemaError, check_schema, coerce, format_path, validate
from .messages import ToolCall
from .runtime import AbortSignal
from .tools import RAW_ARGUMENTS_KEY, AgentTool, AgentToolResult, ToolSpec

__all__ = [
    "check_arguments",
    "check_arguments_by_schema",
    "edited_arguments_problem",
    "error_result",
    "execute_tool",
    "execute_tool_with_timeout",
    "validate_arguments",
]

OnUpdate = Callable[[AgentToolResult], Any]

# How long an aborted or timed-out async tool may take to unwind after being cancelled, so an abort
# returns promptly even when a tool swallows the cancellation.
_CANCEL_GRACE_SECONDS = 1.0


def error_result(code: str, message: str, **details: Any) -> AgentToolResult:
    """A failed tool result: the text a model reads, the code a program checks."""
    return AgentToolResult.text(f"{code}: {message}", details={"error_code": code, **details}, is_error=True)


def aborted_result(tool_name: str) -> AgentToolResult:
    return error_result(EXECUTION_ABORTED, f'Tool "{tool_name}" was aborted.')


class _InvalidArguments(Exception):
    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{path}: {msg}" for path, msg in problems))
        self.problems = problems


def validate_arguments(tool: AgentTool, arguments: Any) -> Any:
    """The arguments ``execute`` receives: a model instance when ``parameters`` is a pydantic model
    class, else the JSON value checked against the schema. Raises ``_InvalidArguments``."""
    parameters = tool.parameters
    _refuse_raw_arguments(arguments)
    if isinstance(parameters, type) and issubclass(parameters, BaseModel):
        try:
            # Coerced as a JSON Schema tool's are (pi's rules), then pydantic's own checks.
            model_schema = _model_schema(parameters)
            coerced = coerce(arguments, model_schema) if model_schema is not None else arguments
            return parameters.model_validate(coerced)
        except PydanticValidationError as exc:
            raise _InvalidArguments(
                [(format_path(tuple(err["loc"])), err["msg"]) for err in exc.errors()]
            ) from None
    if parameters is None or isinstance(parameters, bool | dict):
        try:
            schema = parameters if parameters is not None else True
            arguments = coerce(arguments, schema)
            errors = validate(arguments, schema)
        except InvalidSchemaError as exc:  # a $ref to elsewhere, found unresolvable only now
            raise _InvalidArguments([(ROOT, f"the tool's parameter schema cannot be used: {exc}")]) from None
        if errors:
            raise _InvalidArguments([(format_path(err.path), err.message) for err in errors])
        return arguments
    raise _InvalidArguments(
        [(ROOT, f"tool parameters of type {type(parameters).__name__} cannot be checked")]
    )


@functools.lru_cache(maxsize=256)
def _model_schema(model: type[BaseModel]) -> dict[str, Any] | None:
    """The JSON Schema pydantic makes of ``model`` (None for one it cannot describe: no coercion)."""
    try:
        schema = model.model_json_schema()
        check_schema(schema)
    except Exception:
        return None
    return schema


def _refuse_raw_arguments(arguments: Any) -> None:
    if (
        isinstance(arguments, dict)
        and len(arguments) == 1
        and isinstance(arguments.get(RAW_ARGUMENTS_KEY), str)
    ):
        raise _InvalidArguments(
            [(ROOT, f"arguments are not a JSON object: {arguments[RAW_ARGUMENTS_KEY]!r}")]
        )


def check_arguments_by_schema(spec: ToolSpec, call: ToolCall) -> AgentToolResult | None:
    """For a spec whose schema alone decides (``schema_checks_arguments``): the INVALID_PARAMETERS
    result ``execute_tool`` would give ``call``, or None when its arguments are valid. Pure, so a
    workflow can call it before it schedules the tool's activity."""
    if not spec.schema_checks_arguments:
        return None
    try:
        _refuse_raw_arguments(call.arguments)
        problems = validate(coerce(call.arguments, spec.parameters), spec.parameters)
    except _InvalidArguments as exc:
        return _invalid_parameters_result(spec.name, call.arguments, exc.problems)
    except InvalidSchemaError as exc:  # a $ref to elsewhere, found unresolvable only now
        problem = (ROOT, f"the tool's parameter schema cannot be used: {exc}")
        return _invalid_parameters_result(spec.name, call.arguments, [problem])
    if problems:
        found = [(format_path(err.path), err.message) for err in problems]
        return _invalid_parameters_result(spec.name, call.arguments, found)
    return None


def _invalid_parameters_result(
    tool_name: str, arguments: Any, problems: list[tuple[str, str]]
) -> AgentToolResult:
    received = orjson.dumps(arguments, option=orjson.OPT_INDENT_2, default=repr).decode()
    lines = "\n".join(f"  - {path}: {msg}" for path, msg in problems)
    text = f'Validation failed for tool "{tool_name}":\n{lines}\n\nReceived arguments:\n{received}'
    return AgentToolResult.text(
        f"{INVALID_PARAMETERS}: {text}",
        details={
            "error_code": INVALID_PARAMETERS,
            "errors": [{"path": p, "message": m} for p, m in problems],
        },
        is_error=True,
    )


def _is_async_callable(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


def _prepared_arguments(tool: AgentTool, arguments: Any) -> tuple[Any, AgentToolResult | None]:
    """``prepare_arguments``, then validation: the arguments ``execute`` receives, or the
    INVALID_PARAMETERS result of a call that cannot run."""
    if tool.prepare_arguments is not None:
        try:
            arguments = tool.prepare_arguments(arguments)
        except Exception as exc:
            refused = error_result(
                INVALID_PARAMETERS, f'prepare_arguments of tool "{tool.name}" failed: {exc}'
            )
            return None, refused
    try:
        return validate_arguments(tool, arguments), None
    except _InvalidArguments as exc:
        return None, _invalid_parameters_result(tool.name, arguments, exc.problems)


async def execute_tool(
    tool: AgentTool, call: ToolCall, signal: AbortSignal, on_update: OnUpdate
) -> AgentToolResult:
    """Run one tool call through the whole pipeline. Never raises, except on cancellation and for a
    ``ToolUnavailableError`` (the tool's server is down: whether to try again is the runtime's call)."""
    if signal.aborted:
        return aborted_result(tool.name)

    validated, refused = _prepared_arguments(tool, call.arguments)
    if refused is not None:
        return refused

    # Progress after the tool settled would describe a call that is already over: drop it.
    settled = False
    loop = asyncio.get_running_loop()

    def forward_update(partial: AgentToolResult) -> None:
        if not settled:
            on_update(partial)

    if _is_async_callable(tool.execute):
        work = cast(Awaitable[Any], tool.execute(call.id, validated, signal, forward_update))
    else:

        def update_from_thread(partial: AgentToolResult) -> None:
            # A sync tool runs in a worker thread; the loop's queues are not thread-safe.
            loop.call_soon_threadsafe(forward_update, partial)

        work = asyncio.to_thread(tool.execute, call.id, validated, signal, update_from_thread)

    try:
        # A sub-agent ends its run on the abort and answers with what it had (``agentcore.subagents``):
        # wait for that instead of racing the abort, which would drop it.
        outcome = await (work if tool.subagent is not None else _until_aborted(work, signal))
    except ToolUnavailableError:
        raise  # the runtime decides: retry the call, or record its outcome as unknown
    except Exception as exc:
        return _raised(tool, exc)
    finally:
        settled = True
    if outcome is _ABORTED:
        return aborted_result(tool.name)
    if inspect.isawaitable(outcome):  # a sync callable that returned a coroutine
        try:
            outcome = await _until_aborted(outcome, signal)
        except ToolUnavailableError:
            raise
        except Exception as exc:
            return _raised(tool, exc)
        if outcome is _ABORTED:
            return aborted_result(tool.name)
    if not isinstance(outcome, AgentToolResult):
        return error_result(
            INVALID_TOOL_RESULT,
            f'Tool "{tool.name}" returned {type(outcome).__name__}; execute must return an AgentToolResult '
            f'(for text, return AgentToolResult.text("...")).',
            returned_type=type(outcome).__name__,
        )
    return outcome


def _raised(tool: AgentTool, exc: Exception) -> AgentToolResult:
    return error_result(EXECUTION_ERROR, f'Tool "{tool.name}" failed: {exc}', exception=type(exc).__name__)


_ABORTED: Any = object()


async def _until_aborted(work: Awaitable[Any], signal: AbortSignal) -> Any:
    """``await work``, or ``_ABORTED`` as soon as the signal fires (the work is then cancelled)."""
    task = asyncio.ensure_future(work)
    if signal.aborted:
        await _cancel(task)
        return _ABORTED
    aborted = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait((task, aborted), return_when=asyncio.FIRST_COMPLETED)
    finally:
        aborted.cancel()
        if not task.done():
            await _cancel(task)
    if task.cancelled():
        return _ABORTED
    if signal.aborted and task.exception() is not None:
        # A cooperative tool that raised because it saw the abort: report the abort, not the symptom.
        return _ABORTED
    return task.result()


async def _cancel(task: asyncio.Future[Any]) -> None:
    task.cancel()
    # A thread cannot be interrupted; the tool has the signal and will see it. Don't wait for it.
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.wait_for(asyncio.shield(task), _CANCEL_GRACE_SECONDS)


async def execute_tool_with_timeout(
    tool: AgentTool,
    call: ToolCall,
    signal: AbortSignal,
    on_update: OnUpdate,
    timeout_seconds: float | None = None,
) -> AgentToolResult:
    """``execute_tool`` bounded by ``timeout_seconds`` (default: the tool's own); over time ->
    ``EXECUTION_TIMEOUT``. The tool sees its signal fire on timeout, which matters to sync tools."""
    limit = tool.timeout_seconds if timeout_seconds is None else timeout_seconds
    tool_signal = AbortSignal()
    remove = signal.add_listener(lambda: tool_signal.abort(signal.reason))
    try:
        # asyncio.timeout rather than wait_for: no extra task, so the tool starts in the same step as
        # its tool_execution_start event is queued, as it would if the loop called it directly.
        async with asyncio.timeout(limit):
            return await execute_tool(tool, call, tool_signal, on_update)
    except TimeoutError:
        tool_signal.abort("timeout")
        return error_result(
            EXECUTION_TIMEOUT, f'Tool "{tool.name}" did not finish within {limit:g} s.', timeout_seconds=limit
        )
    finally:
        remove()


def check_arguments(tool: AgentTool | ToolSpec, call: ToolCall) -> AgentToolResult | None:
    """The INVALID_PARAMETERS result ``call`` would get, or None: what can be checked where the call
    is scheduled, before a person is asked to approve it. An ``AgentTool`` runs its
    ``prepare_arguments`` and validation here; a durable conversation's ``ToolSpec`` its JSON schema
    when that alone decides (``schema_checks_arguments``; otherwise its activity checks them)."""
    if isinstance(tool, ToolSpec):
        return check_arguments_by_schema(tool, call)
    return _prepared_arguments(tool, call.arguments)[1]


def edited_arguments_problem(tool: AgentTool | ToolSpec, arguments: Any) -> str | None:
    """Why arguments a person edited cannot replace the model's (None: they can). Pure: a workflow's
    update validator calls it. A ``ToolSpec`` is checked against its JSON schema, an ``AgentTool`` as
    its call would be (``prepare_arguments``, then its parameters)."""
    if not isinstance(arguments, dict):
        return f"edited arguments must be a JSON object, not {type(arguments).__name__}"
    if isinstance(tool, ToolSpec):
        spec = tool.model_copy(update={"schema_checks_arguments": True})
        refused = check_arguments_by_schema(spec, ToolCall(id="edited", name=tool.name, arguments=arguments))
    else:
        refused = check_arguments(tool, ToolCall(id="edited", name=tool.name, arguments=arguments))
    if refused is None:
        return None
    text = refused.content[0].text if refused.content else INVALID_PARAMETERS  # type: ignore[union-attr]
    return text.removeprefix(f"{INVALID_PARAMETERS}: ")
