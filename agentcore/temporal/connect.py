"""Connecting to Temporal with the converter agentcore's payloads need."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter

from ..search_attributes import SEARCH_ATTRIBUTES

# Every payload (workflow input, activity results, events) is a pydantic model.
DATA_CONVERTER = pydantic_data_converter


def default_data_converter() -> DataConverter:
    """``DATA_CONVERTER``, with payload encryption when ``AGENTCORE_ENCRYPTION_KEY`` is set."""
    from .codec import codec_from_env, with_codec

    return with_codec(DATA_CONVERTER, codec_from_env())


async def connect(address: str | None = None, *, namespace: str | None = None, **kwargs: Any) -> Client:
    """Connect with the pydantic data converter. Defaults: ``TEMPORAL_ADDRESS`` / ``TEMPORAL_NAMESPACE``.

    With ``AGENTCORE_ENCRYPTION_KEY`` set, payloads are encrypted (see ``agentcore.temporal.codec``)."""
    if "data_converter" not in kwargs:
        kwargs["data_converter"] = default_data_converter()
    return await Client.connect(
        address or os.environ.get("TEMPORAL_ADDRESS", "localhost:7233"),
        namespace=namespace or os.environ.get("TEMPORAL_NAMESPACE", "default"),
        **kwargs,
    )


def ensure_data_converter(client: Client) -> Client:
    """The same connection with the pydantic converter (a client made without it cannot decode us)."""
    if client.data_converter.payload_converter_class is DATA_CONVERTER.payload_converter_class:
        return client
    config = client.config()
    # Keep the client's codec (encryption): only the payload converter is swapped.
    config["data_converter"] = dataclasses.replace(
        DATA_CONVERTER, payload_codec=client.data_converter.payload_codec
    )
    return Client(**config)


def search_attribute_keys() -> dict[str, SearchAttributeKey[Any]]:
    makers: dict[str, Callable[[str], SearchAttributeKey[Any]]] = {
        "Keyword": SearchAttributeKey.for_keyword,
        "Int": SearchAttributeKey.for_int,
        "Double": SearchAttributeKey.for_float,
    }
    return {name: makers[kind](name) for name, kind in SEARCH_ATTRIBUTES.items()}
