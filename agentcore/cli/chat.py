"""The interactive conversation: prompts in, streamed events out, Ctrl-C aborts only the turn.

A turn is: note the event offset, send the prompt (an update: it returns once accepted), then print
events from that offset until ``agent_end``. The events come from the workflow's event stream, so
the same loop works for a conversation started elsewhere and survives a worker restart mid-turn.

Ctrl-C during a turn sends ``abort`` (the model or tool activity is cancelled, the partial answer is
kept with ``stop_reason="aborted"``) and waits for the run to end; the conversation goes on. At the
prompt, Ctrl-C or end of input leaves. On a terminal, lines typed while a turn runs are steering
messages (``/followup ...`` queues a follow-up instead), and the messages queued and not yet taken
are listed under the live output; piped input is read only between turns, so a script of questions
is asked one turn at a time.

A tool call that waits for approval is asked about on the spot: ``y`` lets it run, ``n`` (optionally
followed by a reason: ``n not on a Friday``) refuses it, ``e`` asks for new arguments (JSON) and runs
it with them. A call decided elsewhere meanwhile (the web chat, ``agentcore approve``) is said so.

On a terminal the chat is drawn with rich and read with prompt-toolkit (``pretty``: Markdown, a
spinner, tool panels, line editing and history; see ``pretty.py``). ``--plain``, or an output that
is not a terminal, keeps the plain lines above, which scripts and pipes rely on.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

import orjson
from rich.text import Text

from ..client import DurableAgent
from ..errors import (
    APPROVAL_ALREADY_RESOLVED,
    APPROVAL_NOT_FOUND,
    INVALID_PARAMETERS,
    AgentBusyError,
    AgentError,
)
from ..events import ToolApprovalRequestedEvent, WakeupFiredEvent
from ..protocol import QueueName, QueuesState
from .pretty import HISTORY_FILE, PromptLines, RichPrinter
from .render import EventPrinter, format_arguments, format_state

HELP = """\
/state            show the conversation's state
/steer TEXT       queue a steering message (taken after the current tool batch)
/followup TEXT    queue a follow-up (taken when the agent would stop)
/clear [steering|followup]  drop queued messages (both queues by default); lists what it dropped
/abort            stop the current turn
/quit             leave (the conversation keeps running in Temporal)
Ctrl-C aborts a running turn; at the prompt it leaves."""

# ``/clear``'s argument: which queue to empty.
CLEAR_ARGUMENTS: dict[str, QueueName] = {
    "": "all",
    "steering": "steering",
    "followup": "follow_up",
    "follow-up": "follow_up",
}


class LineSource:
    """Lines from stdin through a daemon thread, so a blocked read never holds up shutdown."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdin
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self._loop = asyncio.get_running_loop()
        threading.Thread(target=self._pump, name="stdin-reader", daemon=True).start()

    def _pump(self) -> None:
        try:
            for line in self.stream:
                self._loop.call_soon_threadsafe(self.queue.put_nowait, line.rstrip("\n"))
        except (OSError, ValueError):
            pass
        with contextlib.suppress(RuntimeError):  # the loop may be gone already
            self._loop.call_soon_threadsafe(self.queue.put_nowait, None)

    async def next(self) -> str | None:
        return await self.queue.get()

    def interrupt(self) -> None:
        self.queue.put_nowait(None)


class ScriptedLines:
    """A fixed list of user lines (``--demo-script``, ``--once``), echoed as if typed."""

    interactive = False

    def __init__(self, lines: Iterable[str], out: TextIO) -> None:
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        for line in lines:
            self.queue.put_nowait(line)
        self.queue.put_nowait(None)
        self.out = out

    async def next(self) -> str | None:
        line = await self.queue.get()
        if line is not None:
            self.out.write(f"you> {line}\n")
            self.out.flush()
        return line

    def interrupt(self) -> None:
        self.queue.put_nowait(None)


def pretty_output(args: argparse.Namespace, out: TextIO | None = None) -> bool:
    """Draw the chat with rich unless ``--plain`` or the output is not a terminal (a pipe, a file)."""
    stream = out or sys.stdout
    return not getattr(args, "plain", False) and bool(getattr(stream, "isatty", lambda: False)())


def line_source(data_dir: Path, pretty: bool) -> LineSource | PromptLines:
    """prompt-toolkit's editor (history in ``data_dir``) on a terminal, else lines from stdin."""
    if pretty and sys.stdin.isatty():
        return PromptLines(data_dir / HISTORY_FILE)
    return LineSource()


class ChatSession:
    def __init__(
        self,
        agent: DurableAgent,
        lines: LineSource | ScriptedLines | PromptLines,
        out: TextIO | None = None,
        *,
        pretty: bool = False,
    ) -> None:
        self.agent = agent
        self.lines = lines
        self.out = out or sys.stdout
        self.printer: EventPrinter | RichPrinter = RichPrinter(self.out) if pretty else EventPrinter(self.out)
        self._turn_running = False
        self._prompt_accepted = False
        self._abort_when_accepted = False
        self._quit = False
        # An approval question waiting for the next typed line (lines typed during a turn go here
        # instead of becoming steering messages).
        self._answer: asyncio.Future[str | None] | None = None
        self._queued: list[str] = []  # shown under the live output while a turn runs

    def _say(self, text: str) -> None:
        self.printer.line(text)

    # ------------------------------------------------------------------------------- Ctrl-C

    def _on_interrupt(self) -> None:
        if self._turn_running:
            self._say("^C aborting the turn...")
            if self._prompt_accepted:
                asyncio.ensure_future(self.agent.abort("interrupted from the chat"))
            else:
                self._abort_when_accepted = True  # Ctrl-C came while the prompt was on its way
        else:
            self._quit = True
            self.lines.interrupt()

    @contextlib.contextmanager
    def _interrupts(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        installed = False
        if threading.current_thread() is threading.main_thread():
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signal.SIGINT, self._on_interrupt)
                installed = True
        try:
            yield
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)

    # ------------------------------------------------------------------------------- commands

    async def command(self, line: str) -> bool:
        """Run a ``/command``; False when the line is not one."""
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        if name in ("/quit", "/exit"):
            self._quit = True
        elif name == "/help":
            self._say(HELP)
        elif name == "/state":
            state = await self.agent.get_state()
            self._say(format_state(state, await self.agent.get_session_stats()))
        elif name == "/steer" and rest:
            await self.agent.steer(rest)
            self._say("  [steering message queued]")
        elif name in ("/followup", "/follow-up") and rest:
            await self.agent.follow_up(rest)
            self._say("  [follow-up queued]")
        elif name == "/clear":
            await self._clear_queues(rest)
        elif name == "/abort":
            await self.agent.abort("aborted from the chat")
        elif line.startswith("/"):
            self._say(f"unknown command {name!r}; /help lists them")
        else:
            return False
        return True

    async def _clear_queues(self, which: str) -> None:
        queue = CLEAR_ARGUMENTS.get(which)
        if queue is None:
            self._say("usage: /clear [steering|followup]")
            return
        removed = await self.agent.clear_queues(queue)
        items = [("steering", item) for item in removed.steering]
        items += [("follow-up", item) for item in removed.follow_up]
        self._say(f"  [cleared {len(items)} queued message(s)]")
        for kind, item in items:
            self._say(f"  - {kind}: {item.message.text}")

    async def _typed_during_turn(self) -> None:
        while True:
            line = await self.lines.next()
            if self._answer is not None and not self._answer.done():
                self._answer.set_result(line)
                continue
            if line is None:
                return
            if line.strip() and not await self.command(line.strip()):
                await self.agent.steer(line.strip())
                self._say("  [steering message queued]")

    async def _show_queues(self) -> None:
        queues: QueuesState = await self.agent.get_queues()
        self._queued = [f"steering: {item.message.text}" for item in queues.steering] + [
            f"follow-up: {item.message.text}" for item in queues.follow_up
        ]

    def _live_status(self) -> str:
        assert isinstance(self.printer, RichPrinter)
        queued = (
            Text("\n".join(f"  queued {item}" for item in self._queued), style="magenta")
            if self._queued
            else None
        )
        return self.printer.live_ansi(queued)

    async def _steer_while_running(self, lines: PromptLines, pending: str = "") -> None:
        """The live composer: each line typed while the turn runs steers it (or is a command)."""
        while True:
            line = await lines.steer_line(self._live_status, default=pending)
            pending = ""
            if line is None:
                return
            line = line.strip()
            if not line:
                continue
            assert isinstance(self.printer, RichPrinter)
            self.printer.console.print(Text.assemble(("steer> ", "bold yellow"), line))
            try:
                if not await self.command(line):
                    await self.agent.steer(line)
                    self._say("  [steering message queued]")
                await self._show_queues()
            except AgentError as err:
                self._say(f"  [{err.code}: {err.message}]")

    async def _turn_with_live_prompt(self, lines: PromptLines, start: int) -> None:
        """Events printed above a prompt that stays live (prompt-toolkit's ``patch_stdout``)."""
        from prompt_toolkit.patch_stdout import patch_stdout

        assert isinstance(self.printer, RichPrinter)
        printer = self.printer
        printer.stop()
        printer.use_live = False
        original = printer.console.file
        lines.on_interrupt = self._on_interrupt
        await self._show_queues()
        with patch_stdout(raw=True):
            printer.console.file = sys.stdout
            composer = asyncio.ensure_future(self._steer_while_running(lines))
            try:
                async for _, event in self.agent.events(start):
                    if event.type == "agent_start" and self._abort_when_accepted:
                        asyncio.ensure_future(self.agent.abort("interrupted from the chat"))
                    if event.type == "message_start" and event.message.role == "user":
                        await self._show_queues()  # a queued message was taken
                    if printer.handle(event):
                        break
                    if isinstance(event, ToolApprovalRequestedEvent):
                        # The question takes the prompt; the composer (and what was typed) comes back.
                        typed = lines.pending_text()
                        await _cancelled(composer)
                        await self._approval(event, None)
                        composer = asyncio.ensure_future(self._steer_while_running(lines, typed))
            finally:
                typed = lines.pending_text()
                await _cancelled(composer)
                printer.console.file = original
                printer.use_live = True
                lines.on_interrupt = None
                self._queued = []
        if typed.strip():
            lines.session.default_buffer.text = typed  # not lost: it waits in the next prompt

    async def turn(self, text: str) -> None:
        # The turn is the user's from Enter on: Ctrl-C from then aborts it rather than leaving.
        self._turn_running, self._prompt_accepted, self._abort_when_accepted = True, False, False
        self.printer.begin()
        typing: asyncio.Future[None] | None = None
        try:
            start = await self.agent.event_offset()
            try:
                await self.agent.prompt(text)
            except AgentBusyError:
                self.printer.stop()
                self._say("  [the agent is busy with another run; /steer or /followup instead]")
                return
            self._prompt_accepted = True
            if isinstance(self.lines, PromptLines) and isinstance(self.printer, RichPrinter):
                await self._turn_with_live_prompt(self.lines, start)
                return
            if self.lines.interactive:
                typing = asyncio.ensure_future(self._typed_during_turn())
            async for _, event in self.agent.events(start):
                if event.type == "agent_start" and self._abort_when_accepted:
                    asyncio.ensure_future(self.agent.abort("interrupted from the chat"))
                if self.printer.handle(event):
                    break
                if isinstance(event, ToolApprovalRequestedEvent):
                    await self._approval(event, typing)
        finally:
            self._turn_running = False
            self.printer.stop()
            if typing is not None:
                typing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await typing

    async def _next_line(self) -> str | None:
        """The user's next line; meanwhile a wake-up that fires (or a schedule's message) is shown
        as a line of its own, and its run as any turn, and the prompt comes back after it."""
        while True:
            if self.lines.interactive:
                self.out.write("you> ")
                self.out.flush()
            start = await self.agent.event_offset()
            reading = asyncio.ensure_future(self.lines.next())
            woken = asyncio.ensure_future(self._next_wakeup(start))
            done, _ = await asyncio.wait({reading, woken}, return_when=asyncio.FIRST_COMPLETED)
            if reading in done:
                await _cancelled(woken)
                return reading.result()
            # Not a line lost: a queued line stays queued, and the prompt is asked again after the run.
            await _cancelled(reading)
            if woken.exception() is not None:  # the event stream failed: just read the line
                return await self.lines.next()
            await self._follow_wakeup(*woken.result())

    async def _next_wakeup(self, start: int) -> tuple[int, WakeupFiredEvent]:
        async for offset, event in self.agent.events(start):
            if event.type == "wakeup_fired":
                return offset, event
        raise RuntimeError("the conversation's events ended")

    async def _follow_wakeup(self, offset: int, fired: WakeupFiredEvent) -> None:
        if self.lines.interactive:
            self.out.write("\n")  # off the prompt's line
        self._turn_running, self._prompt_accepted = True, True
        self.printer.begin()
        try:
            self.printer.handle(fired)
            async for _, event in self.agent.events(offset + 1):
                if self.printer.handle(event):
                    break
        finally:
            self._turn_running = False
            self.printer.stop()

    # ------------------------------------------------------------------------------- approvals

    async def _ask(self, question: str, typing: asyncio.Future[None] | None) -> str | None:
        """The user's answer: the next line typed (None: input ended)."""
        self.printer.stop()  # a live spinner would draw over the question
        ask = getattr(self.lines, "ask", None)
        if ask is not None:
            answer: str | None = await ask(question)
            return answer
        self.out.write(question)
        self.out.flush()
        if typing is None or typing.done():
            return await self.lines.next()
        self._answer = asyncio.get_running_loop().create_future()
        try:
            return await self._answer
        finally:
            self._answer = None

    async def _approval(self, event: ToolApprovalRequestedEvent, typing: asyncio.Future[None] | None) -> None:
        """Ask whether a waiting tool call may run: y / n [reason] / e (new arguments)."""
        call = f"{event.tool_name}({format_arguments(event.args)})"
        while True:
            answer = await self._ask(f"approve {call}? [y]es / [n]o [reason] / [e]dit: ", typing)
            if answer is None:
                return  # input ended: the call keeps waiting (agentcore approve decides it later)
            word, _, rest = answer.strip().partition(" ")
            try:
                if word.lower() in ("y", "yes"):
                    await self.agent.approve(event.tool_call_id)
                elif word.lower() in ("n", "no"):
                    await self.agent.deny(event.tool_call_id, rest.strip())
                elif word.lower() in ("e", "edit"):
                    text = await self._ask(f"arguments for {event.tool_name} (JSON): ", typing)
                    if text is None:
                        return
                    try:
                        edited = orjson.loads(text)
                    except orjson.JSONDecodeError:
                        self._say("  [not JSON; try again]")
                        continue
                    await self.agent.approve(event.tool_call_id, edited)
                else:
                    continue
            except AgentError as err:
                if err.code == INVALID_PARAMETERS:
                    self._say(f"  [{err.message}]")
                    continue
                if err.code in (APPROVAL_ALREADY_RESOLVED, APPROVAL_NOT_FOUND):
                    self._say("  [that call was decided elsewhere]")
                    return
                raise
            return

    async def run(self) -> None:
        with self._interrupts():
            while not self._quit:
                line = await self._next_line()
                if line is None or self._quit:
                    break
                line = line.strip()
                if not line:
                    continue
                try:
                    if not await self.command(line):
                        await self.turn(line)
                except AgentError as err:
                    if err.code == "AGENT_NOT_FOUND":
                        raise
                    self._say(f"  [{err}]")  # "CODE: message"


async def _cancelled(task: asyncio.Future[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
