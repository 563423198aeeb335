"""Connecting to Temporal with the converter agentcore's payloads need."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter, SerializationContext

from ..search_attributes import SEARCH_ATTRIBUTES
from .payloads import with_payload_store


class AgentcorePayloadConverter(PydanticPayloadConverter):
    """Temporal's pydantic payload converter, built once per process.

    The SDK makes a new data converter, and with it a new payload converter, for every workflow
    activation and every workflow run: a fresh composite of encoders and an empty cache of pydantic
    ``TypeAdapter``s each time (6 % of a worker's CPU on a tool turn, and every run rebuilt the
    adapters of the types it decodes). The converter is stateless apart from that cache, which is
    thread-safe, so every construction hands back the one shared instance. Payloads are byte for
    byte those of ``temporalio.contrib.pydantic.pydantic_data_converter``.
    """

    _shared: ClassVar[AgentcorePayloadConverter | None] = None

    def __new__(cls) -> AgentcorePayloadConverter:
        shared = cls.__dict__.get("_shared")
        if shared is None:
            shared = super().__new__(cls)
            PydanticPayloadConverter.__init__(shared)
            cls._shared = shared
        return shared

    def __init__(self) -> None:
        pass  # built once, in __new__

    def with_context(self, context: SerializationContext) -> AgentcorePayloadConverter:
        # None of its encoders reads the context; cloning would hand out the shared instance anyway.
        return self


# Every payload (workflow input, activity results, events) is a pydantic model.
DATA_CONVERTER = DataConverter(payload_converter_class=AgentcorePayloadConverter)


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


def ensure_data_converter(client: Client, payloads_dir: str | Path | None = None) -> Client:
    """The same connection with the pydantic converter (a client made without it cannot decode us),
    storing large payloads in ``payloads_dir`` when given (see ``agentcore.temporal.payloads``)."""
    converter = client.data_converter
    if converter.payload_converter_class is not DATA_CONVERTER.payload_converter_class:
        # Keep the client's codec (encryption) and storage: only the payload converter is swapped.
        converter = dataclasses.replace(
            DATA_CONVERTER, payload_codec=converter.payload_codec, external_storage=converter.external_storage
        )
    converter = with_payload_store(converter, payloads_dir)
    if converter is client.data_converter:
        return client
    config = client.config()
    config["data_converter"] = converter
    return Client(**config)


def search_attribute_keys() -> dict[str, SearchAttributeKey[Any]]:
    makers: dict[str, Callable[[str], SearchAttributeKey[Any]]] = {
        "Keyword": SearchAttributeKey.for_keyword,
        "Int": SearchAttributeKey.for_int,
        "Double": SearchAttributeKey.for_float,
    }
    return {name: makers[kind](name) for name, kind in SEARCH_ATTRIBUTES.items()}
