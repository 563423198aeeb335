"""What a running tool may know about its call: the idempotency key and the attempt number.

``execute(tool_call_id, arguments, signal, on_update)`` is the spec's signature, so the extra facts a
durable runtime adds travel in a context variable (copied into the thread a sync tool runs in)::

    ctx = current_tool_context()
    charge_card(order, idempotency_key=ctx.idempotency_key)
"""

from __future__ import annotations

from contextvars import ContextVar

from .messages import WireModel


class ToolContext(WireModel):
    tool_call_id: str
    tool_name: str
    session_id: str | None = None
    # 1 on the first try; higher when a durable runtime re-runs the call after a worker died.
    attempt: int = 1

    @property
    def idempotency_key(self) -> str:
        """Stable across retries of one call: use it to make side effects happen once."""
        return f"{self.session_id or '-'}:{self.tool_call_id}"


_CURRENT: ContextVar[ToolContext | None] = ContextVar("agentcore_tool_context", default=None)


def current_tool_context() -> ToolContext | None:
    return _CURRENT.get()


def set_tool_context(context: ToolContext | None) -> object:
    return _CURRENT.set(context)


def reset_tool_context(token: object) -> None:
    _CURRENT.reset(token)  # type: ignore[arg-type]
