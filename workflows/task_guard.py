"""A conversation never acts on history events that came ahead of their workflow task.

How a conversation could stop replaying. A query the server sends straight to a worker (the
workflow had no workflow task scheduled at that moment) carries the history as it stands when a
worker takes it, and the worker's SDK (``sdk-core``) applies the events a cached run has not seen to
that run before it answers: an activity's result, a signal. That activation has no
``WorkflowTaskStarted`` event. The workflow task the server schedules for those events comes next,
with its own messages (a subscriber's poll, a steer): the run accepts them in a second activation,
after the commands the first one made. Replay takes the whole task in one activation, where
updates and signals come first, and so accepts them before those commands: ``Nondeterminism
error: Update machine does not handle this event``. No workflow code can order what two
activations did the way one does, and an activation cannot wait for its task (when the task brings
nothing new the SDK completes it without waking the run), so the run must never keep such an
activation.

``TaskGuard`` recognizes one: the history's length moved, its size did not. The size
(``get_current_history_size``) comes with ``WorkflowTaskStarted`` and grows from one to the next; a
live activation that applies events applies its task's ``WorkflowTaskStarted`` with them, except
this one. The guard then raises ``EventsAheadOfTask``, which is no workflow failure (not an
``ApplicationError``): the activation fails, so the SDK drops the run from its cache and fails that
one query; the query is sent again (agentcore's client does so itself), and the workflow task
replays the history, as any replay will. Nothing is written to history: it was a query task, not a
workflow task.

One more case: a workflow task whose only work was to refuse updates is dropped from history by the
server, but the run keeps the size that task's ``WorkflowTaskStarted`` carried and, when the next
events are as many as that task's two, its history length too. ``TaskGuardInterceptor`` (the
worker's interceptor, installed by ``AgentcorePlugin``) tells the guard of every refusal, so the
next activation is compared with that task, and of every signal, which in one task always comes
before a refusal. The guard looks at every activation that wakes the run
(a condition is checked after each), is never true, and is installed before anything else in the run.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.worker import (
    HandleSignalInput,
    HandleUpdateInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

with workflow.unsafe.imports_passed_through():
    from agentcore.errors import EVENTS_AHEAD_OF_TASK


class EventsAheadOfTask(Exception):
    """Raised in an activation that applies history events no workflow task has started yet. Not a
    Temporal failure: it fails the activation (so the run leaves the worker's cache), not the workflow."""


class TaskGuard:
    """Refuses an activation that applies history events ahead of their workflow task."""

    def __init__(self) -> None:
        self._seen: tuple[int, int] | None = None  # (history size, history length) last seen
        # Where an update was refused since the guard last looked (``refused``).
        self._refused_at: tuple[int, int] | None = None

    @staticmethod
    def _position() -> tuple[int, int]:
        """This activation's history size and length."""
        info = workflow.info()
        return info.get_current_history_size(), info.get_current_history_length()

    def _check(self) -> bool:
        """A condition that is never true; raises in an activation that applies events ahead of their
        workflow task."""
        (size, length), seen = self._position(), self._seen
        self._seen, self._refused_at = (size, length), None
        if (
            seen is not None
            and size  # a server that reports no size: nothing to compare
            and size == seen[0]
            and length != seen[1]
            and not workflow.unsafe.is_replaying()
        ):
            raise EventsAheadOfTask(
                f"{EVENTS_AHEAD_OF_TASK}: history events {seen[1] + 1}-{length} came in a query task ahead "
                "of their workflow task; the run leaves the cache and the query is retried"
            )
        return False

    def refused(self) -> None:
        """An update was refused in this activation. When that was all the workflow task did, the server
        drops the task from history, but the run keeps the size its ``WorkflowTaskStarted`` carried: the
        next activation is compared with this one."""
        self._seen = self._refused_at = self._position()

    def signaled(self) -> None:
        """A signal is about to be handled. A signal that comes after a refusal in one workflow task
        comes before it (its event precedes the update's message), so one that comes after it with
        the same history length and size came in the next activation: in a query task (a task that
        only refused was dropped, and its length was reused), ahead of its workflow task."""
        if (
            self._refused_at is not None
            and self._position() == self._refused_at
            and not workflow.unsafe.is_replaying()
        ):
            raise EventsAheadOfTask(
                f"{EVENTS_AHEAD_OF_TASK}: a signal came in a query task ahead of its workflow task; the "
                "run leaves the cache and the query is retried"
            )

    async def watch(self) -> None:
        """Look at every activation of the run, for as long as it lasts."""
        await workflow.wait_condition(self._check)


class TaskGuardInterceptor(Interceptor):
    """Tells a workflow's ``task_guard`` (when it has one) of every update its validators refuse and
    every signal it takes (the worker's interceptor: ``AgentcorePlugin`` installs it)."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _TaskGuardInbound


def _guard() -> TaskGuard | None:
    guard: Any = getattr(workflow.instance(), "task_guard", None)
    return guard if isinstance(guard, TaskGuard) else None


class _TaskGuardInbound(WorkflowInboundInterceptor):
    def handle_update_validator(self, input: HandleUpdateInput) -> None:
        try:
            super().handle_update_validator(input)
        except BaseException:
            if (guard := _guard()) is not None:
                guard.refused()
            raise

    async def handle_signal(self, input: HandleSignalInput) -> None:
        if (guard := _guard()) is not None:
            guard.signaled()
        await super().handle_signal(input)


__all__ = ["EventsAheadOfTask", "TaskGuard", "TaskGuardInterceptor"]
