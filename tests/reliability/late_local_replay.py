"""Do conversations read while they run replay? A diagnostic for issue 49's first cause: a local
activity's result that a query made come a workflow task late (docs/versioning.md, "No local
activities, by design").

    python -m tests.reliability.late_local_replay                # 100 conversations, 3 turns each
    python -m tests.reliability.late_local_replay --no-queries   # the same without get_state
    python -m tests.reliability.late_local_replay --max-cached 4 # runs evicted all along

Each conversation has an event subscriber (the web page's, the terminal chat's) and takes tool turns;
with queries on, a client calls ``get_state`` while each turn runs. Then every history is replayed.
Prints how many conversations had a local activity's result come a task late (none can now: no
conversation makes a local activity) and how many histories failed to replay (with the first error).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from agentcore import AgentOptions
from agentcore.temporal import (
    DATA_CONVERTER,
    dynamic_config_args,
    find_temporal_binary,
    search_attribute_keys,
)
from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from tests.support.durable import Harness, add_tool, running_worker
from tests.workflows.test_replay import _replayer


def _reply(context: Any) -> Any:
    # Two quick tools side by side, then an answer: local attempts in a row and in parallel.
    if context.messages[-1].role == "user":
        return tool_calls([("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})])
    return text("three and seven, " * 4)


def _late_local_results(history: WorkflowHistory) -> int:
    """Workflow tasks whose last command is a local activity's marker with another task at once
    after them: the worker completed the task before the workflow acted on that result."""
    kinds = [event.event_type for event in history.events]
    return sum(
        1
        for index in range(1, len(kinds))
        if kinds[index] == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
        and kinds[index - 1] == EventType.EVENT_TYPE_MARKER_RECORDED
    )


async def _converse(h: Harness, name: str, turns: int, queries: bool) -> WorkflowHistory:
    agent = await h.agents.start(name, AgentOptions(model=scripted_model(), tools=["add"]))

    async def follow() -> None:
        async for _offset, _event in agent.events():
            pass

    subscriber = asyncio.create_task(follow())
    for turn in range(turns):
        await agent.prompt(f"turn {turn}")
        looks = []
        for _ in range(2 if queries else 0):  # one as the turn starts, one a little later
            looks.append(asyncio.create_task(agent.get_state()))
            await asyncio.sleep(0.003)
        await agent.wait_for_idle(timeout=60)
        await asyncio.gather(*looks)
    subscriber.cancel()
    await asyncio.gather(subscriber, return_exceptions=True)
    return await agent.handle.fetch_history()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--no-queries", action="store_true")
    parser.add_argument("--keep", metavar="DIR", help="write the histories that failed to replay here")
    parser.add_argument(
        "--max-cached", type=int, metavar="N", help="the worker's max_cached_workflows (evictions all along)"
    )
    args = parser.parse_args()
    env = await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER,
        dev_server_existing_path=find_temporal_binary(),
        search_attributes=list(search_attribute_keys().values()),
        dev_server_log_level="error",
        dev_server_extra_args=dynamic_config_args(),
    )
    late = failed = 0
    first_error = ""
    try:
        model = ScriptedModel(_reply, chunks=4, delay=0.005)
        with tempfile.TemporaryDirectory() as tmp:
            cache = {} if args.max_cached is None else {"max_cached_workflows": args.max_cached}
            async with running_worker(env.client, Path(tmp), model, tools=[add_tool()], **cache) as h:
                for batch in range(0, args.conversations, 10):
                    names = [f"late-{n}" for n in range(batch, min(batch + 10, args.conversations))]
                    histories = await asyncio.gather(
                        *(_converse(h, name, args.turns, not args.no_queries) for name in names)
                    )
                    for history in histories:
                        late += bool(_late_local_results(history))
                        try:
                            await _replayer().replay_workflow(history)
                        except Exception as err:
                            failed += 1
                            if args.keep:
                                Path(args.keep).mkdir(parents=True, exist_ok=True)
                                (Path(args.keep) / f"{history.workflow_id}.json").write_text(
                                    history.to_json()
                                )
                            first_error = first_error or f"{history.workflow_id}: {err}"
    finally:
        await env.shutdown()
    print(
        f"{args.conversations} conversations ({'with' if not args.no_queries else 'without'} get_state "
        f"during turns): {late} with a local result a task late, {failed} failed to replay"
    )
    if first_error:
        print("first failure:", first_error[:600])


if __name__ == "__main__":
    asyncio.run(main())
