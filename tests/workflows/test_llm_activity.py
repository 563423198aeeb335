"""``llm.stream`` by itself, under ``ActivityEnvironment``: an answer is paid for once, whatever
happens to the attempts that asked for it. The model here streams no deltas, so the activity needs
no workflow to publish to; the workflow's side is covered in tests/workflows/test_workflow_basic.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agentcore.activities.llm import LlmActivities
from agentcore.activities.session import SessionStore
from agentcore.events import StreamDone, StreamEvent
from agentcore.messages import AssistantMessage, TextContent, UserMessage
from agentcore.model import Model
from agentcore.protocol import SessionCreate, StreamInput
from agentcore.runtime import LlmContext, StreamOptions
from agentcore.session import JsonlSessionStorage, MessageEntry
from agentcore.testing import scripted_model
from agentcore.tools import ToolRegistry


class SlowModel:
    """Answers "done" after ``delay`` seconds, with no deltas; records each call's context and abort
    signal."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.signals: list[object] = []
        self.contexts: list[LlmContext] = []

    def __call__(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[StreamEvent]:
        self.contexts.append(context)
        return self._stream(model, options)

    async def _stream(self, model: Model, options: StreamOptions) -> AsyncIterator[StreamEvent]:
        self.signals.append(options.signal)
        await asyncio.sleep(self.delay)
        message = AssistantMessage(
            api=model.api,
            provider=model.provider,
            model=model.id,
            timestamp=1,
            content=[TextContent(text="done")],
            stop_reason="stop",
        )
        yield StreamDone(reason="stop", message=message)


USER = MessageEntry(id="u1", message=UserMessage(content="hi", timestamp=1))


def _input(**fields: object) -> StreamInput:
    fields.setdefault("entries", [USER])
    fields.setdefault("leaf_id", "u1")
    fields.setdefault("result_entry_id", "a1")
    return StreamInput(session_id="s", model=scripted_model(), create=SessionCreate(cwd="/"), **fields)


def _env() -> ActivityEnvironment:
    return ActivityEnvironment()


def _activities(store: SessionStore, model: SlowModel) -> LlmActivities:
    return LlmActivities(
        store, ToolRegistry([]), stream_fn=model, publish_interval=timedelta(milliseconds=50)
    )


def _stored(tmp_path: Path) -> list[str]:
    with JsonlSessionStorage.open(tmp_path / "s.jsonl") as reader:
        return [entry.id for entry in reader.get_entries()]


async def test_a_bounded_wait_for_this_workers_own_write_gives_the_lock_back(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    release = asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow_write(storage: JsonlSessionStorage) -> None:
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result()

    first = asyncio.create_task(store.write("s", SessionCreate(cwd="/"), slow_write))
    await asyncio.sleep(0.05)
    with pytest.raises(ApplicationError, match="SESSION_LOCKED"):
        await store.write("s", None, lambda storage: None, lock_wait=0.05)
    release.set()
    await first
    assert await store.write("s", None, lambda storage: "free", lock_wait=0.05) == "free"


async def test_an_answer_whose_result_was_lost_is_not_asked_for_again(tmp_path: Path) -> None:
    """An attempt's result did not reach the server (a network cut) and the call runs again in this
    worker: the answer is reused, not paid for twice, and written once."""
    model = SlowModel(0.0)
    acts = _activities(SessionStore(tmp_path), model)
    first = await _env().run(acts.stream, _input())
    again = _env()
    again.info = dataclasses.replace(again.info, attempt=2)
    assert (await again.run(acts.stream, _input())).message == first.message
    assert len(model.signals) == 1 and _stored(tmp_path) == ["u1", "a1"]


async def test_a_retry_takes_over_the_call_its_timed_out_attempt_left_running(tmp_path: Path) -> None:
    """During a network cut the server gives up on an attempt whose model call still runs here (its
    heartbeats did not arrive): the retry carries that call on instead of calling the model again,
    and writes the answer once."""
    model = SlowModel(0.4)
    acts = _activities(SessionStore(tmp_path), model)
    first = _env()
    running = asyncio.ensure_future(first.run(acts.stream, _input()))
    await asyncio.sleep(0.1)
    first.cancel(activity.ActivityCancellationDetails(timed_out=True))
    with pytest.raises(asyncio.CancelledError):
        await running
    retry = _env()
    retry.info = dataclasses.replace(retry.info, attempt=2)
    done = await retry.run(acts.stream, _input())
    assert done.message.content == [TextContent(text="done")]
    assert len(model.signals) == 1 and not model.signals[0].aborted  # type: ignore[attr-defined]
    assert _stored(tmp_path) == ["u1", "a1"]
    # And a third attempt (the retry's result lost too) answers from this worker, still one call.
    third = _env()
    third.info = dataclasses.replace(third.info, attempt=3)
    assert (await third.run(acts.stream, _input())).message == done.message
    assert len(model.signals) == 1 and _stored(tmp_path) == ["u1", "a1"]
