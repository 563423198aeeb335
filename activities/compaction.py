"""``session.compact``: summarise the older part of a conversation into a ``compaction`` entry.

Three steps, and the session's write lock is held only for the first and the last: plan (append the
workflow's pending entries, read the path), summarise (a model call, which may take a while), record
(append the entry under the id the workflow chose and rebuild the context). A retried attempt that
finds the entry already in the file skips the model call. Nothing is ever deleted: the summarised
messages stay in the file, off the context path.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentcore.compaction import (
    CompactionError,
    CompactionPlan,
    branch_summary_context,
    build_summary_context,
    compaction_entry,
    plan_compaction,
    summarize,
)
from agentcore.errors import EntryNotFoundError
from agentcore.protocol import BranchInput, BranchResult, CompactInput, CompactResult
from agentcore.providers.keys import resolve_api_key
from agentcore.runtime import LlmContext, StreamFn
from agentcore.session import BranchSummaryEntry, CompactionEntry, GetEntriesOptions, JsonlSessionStorage
from agentcore.session.branching import branch_entries
from agentcore.state import GetApiKey

from .llm import resolve_stream_fn
from .session import SessionStore, heartbeating

COMPACTION_FAILED = "COMPACTION_FAILED"
# How often a compaction beats (the worker throttles what it sends): well within a second, so an
# abort cancels the summary call at once.
HEARTBEAT_SECONDS = 0.2


class CompactionActivities:
    def __init__(
        self, store: SessionStore, *, stream_fn: StreamFn | None = None, get_api_key: GetApiKey | None = None
    ) -> None:
        self.store = store
        self.stream_fn = stream_fn
        self.get_api_key = get_api_key

    def _stream_fn(self) -> StreamFn:
        return resolve_stream_fn(self.stream_fn)

    @activity.defn(name="session.compact")  # don't rename: recorded in histories
    async def compact(self, inp: CompactInput) -> CompactResult:
        # Beating throughout: the workflow cancels the activity when its run is aborted, and the
        # cancellation reaches it only through heartbeats. It stops the summary call where it is
        # (the stream is cancelled, as an aborted model call's is); nothing is recorded then.
        return await heartbeating(self._compact(inp), HEARTBEAT_SECONDS)

    async def _compact(self, inp: CompactInput) -> CompactResult:
        def plan(storage: JsonlSessionStorage) -> CompactionEntry | CompactionPlan | None:
            storage.append_entries(inp.entries)
            done = storage.get_entry(inp.entry_id)
            if isinstance(done, CompactionEntry):
                return done
            path = storage.get_entries(
                GetEntriesOptions(path_to=inp.leaf_id) if inp.leaf_id else GetEntriesOptions(on_path=True)
            )
            return plan_compaction(path, inp.settings, inp.model)

        planned = await self.store.write(inp.session_id, inp.create, plan)
        if planned is None:
            return CompactResult()
        if isinstance(planned, CompactionPlan):
            entry = await self._summarise(inp, planned)
        else:
            entry = planned

        def record(storage: JsonlSessionStorage) -> CompactResult:
            stored = storage.append_entry(entry)
            assert isinstance(stored, CompactionEntry)
            context = storage.build_context(stored.id)
            details = stored.details if isinstance(stored.details, dict) else {}
            tokens_after = details.get("tokens_after")
            return CompactResult(
                entry=stored,
                messages=context.messages,
                message_entry_ids=list(context.message_entry_ids),
                tokens_before=stored.tokens_before,
                tokens_after=tokens_after if isinstance(tokens_after, int) else None,
            )

        return await self.store.write(inp.session_id, None, record)

    async def _summarise(self, inp: CompactInput, plan: CompactionPlan) -> CompactionEntry:
        settings = inp.settings
        context = build_summary_context(
            plan.messages_to_summarize,
            plan.previous_summary,
            inp.instructions,
            max_input_tokens=settings.summary_input_budget(inp.model),
            max_tool_result_chars=settings.max_tool_result_chars,
        )
        activity.heartbeat()
        try:
            summary, usage = await summarize(
                inp.model,
                context,
                self._stream_fn(),
                max_tokens=settings.summary_max_tokens(inp.model),
                api_key=await resolve_api_key(inp.model.provider, callback=self.get_api_key),
                session_id=inp.session_id,
            )
        except CompactionError as err:
            # A failed summary is retried by Temporal's policy (a provider hiccup); the workflow
            # reports the final failure in compaction_end and carries on uncompacted. The code
            # travels as the error's type (the workflow puts it before the message once).
            raise ApplicationError(err.message, type=COMPACTION_FAILED) from err
        return compaction_entry(plan, summary, usage, reason=inp.reason, entry_id=inp.entry_id)


class BranchActivities:
    """``session.branch``: the leaf move, with a summary of the abandoned branch when asked."""

    def __init__(self, compaction: CompactionActivities) -> None:
        self.compaction = compaction
        self.store = compaction.store

    @activity.defn(name="session.branch")  # don't rename: recorded in histories
    async def branch(self, inp: BranchInput) -> BranchResult:
        def prepare(storage: JsonlSessionStorage) -> LlmContext | None:
            storage.append_entries(inp.entries)
            if inp.target_entry_id is not None and storage.get_entry(inp.target_entry_id) is None:
                raise EntryNotFoundError(f"no entry {inp.target_entry_id!r} in session {inp.session_id!r}")
            if storage.get_entry(inp.leaf_entry_id) is not None or inp.summary or not inp.summarize:
                return None  # already done (a retry), or nothing to ask a model
            return branch_summary_context(
                storage,
                inp.target_entry_id,
                inp.model,
                from_leaf_id=inp.leaf_id,
                instructions=inp.instructions,
                settings=inp.settings,
            )

        request = await self.store.write(inp.session_id, inp.create, prepare)
        summary, usage = inp.summary, None
        if request is not None:
            try:
                summary, usage = await summarize(
                    inp.model,
                    request,
                    self.compaction._stream_fn(),
                    max_tokens=inp.settings.summary_max_tokens(inp.model),
                    api_key=await resolve_api_key(inp.model.provider, callback=self.compaction.get_api_key),
                    session_id=inp.session_id,
                )
            except CompactionError as err:
                raise ApplicationError(err.message, type=COMPACTION_FAILED) from err
        ids = iter([inp.leaf_entry_id, inp.summary_entry_id])
        entries = branch_entries(
            inp.leaf_id, inp.target_entry_id, summary, summary_usage=usage, new_id=lambda: next(ids)
        )

        def record(storage: JsonlSessionStorage) -> BranchResult:
            stored = storage.append_entries(entries)
            summary_entry = (
                stored[1] if len(stored) > 1 and isinstance(stored[1], BranchSummaryEntry) else None
            )
            leaf_id = summary_entry.id if summary_entry is not None else inp.target_entry_id
            result = BranchResult(
                leaf_id=leaf_id,
                summary=summary_entry.summary if summary_entry is not None else None,
                summary_entry=summary_entry,
            )
            if leaf_id is None:
                return result  # the start: no messages, no settings
            context = storage.build_context(leaf_id)
            result.messages, result.message_entry_ids = context.messages, list(context.message_entry_ids)
            result.model, result.thinking_level = context.model, context.thinking_level
            result.active_tools, result.system_prompt = context.active_tools, context.system_prompt
            return result

        return await self.store.write(inp.session_id, None, record)
