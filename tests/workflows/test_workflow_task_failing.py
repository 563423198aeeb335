"""A conversation whose workflow task keeps failing: the server refuses its updates. A command
waits that out for a while, then raises a typed ``WorkflowTaskFailingError`` (not the server's
untyped error); a wait (``wait_for_idle``, ``run``) waits it out until its own timeout, because
such a conversation is simply not idle yet, and one without a timeout raises it as a command does."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import (
    ExecuteWorkflowInput,
    HandleSignalInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

import agentcore.client.calls as client_calls
from agentcore import AgentOptions, WorkflowTaskFailingError
from agentcore.errors import WORKFLOW_TASK_FAILING
from agentcore.testing.scripted import ScriptedModel, scripted_model, text
from tests.support.durable import running_worker

with workflow.unsafe.imports_passed_through():
    from agentcore.protocol import AbortRequest

BREAK = "break this workflow task"


class _Inbound(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        return await super().execute_workflow(input)

    async def handle_signal(self, input: HandleSignalInput) -> None:
        if input.signal == "abort" and any(getattr(arg, "reason", None) == BREAK for arg in input.args):
            # Not an ApplicationError: the workflow task fails, and every retry of it fails again.
            raise RuntimeError("this conversation's workflow task fails")
        await super().handle_signal(input)


class _FailOnSignal(Interceptor):
    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _Inbound


async def test_a_command_refused_for_a_failing_workflow_task_raises_a_typed_error_and_a_wait_waits(
    temporal_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_calls, "UPDATE_REFUSED_RETRY_SECONDS", 2.0)
    model = ScriptedModel(lambda context: text("fine"))
    async with running_worker(temporal_client, tmp_path, model, interceptors=[_FailOnSignal()]) as h:
        agent = await h.agents.start("failing-task", AgentOptions(model=scripted_model()))
        await agent.run("hello", timeout=20)
        await agent.handle.signal("abort", AbortRequest(reason=BREAK))

        began = time.monotonic()
        with pytest.raises(WorkflowTaskFailingError) as refused:
            await agent.prompt("are you there?", id="refused-prompt")
        assert refused.value.code == WORKFLOW_TASK_FAILING
        assert "refused-prompt" in refused.value.message
        # Why, from the conversation's history: the failure's own message.
        assert "this conversation's workflow task fails" in refused.value.message, refused.value.message
        # The server holds an update for a failing conversation ~20 s before it refuses it.
        assert time.monotonic() - began < 45

        # A wait outlasts the refusal window: it ends with its own timeout, not the refusal.
        began = time.monotonic()
        with pytest.raises(TimeoutError):
            await agent.wait_for_idle(timeout=3)
        assert time.monotonic() - began >= 2.9
        with pytest.raises(TimeoutError):
            await agent.run("and now?", timeout=3)
        # Without a timeout, a wait does not hang on a conversation that fails for good.
        with pytest.raises(WorkflowTaskFailingError):
            await agent.wait_for_idle()

        await agent.handle.terminate("test over")
