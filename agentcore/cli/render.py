"""Turning agent events into terminal lines: streamed text, tool calls, progress and results."""

from __future__ import annotations

import sys
from typing import Any, TextIO

import orjson

from ..events import AgentEvent, WakeupFiredEvent
from ..messages import AssistantMessage
from ..protocol import DurableState
from ..session import SessionStats
from ..tools import tool_result_text


def format_arguments(arguments: Any) -> str:
    if not isinstance(arguments, dict):
        return orjson.dumps(arguments).decode() if arguments is not None else ""
    return ", ".join(f"{key}={orjson.dumps(value).decode()}" for key, value in arguments.items())


def _first_line(text: str, width: int = 100) -> str:
    lines = text.strip().splitlines() or [""]
    if lines[0].startswith("|"):
        # A table: its footer ("3 wine(s) match.") says more on one line than its header row.
        prose = [line for line in lines if not line.startswith("|")]
        lines = [*prose[-1:], *(line for line in lines if line.startswith("|"))]
    head = lines[0] if len(lines[0]) <= width else lines[0][: width - 1] + "…"
    more = f"  (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    return head + more


def describe_wakeup(event: WakeupFiredEvent) -> str:
    """When a fired wake-up was due, and how late it fired."""
    due = event.due_at.astimezone().strftime("%H:%M:%S")
    late = f"{event.late_seconds:.1f} s late"
    return f"due {due}, {late}"


class EventPrinter:
    """Prints one run's events as they arrive; ``handle`` returns True at ``agent_end``."""

    def __init__(self, out: TextIO | None = None, *, assistant_label: str = "agent") -> None:
        self.out = out or sys.stdout
        self.assistant_label = assistant_label
        self._in_text = False

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def _end_text(self) -> None:
        if self._in_text:
            self._write("\n")
            self._in_text = False

    def line(self, text: str) -> None:
        self._end_text()
        self._write(text + "\n")

    def begin(self) -> None:
        """A prompt was sent (plain output shows nothing until the first event)."""

    def stop(self) -> None:
        """The turn is over (plain output leaves nothing open)."""

    def handle(self, event: AgentEvent) -> bool:
        if event.type == "message_update":
            self._delta(event.assistant_message_event)
        elif event.type == "message_end" and event.message.role == "assistant":
            self._answer_end(event.message)
        elif event.type == "tool_execution_start":
            self.line(f"  -> {event.tool_name}({format_arguments(event.args)})")
        elif event.type == "tool_execution_update":
            progress = tool_result_text(event.partial_result)
            if progress:
                self.line(f"     .. {_first_line(progress)}")
        elif event.type == "tool_execution_end":
            marker = "!!" if event.is_error else "<-"
            self.line(f"  {marker} {event.tool_name}: {_first_line(tool_result_text(event.result))}")
        elif event.type == "tool_approval_requested":
            self.line(f"  ?? {event.tool_name} waits for approval (call {event.tool_call_id})")
        elif event.type == "tool_approval_resolved":
            reason = f": {event.reason}" if event.reason else ""
            self.line(f"     {event.decision}{reason}")
        elif event.type == "llm_retry":
            self.line(
                f"  [model call failed, retrying (attempt {event.attempt}): {event.error_message or ''}]"
            )
        elif event.type == "wakeup_fired":
            self.line(f"wake-up> {event.note}  ({describe_wakeup(event)})")
        elif event.type == "agent_end":
            self._end_text()
            return True
        return False

    def _delta(self, delta: dict[str, Any]) -> None:
        if delta.get("type") == "text_delta" and delta.get("delta"):
            if not self._in_text:
                self._write(f"{self.assistant_label}> ")
                self._in_text = True
            self._write(str(delta["delta"]))

    def _answer_end(self, message: AssistantMessage) -> None:
        self._end_text()
        if message.stop_reason == "aborted":
            self.line("  [aborted: the turn was stopped; the conversation goes on]")
        elif message.stop_reason == "error":
            self.line(f"  [model error: {message.error_message or 'unknown'}]")


def format_state(state: DurableState, stats: SessionStats | None = None) -> str:
    model = state.model
    rows = [
        ("session", state.session_id),
        ("status", state.status + (" (streaming)" if state.is_streaming else "")),
        ("model", f"{model.provider}/{model.id}" + (f" at {model.base_url}" if model.base_url else "")),
        ("thinking", str(state.thinking_level)),
        ("tools", ", ".join(tool.name for tool in state.tools) or "-"),
        ("messages", str(state.message_count)),
        ("queued", f"{state.steering_queue_length} steering, {state.follow_up_queue_length} follow-up"),
        ("events", f"next offset {state.event_offset}"),
    ]
    if stats is not None:
        rows.append(("usage", f"{stats.total_tokens} tokens, ${stats.cost_total:.4f}"))
    if state.pending_tool_calls:
        rows.append(("running", ", ".join(state.pending_tool_calls)))
    for pending in state.pending_approvals:
        call = f"{pending.tool_name}({format_arguments(pending.arguments)})"
        rows.append(("approval", f"{call} waits (call {pending.tool_call_id}; agentcore approve / deny)"))
    if state.error_message:
        rows.append(("error", state.error_message))
    for wakeup in state.wakeups:
        due = wakeup.due_at.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
        rows.append(("wake-up", f"{due}  {wakeup.id}  {_first_line(wakeup.note, 60)}"))
    if state.messages:
        last = state.messages[-1]
        rows.append(("last", f"{last.role}: {_first_line(last.text or '', 80)}"))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    )
