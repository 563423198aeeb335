"""A long conversation in-process: the real OpenAI provider, the loopback server with a small context
window, a session file, and compaction whenever the context grows too large or the server refuses it.

The loopback responder plays three roles, told apart by the request's system prompt:

- the summariser (``COMPACTION_SYSTEM_PROMPT``): returns a structured summary listing every
  ``FACT-n=value`` it finds in the request (the transcript *and* the previous summary), so a test can
  check that what was learned survives several compactions;
- the branch summariser (``BRANCH_SUMMARY_SYSTEM_PROMPT``): the same, under a "Learned" heading;
- the assistant: answers a user prompt with a ``lookup`` tool call and a tool result with a short text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentcore.compaction import (
    BRANCH_SUMMARY_SYSTEM_PROMPT,
    COMPACTION_SYSTEM_PROMPT,
    CompactionSettings,
    compact_session,
    should_compact,
)
from agentcore.events import CompactionReason, StreamEvent
from agentcore.loop import AgentContext, AgentLoopConfig, agent_loop, agent_loop_continue
from agentcore.messages import AssistantMessage, Message, UserMessage
from agentcore.model import Model
from agentcore.providers import is_context_overflow, stream
from agentcore.runtime import LlmContext, StreamOptions
from agentcore.session import CompactionEntry, JsonlSessionStorage, MessageEntry
from agentcore.testing.loopback import Protocol, Script, ScriptToolCall, last_turn
from agentcore.tools import AgentTool, AgentToolResult

API_KEY = "sk-loopback"
SYSTEM_PROMPT = "You are a careful assistant. Use the lookup tool to answer questions about items."
FACT_RE = re.compile(r"FACT-(\d+)=(\w+)")
BIG_ITEMS = frozenset({5, 14, 23, 32})  # items whose lookup returns a long record (~1,100 tokens)


def _system_text(request: Any) -> str:
    messages = request.get("messages") or []
    if messages and messages[0].get("role") in ("system", "developer"):
        content = messages[0].get("content")
        return content if isinstance(content, str) else ""
    return ""


def _request_text(request: Any) -> str:
    parts: list[str] = []
    for message in request.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "\n".join(parts)


def facts_in(text: str) -> dict[int, str]:
    return {int(number): value for number, value in FACT_RE.findall(text)}


def responder(request: Any, protocol: Protocol) -> Script:
    system = _system_text(request)
    if system in (COMPACTION_SYSTEM_PROMPT, BRANCH_SUMMARY_SYSTEM_PROMPT):
        facts = facts_in(_request_text(request))
        listed = "\n".join(f"- FACT-{n}={value}" for n, value in sorted(facts.items()))
        heading = "## Learned" if system == BRANCH_SUMMARY_SYSTEM_PROMPT else "## Files and data"
        return Script(text=f"## Goal\nLook up items and remember facts.\n{heading}\n{listed}", chunk_chars=64)
    kind, text = last_turn(request, protocol)
    if kind == "tool":
        return Script(text=f"Noted: {text[:60]}", chunk_chars=32)
    item = re.search(r"item (\d+)", text)
    number = int(item.group(1)) if item else 0
    return Script(
        text="Looking it up.",
        tool_calls=[ScriptToolCall("lookup", {"item": number}, id=f"call_{number}")],
        chunk_chars=32,
    )


def lookup_tool() -> AgentTool:
    def execute(tool_call_id: str, arguments: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        item = int(arguments.get("item", 0))
        record = f"Item {item}: price {item * 3} EUR, stock {item % 5}, shelf {chr(65 + item % 26)}."
        days = 110 if item in BIG_ITEMS else 12
        record += " History: " + " ".join(
            f"restocked on day {day} with {day % 9} units;" for day in range(days)
        )
        return AgentToolResult.text(record)

    return AgentTool(
        name="lookup",
        description="Look up an item by number.",
        parameters={"type": "object", "properties": {"item": {"type": "integer"}}, "required": ["item"]},
        execute=execute,
    )


def prompt_text(number: int) -> str:
    return f"Remember FACT-{number}=v{number * 7}. What do we know about item {number}?"


@dataclass
class Compaction:
    reason: CompactionReason
    entry: CompactionEntry
    recovered: list[Message]  # build_context().messages of the file reopened right after it
    next_request: int  # index in ``Conversation.sent`` of the model call that followed it


@dataclass
class Conversation:
    """Runs prompts against ``model`` and keeps the session file in step, compacting as needed."""

    storage: JsonlSessionStorage
    model: Model
    settings: CompactionSettings
    tools: list[AgentTool] = field(default_factory=lambda: [lookup_tool()])
    sent: list[LlmContext] = field(default_factory=list)  # every non-summary model call's context
    compactions: list[Compaction] = field(default_factory=list)
    appended_messages: int = 0

    async def stream_fn(self, model: Model, context: LlmContext, options: StreamOptions) -> Any:
        self.sent.append(context)
        async for event in stream(model, context, options):
            yield event

    async def summary_stream_fn(self, model: Model, context: LlmContext, options: StreamOptions) -> Any:
        event: StreamEvent
        async for event in stream(model, context, options):
            yield event

    def config(self) -> AgentLoopConfig:
        return AgentLoopConfig(model=self.model, api_key=API_KEY)

    def agent_context(self, messages: list[Message]) -> AgentContext:
        return AgentContext(system_prompt=SYSTEM_PROMPT, messages=messages, tools=list(self.tools))

    async def compact(
        self, reason: CompactionReason, instructions: str | None = None
    ) -> CompactionEntry | None:
        entry = await compact_session(
            self.storage,
            self.model,
            self.summary_stream_fn,
            settings=self.settings,
            reason=reason,
            instructions=instructions,
            api_key=API_KEY,
        )
        if entry is not None:
            with JsonlSessionStorage.open(self.storage.path) as reopened:
                recovered = reopened.build_context().messages
            self.compactions.append(Compaction(reason, entry, recovered, len(self.sent)))
        return entry

    async def _run(self, events: Any) -> AssistantMessage:
        last: AssistantMessage | None = None
        async for event in events:
            if event.type == "message_end":
                self.storage.append_entry(MessageEntry(message=event.message))
                self.appended_messages += 1
                if isinstance(event.message, AssistantMessage):
                    last = event.message
        assert last is not None
        return last

    async def prompt(self, text: str) -> AssistantMessage:
        """One user prompt to the end of its run: compact first if the context is past the threshold;
        on a context overflow compact and continue once."""
        messages = self.storage.build_context().messages
        if should_compact(messages, self.model, self.settings):
            await self.compact("threshold")
            messages = self.storage.build_context().messages
        prompt = UserMessage(content=text, timestamp=_now())
        last = await self._run(
            agent_loop([prompt], self.agent_context(messages), self.config(), stream_fn=self.stream_fn)
        )
        if is_context_overflow(last):
            entry = await self.compact("overflow")
            assert entry is not None, "an overflowing context must be compactable"
            messages = self.storage.build_context().messages
            # The refused call stays in the file (history); providers never send failed turns, and the
            # loop continues from the message before it.
            assert messages[-1] is not None and messages[-1].role == "assistant"
            last = await self._run(
                agent_loop_continue(
                    self.agent_context(messages[:-1]), self.config(), stream_fn=self.stream_fn
                )
            )
        return last


def _now() -> int:
    import time

    return time.time_ns() // 1_000_000


def new_storage(tmp_path: Path, name: str = "long") -> JsonlSessionStorage:
    return JsonlSessionStorage.create(
        tmp_path / f"{name}.jsonl", cwd=str(tmp_path), metadata={"system_prompt": SYSTEM_PROMPT}
    )
