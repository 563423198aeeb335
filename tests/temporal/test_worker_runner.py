"""The worker's converter and runner keep Temporal's behaviour (see agentcore.temporal.runner)."""

from __future__ import annotations

from typing import Any

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import PayloadCodec, SerializationContext, WithSerializationContext
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from agentcore.messages import AssistantMessage, TextContent
from agentcore.protocol import StreamResult
from agentcore.temporal import DATA_CONVERTER
from agentcore.temporal.codec import EncryptionCodec, with_codec
from agentcore.temporal.connect import AgentcorePayloadConverter
from agentcore.temporal.runner import ContextFreeSandboxedRunner, is_context_free
from agentcore.worker import workflow_runner


class _ContextCodec(PayloadCodec, WithSerializationContext):
    """A codec that wants to know which workflow or activity a payload belongs to."""

    def __init__(self, context: SerializationContext | None = None) -> None:
        self.context = context

    async def encode(self, payloads: Any) -> Any:
        return list(payloads)

    async def decode(self, payloads: Any) -> Any:
        return list(payloads)

    def with_context(self, context: SerializationContext) -> _ContextCodec:
        return _ContextCodec(context)


def test_payload_converter_is_built_once_and_writes_the_same_bytes() -> None:
    assert AgentcorePayloadConverter() is AgentcorePayloadConverter()
    message = AssistantMessage(
        api="x", provider="p", model="m", content=[TextContent(text="hi")], stop_reason="stop", timestamp=1
    )
    value = StreamResult(message=message, deltas_published=2)
    ours = DATA_CONVERTER.payload_converter.to_payloads([value, {"a": 1}, "text", None])
    theirs = pydantic_data_converter.payload_converter.to_payloads([value, {"a": 1}, "text", None])
    assert ours == theirs
    back = DATA_CONVERTER.payload_converter.from_payloads(ours, [StreamResult, dict, str, type(None)])
    assert back[0] == value and back[1:] == [{"a": 1}, "text", None]


def test_runner_skips_the_sandbox_only_for_context_free_converters() -> None:
    assert is_context_free(DATA_CONVERTER)
    assert is_context_free(with_codec(DATA_CONVERTER, EncryptionCodec(b"k" * 32)))
    aware = with_codec(DATA_CONVERTER, _ContextCodec())
    assert not is_context_free(aware)
    assert isinstance(workflow_runner(DATA_CONVERTER), ContextFreeSandboxedRunner)
    plain = workflow_runner(aware)
    assert isinstance(plain, SandboxedWorkflowRunner) and not isinstance(plain, ContextFreeSandboxedRunner)
    assert not isinstance(workflow_runner(), ContextFreeSandboxedRunner)
