"""``llm.stream`` run as a local attempt that hands a slow call to a remote one (``StreamResult.handoff``).

The activity runs here under ``ActivityEnvironment`` (a local attempt is the same activity with
``info.is_local``); the workflow's side is covered in tests/test_workflow_basic.py. The model
here streams no deltas, so the remote attempt needs no workflow to publish to.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

import agentcore.activities.llm as llm
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


def _env(*, local: bool) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, is_local=local)
    return env


def _activities(store: SessionStore, model: SlowModel) -> LlmActivities:
    return LlmActivities(
        store, ToolRegistry([]), stream_fn=model, publish_interval=timedelta(milliseconds=50)
    )


def _stored(tmp_path: Path) -> list[str]:
    with JsonlSessionStorage.open(tmp_path / "s.jsonl") as reader:
        return [entry.id for entry in reader.get_entries()]


async def test_a_quick_call_ends_in_its_local_attempt_which_writes_no_result(tmp_path: Path) -> None:
    """The workflow task a local attempt runs in may be lost and run again, making the call anew:
    the workflow queues the result for writing, not the attempt."""
    model = SlowModel(0.0)
    result = await _env(local=True).run(_activities(SessionStore(tmp_path), model).stream, _input())
    assert not result.handoff and result.message.stop_reason == "stop" and result.deltas_published == 0
    assert _stored(tmp_path) == ["u1"]


async def test_pending_entries_are_in_the_context_but_not_in_the_file(tmp_path: Path) -> None:
    model = SlowModel(0.0)
    acts = _activities(SessionStore(tmp_path), model)
    await _env(local=True).run(acts.stream, _input(entries=[], pending_entries=[USER]))
    assert [m.text for m in model.contexts[0].messages] == ["hi"]
    assert _stored(tmp_path) == []


async def test_a_slow_call_is_handed_off_and_taken_over_without_calling_again(tmp_path: Path) -> None:
    model = SlowModel(0.3)
    acts = _activities(SessionStore(tmp_path), model)
    handed = await _env(local=True).run(acts.stream, _input())
    assert handed.handoff
    assert _stored(tmp_path) == ["u1"], "the prompt is synced, the answer not written yet"
    done = await _env(local=False).run(acts.stream, _input())
    assert not done.handoff and done.message.content == [TextContent(text="done")]
    assert len(model.signals) == 1
    assert _stored(tmp_path) == ["u1", "a1"]


async def test_a_local_attempt_run_again_takes_over_its_own_handed_off_call(tmp_path: Path) -> None:
    """The workflow task that recorded a handoff was lost: the local attempt runs again, and carries
    on the call the first one left running instead of making a second."""
    model = SlowModel(0.08)
    acts = _activities(SessionStore(tmp_path), model)
    assert (await _env(local=True).run(acts.stream, _input())).handoff
    again = await _env(local=True).run(acts.stream, _input())
    assert not again.handoff and again.message.content == [TextContent(text="done")]
    assert len(model.signals) == 1 and not acts._calls


async def test_a_handed_off_call_not_on_this_worker_is_made_again(tmp_path: Path) -> None:
    model = SlowModel(0.2)
    store = SessionStore(tmp_path)
    handed = await _env(local=True).run(_activities(store, model).stream, _input())
    assert handed.handoff
    done = await _env(local=False).run(_activities(store, model).stream, _input())
    assert done.message.content == [TextContent(text="done")]
    assert len(model.signals) == 2


async def test_a_handed_off_call_nobody_takes_over_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llm, "HANDOFF_WAIT_SECONDS", 0.1)
    model = SlowModel(5.0)
    acts = _activities(SessionStore(tmp_path), model)
    assert (await _env(local=True).run(acts.stream, _input())).handoff
    await asyncio.sleep(0.3)
    assert model.signals[0].aborted  # type: ignore[attr-defined]
    assert not acts._calls


async def test_a_local_attempt_does_not_wait_on_a_busy_session_file(tmp_path: Path) -> None:
    """The local attempt holds the workflow task: on a locked file it fails at once (the remote
    attempt, which heartbeats, waits instead)."""
    model = SlowModel(0.0)
    store = SessionStore(tmp_path)
    await store.write("s", SessionCreate(cwd="/"), lambda storage: None)
    holder = JsonlSessionStorage.open(tmp_path / "s.jsonl", writer=True)
    try:
        started = asyncio.get_running_loop().time()
        with pytest.raises(ApplicationError, match="SESSION_LOCKED"):
            await _env(local=True).run(_activities(store, model).stream, _input())
        assert asyncio.get_running_loop().time() - started < 2.0
    finally:
        holder.close()
    assert not model.signals


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


class SyncWatchingModel(SlowModel):
    """Answers once the entries appended before the call are on disk, or after ``wait`` seconds;
    records which came first."""

    def __init__(self, wait: float, store: SessionStore) -> None:
        super().__init__(0.0)
        self.wait = wait
        self.store = store
        self.synced_while_answering: list[bool] = []

    async def _stream(self, model: Model, options: StreamOptions) -> AsyncIterator[StreamEvent]:
        deadline = asyncio.get_running_loop().time() + self.wait
        synced = False
        while not synced and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.005)
            writer = self.store._kept.get("s")  # back in the store once a write or sync is done
            synced = writer is not None and not (writer._unsynced or writer._deferred)
        self.synced_while_answering.append(synced)
        async for event in super()._stream(model, options):
            yield event


async def test_a_local_attempt_syncs_its_entries_while_the_model_answers(tmp_path: Path) -> None:
    """The fsync that makes the call's new entries durable runs beside the call, not after it; the
    attempt still returns only once they are synced."""
    store = SessionStore(tmp_path)
    model = SyncWatchingModel(1.0, store)
    acts = LlmActivities(store, ToolRegistry([]), stream_fn=model, publish_interval=timedelta(seconds=5))
    result = await _env(local=True).run(acts.stream, _input())
    assert not result.handoff and result.message.stop_reason == "stop"
    assert model.synced_while_answering == [True]
    writer = store._kept["s"]
    assert not (writer._unsynced or writer._deferred)
    assert _stored(tmp_path) == ["u1"]


async def test_an_answer_whose_workflow_task_was_lost_is_not_asked_for_again(tmp_path: Path) -> None:
    """A quick answer ends in its local attempt; the workflow task that got it is lost (its
    completion did not reach the server during a network cut) and runs again: the answer is
    reused, not paid for twice."""
    model = SlowModel(0.0)
    acts = _activities(SessionStore(tmp_path), model)
    first = await _env(local=True).run(acts.stream, _input())
    again = await _env(local=True).run(acts.stream, _input())
    assert again.message == first.message and not again.handoff
    assert len(model.signals) == 1


async def test_a_handed_off_answer_outlives_the_wait_for_its_lost_workflow_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workflow task that recorded a handoff was lost and comes back after the call ended and
    nobody came for it: its answer is still there."""
    monkeypatch.setattr(llm, "HANDOFF_WAIT_SECONDS", 0.2)
    model = SlowModel(0.08)
    acts = _activities(SessionStore(tmp_path), model)
    assert (await _env(local=True).run(acts.stream, _input())).handoff
    await asyncio.sleep(0.4)
    again = await _env(local=True).run(acts.stream, _input())
    assert again.message.content == [TextContent(text="done")]
    assert len(model.signals) == 1


async def test_a_retry_takes_over_the_call_its_timed_out_attempt_left_running(tmp_path: Path) -> None:
    """During a network cut the server gives up on an attempt whose model call still runs here (its
    heartbeats did not arrive): the retry carries that call on instead of calling the model again,
    and writes the answer once."""
    model = SlowModel(0.4)
    acts = _activities(SessionStore(tmp_path), model)
    first = _env(local=False)
    running = asyncio.ensure_future(first.run(acts.stream, _input()))
    await asyncio.sleep(0.1)
    first.cancel(activity.ActivityCancellationDetails(timed_out=True))
    with pytest.raises(asyncio.CancelledError):
        await running
    retry = _env(local=False)
    retry.info = dataclasses.replace(retry.info, attempt=2)
    done = await retry.run(acts.stream, _input())
    assert done.message.content == [TextContent(text="done")]
    assert len(model.signals) == 1 and not model.signals[0].aborted  # type: ignore[attr-defined]
    assert _stored(tmp_path) == ["u1", "a1"]
    # And a third attempt (the retry's result lost too) answers from this worker, still one call.
    third = _env(local=False)
    third.info = dataclasses.replace(third.info, attempt=3)
    assert (await third.run(acts.stream, _input())).message == done.message
    assert len(model.signals) == 1 and _stored(tmp_path) == ["u1", "a1"]


def _kept(tmp_path: Path) -> list[str]:
    answers = tmp_path / ".answers"
    return sorted(p.name for p in answers.iterdir()) if answers.exists() else []


async def test_an_answer_a_dead_worker_got_is_not_asked_for_again_by_another(tmp_path: Path) -> None:
    """A quick answer ends in its local attempt, and the worker dies before its workflow task
    completes (the answer is in no session entry yet). Another worker runs the task again: its
    local attempt, and a remote one, answer from what the first kept, not from the model."""
    dead = SlowModel(0.0)
    got = await _env(local=True).run(_activities(SessionStore(tmp_path), dead).stream, _input())
    assert _stored(tmp_path) == ["u1"] and _kept(tmp_path) == ["s.a1.json"]
    other = SlowModel(0.0)
    acts = _activities(SessionStore(tmp_path), other)  # another process: none of the first's memory
    again = await _env(local=True).run(acts.stream, _input())
    assert again.message == got.message and not again.handoff
    assert _stored(tmp_path) == ["u1"], "a local attempt still writes no result"
    remote = await _env(local=False).run(_activities(SessionStore(tmp_path), other).stream, _input())
    assert remote.message == got.message
    assert other.contexts == [], "the model was asked again"
    assert _stored(tmp_path) == ["u1", "a1"] and _kept(tmp_path) == []


async def test_a_kept_answer_is_forgotten_once_its_entry_is_written(tmp_path: Path) -> None:
    model = SlowModel(0.0)
    acts = _activities(SessionStore(tmp_path), model)
    got = await _env(local=True).run(acts.stream, _input())
    assert _kept(tmp_path) == ["s.a1.json"]
    answer = MessageEntry(id="a1", parent_id="u1", message=got.message)
    follow_up = MessageEntry(id="u2", parent_id="a1", message=UserMessage(content="and?", timestamp=2))
    await _env(local=True).run(
        acts.stream, _input(entries=[answer, follow_up], leaf_id="u2", result_entry_id="a2")
    )
    assert _stored(tmp_path) == ["u1", "a1", "u2"]
    assert _kept(tmp_path) == ["s.a2.json"]


async def test_a_kept_answer_is_not_taken_for_another_context(tmp_path: Path) -> None:
    """Run again, the lost workflow task made the call from another leaf (say a steering message
    arrived meanwhile): the kept answer is not this call's, and the model is asked."""
    await _env(local=True).run(_activities(SessionStore(tmp_path), SlowModel(0.0)).stream, _input())
    other = SlowModel(0.0)
    steer = MessageEntry(id="u2", parent_id="u1", message=UserMessage(content="steer", timestamp=2))
    acts = _activities(SessionStore(tmp_path), other)
    await _env(local=True).run(acts.stream, _input(entries=[USER], pending_entries=[steer], leaf_id="u2"))
    assert [m.text for m in other.contexts[0].messages] == ["hi", "steer"]


async def test_a_handed_off_answer_is_kept_for_a_remote_attempt_in_another_worker(tmp_path: Path) -> None:
    """The handed-off call ends before the remote attempt comes for it, and its worker dies: the
    remote attempt, in another worker, records the kept answer instead of calling the model."""
    first = SlowModel(0.08)
    assert (await _env(local=True).run(_activities(SessionStore(tmp_path), first).stream, _input())).handoff
    await wait_for(lambda: _kept(tmp_path) == ["s.a1.json"])
    other = SlowModel(0.0)
    done = await _env(local=False).run(_activities(SessionStore(tmp_path), other).stream, _input())
    assert done.message.content == [TextContent(text="done")] and other.contexts == []
    assert _stored(tmp_path) == ["u1", "a1"] and _kept(tmp_path) == []


async def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_a_kept_answer_its_worker_left_torn_is_no_answer(tmp_path: Path) -> None:
    await _env(local=True).run(_activities(SessionStore(tmp_path), SlowModel(0.0)).stream, _input())
    kept = tmp_path / ".answers" / "s.a1.json"
    kept.write_bytes(kept.read_bytes()[:40])  # the worker died mid-write
    other = SlowModel(0.0)
    done = await _env(local=False).run(_activities(SessionStore(tmp_path), other).stream, _input())
    assert len(other.contexts) == 1 and done.message.content == [TextContent(text="done")]
    assert _stored(tmp_path) == ["u1", "a1"] and _kept(tmp_path) == []
