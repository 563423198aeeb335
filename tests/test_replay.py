"""Replay: every recorded history replays against the current workflow code without nondeterminism.

A change to ``workflows/`` that would break running conversations fails here. Histories are recorded
by ``python -m tests.histories.record``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from agentcore import AgentOptions
from agentcore.temporal import DATA_CONVERTER
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from agentcore.worker import workflow_runner
from agentcore.workflows import ConversationWorkflow
from tests.durable_support import add_tool, running_worker

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def _replayer() -> Replayer:
    return Replayer(
        workflows=[ConversationWorkflow],
        data_converter=DATA_CONVERTER,
        workflow_runner=workflow_runner(DATA_CONVERTER),
    )


def test_recorded_histories_exist() -> None:
    assert len(HISTORIES) >= 3, "record them with `python -m tests.histories.record`"


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_recorded_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    await _replayer().replay_workflow(history)


async def test_a_fresh_history_replays(temporal_client: Client, tmp_path: Path) -> None:
    model = ScriptedModel([tool_calls([("add", {"a": 1, "b": 2})]), text("3")])
    async with running_worker(temporal_client, tmp_path, model, tools=[add_tool()]) as h:
        agent = await h.agents.start("replay-fresh", AgentOptions(model=scripted_model(), tools=["add"]))
        await agent.prompt("1+2")
        await agent.steer("and a steer")
        await agent.wait_for_idle(timeout=20)
        history = await agent.handle.fetch_history()
    await _replayer().replay_workflow(history)


def test_every_patch_but_the_baseline_is_in_it() -> None:
    """A patch left out of BASELINE_PATCHES would record its own marker (and upsert) in every run;
    one added to it later would break runs recorded with the baseline. The set is exactly today's."""
    import importlib
    import pkgutil

    import agentcore.workflows
    from agentcore.workflows.state import (
        BASELINE_2_PATCHES,
        BASELINE_3_PATCHES,
        BASELINE_PATCHES,
        PATCH_BASELINE,
        PATCH_BASELINE_2,
        PATCH_BASELINE_3,
    )

    patches = set()
    for module_info in pkgutil.iter_modules(agentcore.workflows.__path__):
        module = importlib.import_module(f"agentcore.workflows.{module_info.name}")
        patches |= {value for name, value in vars(module).items() if name.startswith("PATCH_")}
    assert patches - {PATCH_BASELINE, PATCH_BASELINE_2, PATCH_BASELINE_3} == BASELINE_3_PATCHES
    # Each baseline is what runs recorded with it took as applied: it never changes.
    assert len(BASELINE_PATCHES) == 12 and BASELINE_2_PATCHES == BASELINE_PATCHES | {"paced-flush-v1"}
    assert BASELINE_3_PATCHES == BASELINE_2_PATCHES | {"branch-keeps-settings-v1"}


async def test_a_new_run_records_one_patch_marker(temporal_client: Client, tmp_path: Path) -> None:
    """A run on this code records the baseline's marker alone (and the SDK's one
    ``TemporalChangeVersion`` upsert with it), however many patched paths it takes."""
    from temporalio.api.enums.v1 import EventType

    from agentcore.workflows.state import PATCH_BASELINE_3

    model = ScriptedModel(
        lambda context: (
            text("ok") if context.messages[-1].role != "user" else tool_calls([("add", {"a": 1, "b": 2})])
        )
    )
    async with running_worker(temporal_client, tmp_path, model, tools=[add_tool()]) as h:
        agent = await h.agents.start("one-marker", AgentOptions(model=scripted_model(), tools=["add"]))
        for text_ in ("1+2", "again", "and again"):
            await agent.prompt(text_)
            await agent.wait_for_idle(timeout=20)
        history = await agent.handle.fetch_history()
    markers = [
        e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]
    assert len(markers) == 1 and PATCH_BASELINE_3.encode() in markers[0]
    change_versions = [
        e
        for e in history.events
        if "TemporalChangeVersion"
        in e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
    ]
    assert len(change_versions) == 1
    await _replayer().replay_workflow(history)
