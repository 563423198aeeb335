"""The web chat against a real deployment, driven by a real headless Chromium (Debian's chromium and
chromium-driver, through selenium). Skips with the reason when the browser is not installed.

The deployment: the session's Temporal dev server, a worker with the demo tools plus ``hold`` (a tool
that runs until the test lets it go, so a turn can be caught mid-tool), the loopback model server
playing the sommelier with a few extra scripted answers, and the web app served on 127.0.0.1:0.
"""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.client import Client

from agentcore import AgentTool, AgentToolResult
from agentcore.cli.common import DEMO_TOOL_NAMES
from agentcore.client import AgentClient, DurableAgent
from agentcore.demo import DEMO_SYSTEM_PROMPT, demo_tools
from agentcore.demo.script import sommelier_responder
from agentcore.model import Model
from agentcore.state import AgentOptions
from agentcore.testing.loopback import LoopbackServer, Protocol, Script, ScriptToolCall, last_turn
from agentcore.web import WebSettings, create_app, serve_web
from agentcore.worker import create_worker
from tests.support.durable import FAST_LIMITS
from tests.support.replay import watch_worker

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)",
)

# An answer that tries to run script in the page, two ways.
XSS_ANSWER = (
    'Here you go: <script>window.__xss = "script"</script> and '
    '<img src="x" onerror="window.__xss = \'img\'"> and [a link](javascript:window.__xss=1). **Safe**.'
)
# A long answer streamed slowly, its words numbered so a repeat or a gap is plain to see.
COUNTING = " ".join(f"w{n:03d}" for n in range(1, 241))
HOLD_RESULT = "the door held"
# Unbroken strings that once made the page thousands of pixels wide.
LONG_URL = "https://example.com/" + "a" * 700
LONG_ANSWER = (
    f"See {LONG_URL} and the hash {'9f86d081884c7d65' * 40}.\n\n"
    f"```\n{'QUJDREVGR0g=' * 90}\n```\n\n| column |\n| --- |\n| {'y' * 500} |\n"
)
# Markdown streamed slowly enough to be caught half-way.
MARKDOWN_CODE = "def pour(glass):\n    return glass + 1\n"
MARKDOWN_ANSWER = f"**Pour it slowly.** Here is how:\n\n```python\n{MARKDOWN_CODE}```\n\n" + " ".join(
    f"then{n}" for n in range(150)
)


class NoArgs(BaseModel):
    pass


@dataclass
class Hold:
    """The ``hold`` tool's gate: each call runs until ``release()``."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)
    calls: int = 0

    def release(self) -> None:
        self.gate.set()

    def tool(self) -> AgentTool:
        async def execute(tool_call_id: str, args: NoArgs, signal: Any, on_update: Any) -> AgentToolResult:
            self.calls += 1
            on_update(AgentToolResult.text("holding the door"))
            await self.gate.wait()
            return AgentToolResult.text(HOLD_RESULT)

        # Not short: a remote activity, so abort and steering reach the conversation while it runs.
        return AgentTool(
            name="hold", description="Hold the door until told.", parameters=NoArgs, execute=execute
        )


def web_responder(pacing: float) -> Callable[[Any, Protocol], Script]:
    """The sommelier, plus: ``XSS`` (a hostile answer), ``Count to`` (a long slow answer), ``hold``
    (a tool call that waits), ``flaky`` (an overloaded provider once, then an answer), ``Pick a
    number`` (another number each time it is asked: a regenerated answer differs)."""
    sommelier = sommelier_responder(pacing=pacing)
    flaky_seen: set[str] = set()
    picked: list[int] = []

    def respond(body: Any, protocol: Protocol) -> Script:
        kind, text = last_turn(body, protocol)
        if kind == "user" and text.startswith("Long"):
            return Script(text=LONG_ANSWER, delay=pacing)
        if kind == "user" and text.startswith("Markdown"):
            return Script(text=MARKDOWN_ANSWER, delay=0.04, chunk_chars=4)
        if kind == "user" and "XSS" in text:
            return Script(text=XSS_ANSWER, delay=pacing)
        if kind == "user" and text.startswith("Count to"):
            return Script(text=COUNTING, delay=0.04, chunk_chars=5)
        if kind == "user" and "hold" in text:
            return Script(text="Holding the door.", tool_calls=[ScriptToolCall("hold", {})], delay=pacing)
        if kind == "tool" and text == HOLD_RESULT:
            return Script(text="The door is shut again.", delay=pacing)
        if kind == "user" and text.startswith("Pick a number"):
            picked.append(len(picked) + 1)
            return Script(text=f"Number {picked[-1]}.", delay=pacing)
        if kind == "user" and "flaky" in text:
            if text not in flaky_seen:
                flaky_seen.add(text)
                return Script(status=529, error_message="overloaded, try again")
            return Script(text="Made it on the second attempt.", delay=pacing)
        return sommelier(body, protocol)

    return respond


@dataclass
class WebDeployment:
    url: str
    agents: AgentClient
    model: Model
    hold: Hold
    token: str | None
    app: Any = None  # the ASGI app (a test can serve it again elsewhere)

    async def start(self, session_id: str | None = None) -> DurableAgent:
        options = AgentOptions(
            model=self.model, tools=[*DEMO_TOOL_NAMES, "hold"], system_prompt=DEMO_SYSTEM_PROMPT
        )
        return await self.agents.start(session_id or f"web-{uuid.uuid4().hex[:8]}", options)


@asynccontextmanager
async def web_deployment(
    client: Client,
    tmp_path: Path,
    *,
    token: str | None = None,
    pacing: float = 0.01,
    sessions_dir: Path | None = None,
) -> AsyncIterator[WebDeployment]:
    task_queue = f"web-{uuid.uuid4().hex[:10]}"
    sessions_dir = sessions_dir or tmp_path / "sessions"
    hold = Hold()
    async with LoopbackServer(web_responder(pacing)) as loopback:
        model = loopback.model("openai-completions", "cellar-demo", provider="demo")
        worker = create_worker(
            client,
            task_queue=task_queue,
            tools=[*demo_tools(tmp_path / "cellar.sqlite"), hold.tool()],
            sessions_dir=sessions_dir,
        )
        watch_worker(worker)
        async with worker:
            agents = AgentClient(client, task_queue=task_queue, sessions_dir=sessions_dir, limits=FAST_LIMITS)

            def resolve_model(spec: str) -> Model:
                if spec != "demo":
                    raise ValueError(f"only the demo model here, not {spec!r}")
                return model

            settings = WebSettings(
                resolve_model=resolve_model,
                tools=[*DEMO_TOOL_NAMES, "hold"],
                system_prompt=DEMO_SYSTEM_PROMPT,
                token=token,
                temporal_ui_url="http://localhost:8233",
            )
            app = create_app(agents, settings)
            async with serve_web(app, port=0, token=token) as server:
                yield WebDeployment(server.url, agents, model, hold, token, app)
            hold.release()  # a held tool must not keep the worker from shutting down


class Browser:
    """A headless Chromium; every WebDriver call runs in a thread so the event loop (the worker, the
    web server, the model server) keeps going while the browser waits."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver

    @classmethod
    async def launch(cls, width: int = 1280, height: int = 800) -> Browser:
        def start() -> Any:
            from selenium import webdriver
            from selenium.webdriver.chrome.service import Service

            options = webdriver.ChromeOptions()
            assert CHROMIUM is not None
            options.binary_location = CHROMIUM
            for argument in (
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--force-device-scale-factor=1", "--lang=en-US",
            ):  # fmt: skip
                options.add_argument(argument)
            return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)

        browser = cls(await asyncio.to_thread(start))
        await browser.get("about:blank")
        await browser.set_size(width, height)  # the page's viewport, whatever the window adds
        return browser

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    async def get(self, url: str) -> None:
        await self.call(self.driver.get, url)

    async def js(self, script: str, *args: Any) -> Any:
        return await self.call(self.driver.execute_script, script, *args)

    async def wait_for(self, script: str, *args: Any, timeout: float = 30, what: str = "") -> Any:
        """Poll ``script`` (a JS expression's body: ``return ...``) until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = await self.js(script, *args)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {what or script}; the page says:\n{await self.page_text()}"
                )
            await asyncio.sleep(0.1)

    async def page_text(self) -> str:
        """What a failure should show: the open conversation (not the sidebar's list, which can be
        long on a shared server), the notice and the box, and the page's own view of the chat."""
        return str(
            await self.js(
                "const c = window.agentcoreChat || {};"
                " const main = document.querySelector('main:not([hidden])') || document.body;"
                " const state = {runs: c.runs, running: c.running, connected: c.connected,"
                " status: (document.querySelector('#chat-status') || {}).textContent,"
                " toast: (document.querySelector('#toast:not([hidden])') || {}).innerText,"
                " box: (document.querySelector('#message') || {}).value};"
                " return JSON.stringify(state) + '\\n' + main.innerText.slice(-3000)"
            )
        )

    async def type(self, css: str, text: str) -> None:
        from selenium.webdriver.common.by import By

        element = await self.call(self.driver.find_element, By.CSS_SELECTOR, css)
        await self.call(element.send_keys, text)

    async def click(self, css: str) -> None:
        from selenium.webdriver.common.by import By

        element = await self.call(self.driver.find_element, By.CSS_SELECTOR, css)
        await self.call(element.click)

    async def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        await self.call(self.driver.save_screenshot, str(path))

    async def set_size(self, width: int, height: int) -> None:
        """The page's viewport (``innerWidth`` x ``innerHeight``) at ``width`` x ``height``."""
        await self.call(self.driver.set_window_size, width, height)
        inner = await self.js("return [window.innerWidth, window.innerHeight]")
        await self.call(self.driver.set_window_size, 2 * width - inner[0], 2 * height - inner[1])

    async def grant_clipboard(self, origin: str) -> None:
        await self.call(
            self.driver.execute_cdp_cmd,
            "Browser.grantPermissions",
            {"permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"], "origin": origin},
        )

    async def quit(self) -> None:
        await self.call(self.driver.quit)


async def send(browser: Browser, text: str) -> None:
    """Type ``text`` in the message box and press Enter."""
    await browser.type("#message", text + "\n")


async def runs_ended(browser: Browser, runs: int) -> None:
    """Wait until the page has seen ``runs`` runs end (since it was opened) and shows it idle."""
    await browser.wait_for(
        "const c = window.agentcoreChat; return c && c.runs >= arguments[0] && !c.running"
        " && document.querySelector('#chat-status').textContent === 'idle'",
        runs,
        what=f"run {runs} to end",
    )
