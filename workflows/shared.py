"""What every part of the conversation workflow uses: workflow time and ids, and how refusals look."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError


def now_ms() -> int:
    """Workflow time in milliseconds: the same on replay."""
    return int(workflow.now().timestamp() * 1000)


def new_id() -> str:
    """An entry id from ``workflow.uuid4``: a replay makes the same one, so it appends the same entry."""
    return workflow.uuid4().hex


def failure(err: ActivityError, default_code: str) -> tuple[str, str]:
    """An activity's failure as ``(code, message)``: its ApplicationError's type and message, else
    ``default_code`` and the error's text."""
    cause = err.cause
    if isinstance(cause, ApplicationError):
        return cause.type or default_code, cause.message
    return default_code, str(cause or err)


def refuse(code: str, message: str) -> ApplicationError:
    # ``type`` carries the spec's code so the client rebuilds the same typed error.
    return ApplicationError(message, type=code, non_retryable=True)
