"""Record workflow histories for the replay tests: ``python -m tests.histories.record``.

Runs a few conversations (tool turns, steering, abort, continue-as-new) on a fresh dev server and
writes each run's history to ``tests/histories/<name>.json``. Re-record only when a change is meant
to be incompatible (see ``docs/versioning.md``); ``tests/test_replay.py`` replays every file.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from agentcore import AgentOptions
from agentcore.protocol import ConversationLimits
from agentcore.temporal import (
    DATA_CONVERTER,
    dynamic_config_args,
    find_temporal_binary,
    search_attribute_keys,
)
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.durable_support import add_tool, collect_run, running_worker, sleep_tool

HERE = Path(__file__).parent


async def record_all(client: Client, workdir: Path) -> dict[str, str]:
    histories: dict[str, str] = {}

    def respond(context):  # type: ignore[no-untyped-def]
        last = context.messages[-1]
        if last.role == "user" and "add" in last.text:
            return tool_calls([("add", {"a": 2, "b": 3}), ("add", {"a": 1, "b": 1})])
        if last.role == "user" and "sleep" in last.text:
            return tool_calls([("sleep", {"seconds": 0.5})])
        return text(f"reply to {last.role}")

    limits = ConversationLimits(
        continue_as_new_after_events=60, llm_heartbeat_seconds=2, tool_heartbeat_seconds=2
    )
    async with running_worker(
        client, workdir, ScriptedModel(respond), tools=[add_tool(), sleep_tool()], limits=limits
    ) as h:
        agent = await h.agents.start(
            "tools-and-steering", AgentOptions(model=scripted_model(), tools=["add", "sleep"])
        )
        await agent.prompt("please add")
        await agent.wait_for_idle(timeout=30)
        offset = await agent.event_offset()
        await agent.prompt("please sleep")
        await agent.steer("steering message")
        await collect_run(agent, offset)
        await agent.follow_up("a follow-up")
        await agent.continue_()
        await agent.wait_for_idle(timeout=30)
        await agent.set_thinking_level("high")
        await agent.prompt("please sleep")
        await asyncio.sleep(0.3)
        await agent.abort()
        await agent.wait_for_idle(timeout=30)
        for i in range(5):  # past continue_as_new_after_events: the history ends in continue-as-new
            await agent.prompt(f"more {i}")
            await agent.wait_for_idle(timeout=30)
        executions = [e async for e in client.list_workflows(f'WorkflowId = "{agent.session_id}"')]
        for number, execution in enumerate(sorted(executions, key=lambda e: e.start_time), start=1):
            run_history = await client.get_workflow_handle(
                agent.session_id, run_id=execution.run_id
            ).fetch_history()
            if len(run_history.events) < 4:  # a run that has not had a workflow task yet
                continue
            histories[f"{agent.session_id}-run{number}"] = run_history.to_json()
    return histories


async def record_tree(client: Client, workdir: Path) -> dict[str, str]:
    """Compaction, branch (model-written summary), label, name, settings updates."""
    from agentcore.compaction import BRANCH_SUMMARY_SYSTEM_PROMPT, COMPACTION_SYSTEM_PROMPT

    def respond(context):  # type: ignore[no-untyped-def]
        if context.system_prompt in (COMPACTION_SYSTEM_PROMPT, BRANCH_SUMMARY_SYSTEM_PROMPT):
            return text("## Goal\nRecorded summary.")
        last = context.messages[-1]
        if last.role == "user" and "add" in last.text:
            return tool_calls([("add", {"a": 2, "b": 3})])
        return text(f"reply to {last.role} " + "words " * 30)

    histories: dict[str, str] = {}
    async with running_worker(client, workdir, ScriptedModel(respond), tools=[add_tool()]) as h:
        agent = await h.agents.start("tree", AgentOptions(model=scripted_model(), tools=["add"]))
        for i in range(6):
            await agent.prompt(f"please add {i}")
            await agent.wait_for_idle(timeout=30)
        page = await agent.get_messages()
        await agent.set_label(page.entry_ids[3], "first answer")  # type: ignore[arg-type]
        await agent.set_session_name("Recorded tree")
        await agent.compact("keep the sums")
        await agent.prompt("no tools now")
        await agent.wait_for_idle(timeout=30)
        page = await agent.get_messages()
        await agent.branch(page.entry_ids[1], summarize=True)
        await agent.set_model(scripted_model("other"))
        await agent.set_system_prompt("Be terse.")
        await agent.prompt("after the branch")
        await agent.wait_for_idle(timeout=30)
        await agent.branch(None)  # back to the start: the settings are recorded again
        await agent.prompt("from the start")
        await agent.wait_for_idle(timeout=30)
        history = await agent.handle.fetch_history()
        histories["tree-run1"] = history.to_json()
    return histories


async def record_streaming(client: Client, workdir: Path) -> dict[str, str]:
    """Tool turns watched by a live subscriber: poll Updates in the history.

    Quick model calls (local activities), a call that streams its own deltas and a quiet one (both
    handed from a local attempt to a remote activity), remote calls after a slow one, and an abort
    of a handed-off call."""

    def respond(context):  # type: ignore[no-untyped-def]
        last = context.messages[-1]
        if last.role == "user" and "add" in last.text:
            return tool_calls([("add", {"a": 2, "b": 3}), ("add", {"a": 1, "b": 1})])
        return text(f"reply to {last.role}")

    quick, streamed = ScriptedModel(respond), ScriptedModel(respond, chunks=3, delay=0.05)

    async def stream(model, context, options):  # type: ignore[no-untyped-def]
        prompt = next(m.text for m in reversed(context.messages) if m.role == "user")
        if "quietly" in prompt:
            await asyncio.sleep(0.3)
        if "abort" in prompt:
            await options.signal.wait()
        source = streamed if "stream" in prompt else quick
        async for event in source(model, context, options):
            yield event

    histories: dict[str, str] = {}
    async with running_worker(client, workdir, stream, tools=[add_tool()]) as h:
        agent = await h.agents.start("streaming", AgentOptions(model=scripted_model(), tools=["add"]))
        offset = await agent.event_offset()
        prompts = ["please add 0", "quietly please add", "stream: please add", "please add 1", "add 2"]
        for prompt in [*prompts, "then abort"]:
            watcher = asyncio.create_task(collect_run(agent, offset))
            await asyncio.sleep(0.2)  # the subscriber's poll is waiting before the prompt lands
            await agent.prompt(prompt)
            if "abort" in prompt:
                await agent.abort()
            events = await watcher
            assert events[-1].type == "agent_end", events[-1]
            offset = await agent.event_offset()
        history = await agent.handle.fetch_history()
        histories["streaming-run1"] = history.to_json()
    return histories


async def record_paced(client: Client, workdir: Path) -> dict[str, str]:
    """Runs a person paces (more than FLUSH_DELAY apart) with one subscriber throughout: each run's
    entries are flushed at the subscriber's next poll, not by the timer."""

    def respond(context):  # type: ignore[no-untyped-def]
        last = context.messages[-1]
        if last.role == "user" and "add" in last.text:
            return tool_calls([("add", {"a": 2, "b": 3})])
        return text(f"reply to {last.role}")

    histories: dict[str, str] = {}
    async with running_worker(client, workdir, ScriptedModel(respond), tools=[add_tool()]) as h:
        agent = await h.agents.start("paced", AgentOptions(model=scripted_model(), tools=["add"]))
        ends: asyncio.Queue[None] = asyncio.Queue()

        async def subscribe() -> None:
            async for _, event in agent.events(await agent.event_offset()):
                if event.type == "agent_end":
                    ends.put_nowait(None)

        subscriber = asyncio.create_task(subscribe())
        for index, prompt in enumerate(["please add", "thanks", "please add again", "bye"]):
            if index:
                await asyncio.sleep(1.3)
            await agent.prompt(prompt)
            await asyncio.wait_for(ends.get(), 30)
        await asyncio.sleep(0.5)
        subscriber.cancel()
        history = await agent.handle.fetch_history()
        histories["paced-run1"] = history.to_json()
    return histories


async def record_subagents(client: Client, workdir: Path) -> dict[str, str]:
    """A sub-agent tool's calls as child workflows: one that finishes (with a tool call and progress
    sent to the parent), one aborted through its parent while its tool runs."""
    from agentcore import subagent_tool

    def respond(context):  # type: ignore[no-untyped-def]
        turn = sum(1 for message in context.messages if message.role == "assistant")
        last = context.messages[-1]
        if context.system_prompt == "child":
            if turn == 0:
                name, arguments = (
                    ("sleep", {"seconds": 30})
                    if "slow" in context.messages[0].text
                    else (
                        "add",
                        {"a": 2, "b": 3},
                    )
                )
                return tool_calls([(name, arguments)], preamble="Working on it.")
            return text("The child's answer.")
        if last.role == "user":
            return tool_calls([("helper", {"task": last.text})])
        return text(f"reply to {last.role}")

    helper = subagent_tool(
        "helper",
        "Does one task.",
        AgentOptions(model=scripted_model(), system_prompt="child", tools=[add_tool(), sleep_tool()]),
    )
    histories: dict[str, str] = {}
    async with running_worker(client, workdir, ScriptedModel(respond), tools=[helper]) as h:
        agent = await h.agents.start("subagents", AgentOptions(model=scripted_model(), tools=["helper"]))
        await agent.prompt("add two numbers")
        await agent.wait_for_idle(timeout=30)
        offset = await agent.event_offset()
        await agent.prompt("something slow")
        async for _, event in agent.events(offset):
            if event.type == "tool_execution_update" and event.partial_result.details["event"] == (
                "tool_execution_start"
            ):
                await agent.abort()
            if event.type == "agent_end":
                break
        await agent.wait_for_idle(timeout=30)
        histories["subagents-run1"] = (await agent.handle.fetch_history()).to_json()
        for index, child_id in enumerate(["subagents.sub.call_0_0", "subagents.sub.call_2_0"], start=1):
            child = client.get_workflow_handle(child_id)
            histories[f"subagents-child{index}-run1"] = (await child.fetch_history()).to_json()
    return histories


async def record_wakeups(client: Client, workdir: Path) -> dict[str, str]:
    """Wake-ups: one the application schedules and lets fire, one cancelled, one the model schedules
    (``wakeup_tool``) and lets fire, a recurring message delivered, then a reset (which cancels the
    pending wake-up and deletes the schedule)."""
    from datetime import timedelta

    from agentcore import wakeup_tool
    from tests.durable_support import eventually

    def respond(context):  # type: ignore[no-untyped-def]
        last = context.messages[-1]
        if last.role == "user" and "check back" in last.text:
            return tool_calls([("schedule_wakeup", {"note": "the model's check", "delay_seconds": 1})])
        return text(f"reply to {last.role}")

    def said(fragment: str):  # type: ignore[no-untyped-def]
        return lambda state: (
            state.status == "idle"
            and any(fragment in message.text for message in state.messages if message.role == "user")
        )

    tool = wakeup_tool(min_delay=timedelta(seconds=1))
    histories: dict[str, str] = {}
    async with running_worker(client, workdir, ScriptedModel(respond), tools=[tool]) as h:
        agent = await h.agents.start(
            "wakeups", AgentOptions(model=scripted_model(), tools=["schedule_wakeup"])
        )
        await agent.schedule_wakeup("the application's check", after=timedelta(seconds=1))
        await agent.cancel_wakeup(await agent.schedule_wakeup("never", after=timedelta(hours=1)))
        await eventually(agent.get_state, said("the application's check"))
        await agent.prompt("please check back later")
        await eventually(agent.get_state, said("the model's check"))
        await agent.schedule("every second", every=timedelta(seconds=1))
        await eventually(agent.get_state, said("[scheduled message] every second"))
        await agent.schedule_wakeup("pending at the reset", after=timedelta(hours=1))
        await agent.wait_for_idle(timeout=30)
        await agent.reset()
        await agent.wait_for_idle(timeout=30)
        histories["wakeups-run1"] = (await agent.handle.fetch_history()).to_json()
    return histories


async def record_approvals(client: Client, workdir: Path) -> dict[str, str]:
    """Tool approvals: one approved, one approved with edited arguments, one denied, one expired,
    one aborted while it waits, then one set aside to continue as new while it waits and approved
    in the next run."""
    from tests.durable_support import FAST_LIMITS
    from tests.test_approvals import deploy_tool

    def respond(context):  # type: ignore[no-untyped-def]
        last = context.messages[-1]
        if last.role == "user":
            return tool_calls(
                [{"id": f"call-{len(context.messages)}", "name": "deploy", "arguments": {"service": "web"}}]
            )
        return text(f"reply to {last.role}")

    async def asked(agent, offset: int) -> str:  # type: ignore[no-untyped-def]
        async for _, event in agent.events(offset):
            if event.type == "tool_approval_requested":
                return str(event.tool_call_id)
        raise AssertionError("no approval was asked for")

    limits = FAST_LIMITS.model_copy(update={"continue_as_new_after_events": 150})
    tool = deploy_tool([], approval_timeout_seconds=60)
    quick = deploy_tool([], approval_timeout_seconds=1).model_copy(update={"name": "deploy_now"})
    histories: dict[str, str] = {}
    async with running_worker(
        client, workdir, ScriptedModel(respond), tools=[tool, quick], limits=limits
    ) as h:
        agent = await h.agents.start("approvals", AgentOptions(model=scripted_model(), tools=["deploy"]))
        for decide in ("approve", "edit", "deny", "abort"):
            offset = await agent.event_offset()
            await agent.prompt(f"deploy ({decide})")
            call = await asked(agent, offset)
            if decide == "approve":
                await agent.approve(call)
            elif decide == "edit":
                await agent.approve(call, {"service": "api", "replicas": 2})
            elif decide == "deny":
                await agent.deny(call, "not today")
            else:
                await agent.abort()
            await agent.wait_for_idle(timeout=30)
        await agent.set_tools(["deploy_now"])
        await agent.prompt("deploy (nobody answers)")
        await agent.wait_for_idle(timeout=30)
        await agent.set_tools(["deploy"])
        offset = await agent.event_offset()
        first_run = (await agent.handle.describe()).run_id
        await agent.prompt("deploy (after a roll-over)")
        call = await asked(agent, offset)
        for index in range(60):  # history grows while it waits, until it continues as new
            if (await agent.handle.describe()).run_id != first_run:
                break
            await agent.set_session_name(f"name {index}")
        await asked(agent, await agent.event_offset() - 1)
        await agent.approve(call)
        await agent.wait_for_idle(timeout=30)
        executions = [e async for e in client.list_workflows(f'WorkflowId = "{agent.session_id}"')]
        for number, execution in enumerate(sorted(executions, key=lambda e: e.start_time), start=1):
            handle = client.get_workflow_handle(agent.session_id, run_id=execution.run_id)
            histories[f"approvals-run{number}"] = (await handle.fetch_history()).to_json()
    return histories


async def record_run(client: Client, workdir: Path) -> dict[str, str]:
    """Turns read by ``run`` (the ``prompt_and_wait`` update): a tool turn, one steered while its
    tool runs, one sent twice with the same id, then one whose tool waits for approval while the
    conversation continues as new (the wait is refused as ROLLING_OVER there and answered by the
    next run), with a ``wait_for_idle`` waiting beside it."""
    from tests.durable_support import FAST_LIMITS
    from tests.test_approvals import deploy_tool

    def respond(context):  # type: ignore[no-untyped-def]
        last = context.messages[-1]
        if last.role == "user" and "add" in last.text:
            return tool_calls([("add", {"a": 2, "b": 3})])
        if last.role == "user" and "sleep" in last.text:
            return tool_calls([("sleep", {"seconds": 0.5})])
        if last.role == "user" and "deploy" in last.text:
            return tool_calls([{"id": "call-deploy", "name": "deploy", "arguments": {"service": "web"}}])
        return text(f"reply to {last.role}")

    limits = FAST_LIMITS.model_copy(update={"continue_as_new_after_events": 120})
    tools = [add_tool(), sleep_tool(), deploy_tool([], approval_timeout_seconds=60)]
    histories: dict[str, str] = {}
    async with running_worker(client, workdir, ScriptedModel(respond), tools=tools, limits=limits) as h:
        agent = await h.agents.start(
            "run", AgentOptions(model=scripted_model(), tools=["add", "sleep", "deploy"])
        )
        await agent.run("please add", timeout=30)
        steered = asyncio.ensure_future(agent.run("please sleep", timeout=30))
        await asyncio.sleep(0.2)
        await agent.steer("steering message")
        await steered
        await asyncio.gather(
            agent.run("thanks", id="same", timeout=30), agent.run("thanks", id="same", timeout=30)
        )
        first_run = (await agent.handle.describe()).run_id
        offset = await agent.event_offset()
        waiting = asyncio.ensure_future(agent.run("please deploy", timeout=60))
        async for _, event in agent.events(offset):
            if event.type == "tool_approval_requested":
                break
        idle = asyncio.ensure_future(agent.wait_for_idle(timeout=60))
        for index in range(60):  # history grows while it waits, until it continues as new
            if (await agent.handle.describe()).run_id != first_run:
                break
            await agent.set_session_name(f"name {index}")
        await asyncio.sleep(0.5)
        await agent.approve("call-deploy")
        await waiting
        await idle
        executions = [e async for e in client.list_workflows(f'WorkflowId = "{agent.session_id}"')]
        for number, execution in enumerate(sorted(executions, key=lambda e: e.start_time), start=1):
            handle = client.get_workflow_handle(agent.session_id, run_id=execution.run_id)
            histories[f"run-run{number}"] = (await handle.fetch_history()).to_json()
    return histories


async def main() -> None:
    env = await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER,
        dev_server_existing_path=find_temporal_binary(),
        search_attributes=list(search_attribute_keys().values()),
        dev_server_extra_args=dynamic_config_args(),
    )
    try:
        only = sys.argv[1:]
        recorders = {
            "tools-and-steering": record_all,
            "tree": record_tree,
            "streaming": record_streaming,
            "paced": record_paced,
            "subagents": record_subagents,
            "wakeups": record_wakeups,
            "approvals": record_approvals,
            "run": record_run,
        }
        histories: dict[str, str] = {}
        for name, recorder in recorders.items():
            if only and name not in only:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                histories.update(await recorder(env.client, Path(tmp)))
    finally:
        await env.shutdown()
    for name, data in histories.items():
        (HERE / f"{name}.json").write_text(data)
        print(f"recorded {name}.json ({len(data)} bytes)")


if __name__ == "__main__":
    asyncio.run(main())
