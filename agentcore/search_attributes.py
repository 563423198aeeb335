"""The custom Temporal search attributes of a conversation workflow: the single source of truth.

A search attribute must be registered on the Temporal server (per namespace, with its type) before a
workflow may upsert it, or the upsert fails the workflow task. Three places must therefore agree:
the workflow that upserts them, whatever starts an embedded dev server (it must register them at
start-up), and ``docker-compose.yml``'s ``temporal-setup`` service (which runs
``temporal operator search-attribute create`` against the cluster). They all read, or are tested
against, this dict; ``tests/project/test_compose.py`` fails when the compose file drifts from it.

Deliberately plain data with no ``temporalio`` import, so the library half stays Temporal-free; the
Temporal edge maps the type strings to ``temporalio.common.SearchAttributeKey.for_keyword`` etc.
A registered attribute cannot change type, so never change an entry's type: add a new name instead.
"""

from __future__ import annotations

from typing import Final, Literal

SearchAttributeType = Literal["Keyword", "Int", "Double"]

AGENT_SESSION_ID: Final = "AgentSessionId"
AGENT_MODEL: Final = "AgentModel"
AGENT_STATUS: Final = "AgentStatus"
AGENT_MESSAGE_COUNT: Final = "AgentMessageCount"
AGENT_COST_USD: Final = "AgentCostUsd"
# ``AgentStatus`` values: idle, running, aborting, and this one while tool calls wait for a person
# (``AgentStatus = "awaiting_approval"`` lists them, in the CLI's ``approvals`` and the Web UI).
AWAITING_APPROVAL: Final = "awaiting_approval"

SEARCH_ATTRIBUTES: Final[dict[str, SearchAttributeType]] = {
    # Keyword, not Text: these are matched exactly (``AgentModel = "gpt-4o"``), never tokenised.
    AGENT_SESSION_ID: "Keyword",
    AGENT_MODEL: "Keyword",
    AGENT_STATUS: "Keyword",
    AGENT_MESSAGE_COUNT: "Int",
    AGENT_COST_USD: "Double",
}

__all__ = [
    "AGENT_COST_USD",
    "AGENT_MESSAGE_COUNT",
    "AGENT_MODEL",
    "AGENT_SESSION_ID",
    "AGENT_STATUS",
    "AWAITING_APPROVAL",
    "SEARCH_ATTRIBUTES",
    "SearchAttributeType",
]
