"""A conversation survives its worker whatever its clients do (``tests/reliability/watched.py``).

Sixty conversations, each followed by an event subscriber and queried (its state, its messages, its
queues, the Web UI's stack trace and metadata) for the whole test, every 20 ms while a turn of it
runs, take three turns of quick tools (twenty turns at a time): side by side, awaiting approval, in a
sub-agent, steered, followed up. Then the worker is
SIGKILLed and replaced: every conversation must answer one more prompt, no history may hold a failed
workflow task or fail to replay (sub-agents' child workflows included), and every session file must
equal its workflow's state. With three workers and no fault, no tool call and no model call may run
twice.

    .venv/bin/python -m pytest -q tests/reliability --run-reliability -k watched -s

``AGENTCORE_WATCHED_CONVERSATIONS``, ``AGENTCORE_WATCHED_QUERY_INTERVAL`` and
``AGENTCORE_WATCHED_IDLE_QUERY_INTERVAL`` (seconds) change the load;
``python -m tests.reliability.watched --runs 10`` repeats it outside pytest.
"""

from __future__ import annotations

import os

import pytest

from .conftest import Rig
from .watched import CONVERSATIONS, IDLE_QUERY_INTERVAL, QUERY_INTERVAL, WatchedReport, run_watched

WATCHED_CONVERSATIONS = int(os.environ.get("AGENTCORE_WATCHED_CONVERSATIONS", CONVERSATIONS))
WATCHED_QUERY_INTERVAL = float(os.environ.get("AGENTCORE_WATCHED_QUERY_INTERVAL", QUERY_INTERVAL))
WATCHED_IDLE_QUERY_INTERVAL = float(
    os.environ.get("AGENTCORE_WATCHED_IDLE_QUERY_INTERVAL", IDLE_QUERY_INTERVAL)
)


async def _run(rig: Rig, *, workers: int, kill: bool) -> WatchedReport:
    return await run_watched(
        rig,
        conversations=WATCHED_CONVERSATIONS,
        query_interval=WATCHED_QUERY_INTERVAL,
        idle_query_interval=WATCHED_IDLE_QUERY_INTERVAL,
        workers=workers,
        kill=kill,
    )


def _explain(report: WatchedReport, failures: list[str]) -> str:
    more = [f"... {len(failures) - 40} more in {report.failures_file}"] if len(failures) > 40 else []
    return "\n".join([report.summary(), *failures[:40], *more])


# About a minute or two on two cores when every conversation answers; one that does not is waited
# for (its turn's and its last prompt's timeouts) before the checks say why. A query that reaches
# the new worker with history events ahead of their workflow task is refused once and sent again
# (``workflows/task_guard.py``): without that, one run in one or two left a history that does not
# replay.
@pytest.mark.no_replay_check("replays every history itself (history_problems) and reports each")
@pytest.mark.timeout(600)
async def test_watched_conversations_survive_a_worker_kill(rig: Rig) -> None:
    report = await _run(rig, workers=1, kill=True)
    print("\n" + report.summary())
    failures = report.failures()
    assert failures == [], _explain(report, failures)


@pytest.mark.timeout(600)
async def test_watched_conversations_on_three_workers_run_nothing_twice(rig: Rig) -> None:
    report = await _run(rig, workers=3, kill=False)
    print("\n" + report.summary())
    duplicates = [
        *(f"tool call {key} ran {n} times" for key, n in report.duplicate_tools.items()),
        *(f"model call {key} ran {n} times" for key, n in report.duplicate_models.items()),
    ]
    assert report.tool_calls > 0 and report.model_calls > 0, "the execution log counted nothing"
    assert duplicates == [], _explain(report, duplicates)
    failures = report.failures()
    assert failures == [], _explain(report, failures)
