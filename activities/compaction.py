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
    build_summary_context,
    compaction_entry,
    plan_compaction,
    summarize,
)
from agentcore.protocol import CompactInput, CompactResult
from agentcore.runtime import StreamFn
from agentcore.session import CompactionEntry, GetEntriesOptions, JsonlSessionStorage
from agentcore.state import GetApiKey

from .llm import _resolve_key
from .session import SessionStore

COMPACTION_FAILED = "COMPACTION_FAILED"


class CompactionActivities:
    def __init__(
        self, store: SessionStore, *, stream_fn: StreamFn | None = None, get_api_key: GetApiKey | None = None
    ) -> None:
        self.store = store
        self.stream_fn = stream_fn
        self.get_api_key = get_api_key

    def _stream_fn(self) -> StreamFn:
        if self.stream_fn is not None:
            return self.stream_fn
        from agentcore.inprocess import default_stream_fn

        return default_stream_fn()

    @activity.defn(name="session.compact")  # don't rename: recorded in histories
    async def compact(self, inp: CompactInput) -> CompactResult:
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
                api_key=await _resolve_key(self.get_api_key, inp.model.provider),
                session_id=inp.session_id,
            )
        except CompactionError as err:
            # A failed summary is retried by Temporal's policy (a provider hiccup); the workflow
            # reports the final failure in compaction_end and carries on uncompacted.
            raise ApplicationError(str(err), type=COMPACTION_FAILED) from err
        return compaction_entry(plan, summary, usage, reason=inp.reason, entry_id=inp.entry_id)
