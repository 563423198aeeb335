"""The short load run of the stage (the 5-minute one is ``python -m tests.reliability.load``)."""

from __future__ import annotations

import os

import pytest
from temporalio.client import Client

from .load import run_load


# A minute of load, then its conversations are drained and checked: 100-105 s on a quiet 2-core
# machine, too near the suite's 120 s default.
@pytest.mark.timeout(300)
async def test_load_with_worker_kills_loses_and_duplicates_nothing(temporal_client: Client, tmp_path) -> None:  # type: ignore[no-untyped-def]
    client = temporal_client
    report = await run_load(
        client,
        client.service_client.config.target_host,
        tmp_path,
        conversations=int(os.environ.get("AGENTCORE_LOAD_CONVERSATIONS", 30)),
        duration=float(os.environ.get("AGENTCORE_LOAD_SECONDS", 60)),
        kill_every=float(os.environ.get("AGENTCORE_LOAD_KILL_EVERY", 25)),
    )
    print("\n" + report.summary())
    assert report.problems == []
    assert report.client_errors == []
    assert report.kills >= 2
    assert report.turns > 0
