"""Compaction: estimates, planning, the summary request, and a long conversation on a small window.

The long-conversation test runs the real OpenAI provider against the loopback server playing a model
with a 2,000-token window (it refuses longer prompts with OpenAI's own overflow error), for 36 prompts
with tool calls: several compactions, some at the threshold and some after an overflow.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentcore.compaction import (
    COMPACTION_SYSTEM_PROMPT,
    IMAGE_TOKENS,
    CompactionSettings,
    build_summary_context,
    compact_session,
    compaction_end_event,
    estimate_context_tokens,
    estimate_tokens,
    plan_compaction,
    should_compact,
    summarize,
)
from agentcore.errors import CompactionError
from agentcore.events import AGENT_EVENT_ADAPTER, CompactionStartEvent
from agentcore.messages import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from agentcore.providers import is_context_overflow, stream
from agentcore.runtime import LlmContext
from agentcore.session import (
    CompactionEntry,
    GetEntriesOptions,
    JsonlSessionStorage,
    MessageEntry,
    compaction_summary_message,
)
from agentcore.testing.loopback import LoopbackServer, Script, estimate_request_tokens
from tests.support.compaction import (
    API_KEY,
    BIG_ITEMS,
    Conversation,
    facts_in,
    new_storage,
    prompt_text,
    responder,
)
from tests.support.providers import PNG_1PX

WINDOW = 2_000


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    async with LoopbackServer(responder, context_window=WINDOW) as srv:
        yield srv


def user(text: str, ts: int = 1) -> UserMessage:
    return UserMessage(content=text, timestamp=ts)


def assistant(
    text: str = "", calls: list[ToolCall] | None = None, ts: int = 1, tokens: int = 0
) -> AssistantMessage:
    content: list[TextContent | ToolCall] = [TextContent(text=text)] if text else []
    content += calls or []
    return AssistantMessage(
        content=content,
        stop_reason="toolUse" if calls else "stop",
        usage=Usage(input=tokens, total_tokens=tokens),
        timestamp=ts,
    )


def result(call_id: str, text: str, ts: int = 1) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name="t", content=[TextContent(text=text)], timestamp=ts
    )


def entries_for(messages: list[Message]) -> list[MessageEntry]:
    entries = []
    parent = None
    for index, message in enumerate(messages):
        entries.append(MessageEntry(id=f"e{index}", parent_id=parent, timestamp=index + 1, message=message))
        parent = f"e{index}"
    return entries


# ------------------------------------------------------------------------------------------ estimates


def test_estimate_tokens_counts_text_tool_calls_and_images() -> None:
    assert estimate_tokens(user("x" * 400)) == 100
    call = ToolCall(id="c", name="lookup", arguments={"item": 12})
    assert estimate_tokens(assistant(calls=[call])) == -(-(len("lookup") + len('{"item":12}')) // 4)
    image = UserMessage(
        content=[TextContent(text="abcd"), ImageContent(data=PNG_1PX, mime_type="image/png")], timestamp=1
    )
    assert estimate_tokens(image) == 1 + IMAGE_TOKENS


def test_context_estimate_uses_last_reported_usage_plus_what_came_after() -> None:
    messages: list[Message] = [user("a" * 40), assistant("b" * 40, tokens=500), user("c" * 400)]
    assert estimate_context_tokens(messages) == 500 + 100
    # A failed call reports nothing useful: the usage before it still counts, the rest is estimated.
    failed = assistant("", ts=2).model_copy(update={"stop_reason": "error", "error_message": "boom"})
    assert estimate_context_tokens([*messages, failed]) == 600
    assert estimate_context_tokens(messages, Usage(input=50, output=7)) == 57 + 100
    assert estimate_context_tokens([user("x" * 8)]) == 2


def test_usage_from_before_a_compaction_is_not_trusted() -> None:
    # Kept messages were answered before the compaction: their usage counts the summarised history.
    summary = compaction_summary_message("short", timestamp=100)
    stale = assistant("kept answer", ts=50, tokens=1_900)
    estimate = estimate_context_tokens([summary, stale, user("next", ts=101)])
    assert estimate < 100
    fresh = assistant("new answer", ts=102, tokens=300)
    assert estimate_context_tokens([summary, stale, user("next", ts=101), fresh]) == 300


def test_settings_cap_keep_and_reserve_for_small_windows(server: LoopbackServer) -> None:
    settings = CompactionSettings()
    small = server.model(context_window=2_000, max_tokens=4_096)
    assert settings.trigger_tokens(small) == 1_600
    assert settings.keep_tokens(small) == 600
    assert settings.summary_max_tokens(small) == 500
    big = server.model(context_window=200_000, max_tokens=32_000)
    assert settings.keep_tokens(big) == 20_000
    assert settings.summary_max_tokens(big) == 16_384
    assert should_compact([user("x" * 6_404)], small, settings)
    assert not should_compact([user("x" * 6_400)], small, settings)
    assert not should_compact([user("x" * 9_000)], small, CompactionSettings(enabled=False))


# ------------------------------------------------------------------------------------------- planning


def _pairs_intact(kept: list[Message]) -> bool:
    calls = {call.id for m in kept if isinstance(m, AssistantMessage) for call in m.tool_calls}
    results = {m.tool_call_id for m in kept if isinstance(m, ToolResultMessage)}
    return results <= calls and not isinstance(kept[0], ToolResultMessage)


def test_plan_never_splits_a_tool_call_from_its_results(server: LoopbackServer) -> None:
    model = server.model(context_window=2_000)
    messages: list[Message] = []
    for turn in range(12):
        messages.append(user(f"question {turn}"))
        calls = [ToolCall(id=f"c{turn}-{n}", name="t", arguments={"n": n}) for n in range(turn % 3 + 1)]
        messages.append(assistant("thinking out loud", calls))
        messages += [result(call.id, "r" * (100 * (turn % 4 + 1))) for call in calls]
        messages.append(assistant("done"))
    for keep in (0, 20, 50, 100, 200, 400, 800, 5_000):
        settings = CompactionSettings(keep_recent_tokens=keep)
        plan = plan_compaction(entries_for(messages), settings, model)
        if plan is None:
            continue
        assert plan.messages_to_summarize and plan.kept_messages
        assert _pairs_intact(plan.kept_messages), keep
        assert plan.messages_to_summarize + plan.kept_messages == messages
        assert plan.kept_tokens == sum(estimate_tokens(m) for m in plan.kept_messages)


def test_plan_cuts_inside_a_long_tool_run_only_before_an_assistant_message(server: LoopbackServer) -> None:
    # One prompt, then many tool turns: cutting before an assistant message that starts a turn is the
    # only way to compact it.
    model = server.model(context_window=2_000)
    messages: list[Message] = [user("do the whole job")]
    for step in range(10):
        messages += [
            assistant(f"step {step}", [ToolCall(id=f"s{step}", name="t")]),
            result(f"s{step}", "x" * 800),
        ]
    plan = plan_compaction(entries_for(messages), CompactionSettings(), model)
    assert plan is not None
    assert isinstance(plan.kept_messages[0], AssistantMessage)
    assert _pairs_intact(plan.kept_messages)
    assert plan.kept_tokens <= CompactionSettings().keep_tokens(model)


def test_plan_folds_the_previous_summary_in_and_keeps_nothing_twice(server: LoopbackServer) -> None:
    model = server.model(context_window=2_000)
    messages = [m for turn in range(8) for m in (user(f"q{turn} " + "y" * 600), assistant(f"a{turn}"))]
    entries: list[MessageEntry | CompactionEntry] = list(entries_for(messages))
    first = plan_compaction(entries, CompactionSettings(), model)
    assert first is not None
    entries.append(
        CompactionEntry(
            id="c1",
            parent_id=entries[-1].id,
            timestamp=99,
            summary="S1",
            first_kept_entry_id=first.first_kept_entry_id,
        )
    )
    assert plan_compaction(entries, CompactionSettings(), model) is None  # the kept part fits already
    more = [m for turn in range(8, 12) for m in (user(f"q{turn} " + "z" * 600), assistant(f"a{turn}"))]
    for offset, message in enumerate(more):
        entries.append(
            MessageEntry(id=f"n{offset}", parent_id=entries[-1].id, timestamp=100 + offset, message=message)
        )
    second = plan_compaction(entries, CompactionSettings(), model)
    assert second is not None
    assert second.previous_summary == "S1"
    summarized_texts = [m.text for m in second.messages_to_summarize if isinstance(m, UserMessage)]
    # The messages kept by the first compaction are summarised now; those it summarised are not again.
    assert all(not text.startswith(("q0 ", "q1 ")) for text in summarized_texts)
    assert first.kept_messages[0] in second.messages_to_summarize


def test_summary_request_fits_the_window_and_carries_instructions() -> None:
    messages: list[Message] = [user("FACT-1=a " + "p" * 3_000), assistant("ok"), user("FACT-2=b please")]
    context = build_summary_context(messages, "old summary FACT-0=z", "focus on facts", max_input_tokens=600)
    assert context.system_prompt == COMPACTION_SYSTEM_PROMPT
    text = context.messages[0].text  # type: ignore[union-attr]
    assert "<previous-summary>\nold summary FACT-0=z" in text
    assert "Additional instructions from the user: focus on facts" in text
    assert "[User]: FACT-2=b please" in text
    assert (len(text) + len(context.system_prompt)) / 4 <= 600
    assert "characters truncated" in text


# ------------------------------------------------------------------------------ loopback and errors


@pytest.mark.parametrize("api", ["openai-completions", "anthropic-messages"])
async def test_loopback_overflow_is_the_providers_real_error(server: LoopbackServer, api: str) -> None:
    model = server.model(api, context_window=WINDOW)
    context = LlmContext(messages=[user("x" * (WINDOW * 4 + 100))])
    events = [event async for event in stream(model, context, _options())]
    final = events[-1]
    assert final.type == "error"
    assert is_context_overflow(final.error)
    assert final.status_code == 400 and not final.retryable
    assert server.overflows == 1
    wording = (
        "maximum context length is 2000 tokens" if api == "openai-completions" else "tokens > 2000 maximum"
    )
    assert wording in (final.error.error_message or "")


async def test_loopback_reports_its_estimate_as_usage(server: LoopbackServer) -> None:
    model = server.model(context_window=WINDOW)
    context = LlmContext(system_prompt="sys", messages=[user("hello " * 50)])
    events = [event async for event in stream(model, context, _options())]
    assert events[-1].type == "done"
    usage = events[-1].message.usage
    assert usage.input == estimate_request_tokens(server.requests[-1].body) > 50
    assert usage.output > 0


async def test_a_failed_summary_raises_and_leaves_the_file_unchanged(
    server: LoopbackServer, tmp_path: Path
) -> None:
    model = server.model(context_window=WINDOW)
    with new_storage(tmp_path) as storage:
        storage.append_entries(
            [
                MessageEntry(message=m)
                for m in [user("q " + "w" * 3_000), assistant("a"), user("again"), assistant("b")]
            ]
        )
        before = storage.path.read_bytes()
        server.enqueue(Script(status=500, error_message="upstream exploded"))
        with pytest.raises(CompactionError) as caught:
            await compact_session(storage, model, stream, settings=CompactionSettings(), api_key=API_KEY)
        assert not caught.value.aborted and "upstream exploded" in caught.value.message
        assert storage.path.read_bytes() == before
        server.enqueue(Script(text="   "))
        with pytest.raises(CompactionError, match="no text"):
            await compact_session(storage, model, stream, settings=CompactionSettings(), api_key=API_KEY)


async def test_summarize_reports_an_overflowing_summary_request(server: LoopbackServer) -> None:
    model = server.model(context_window=WINDOW)
    too_big = LlmContext(messages=[user("x" * (WINDOW * 5))])
    with pytest.raises(CompactionError) as caught:
        await summarize(model, too_big, stream, api_key=API_KEY)
    assert caught.value.context_overflow


async def test_manual_compaction_with_instructions_is_idempotent_on_its_id(
    server: LoopbackServer, tmp_path: Path
) -> None:
    model = server.model(context_window=WINDOW)
    with new_storage(tmp_path) as storage:
        storage.append_entries(
            [
                MessageEntry(message=m)
                for turn in range(4)
                for m in (user(f"FACT-{turn}=x{turn} " + "k" * 900), assistant("ok"))
            ]
        )
        entry = await compact_session(
            storage, model, stream, instructions="keep the facts", entry_id="compaction-1", api_key=API_KEY
        )
        assert entry is not None and entry.id == "compaction-1"
        request_text = str(server.requests[-1].body["messages"][-1]["content"])
        assert "keep the facts" in request_text
        assert facts_in(entry.summary) == {0: "x0", 1: "x1"}  # the last two turns are kept (600 tokens)
        assert entry.details["reason"] == "manual"
        requests = server.requests_received
        again = await compact_session(storage, model, stream, entry_id="compaction-1", api_key=API_KEY)
        assert again == entry and server.requests_received == requests  # a retried activity calls no model
        end = compaction_end_event(entry)
        assert end.tokens_before == entry.tokens_before > end.tokens_after  # type: ignore[operator]
        assert AGENT_EVENT_ADAPTER.validate_python(end.model_dump()) == end
        assert AGENT_EVENT_ADAPTER.validate_python(
            {"type": "compaction_start", "reason": "overflow"}
        ) == CompactionStartEvent(reason="overflow")


# -------------------------------------------------------------------------------- long conversation


async def test_a_long_conversation_keeps_working_through_several_compactions(
    server: LoopbackServer, tmp_path: Path
) -> None:
    model = server.model(context_window=WINDOW, max_tokens=512)
    settings = CompactionSettings()
    prompts = 36
    with new_storage(tmp_path) as storage:
        conversation = Conversation(storage, model, settings)
        for number in range(prompts):
            last = await conversation.prompt(prompt_text(number))
            assert last.stop_reason == "stop", (number, last.error_message)
            assert last.text.startswith("Noted: Item")

        reasons = [c.reason for c in conversation.compactions]
        assert reasons.count("threshold") >= 3 and reasons.count("overflow") >= 1, reasons
        assert server.overflows == reasons.count("overflow")  # every overflow was cured by one compaction

        # Recovery rebuilds the compacted context exactly: what the reopened file gives right after
        # each compaction is what the model was sent next.
        for compaction in conversation.compactions:
            sent = conversation.sent[compaction.next_request].messages
            expected = compaction.recovered if compaction.reason == "threshold" else compaction.recovered[:-1]
            assert _dump(sent[: len(expected)]) == _dump(expected)
            assert sent[0].text.endswith(compaction.entry.summary + "\n</summary>")  # type: ignore[union-attr]
            assert (
                compaction.entry.tokens_before > settings.trigger_tokens(model)
                or compaction.reason == "overflow"
            )
            assert compaction.entry.details["tokens_after"] < settings.trigger_tokens(model)
            kept = compaction.recovered[1:]
            assert _pairs_intact(kept)

        # Nothing was deleted: the file holds every message, and the stats count them all.
        stats = storage.get_session_stats()
        assert stats.message_count == conversation.appended_messages
        assert stats.user_messages == prompts
        assert stats.tool_results == prompts
        assert len(storage.find_entries("compaction")) == len(conversation.compactions)
        assert storage.get_session_stats().input_tokens > WINDOW * 10

        # What was learned survived: every fact is in the final summary or in the kept messages.
        final = JsonlSessionStorage.open(storage.path).build_context()
        seen = facts_in("\n".join(_text(m) for m in final.messages))
        assert seen == {n: f"v{n * 7}" for n in range(prompts)}
        assert (
            all(estimate_request_tokens(r.body) <= WINDOW for r in server.requests if r.body)
            or server.overflows
        )
        # The big lookups really were what overflowed.
        assert set(BIG_ITEMS) & set(range(prompts))


def _dump(messages: list[Message]) -> list[object]:
    return [m.model_dump(mode="json") for m in messages]


def _text(message: Message) -> str:
    if isinstance(message, AssistantMessage):
        return message.text
    return message.text


def _options():  # type: ignore[no-untyped-def]
    from agentcore.runtime import StreamOptions

    return StreamOptions(api_key=API_KEY)


def test_path_entries_after_compaction_keep_all_history(tmp_path: Path) -> None:
    with new_storage(tmp_path) as storage:
        storage.append_entries([MessageEntry(message=m) for m in (user("one"), assistant("two"))])
        first = storage.get_entries(GetEntriesOptions(on_path=True))[0].id
        storage.append_entry(CompactionEntry(summary="S", first_kept_entry_id=first, tokens_before=10))
        assert [m.role for m in storage.build_context().messages] == ["user", "user", "assistant"]
