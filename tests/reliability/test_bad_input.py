"""Bad input at the durable boundary: each gets a clear typed error, nothing is written, and the
workflow never fails a task. Checked twice: through the client (which validates before sending) and
as raw payloads sent straight to the workflow handle, bypassing the client."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from temporalio.client import WorkflowUpdateFailedError

from agentcore import AgentOptions
from agentcore.client import DurableAgent
from agentcore.errors import (
    InvalidMessageRoleError,
    InvalidSessionIdError,
    PathOutsideRootError,
    SessionCorruptError,
    SessionEncodingError,
    ToolNotFoundError,
    UnknownEntryTypeError,
    ValidationError,
)
from agentcore.messages import AssistantMessage, ImageContent, ToolResultMessage, UserMessage
from agentcore.protocol import Accepted
from agentcore.providers.catalog import UnknownModelError, get_model
from agentcore.session import JsonlSessionStorage
from agentcore.testing.scripted import scripted_model

from .conftest import Rig, assert_histories_sound
from .test_worker_faults import directive

PNG = "iVBORw0KGgo="


class Snapshot:
    """The conversation's state and session file, to show a refused input changed neither."""

    def __init__(self, rig: Rig, agent: DurableAgent) -> None:
        self.rig, self.agent = rig, agent

    async def take(self) -> tuple[Any, bytes]:
        state = await self.agent.get_state()
        return state.model_dump(exclude={"event_offset"}), self.rig.session_path(self.agent).read_bytes()


@pytest.fixture
async def idle_agent(rig: Rig) -> DurableAgent:
    await rig.spawn()
    agent = await rig.start("bad-input", tools=["add"])
    await agent.prompt("hello")
    await rig.settle(agent)
    return agent


def image(data: str = PNG, mime_type: str = "image/png") -> ImageContent:
    # Built without validation, as a caller could: the client must still refuse it.
    return ImageContent.model_construct(type="image", data=data, mime_type=mime_type)


async def test_client_refuses_bad_prompts_with_typed_errors(rig: Rig, idle_agent: DurableAgent) -> None:
    agent = idle_agent
    before = await Snapshot(rig, agent).take()
    cases: list[tuple[Any, type[Exception], str]] = [
        (agent.prompt(""), ValidationError, "non-empty"),
        (agent.prompt("look", images=[image(data="not base64!!")]), ValidationError, "base64"),
        (agent.prompt("look", images=[image(mime_type="image/tiff")]), ValidationError, "MIME"),
        (agent.prompt(AssistantMessage(content=[], timestamp=1)), InvalidMessageRoleError, "assistant"),
        (
            agent.prompt(ToolResultMessage(tool_call_id="x", tool_name="add", timestamp=1)),
            InvalidMessageRoleError,
            "toolResult",
        ),
        (agent.prompt("x" * 3_000_000), ValidationError, "MB"),
        (agent.steer(""), ValidationError, "non-empty"),
        (agent.follow_up("y" * 3_000_000), ValidationError, "MB"),
        (agent.set_tools(["no_such_tool"]), ToolNotFoundError, "no_such_tool"),
        (
            agent.prompt(UserMessage.model_construct(role="user", content=[], timestamp=0)),
            ValidationError,
            "timestamp",
        ),
    ]
    for call, error, text in cases:
        with pytest.raises(error, match=text):
            await call
    assert await Snapshot(rig, agent).take() == before
    await assert_histories_sound(rig.client, agent.session_id)


async def test_raw_malformed_payloads_never_fail_a_workflow_task(rig: Rig, idle_agent: DurableAgent) -> None:
    """Straight to the handle: updates are rejected (nothing in history), bad signals are dropped."""
    agent = idle_agent
    before = await Snapshot(rig, agent).take()
    deep: Any = "leaf"
    for _ in range(200):  # as deep as the sender's serializer goes
        deep = [deep]
    user = {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1}
    bad_prompts: list[Any] = [
        {"id": "a", "messages": [{**user, "content": [{"type": "text", "text": ""}]}]},
        {
            "id": "b",
            "messages": [{**user, "content": [{"type": "image", "data": "%%", "mime_type": "image/png"}]}],
        },
        {
            "id": "c",
            "messages": [{**user, "content": [{"type": "image", "data": PNG, "mime_type": "x/unknown"}]}],
        },
        {"id": "d", "messages": [{**user, "role": "assistant"}]},
        {"id": "e", "messages": [{**user, "timestamp": 0}]},
        {"id": "f", "messages": [{**user, "timestamp": -5}]},
        {"id": "g", "messages": []},
        {"id": "h", "messages": "not a list"},
        {"id": "i", "messages": [{**user, "content": deep}]},
        "not even an object",
    ]
    for payload in bad_prompts:
        with pytest.raises(WorkflowUpdateFailedError):
            await agent.handle.execute_update("prompt", payload, id=uuid.uuid4().hex, result_type=Accepted)
    for name in ("steer", "follow_up"):
        await agent.handle.signal(name, {"id": "s", "message": {**user, "timestamp": -1}})
        await agent.handle.signal(name, {"nonsense": True})
    await agent.handle.signal("abort", ["not", "an", "abort"])
    with pytest.raises(WorkflowUpdateFailedError):
        await agent.handle.execute_update("set_tools", {"id": "t", "tools": ["../etc"]}, result_type=Accepted)
    await agent.wait_for_idle(timeout=30)
    assert await Snapshot(rig, agent).take() == before
    queues = await agent.get_queues()
    assert queues.steering == [] and queues.follow_up == []
    await assert_histories_sound(rig.client, agent.session_id)
    await agent.prompt("still fine")
    state = await rig.settle(agent)
    assert state.messages[-1].stop_reason == "stop"


async def test_bad_tool_calls_from_the_model_become_error_results(rig: Rig, idle_agent: DurableAgent) -> None:
    """Unknown tool and arguments failing the schema: an error result each, the turn goes on."""
    agent = idle_agent
    await agent.prompt(directive(("no_such_tool", {}), ("add", {"a": "two", "b": []})))
    state = await rig.settle(agent)
    results = [m for m in state.messages if isinstance(m, ToolResultMessage)]
    assert [r.details["error_code"] for r in results] == ["TOOL_NOT_FOUND", "INVALID_PARAMETERS"]
    assert state.messages[-1].role == "assistant" and state.messages[-1].stop_reason == "stop"


def write_session(path: Path, *lines: bytes) -> Path:
    header = {"type": "session", "version": 1, "id": path.stem, "cwd": "/", "timestamp": 1}
    path.write_bytes(orjson.dumps(header) + b"\n" + b"".join(line + b"\n" for line in lines))
    return path


async def test_bad_session_files_and_ids_are_refused(rig: Rig, tmp_path: Path) -> None:
    """Recover and start refuse bad files and ids before any workflow exists or any byte is written."""
    outside = tmp_path / "outside"
    outside.mkdir()
    entry = {"type": "model_change", "id": "e1", "parent_id": None, "timestamp": 1}
    cases: list[tuple[Path, type[Exception]]] = [
        (
            write_session(outside / "utf8.jsonl", b'{"type": "custom", "id": "\xff\xfe"}'),
            SessionEncodingError,
        ),
        (
            write_session(outside / "kind.jsonl", orjson.dumps({**entry, "type": "bogus"})),
            UnknownEntryTypeError,
        ),
        (write_session(outside / "deep.jsonl", b"[" * 5000 + b"]" * 5000), SessionCorruptError),
    ]
    for path, error in cases:
        size = path.stat().st_size
        with pytest.raises(error):
            await rig.agents.recover(path)
        assert path.stat().st_size == size
    escaping = write_session(outside / "esc.jsonl")
    escaping.write_bytes(escaping.read_bytes().replace(b'"esc"', b'"../../escaped"'))
    with pytest.raises(InvalidSessionIdError):
        await rig.agents.recover(escaping)
    assert not (rig.sessions_dir.parent.parent / "escaped.jsonl").exists()
    for bad_id in ("../escape", "a/b", ".hidden", "x" * 200):
        with pytest.raises(InvalidSessionIdError):
            await rig.agents.start(bad_id, AgentOptions(model=scripted_model()))
    with pytest.raises(PathOutsideRootError):
        JsonlSessionStorage.open(outside / "kind.jsonl", root=rig.sessions_dir)
    assert list(rig.sessions_dir.iterdir()) == []
    async for execution in rig.client.list_workflows(f'TaskQueue = "{rig.task_queue}"'):
        raise AssertionError(f"a workflow was started: {execution.id}")


def test_unknown_model_name() -> None:
    with pytest.raises(UnknownModelError, match="gpt-nope"):
        get_model("openai", "gpt-nope")
    assert issubclass(UnknownModelError, ValidationError)
