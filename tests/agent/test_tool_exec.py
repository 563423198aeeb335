"""The tool pipeline on its own: prepare, validate, execute, check the result; never raises."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import orjson
from pydantic import BaseModel, Field

from agentcore import AbortSignal, AgentToolResult, ToolCall
from agentcore.errors import (
    EXECUTION_ABORTED,
    EXECUTION_ERROR,
    EXECUTION_TIMEOUT,
    INVALID_PARAMETERS,
    INVALID_TOOL_RESULT,
)
from agentcore.tool_exec import execute_tool, execute_tool_with_timeout
from tests.support.loop import make_tool


class Forecast(BaseModel):
    city: str
    days: int = Field(default=1, ge=1, le=7)


def call(arguments: dict[str, Any], name: str = "t") -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=arguments)


def no_updates(partial: AgentToolResult) -> None:
    raise AssertionError("no update expected")


def code(result: AgentToolResult) -> str:
    return str(result.details["error_code"]) if result.is_error else ""


def first_text(result: AgentToolResult) -> str:
    return result.content[0].text if result.content else ""  # type: ignore[union-attr]


async def test_pydantic_parameters_give_execute_a_validated_instance() -> None:
    received: list[Any] = []

    async def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        received.append(args)
        return AgentToolResult.text(f"{args.city} for {args.days}")

    tool = make_tool("weather", execute, parameters=Forecast)
    result = await execute_tool(tool, call({"city": "Oslo"}), AbortSignal(), no_updates)
    assert first_text(result) == "Oslo for 1"
    assert isinstance(received[0], Forecast)


async def test_pydantic_validation_failure_lists_each_path() -> None:
    tool = make_tool("weather", parameters=Forecast)
    result = await execute_tool(tool, call({"days": 9}), AbortSignal(), no_updates)
    assert code(result) == INVALID_PARAMETERS
    text = first_text(result)
    assert 'Validation failed for tool "weather":' in text
    assert "  - /city: Field required" in text
    assert "  - /days: Input should be less than or equal to 7" in text
    assert text.endswith('Received arguments:\n{\n  "days": 9\n}')
    assert [e["path"] for e in result.details["errors"]] == ["/city", "/days"]


async def test_prepare_arguments_runs_before_validation() -> None:
    seen: list[Any] = []

    async def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        seen.append(args)
        return AgentToolResult.text("ok")

    tool = make_tool(
        "legacy",
        execute,
        parameters={"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    )
    tool.prepare_arguments = lambda raw: {"query": raw.pop("q")} if "q" in raw else raw
    result = await execute_tool(tool, call({"q": "wine"}), AbortSignal(), no_updates)
    assert not result.is_error and seen == [{"query": "wine"}]

    def broken(raw: Any) -> Any:
        raise KeyError("q")

    tool.prepare_arguments = broken
    result = await execute_tool(tool, call({}), AbortSignal(), no_updates)
    assert code(result) == INVALID_PARAMETERS and "prepare_arguments" in first_text(result)


async def test_sync_execute_runs_in_a_worker_thread() -> None:
    def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        time.sleep(0.01)  # would block the event loop if not in a thread
        return AgentToolResult.text(threading.current_thread().name)

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    background = asyncio.create_task(ticker())
    result = await execute_tool(make_tool("blocking", execute), call({}), AbortSignal(), no_updates)
    background.cancel()
    assert first_text(result) != threading.current_thread().name
    assert ticks >= 2


async def test_wrong_return_type_is_refused_by_name() -> None:
    async def returns_str(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> Any:
        return "plain text"

    def returns_dict(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> Any:
        return {"content": []}

    for execute, type_name in ((returns_str, "str"), (returns_dict, "dict")):
        result = await execute_tool(make_tool("bad", execute), call({}), AbortSignal(), no_updates)
        assert code(result) == INVALID_TOOL_RESULT
        assert f"returned {type_name}" in first_text(result) and "AgentToolResult" in first_text(result)


async def test_exceptions_become_error_results() -> None:
    async def explode(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        raise PermissionError("cellar is locked")

    result = await execute_tool(make_tool("open", explode), call({}), AbortSignal(), no_updates)
    assert code(result) == EXECUTION_ERROR
    assert "cellar is locked" in first_text(result)
    assert result.details["exception"] == "PermissionError"


async def test_abort_before_start_never_calls_execute() -> None:
    ran = []

    async def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        ran.append(1)
        return AgentToolResult.text("ran")

    signal = AbortSignal()
    signal.abort()
    result = await execute_tool(make_tool("t", execute), call({}), signal, no_updates)
    assert code(result) == EXECUTION_ABORTED and ran == []


async def test_abort_during_execution_returns_promptly_and_cancels_the_tool() -> None:
    cancelled = asyncio.Event()

    async def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return AgentToolResult.text("never")

    signal = AbortSignal()
    asyncio.get_running_loop().call_later(0.01, signal.abort)
    started = time.perf_counter()
    result = await execute_tool(make_tool("t", execute), call({}), signal, no_updates)
    assert time.perf_counter() - started < 1
    assert code(result) == EXECUTION_ABORTED and cancelled.is_set()


async def test_timeout_signals_the_tool_and_reports_execution_timeout() -> None:
    seen_abort = threading.Event()

    def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        for _ in range(200):
            if signal.aborted:
                seen_abort.set()
                break
            time.sleep(0.005)
        return AgentToolResult.text("finished late")

    tool = make_tool("slow", execute, timeout_seconds=0.05)
    result = await execute_tool_with_timeout(tool, call({}), AbortSignal(), no_updates)
    assert code(result) == EXECUTION_TIMEOUT and "0.05 s" in first_text(result)
    assert await asyncio.to_thread(seen_abort.wait, 1.0)


async def test_timeout_wrapper_passes_results_and_outer_aborts_through() -> None:
    tool = make_tool("quick")
    result = await execute_tool_with_timeout(tool, call({}), AbortSignal(), no_updates)
    assert first_text(result) == "quick ok"
    signal = AbortSignal()
    signal.abort()
    result = await execute_tool_with_timeout(tool, call({}), signal, no_updates)
    assert code(result) == EXECUTION_ABORTED


async def test_updates_after_the_tool_settles_are_dropped() -> None:
    updates: list[str] = []
    keep: list[Any] = []

    async def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        on_update(AgentToolResult.text("during"))
        keep.append(on_update)
        return AgentToolResult.text("done")

    await execute_tool(
        make_tool("t", execute), call({}), AbortSignal(), lambda p: updates.append(p.content[0].text)
    )
    keep[0](AgentToolResult.text("after"))
    assert updates == ["during"]


async def test_terminate_usage_and_details_survive_the_pipeline() -> None:
    async def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        return AgentToolResult(content=[], details={"rows": 3}, terminate=True, added_tool_names=["more"])

    result = await execute_tool(make_tool("t", execute), call({}), AbortSignal(), no_updates)
    assert result.terminate and result.details == {"rows": 3} and result.added_tool_names == ["more"]
    # Error results stay JSON-serialisable (they travel as activity results and events).
    failed = await execute_tool(
        make_tool("t", parameters=Forecast), call({"x": object()}), AbortSignal(), no_updates
    )
    assert orjson.loads(orjson.dumps(failed.model_dump(mode="json")))["is_error"] is True


async def test_arguments_that_are_not_json_get_invalid_parameters() -> None:
    from agentcore import AgentTool, AgentToolResult, ToolCall
    from agentcore.runtime import AbortSignal
    from agentcore.tool_exec import execute_tool
    from agentcore.tools import RAW_ARGUMENTS_KEY

    tool = AgentTool(
        name="t",
        description="d",
        parameters={"type": "object", "properties": {"x": {"type": "integer"}}},
        execute=lambda *a: AgentToolResult.text("ran"),
    )
    call = ToolCall(id="c1", name="t", arguments={RAW_ARGUMENTS_KEY: '{"x": 1,'})
    result = await execute_tool(tool, call, AbortSignal(), lambda _: None)
    assert result.is_error
    assert result.details["error_code"] == "INVALID_PARAMETERS"
    assert '{"x": 1,' in result.content[0].text  # type: ignore[union-attr]


ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "quantity": {"type": "integer", "minimum": 1},
        "price": {"type": "number"},
        "gift": {"type": "boolean"},
        "note": {"type": "string"},
        "code": {"type": "string"},
        "lines": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    },
    "required": ["quantity", "price", "code"],
}


async def _arguments_received(tool_parameters: Any, arguments: dict[str, Any]) -> tuple[Any, AgentToolResult]:
    received: list[Any] = []

    async def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        received.append(args)
        return AgentToolResult.text("ok")

    tool = make_tool("order", execute, parameters=tool_parameters)
    result = await execute_tool(tool, call(arguments, "order"), AbortSignal(), no_updates)
    return (received[0] if received else None), result


async def test_arguments_are_coerced_as_pi_coerces_them() -> None:
    """pi validates with AJV ``coerceTypes: true`` and drops ``null`` for an optional property: a
    model's small type slips reach the tool repaired instead of costing a turn."""
    args, result = await _arguments_received(
        ORDER_SCHEMA,
        {
            "quantity": "6",
            "price": " 2.50 ",
            "gift": "true",
            "note": None,
            "code": 1e21,
            "lines": [{"n": "7.0"}, {"n": False}],
        },
    )
    assert not result.is_error, first_text(result)
    assert args == {"quantity": 6, "price": 2.5, "gift": True, "code": "1e+21", "lines": [{"n": 7}, {"n": 0}]}

    # null for a required property is coerced as AJV coerces it; several types: the first that works
    args, result = await _arguments_received(
        {
            "type": "object",
            "properties": {"a": {"type": ["integer", "null"]}, "b": {"type": "string"}},
            "required": ["b"],
        },
        {"a": "", "b": None},
    )
    assert args == {"a": None, "b": ""}


async def test_what_cannot_be_coerced_is_still_refused_with_its_path() -> None:
    _, result = await _arguments_received(
        ORDER_SCHEMA, {"quantity": "6.5", "price": "cheap", "code": "A1", "gift": "yes"}
    )
    assert code(result) == INVALID_PARAMETERS
    assert sorted(e["path"] for e in result.details["errors"]) == ["/gift", "/price", "/quantity"]
    assert "Received arguments:" in first_text(result) and '"quantity": "6.5"' in first_text(result)
    _, result = await _arguments_received(ORDER_SCHEMA, {"quantity": "0", "price": 1, "code": "A1"})
    assert code(result) == INVALID_PARAMETERS  # coerced to 0, then below the minimum
    assert "  - /quantity: 0 is less than the minimum of 1" in first_text(result)


async def test_pydantic_parameters_are_coerced_too() -> None:
    """Pydantic already reads "6" as 6; what it refuses and AJV coerces (a number for a string, null
    for an optional field) is coerced first."""
    args, result = await _arguments_received(Forecast, {"city": 5, "days": None})
    assert not result.is_error, first_text(result)
    assert args == Forecast(city="5", days=1)
