"""The conversation's search attributes as Temporal keys (``agentcore.search_attributes`` holds them as
plain data, so the library half imports no Temporal). A module of its own: the workflow and the
schedule activities read the keys without loading the client's connection code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio.common import SearchAttributeKey

from ..search_attributes import SEARCH_ATTRIBUTES

__all__ = ["search_attribute_keys"]


def search_attribute_keys() -> dict[str, SearchAttributeKey[Any]]:
    """Each search attribute's typed key, by name."""
    makers: dict[str, Callable[[str], SearchAttributeKey[Any]]] = {
        "Keyword": SearchAttributeKey.for_keyword,
        "Int": SearchAttributeKey.for_int,
        "Double": SearchAttributeKey.for_float,
    }
    return {name: makers[kind](name) for name, kind in SEARCH_ATTRIBUTES.items()}
