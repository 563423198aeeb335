"""The workflow runner the agentcore worker uses: Temporal's sandbox, minus a per-payload toll.

For every payload of every workflow activation and completion (each is visited three times: codec,
external storage, reference payloads) the SDK asks the workflow instance which serialization context
applies. Inside the sandbox each such question is an ``exec`` of a source string under the sandbox's
import hooks: 17 % of the worker's samples in a py-spy profile of tool turns. The answer only matters
to converters and codecs that implement ``WithSerializationContext``. When the worker's data
converter ignores the context (agentcore's pydantic converter, with or without its encryption codec),
:class:`ContextFreeSandboxedRunner` answers without entering the sandbox; the workflow code itself
still runs sandboxed, with the same restrictions.

:func:`skip_no_op_payload_visits` removes the other per-activation toll: the SDK walks every
activation and completion three times each (codec, external storage, storage references), awaiting a
call per payload, even when the converter has neither a codec nor external storage and every call
returns its input (14 % of the samples in the same profile; the bench's A/B could not tell its gain
from run-to-run noise, so it is kept for being free, not for a measured figure). With agentcore's
payload store (``agentcore.temporal.payloads``) the passes run only for a completion big enough to
hold a payload to store, or an activation holding a stored payload's reference.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import temporalio.bridge.proto.workflow_activation
import temporalio.bridge.proto.workflow_completion
import temporalio.bridge.worker
import temporalio.converter._extstore
import temporalio.workflow
from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    SerializationContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
    WorkflowSerializationContext,
)
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from .payloads import is_directory_store


def is_context_free(converter: DataConverter) -> bool:
    """True when ``converter`` serializes the same way whatever the serialization context.

    External storage asks which workflow or activity a payload goes to; agentcore's payload store
    (``agentcore.temporal.payloads``) only asks whether it goes to one, which
    :class:`_ContextFreeInstance` answers."""
    if converter.external_storage is not None and not is_directory_store(converter.external_storage):
        return False
    probes: list[SerializationContext] = [
        WorkflowSerializationContext(namespace="default", workflow_id="probe"),
        ActivitySerializationContext(
            namespace="default",
            activity_id="1",
            activity_type="probe",
            activity_task_queue="probe",
            workflow_id="probe",
            workflow_type="probe",
            is_local=False,
        ),
    ]
    return all(converter.with_context(probe) is converter for probe in probes)


class _ContextFreeInstance(WorkflowInstance):
    """A sandboxed instance whose serialization-context questions are answered outside the sandbox."""

    def __init__(self, inner: WorkflowInstance) -> None:
        self._inner = inner

    def activate(
        self, act: temporalio.bridge.proto.workflow_activation.WorkflowActivation
    ) -> temporalio.bridge.proto.workflow_completion.WorkflowActivationCompletion:
        return self._inner.activate(act)

    def get_serialization_context(self, command_info: Any) -> SerializationContext | None:
        # None selects the worker's own converter, which is the one any context would give back.
        return None

    def get_external_store_context(self, command_info: Any) -> StorageDriverStoreContext:
        # Read by agentcore's payload store only (see ``is_context_free``): a payload that goes with a
        # command (an activity's input) may be stored; one without (an update's result, a query's
        # answer, read by clients that may not reach the store) has no target and stays inline.
        if command_info is None:
            return StorageDriverStoreContext(target=None)
        info = self._inner.get_info()
        return StorageDriverStoreContext(
            target=StorageDriverWorkflowInfo(
                namespace=info.namespace, id=info.workflow_id, run_id=info.run_id, type=info.workflow_type
            )
        )

    def get_info(self) -> temporalio.workflow.Info:
        return self._inner.get_info()

    def get_thread_id(self) -> int | None:
        return self._inner.get_thread_id()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclass(frozen=True)
class ContextFreeSandboxedRunner(SandboxedWorkflowRunner):
    """``SandboxedWorkflowRunner`` for a worker whose data converter :func:`is_context_free`."""

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _ContextFreeInstance(super().create_instance(det))


# How a stored payload's reference names itself (the message type in its metadata).
_REFERENCE_MARK = b"temporal.api.sdk.v1.ExternalStorageReference"


def _changes_nothing(message: Any, converter: DataConverter, encoding: bool) -> bool:
    """Whether every payload of ``message`` would come out of the SDK's passes as it went in."""
    if converter.payload_codec is not None:
        return False
    storage = converter.external_storage
    if storage is None:
        return True
    if not is_directory_store(storage):
        return False
    if encoding:  # nothing to store when the whole completion is under the size at which one is stored
        return bool(message.ByteSize() < storage.payload_size_threshold)
    return _REFERENCE_MARK not in message.SerializeToString()  # nothing to fetch


def _skipping(visit: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    encoding = visit.__name__ == "encode_completion"

    @functools.wraps(visit)
    async def skip_or_visit(message: Any, data_converter: DataConverter, *args: Any, **kwargs: Any) -> Any:
        if _changes_nothing(message, data_converter, encoding):
            return temporalio.converter._extstore.StorageOperationMetrics()
        return await visit(message, data_converter, *args, **kwargs)

    skip_or_visit.__agentcore_skips__ = True  # type: ignore[attr-defined]
    return skip_or_visit


def skip_no_op_payload_visits() -> bool:
    """Make the SDK's workflow payload passes return at once for converters that transform nothing.

    Process-wide and idempotent; a worker whose converter has a codec or external storage still gets
    every pass, except with agentcore's payload store alone: then a completion smaller than the size
    at which a payload is stored, or an activation holding no stored payload's reference, skips them.
    Returns False (and changes nothing) if this SDK version lays the passes out otherwise.
    One check goes with the skipped passes: a payload a client stored externally reaching a worker
    without external storage fails to decode as that payload's type instead of with TMPRL1105.
    """
    bridge = temporalio.bridge.worker
    names = ("decode_activation", "encode_completion")
    if not all(callable(getattr(bridge, name, None)) for name in names):
        return False
    if not hasattr(temporalio.converter, "_extstore"):
        return False
    for name in names:
        visit = getattr(bridge, name)
        if not getattr(visit, "__agentcore_skips__", False):
            setattr(bridge, name, _skipping(visit))
    return True
