"""The workflow runner the agentcore worker uses: Temporal's sandbox, minus a per-payload toll.

For every payload of every workflow activation and completion (each is visited three times: codec,
external storage, reference payloads) the SDK asks the workflow instance which serialization context
applies. Inside the sandbox each such question is an ``exec`` of a source string under the sandbox's
import hooks: profiled on a tool turn, 17 % of the worker's CPU went there. The answer only matters
to converters and codecs that implement ``WithSerializationContext``. When the worker's data
converter ignores the context (agentcore's pydantic converter, with or without its encryption codec),
:class:`ContextFreeSandboxedRunner` answers without entering the sandbox; the workflow code itself
still runs sandboxed, with the same restrictions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import temporalio.bridge.proto.workflow_activation
import temporalio.bridge.proto.workflow_completion
import temporalio.workflow
from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    SerializationContext,
    StorageDriverStoreContext,
    WorkflowSerializationContext,
)
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner


def is_context_free(converter: DataConverter) -> bool:
    """True when ``converter`` serializes the same way whatever the serialization context."""
    if converter.external_storage is not None:
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
        # Only read by external storage, which a context-free converter does not have.
        return StorageDriverStoreContext(target=None)

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
