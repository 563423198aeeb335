"""``AgentClient``: start, attach to, list and recover durable conversations.

    agents = await AgentClient.connect(task_queue="agentcore")   # TEMPORAL_* variables / profile file
    agent = await agents.start("support-42", AgentOptions(model=model, tools=["search_wines"]))
    await agent.prompt("Which Rioja do we have under $30?")
    await agent.wait_for_idle()

A ``DurableAgent`` has the in-process ``Agent``'s methods; each is a Temporal update, signal or query
on the conversation's workflow. Refused commands raise the same typed errors as in-process
(``AgentBusyError``, ``InvalidMessageRoleError``, ``RateLimitError``, ...); a session that does not
exist raises ``AgentNotFoundError``.

The modules: ``lifecycle`` (``AgentClient``), ``agent`` (``DurableAgent``), ``events`` (its event
stream and subscriptions), ``calls`` (the worker watch, resending refused calls, error mapping) and
``requests`` (request ids, prompts as user messages).
"""

from __future__ import annotations

from .agent import TERMINATE_ASK_SECONDS, DurableAgent
from .calls import (
    MAX_PAYLOAD_BYTES,
    QUERY_REFUSALS_RETRIED,
    TRANSIENT_RPC_STATUSES,
    UNPROCESSED_UPDATE,
    UPDATE_REFUSED_RETRY_SECONDS,
    WORKER_CHECK_MAX_SECONDS,
    WORKER_CHECK_SECONDS,
    WORKER_CONFIRM_SECONDS,
    WORKER_GONE_SECONDS,
    R,
    T,
    namespace_not_found,
)
from .events import RECONNECT_FIRST_PAUSE, RECONNECT_MAX_PAUSE, RECONNECT_TIMEOUT, Listener, logger
from .lifecycle import AgentClient, SessionSummary
from .requests import PromptInput, user_messages

__all__ = [
    "MAX_PAYLOAD_BYTES",
    "QUERY_REFUSALS_RETRIED",
    "RECONNECT_FIRST_PAUSE",
    "RECONNECT_MAX_PAUSE",
    "RECONNECT_TIMEOUT",
    "TERMINATE_ASK_SECONDS",
    "TRANSIENT_RPC_STATUSES",
    "UNPROCESSED_UPDATE",
    "UPDATE_REFUSED_RETRY_SECONDS",
    "WORKER_CHECK_MAX_SECONDS",
    "WORKER_CHECK_SECONDS",
    "WORKER_CONFIRM_SECONDS",
    "WORKER_GONE_SECONDS",
    "AgentClient",
    "DurableAgent",
    "Listener",
    "PromptInput",
    "R",
    "SessionSummary",
    "T",
    "logger",
    "namespace_not_found",
    "user_messages",
]
