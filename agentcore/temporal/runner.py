"""The workflow runner the agentcore worker uses: Temporal's sandbox, answering two questions itself.

Built on the SDK's public extension point for runners (``SandboxedWorkflowRunner``, whose instances
implement ``temporalio.worker.WorkflowInstance``); nothing inside the SDK is replaced.

1. Which store context a payload has (``get_external_store_context``). agentcore's payload store
   (``agentcore.temporal.payloads``) keeps large payloads that workers exchange (an activity's input)
   in a directory every worker shares. What a workflow answers to clients (update results, query
   answers) must stay inline, since a client need not reach that directory: those payloads go with
   no command, and this runner gives them no target, which the store's selector reads as "inline".
2. Which serialization context a payload has (``get_serialization_context``). The SDK asks the
   workflow instance for every payload of every activation and completion; inside the sandbox each
   question is an ``exec`` under the sandbox's import hooks. The answer only matters to converters
   and codecs that implement ``WithSerializationContext``, so when the worker's data converter ignores
   the context (agentcore's pydantic converter, with or without its encryption codec) the runner
   answers None ("the worker's own converter") without entering the sandbox.

The workflow code itself runs sandboxed, with the same restrictions, either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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

    def activate(self, act: Any) -> Any:
        return self._inner.activate(act)

    def get_serialization_context(self, command_info: Any) -> SerializationContext | None:
        # None selects the worker's own converter, which is the one any context would give back.
        return None

    def get_external_store_context(self, command_info: Any) -> StorageDriverStoreContext:
        # Read by agentcore's payload store only (see ``is_context_free``): a payload that goes with a
        # command (an activity's input) may be stored; one without (an update's result, a query's
        # answer, read by clients that may not reach the store) has no target and stays inline.
        # A runner-level rule, because the store's selector is only told the target.
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
