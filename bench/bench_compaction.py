"""Compaction benchmark: the cost of one compaction and the context size before and after.

Sessions of 100 and 1,000 messages (user prompt, assistant tool call, a 2,000-character tool result,
assistant answer) are compacted with ``compact_session`` against the loopback server playing the model
over real HTTP (it reports its token estimate as usage and enforces the context window). Reported per
size: time to plan, time for the whole compaction (plan, summary request and its stream, append), the
summary call's tokens, the context before and after (estimated, and as the server counts the next
request), and reopening the file and rebuilding the compacted context.

python bench/bench_compaction.py
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentcore.compaction import (
    CompactionSettings,
    compact_session,
    estimate_context_tokens,
    plan_compaction,
)
from agentcore.messages import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage, UserMessage
from agentcore.model import Model
from agentcore.providers import aclose_shared_client, stream
from agentcore.runtime import LlmContext
from agentcore.session import (
    FsyncPolicy,
    GetEntriesOptions,
    JsonlSessionStorage,
    MessageEntry,
    StorageRateLimits,
)
from agentcore.testing.loopback import LoopbackServer, Protocol, Script, estimate_request_tokens

RUNS = 5
SUMMARY = "## Goal\nAnswer questions about the cellar.\n## Files and data\n" + "\n".join(
    f"- wine {n}: vintage {1990 + n}, 6 bottles, rack {n % 7}" for n in range(40)
)


def responder(request: Any, protocol: Protocol) -> Script:
    return Script(text=SUMMARY, chunk_chars=64)


def messages_for(count: int) -> list[MessageEntry]:
    """``count`` messages in groups of four; the assistant reports growing usage, as a provider would."""
    entries: list[MessageEntry] = []
    context_tokens = 0
    for n in range(count):
        turn, step = divmod(n, 4)
        message: UserMessage | AssistantMessage | ToolResultMessage
        if step == 0:
            message = UserMessage(
                content=f"Question {turn}: what is in rack {turn % 7}? " * 4, timestamp=1 + n
            )
        elif step == 1:
            message = AssistantMessage(
                content=[
                    TextContent(text="Let me look."),
                    ToolCall(id=f"c{turn}", name="rack", arguments={"rack": turn % 7}),
                ],
                stop_reason="toolUse",
                timestamp=1 + n,
            )
        elif step == 2:
            message = ToolResultMessage(
                tool_call_id=f"c{turn}",
                tool_name="rack",
                content=[TextContent(text=f"Rack {turn % 7}: " + "Barolo 2016 x6, Rioja 2012 x3; " * 64)],
                timestamp=1 + n,
            )
        else:
            message = AssistantMessage(
                content=[TextContent(text=f"Rack {turn % 7} holds Barolo and Rioja.")], timestamp=1 + n
            )
        context_tokens += len(message.model_dump_json()) // 4
        if isinstance(message, AssistantMessage):
            message.usage = Usage(input=context_tokens, output=20, total_tokens=context_tokens + 20)
        entries.append(MessageEntry(message=message))
    return entries


async def bench_size(server: LoopbackServer, count: int, window: int, workdir: Path) -> dict[str, Any]:
    model: Model = server.model(context_window=window, max_tokens=8_192)
    settings = CompactionSettings()
    base = workdir / f"base-{count}.jsonl"
    with JsonlSessionStorage.create(
        base, cwd="/", fsync=FsyncPolicy("never"), rate_limits=StorageRateLimits.unlimited()
    ) as storage:
        storage.append_entries(messages_for(count))
        path = storage.get_entries(GetEntriesOptions(on_path=True))
        before = storage.build_context().messages
    tokens_before = estimate_context_tokens(before)

    plan_times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        plan = plan_compaction(path, settings, model)
        plan_times.append(time.perf_counter() - started)
    assert plan is not None

    compact_times, rebuild_times, call_times = [], [], []
    result: dict[str, Any] = {}

    async def timed_stream(model: Model, context: LlmContext, options: Any) -> Any:
        started = time.perf_counter()
        async for event in stream(model, context, options):
            yield event
        call_times.append(time.perf_counter() - started)

    for run in range(RUNS):
        copy = workdir / f"run-{count}-{run}.jsonl"
        shutil.copy(base, copy)
        with JsonlSessionStorage.open(
            copy, writer=True, fsync=FsyncPolicy("never"), rate_limits=StorageRateLimits.unlimited()
        ) as storage:
            started = time.perf_counter()
            entry = await compact_session(
                storage, model, timed_stream, settings=settings, reason="threshold", api_key="bench"
            )
            compact_times.append(time.perf_counter() - started)
            assert entry is not None
        summary_request = server.requests[-1].body
        started = time.perf_counter()
        with JsonlSessionStorage.open(copy, rate_limits=StorageRateLimits.unlimited()) as reopened:
            after = reopened.build_context()
        rebuild_times.append(time.perf_counter() - started)
        # What the server would count for the next model call on the compacted context.
        next_request = LlmContext(messages=after.messages)
        events = [event async for event in stream(model, next_request, _options())]
        next_tokens = events[-1].message.usage.input if events[-1].type == "done" else None
        result = {
            "messages": count,
            "window": window,
            "context_before_estimate": tokens_before,
            "context_before_server": estimate_request_tokens(
                {"messages": [m.model_dump(mode="json") for m in before]}
            ),
            "tokens_after_estimate": entry.details["tokens_after"],
            "context_after_server": next_tokens,
            "summarized_messages": entry.details["summarized_messages"],
            "kept_messages": entry.details["kept_messages"],
            "summary_request_tokens": estimate_request_tokens(summary_request),
            "summary_usage_in": entry.usage.input if entry.usage else None,
            "summary_usage_out": entry.usage.output if entry.usage else None,
        }
    result["plan_ms"] = statistics.median(plan_times) * 1000
    result["compact_ms"] = statistics.median(compact_times) * 1000
    result["compact_min_ms"] = min(compact_times) * 1000
    result["call_ms"] = statistics.median(call_times) * 1000
    result["rebuild_ms"] = statistics.median(rebuild_times) * 1000
    return result


def _options() -> Any:
    from agentcore.runtime import StreamOptions

    return StreamOptions(api_key="bench")


async def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-compaction-"))
    try:
        results = []
        for count, window in ((100, 32_000), (1_000, 200_000)):
            async with LoopbackServer(responder, context_window=window) as server:
                results.append(await bench_size(server, count, window, workdir))
        await aclose_shared_client()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"compaction bench (python {sys.version.split()[0]}, loopback model over HTTP, median of {RUNS})")
    for r in results:
        print(
            f"\n{r['messages']:>5} messages, window {r['window']:,} tokens\n"
            f"  context before: {r['context_before_estimate']:,} tokens (estimate), "
            f"{r['context_before_server']:,} (as the server counts it)\n"
            f"  context after:  {r['tokens_after_estimate']:,} tokens (estimate), "
            f"{r['context_after_server']:,} (server, next request)\n"
            f"  summarised {r['summarized_messages']} messages, kept {r['kept_messages']}\n"
            f"  summary call: request {r['summary_request_tokens']:,} tokens, usage in/out "
            f"{r['summary_usage_in']:,}/{r['summary_usage_out']:,}\n"
            f"  plan {r['plan_ms']:.2f} ms; whole compaction {r['compact_ms']:.1f} ms "
            f"(min {r['compact_min_ms']:.1f}), of which the summary call {r['call_ms']:.1f} ms;\n"
            f"  reopen + build_context after {r['rebuild_ms']:.2f} ms"
        )


if __name__ == "__main__":
    asyncio.run(main())
