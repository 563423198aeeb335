"""The terminal chat on a terminal: Markdown answers, colour, a spinner, tool calls as panels.

``RichPrinter`` takes the same events as the plain ``EventPrinter`` (which pipes and ``--plain``
keep). While a turn runs, a live region at the bottom shows what is in progress: a spinner with the
seconds since the model was asked (until its first token) or since a tool started, thinking in dim
italics, and the answer so far as Markdown. Whatever has finished is printed above it for good.

``PromptLines`` reads the user's lines with prompt-toolkit: line editing, a history kept across
chats in the data directory (Up recalls the last line), Alt+Enter for a new line. While a turn runs
the prompt stays live (``steer``): what has finished is printed above it, the live region (spinner,
answer so far, queued messages) is drawn as the prompt's own first lines, so typing never garbles
the output; Ctrl-C there calls ``on_interrupt`` (abort) instead of leaving.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.formatted_text import ANSI, FormattedText
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.padding import Padding
from rich.panel import Panel
from rich.spinner import Spinner
from rich.text import Text

from ..events import AgentEvent, ToolExecutionEndEvent
from ..messages import AssistantMessage
from ..tools import tool_result_text
from .render import describe_wakeup, format_arguments

# Lines of a tool result shown in its panel; the rest is summarised as "+N lines".
PANEL_LINES = 8
HISTORY_FILE = "chat_history"
IDLE_PLACEHOLDER = FormattedText([("fg:ansibrightblack", "message, /help; Alt+Enter for a new line")])


class RichPrinter:
    """Prints one run's events to a terminal; ``handle`` returns True at ``agent_end``."""

    def __init__(self, out: TextIO, *, assistant_label: str = "agent") -> None:
        self.console = Console(file=out, highlight=False, soft_wrap=False)
        self.assistant_label = assistant_label
        self._live: Live | None = None
        self._text = ""
        self._thinking = ""
        self._waiting_label: str | None = None
        self._waiting_since = time.monotonic()
        self._tools: dict[str, tuple[str, str]] = {}  # running: id -> (name, progress)
        self._tool_args: dict[str, object] = {}
        self._spinner = Spinner("dots")
        # False while the prompt stays live during a turn: the prompt draws ``live_ansi()`` instead.
        self.use_live = True

    # ------------------------------------------------------------------------------- live region

    def _wait_for(self, label: str | None) -> None:
        if label != self._waiting_label:
            self._waiting_since = time.monotonic()
        self._waiting_label = label

    def _tail(self, text: str) -> str:
        # A live region taller than the terminal cannot be redrawn in place: show the newest lines.
        keep = max(4, self.console.size.height - 6)
        lines = text.splitlines()
        return "\n".join(lines[-keep:]) if len(lines) > keep else text

    def _render(self) -> RenderableType:
        parts: list[RenderableType] = []
        if self._thinking:
            parts.append(Text(self._tail(self._thinking), style="dim italic"))
        if self._text:
            parts.append(Markdown(self._tail(self._text)))
        label = self._waiting_label
        if self._tools:
            names = ", ".join(name for name, _ in self._tools.values())
            progress = next((p for _, p in reversed(self._tools.values()) if p), "")
            label = f"running {names}" + (f": {progress}" if progress else "")
        if label:
            elapsed = time.monotonic() - self._waiting_since
            # One spinner for the printer's life: its frame follows the time since it was made.
            self._spinner.update(text=Text(f"{label}… {elapsed:.1f}s", style="cyan"))
            parts.append(self._spinner)
        # A right margin: a line exactly as wide as the terminal leaves the cursor in its "pending
        # wrap" state, and the region's redraw then misplaces a line.
        return Padding(Group(*parts), (0, 1, 0, 0))

    def live_ansi(self, extra: RenderableType | None = None) -> str:
        """The live region (and ``extra`` below it) as ANSI text, for a prompt to draw."""
        buffer = io.StringIO()
        width = self.console.size.width
        console = Console(
            file=buffer, force_terminal=True, width=width, color_system="standard", highlight=False
        )
        parts = [self._render()] + ([extra] if extra is not None else [])
        console.print(Group(*parts), end="")
        return buffer.getvalue()

    def _start_live(self) -> None:
        if self._live is None and self.use_live and self.console.is_terminal:
            self._live = Live(
                get_renderable=self._render,
                console=self.console,
                refresh_per_second=10,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()

    def begin(self) -> None:
        """A prompt was sent: the spinner runs from now until the first token."""
        self._wait_for("thinking")
        self._waiting_since = time.monotonic()
        self._start_live()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    # ------------------------------------------------------------------------------- output

    def line(self, text: str) -> None:
        self.console.print(Text(text, style="yellow"))

    def _finish_text(self) -> None:
        # Cleared before printing: printing redraws the live region, which must not show it again.
        thinking, text = self._thinking.strip(), self._text
        self._text = self._thinking = ""
        if thinking:
            self.console.print(Text(thinking, style="dim italic"))
        if text.strip():
            self.console.print(Markdown(text))

    def _tool_panel(self, name: str, args: object, result: str, is_error: bool) -> Panel:
        lines = result.strip().splitlines() or ["(no output)"]
        shown = "\n".join(lines[:PANEL_LINES])
        more = Text(f"… +{len(lines) - PANEL_LINES} lines", style="dim") if len(lines) > PANEL_LINES else None
        body: RenderableType
        if not is_error and any(line.startswith("|") for line in lines):
            # A Markdown table (what search tools tend to answer): drawn as a table, whole.
            body, more = Markdown(result.strip()), None
        else:
            body = Text(shown, style="red" if is_error else "")
        if more is not None:
            body = Group(body, more)
        title = Text.assemble(("✗ " if is_error else "✓ ", "red" if is_error else "green"), (name, "bold"))
        if args:
            title.append(f"({format_arguments(args)})", style="dim")
        return Panel(
            body, title=title, title_align="left", border_style="red" if is_error else "blue", expand=False
        )

    def _delta(self, delta: dict[str, Any]) -> None:
        kind, text = delta.get("type"), str(delta.get("delta") or "")
        if kind == "text_delta" and text:
            self._text += text
            self._wait_for(None)
        elif kind == "thinking_delta" and text:
            self._thinking += text
            self._wait_for("thinking")
        elif kind == "toolcall_start":
            self._wait_for("preparing a tool call")

    def _answer_end(self, message: AssistantMessage) -> None:
        self._finish_text()
        self._wait_for(None)
        if message.stop_reason == "aborted":
            self.line("  aborted: the turn was stopped; the conversation goes on")
        elif message.stop_reason == "error":
            self.console.print(Text(f"  model error: {message.error_message or 'unknown'}", style="bold red"))

    def _tool_end(self, event: ToolExecutionEndEvent) -> None:
        self._tools.pop(event.tool_call_id, None)
        args = self._tool_args.pop(event.tool_call_id, None)
        self.console.print(
            self._tool_panel(event.tool_name, args, tool_result_text(event.result), event.is_error)
        )
        if not self._tools:
            self._wait_for("thinking")

    def handle(self, event: AgentEvent) -> bool:
        self._start_live()
        if event.type == "agent_start" or event.type == "turn_start":
            self._wait_for("thinking")
        elif event.type == "message_update":
            self._delta(event.assistant_message_event)
        elif event.type == "message_end" and event.message.role == "assistant":
            self._answer_end(event.message)
        elif event.type == "tool_execution_start":
            self._tools[event.tool_call_id] = (event.tool_name, "")
            self._tool_args[event.tool_call_id] = event.args
            self._wait_for(None)
            self._waiting_since = time.monotonic()
        elif event.type == "tool_execution_update":
            if event.tool_call_id in self._tools:
                progress = tool_result_text(event.partial_result).strip().splitlines()
                self._tools[event.tool_call_id] = (event.tool_name, progress[-1][:60] if progress else "")
        elif event.type == "tool_approval_requested":
            self._wait_for(None)
        elif event.type == "tool_approval_resolved":
            reason = f": {event.reason}" if event.reason else ""
            self.line(f"  {event.decision}{reason}")
        elif event.type == "tool_execution_end":
            self._tool_end(event)
        elif event.type == "llm_retry":
            self._text = self._thinking = ""  # the failed attempt's text is void
            self.line(f"  model call failed, retrying (attempt {event.attempt}): {event.error_message or ''}")
            self._wait_for("retrying")
        elif event.type == "wakeup_fired":
            # As a line the user typed: the note is what the conversation runs with now.
            self._finish_text()
            self.console.print(
                Text.assemble(
                    ("wake-up> ", "bold ansigreen"), event.note, (f"  ({describe_wakeup(event)})", "dim")
                )
            )
            self._wait_for("thinking")
        elif event.type == "compaction_start":
            self._wait_for(f"compacting the conversation ({event.reason})")
        elif event.type == "compaction_end":
            self._wait_for(None)
            self.console.print(Text(f"  compacted: {event.tokens_before} tokens summarised", style="dim"))
        elif event.type == "agent_end":
            self._finish_text()
            self._tools.clear()
            self._wait_for(None)
            self.stop()
            return True
        return False


class PromptLines:
    """The user's lines from prompt-toolkit, with a history file that outlives the chat."""

    interactive = False  # typing is read at the prompt only; a running turn is stopped with Ctrl-C

    def __init__(self, history_path: Path) -> None:
        history_path.parent.mkdir(parents=True, exist_ok=True)
        bindings = KeyBindings()

        # Not Ctrl-J: Enter typed ahead, before the prompt has the terminal in raw mode, arrives
        # translated to a line feed (Ctrl-J) and must still send the message.
        @bindings.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @bindings.add("c-c")
        def _interrupt(event: KeyPressEvent) -> None:
            # A turn runs: Ctrl-C aborts it (the terminal is raw, so it arrives as a key, not SIGINT).
            # At the idle prompt it leaves, as before.
            if self.on_interrupt is not None:
                event.current_buffer.reset()
                self.on_interrupt()
            else:
                event.app.exit(exception=KeyboardInterrupt())

        self.session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history_path)),
            key_bindings=bindings,
            multiline=False,
            prompt_continuation=lambda width, line, wrapped: "... ".rjust(width),
            placeholder=IDLE_PLACEHOLDER,
        )
        self._closed = False
        self.on_interrupt: Callable[[], None] | None = None

    def interrupt(self) -> None:
        self._closed = True

    async def ask(self, question: str) -> str | None:
        """One answer (a tool approval's y / n / e), without the history."""
        try:
            answer: str = await PromptSession[str]().prompt_async(
                [("bold ansiyellow", question)], handle_sigint=False
            )
            return answer
        except (EOFError, KeyboardInterrupt):
            return None

    async def steer_line(self, status: Callable[[], str], default: str = "") -> str | None:
        """A line typed while a turn runs, under ``status`` (ANSI, redrawn ten times a second)."""
        if self._closed:
            return None
        # Erased when done: the chat prints what was sent, and no stale status stays behind.
        self.session.app.erase_when_done = True
        try:
            return await self.session.prompt_async(
                lambda: ANSI(status() + "\n\x1b[1;33msteer> \x1b[0m"),
                handle_sigint=False,
                refresh_interval=0.1,
                default=default,
                placeholder=[("fg:ansibrightblack", "Enter steers, /followup TEXT queues, Ctrl-C aborts")],
            )
        except EOFError:
            return None
        finally:
            self.session.app.erase_when_done = False

    def pending_text(self) -> str:
        """What is typed but not sent (kept when the prompt is closed at the end of a turn)."""
        return self.session.default_buffer.text

    async def next(self) -> str | None:
        if self._closed:
            return None
        try:
            # The chat owns SIGINT (Ctrl-C aborts a running turn): prompt-toolkit must not take it over.
            return await self.session.prompt_async(
                [("bold ansigreen", "you> ")],
                handle_sigint=False,
                refresh_interval=0,
                placeholder=IDLE_PLACEHOLDER,
            )
        except (EOFError, KeyboardInterrupt):
            return None
        except asyncio.CancelledError:
            raise


__all__ = ["HISTORY_FILE", "PromptLines", "RichPrinter"]
