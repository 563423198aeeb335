"""One logging setup for every ``agentcore`` command: readable by default, JSON lines on request.

    setup_logging()                      # AGENTCORE_LOG_FORMAT (text | json), AGENTCORE_LOG_LEVEL
    setup_logging("json", "DEBUG")       # --log-format json --log-level DEBUG

Text: the command's own messages (logger ``agentcore.cli``) as plain lines, everything else with
time, level and logger. JSON: one object per line (``python-json-logger``) with ``time``, ``level``,
``logger``, ``message`` and, where the record comes from a workflow or an activity, ``session_id``
(the workflow id), ``workflow_run_id``, ``workflow_type``, ``activity``, ``activity_id`` and
``attempt``: Temporal's ``workflow.logger`` and ``activity.logger`` put those in the record's
``extra``, and they are lifted to the top level here so a log search can filter on them.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Literal, TextIO

from pythonjsonlogger.json import JsonFormatter

LOG_FORMAT_ENV = "AGENTCORE_LOG_FORMAT"
LOG_LEVEL_ENV = "AGENTCORE_LOG_LEVEL"
LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
CLI_LOGGER = "agentcore.cli"

# Temporal's context dicts -> the flat fields a log search filters on.
_WORKFLOW_FIELDS = {
    "workflow_id": "session_id",
    "run_id": "workflow_run_id",
    "workflow_type": "workflow_type",
    "task_queue": "task_queue",
}
_ACTIVITY_FIELDS = {
    "workflow_id": "session_id",
    "workflow_run_id": "workflow_run_id",
    "workflow_type": "workflow_type",
    "activity_type": "activity",
    "activity_id": "activity_id",
    "attempt": "attempt",
    "task_queue": "task_queue",
}


class TemporalContextFilter(logging.Filter):
    """Lift ``temporal_workflow`` / ``temporal_activity`` (Temporal's logger ``extra``) to fields."""

    def __init__(self, *, strip_message_suffix: bool) -> None:
        super().__init__()
        self.strip_message_suffix = strip_message_suffix

    def filter(self, record: logging.LogRecord) -> bool:
        for key, fields in (("temporal_workflow", _WORKFLOW_FIELDS), ("temporal_activity", _ACTIVITY_FIELDS)):
            details = record.__dict__.get(key)
            if not isinstance(details, dict):
                continue
            for source, target in fields.items():
                value = details.get(source)
                if value is not None:
                    setattr(record, target, value)
            if self.strip_message_suffix and isinstance(record.msg, str):
                # The SDK also appends the dict to the message text; in JSON it is in the fields.
                record.msg = record.msg.removesuffix(f" ({details})")
            delattr(record, key)
        return True


class TextFormatter(logging.Formatter):
    """The command's own lines as they are (errors prefixed ``agentcore:``); others with context."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        if record.name == CLI_LOGGER:
            message = record.getMessage()
            return f"agentcore: {message}" if record.levelno >= logging.ERROR else message
        return super().format(record)


def json_formatter() -> JsonFormatter:
    return JsonFormatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        timestamp=False,
        datefmt="%Y-%m-%dT%H:%M:%S%z",
    )


def log_format_from_env(default: LogFormat = "text") -> LogFormat:
    value = os.environ.get(LOG_FORMAT_ENV, "").strip().lower()
    return value if value in LOG_FORMATS else default


def setup_logging(
    log_format: str | None = None, level: str | int | None = None, *, stream: TextIO | None = None
) -> None:
    """Configure the root logger once for this process (a second call replaces the first).

    ``log_format``: ``text`` or ``json`` (default ``AGENTCORE_LOG_FORMAT``, else text); ``level``:
    a level name or number (default ``AGENTCORE_LOG_LEVEL``, else INFO)."""
    chosen = (log_format or log_format_from_env()).lower()
    if chosen not in LOG_FORMATS:
        raise ValueError(f"log format {log_format!r}: choose one of {', '.join(LOG_FORMATS)}")
    level = level if level is not None else os.environ.get(LOG_LEVEL_ENV, "INFO")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(json_formatter() if chosen == "json" else TextFormatter())
    handler.addFilter(TemporalContextFilter(strip_message_suffix=chosen == "json"))
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _MARK, False)]:
        root.removeHandler(old)
    setattr(handler, _MARK, True)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    # The HTTP clients log every request at INFO: noise in a worker's log.
    for noisy in ("httpx", "httpcore", "urllib3"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


_MARK = "_agentcore_handler"


def cli_logger() -> logging.Logger:
    return logging.getLogger(CLI_LOGGER)


__all__ = ["LOG_FORMATS", "LOG_FORMAT_ENV", "cli_logger", "setup_logging"]
