"""Events an activity publishes reach the conversation as signals, and a signal is never cancelled
half-way: the server may be writing it when its RPC is cancelled, and a write cut short makes it
drop the run's state held in memory (a workflow task in flight with it), which leads the SDK to
evict the run (``activities/events.py``). Against a real dev server."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    Interceptor,
    OutboundInterceptor,
    SignalWorkflowInput,
)
from temporalio.testing import ActivityEnvironment

from agentcore.activities.events import ActivityEventPublisher
from agentcore.events import AgentStartEvent
from agentcore.protocol import SIGNAL_ACTIVITY_EVENTS
from agentcore.temporal import DATA_CONVERTER


class _SlowSignals(Interceptor):
    """Every signal RPC says when it starts, then takes a moment: a window to cancel it in."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _SlowSignalsOutbound(next, self.started)


class _SlowSignalsOutbound(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, started: asyncio.Event) -> None:
        super().__init__(next)
        self._started = started

    async def signal_workflow(self, input: SignalWorkflowInput) -> None:
        self._started.set()
        await asyncio.sleep(0.2)
        await super().signal_workflow(input)


async def _signals(client: Client, workflow_id: str) -> int:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return sum(
        1
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        and event.workflow_execution_signaled_event_attributes.signal_name == SIGNAL_ACTIVITY_EVENTS
    )


async def _until(condition: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await condition():
            return True
        await asyncio.sleep(0.05)
    return False


async def test_a_flush_cancelled_mid_send_still_delivers_its_batch_once(temporal_client: Client) -> None:
    # A run no worker serves: the server takes its signals all the same.
    workflow_id = f"events-{uuid.uuid4().hex[:8]}"
    handle = await temporal_client.start_workflow(
        "NoWorkerServesThis", id=workflow_id, task_queue=f"nobody-{uuid.uuid4().hex[:8]}"
    )
    slow = _SlowSignals()
    client = Client(**{**temporal_client.config(), "interceptors": [slow]})
    env = ActivityEnvironment(client=client)
    env.payload_converter = DATA_CONVERTER.payload_converter
    env.info = dataclasses.replace(env.info, workflow_id=workflow_id, workflow_run_id=handle.result_run_id)
    publisher = ActivityEventPublisher()

    async def cancelled_mid_send() -> None:
        publisher.publish(AgentStartEvent())
        flushing = asyncio.create_task(publisher.flush())
        await asyncio.wait_for(slow.started.wait(), 10)
        flushing.cancel()  # as an activity's ticker is when its call ends
        await asyncio.gather(flushing, return_exceptions=True)
        # The signal goes on to the server regardless, and the batch counts as sent: a later flush
        # sends nothing again.
        assert await _until(lambda: _signals(temporal_client, workflow_id)), "the signal was cancelled"
        await publisher.flush()

    try:
        await env.run(cancelled_mid_send)
        assert await _signals(temporal_client, workflow_id) == 1
    finally:
        await handle.terminate()
