"""Compaction, branches, labels and the session name: the conversation's tree, as workflow handlers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from agentcore import errors
    from agentcore.compaction import compaction_end_event, estimate_context_tokens, should_compact
    from agentcore.events import (
        AgentEvent,
        CompactionEndEvent,
        CompactionReason,
        CompactionStartEvent,
    )
    from agentcore.protocol import (
        Accepted,
        BranchInput,
        BranchRequest,
        BranchResult,
        CompactInput,
        CompactRequest,
        CompactResult,
        LabelRequest,
        SessionNameRequest,
    )
    from agentcore.runtime import AbortSignal
    from agentcore.session.entries import (
        LabelEntry,
        SessionInfoEntry,
    )
    from agentcore.transcript import add_entry_usage_to_stats

from . import policies
from .state import ConversationState, _failure, _refuse, new_id

COMPACT_ACTIVITY = "session.compact"  # don't rename: recorded in histories
BRANCH_ACTIVITY = "session.branch"  # don't rename: recorded in histories


class TreeHandlers(ConversationState):
    def compaction_enabled(self) -> bool:
        return self.config.compaction.enabled

    async def compact_for_overflow(self, signal: AbortSignal | None) -> None:
        """pi's rule: a context overflow is compacted away and the model call retried, once."""
        await self.compact("overflow", will_retry=True, signal=signal)

    def compaction_due(self) -> bool:
        settings = self.config.compaction
        return settings.enabled and should_compact(self.transcript.messages, self.config.model, settings)

    async def compact(
        self,
        reason: CompactionReason,
        instructions: str | None = None,
        *,
        will_retry: bool = False,
        emit: Callable[[AgentEvent], None] | None = None,
        signal: AbortSignal | None = None,
    ) -> CompactionEndEvent:
        """Summarise the older part of the path (an activity) and go on from the compacted context.

        Its events go to ``emit`` (the agent loop's, for an auto-compaction, so they take their
        place in the run's events), else straight to subscribers. ``signal`` (the run's) cancels
        the activity as it cancels a model call: the summary call stops, no entry is written, and
        the end event says ``aborted``."""
        publish = emit or self.publish
        tokens_before = estimate_context_tokens(self.transcript.messages)
        publish(CompactionStartEvent(reason=reason))
        entries = list(self.transcript.unwritten)
        handle = workflow.start_activity(
            COMPACT_ACTIVITY,
            CompactInput(
                session_id=self.session_id,
                model=self.config.model,
                entries=entries,
                leaf_id=self.transcript.leaf_id,
                entry_id=new_id(),
                reason=reason,
                instructions=instructions,
                settings=self.config.compaction,
                create=self.session_create(),
            ),
            result_type=CompactResult,
            start_to_close_timeout=policies.COMPACTION.start_to_close,
            # Beats while the summary streams: an abort reaches the activity through them.
            heartbeat_timeout=timedelta(seconds=self.limits.llm_heartbeat_seconds),
            retry_policy=policies.COMPACTION.retry,
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            summary=f"compact ({reason})",
        )
        remove = signal.add_listener(handle.cancel) if signal is not None else None
        try:
            result: CompactResult = await handle
        except ActivityError as err:
            # The conversation goes on uncompacted (an overflow then surfaces as the model's error).
            if isinstance(err.cause, CancelledError):
                end = CompactionEndEvent(reason=reason, tokens_before=tokens_before, aborted=True)
            else:
                code, why = _failure(err, errors.COMPACTION_FAILED)
                end = CompactionEndEvent(
                    reason=reason, tokens_before=tokens_before, error_message=f"{code}: {why}"
                )
            publish(end)
            return end
        finally:
            if remove is not None:
                remove()
        self.transcript.mark_written(entries)
        self.session.written()
        if result.entry is None:
            end = CompactionEndEvent(reason=reason, tokens_before=tokens_before, tokens_after=tokens_before)
        else:
            self.transcript.replace_messages(result.messages, result.message_entry_ids)
            self.transcript.leaf_id = result.entry.id
            self.stats = add_entry_usage_to_stats(self.stats, result.entry)
            end = compaction_end_event(result.entry, reason=reason, will_retry=will_retry)
        publish(end)
        self._set_details()
        return end

    @workflow.update(name="compact")
    async def compact_(self, request: CompactRequest) -> CompactionEndEvent:
        # ``abort`` stops a manual compaction as it stops a run: the summary call is cancelled.
        signal = self.runs.start_compaction(abortable=True)
        try:
            return await self.compact("manual", request.instructions, signal=signal)
        finally:
            self.runs.end_compaction(signal)

    @compact_.validator
    def _validate_compact(self, request: CompactRequest) -> None:
        self._refuse_if_busy("compact")

    @workflow.update(name="branch")
    async def branch(self, request: BranchRequest) -> BranchResult:
        """Move back to an earlier entry; the abandoned branch stays in the file, optionally summarised."""
        self.runs.start_compaction(abortable=False)
        entries = list(self.transcript.unwritten)
        try:
            result: BranchResult = await workflow.execute_activity(
                BRANCH_ACTIVITY,
                BranchInput(
                    session_id=self.session_id,
                    model=self.config.model,
                    entries=entries,
                    leaf_id=self.transcript.leaf_id,
                    target_entry_id=request.target_entry_id,
                    summary=request.summary,
                    summarize=request.summarize,
                    instructions=request.instructions,
                    leaf_entry_id=new_id(),
                    summary_entry_id=new_id(),
                    settings=self.config.compaction,
                    create=self.session_create(),
                ),
                result_type=BranchResult,
                start_to_close_timeout=policies.COMPACTION.start_to_close,
                retry_policy=policies.COMPACTION.retry,
                summary=f"branch to {request.target_entry_id or 'start'}",
            )
        except ActivityError as err:
            code, reason = _failure(err, errors.VALIDATION_ERROR)
            raise _refuse(code, f"branch failed: {reason}") from None
        finally:
            self.runs.end_compaction()
        self.transcript.mark_written(entries)
        self.session.written()
        self.transcript.replace_messages(result.messages, result.message_entry_ids)
        self.transcript.leaf_id = result.leaf_id
        if result.summary_entry is not None:
            self.stats = add_entry_usage_to_stats(self.stats, result.summary_entry)
        self._record_settings_off_path(result)
        self._set_details()
        return result

    @branch.validator
    def _validate_branch(self, request: BranchRequest) -> None:
        self._refuse_if_busy("branch")

    @workflow.update(name="set_label")
    async def set_label(self, request: LabelRequest) -> Accepted:
        self.transcript.add(LabelEntry(target_id=request.target_entry_id, label=request.label or None))
        return self._accepted(request.id)

    @set_label.validator
    def _validate_set_label(self, request: LabelRequest) -> None:
        known = {entry_id for entry_id in self.transcript.entry_ids if entry_id} | {
            entry.id for entry in self.transcript.unwritten
        }
        if self.transcript.leaf_id:
            known.add(self.transcript.leaf_id)
        if request.target_entry_id not in known:
            raise _refuse(
                errors.SESSION_ENTRY_NOT_FOUND,
                f"target_entry_id: {request.target_entry_id!r} is not an entry of this conversation's context",
            )

    @workflow.update(name="set_session_name")
    async def set_session_name(self, request: SessionNameRequest) -> Accepted:
        self.transcript.add(SessionInfoEntry(name=request.name))
        return self._accepted(request.id)

    @set_session_name.validator
    def _validate_set_session_name(self, request: SessionNameRequest) -> None:
        if not request.name.strip():
            raise _refuse(errors.VALIDATION_ERROR, "name: must be a non-empty string")
