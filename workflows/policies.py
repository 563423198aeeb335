"""Activity timeouts and retry policies, in one place (named, never scattered literals).

Temporal owns retries: providers classify failures (retryable or not, and the delay the server asked
for) and the activities turn that into ``ApplicationError(non_retryable=..., next_retry_delay=...)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio.common import RetryPolicy

from agentcore.protocol import ConversationLimits

# Error types an activity raises that retrying cannot fix.
NON_RETRYABLE_SESSION_ERRORS = [
    "SESSION_CORRUPT",
    "SESSION_PATH_OUTSIDE_ROOT",
    "SESSION_UNKNOWN_ENTRY_TYPE",
    "SESSION_INVALID_PARENT",
    "SESSION_NOT_SESSION_FILE",
]


@dataclass(frozen=True)
class ActivityOptions:
    start_to_close: timedelta
    heartbeat: timedelta | None
    retry: RetryPolicy


def llm_call(limits: ConversationLimits) -> ActivityOptions:
    # A short heartbeat timeout is what makes abort fast: cancellation reaches an activity only
    # through its heartbeats (the worker throttles them to ``HEARTBEAT_THROTTLE``).
    return ActivityOptions(
        start_to_close=timedelta(seconds=limits.llm_timeout_seconds),
        heartbeat=timedelta(seconds=limits.llm_heartbeat_seconds),
        retry=RetryPolicy(
            initial_interval=timedelta(seconds=1),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(seconds=60),
            maximum_attempts=limits.llm_max_attempts,
        ),
    )


def tool_call(limits: ConversationLimits, timeout_seconds: float, retry_safe: bool) -> ActivityOptions:
    # The activity enforces the tool's own timeout (an EXECUTION_TIMEOUT result, like in-process);
    # start-to-close is only the backstop. A tool that must not run twice gets one attempt: if its
    # worker dies, the call is recorded as "outcome unknown" instead of silently re-run.
    return ActivityOptions(
        start_to_close=timedelta(seconds=timeout_seconds + 30),
        heartbeat=timedelta(seconds=limits.tool_heartbeat_seconds),
        retry=RetryPolicy(
            initial_interval=timedelta(milliseconds=200),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(seconds=10),
            maximum_attempts=limits.tool_max_attempts if retry_safe else 1,
        ),
    )


SESSION_WRITE = ActivityOptions(
    start_to_close=timedelta(seconds=30),
    heartbeat=None,
    retry=RetryPolicy(
        initial_interval=timedelta(milliseconds=200),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=10),
        non_retryable_error_types=NON_RETRYABLE_SESSION_ERRORS,
    ),
)

DESCRIBE_TOOLS = ActivityOptions(
    start_to_close=timedelta(seconds=1), heartbeat=None, retry=RetryPolicy(maximum_attempts=1)
)

DESCRIBE_TOOLS = ActivityOptions(
    start_to_close=timedelta(seconds=10),
    heartbeat=None,
    retry=RetryPolicy(maximum_attempts=5),
)

# A conversation's Temporal Schedules, made and deleted through the worker's client.
SCHEDULES = ActivityOptions(
    start_to_close=timedelta(seconds=30),
    heartbeat=None,
    retry=RetryPolicy(maximum_attempts=10, non_retryable_error_types=["VALIDATION_ERROR"]),
)

# Worker-side: how often heartbeats actually go out (bounds abort latency for long activities).
HEARTBEAT_THROTTLE = timedelta(milliseconds=300)

COMPACTION = ActivityOptions(
    start_to_close=timedelta(minutes=10),
    heartbeat=None,
    retry=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=4,
        non_retryable_error_types=NON_RETRYABLE_SESSION_ERRORS,
    ),
)
