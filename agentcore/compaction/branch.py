"""Branch summaries: the model request that summarises a branch a conversation left (the entries after
the common ancestor of the old leaf and the target), with compaction's ``summarize``. The session
package moves leaves and writes entries; it never calls a model."""

from __future__ import annotations

from ..messages import Usage
from ..model import Model
from ..runtime import AbortSignal, LlmContext, StreamFn
from ..session.branching import abandoned_messages
from ..session.storage import JsonlSessionStorage
from .estimates import CompactionSettings
from .summary import BRANCH_SUMMARY_SYSTEM_PROMPT, build_summary_context, summarize

__all__ = ["branch_summary_context", "summarize_branch"]


def branch_summary_context(
    storage: JsonlSessionStorage,
    target_entry_id: str | None,
    model: Model,
    *,
    from_leaf_id: str | None = None,
    instructions: str | None = None,
    settings: CompactionSettings | None = None,
) -> LlmContext | None:
    """The summary request for the branch that ``branch(storage, target_entry_id)`` would leave;
    None when that branch holds no messages."""
    messages = abandoned_messages(storage, target_entry_id, from_leaf_id=from_leaf_id)
    if not messages:
        return None
    settings = settings or CompactionSettings()
    return build_summary_context(
        messages,
        None,
        instructions,
        max_input_tokens=settings.summary_input_budget(model),
        system_prompt=BRANCH_SUMMARY_SYSTEM_PROMPT,
        max_tool_result_chars=settings.max_tool_result_chars,
    )


async def summarize_branch(
    storage: JsonlSessionStorage,
    target_entry_id: str | None,
    model: Model,
    stream_fn: StreamFn,
    *,
    from_leaf_id: str | None = None,
    instructions: str | None = None,
    settings: CompactionSettings | None = None,
    signal: AbortSignal | None = None,
    api_key: str | None = None,
) -> tuple[str, Usage] | None:
    """Summarise the branch ``branch(storage, target_entry_id)`` would leave: ``(summary, usage)``,
    or None when it holds no messages. Raises ``CompactionError`` when the model call fails."""
    settings = settings or CompactionSettings()
    context = branch_summary_context(
        storage,
        target_entry_id,
        model,
        from_leaf_id=from_leaf_id,
        instructions=instructions,
        settings=settings,
    )
    if context is None:
        return None
    return await summarize(
        model, context, stream_fn, signal, max_tokens=settings.summary_max_tokens(model), api_key=api_key
    )
