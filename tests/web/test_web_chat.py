"""The web chat as people expect a chat to behave, in a real headless Chromium: errors where the eye
is, controls that follow the connection, long strings kept in their block, the phone layout, Markdown
rendered while it streams, code highlighted and copied, fork with the default sessions directory.

``AGENTCORE_WEB_SCREENSHOTS=docs`` refreshes the screenshots in docs/ from these runs.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

import agentcore.client.calls as client_calls
from agentcore import AgentOptions
from agentcore.client import AgentClient, DurableAgent
from agentcore.web import serve_web
from agentcore.worker import create_worker
from tests.support.durable import FAST_LIMITS
from tests.support.web import (
    LONG_URL,
    MARKDOWN_CODE,
    Browser,
    WebDeployment,
    needs_chromium,
    runs_ended,
    send,
    web_deployment,
)

pytestmark = [needs_chromium, pytest.mark.timeout(180)]

SCREENSHOTS = os.environ.get("AGENTCORE_WEB_SCREENSHOTS")
SCREENSHOT_DIR = Path(SCREENSHOTS).resolve() if SCREENSHOTS else None  # before a test changes directory
OPENED = "return window.agentcoreChat && window.agentcoreChat.snapshotOffset !== undefined"
DESKTOP = (1280, 800)
PHONE = (390, 844)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    page = await Browser.launch(*DESKTOP)
    try:
        yield page
    finally:
        await page.quit()


@pytest.fixture
async def web(
    temporal_client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[WebDeployment]:
    # The layout `agentcore dev` makes: a sessions directory relative to where it runs.
    monkeypatch.chdir(tmp_path)
    async with web_deployment(
        temporal_client, tmp_path, sessions_dir=Path(".agentcore/sessions")
    ) as deployment:
        yield deployment


async def screenshot(browser: Browser, name: str) -> None:
    if SCREENSHOT_DIR is not None:
        await browser.screenshot(SCREENSHOT_DIR / name)


async def page_width(browser: Browser) -> tuple[int, int]:
    widths: list[int] = await browser.js(
        "return [Math.max(document.documentElement.scrollWidth, document.body.scrollWidth), window.innerWidth]"
    )
    return widths[0], widths[1]


IN_VIEW = """
const node = document.querySelector(arguments[0]);
if (!node || node.hidden || node.offsetParent === null) return false;
const box = node.getBoundingClientRect();
return box.top >= 0 && box.bottom <= window.innerHeight && box.height > 0;
"""


async def test_fork_with_the_default_sessions_dir_and_its_error_in_view(
    web: WebDeployment, browser: Browser
) -> None:
    agent = await web.start()
    await browser.get(f"{web.url}/c/{agent.session_id}")
    await browser.wait_for(OPENED)
    for question in ("What is 3 * 20?", "What is 4 * 10?", "Count to 240, please"):
        await send(browser, question)
        await runs_ended(
            browser, ["What is 3 * 20?", "What is 4 * 10?", "Count to 240, please"].index(question) + 1
        )
    # Scrolled to the bottom of a long transcript, as one is after a few answers.
    await browser.js("window.scrollTo(0, document.body.scrollHeight)")
    assert await browser.js("return window.scrollY > 0")
    # A fork that fails: the message is in view, near the message box, once, with no server path.
    await browser.js("forkAt('no-such-entry')")
    await browser.wait_for(
        "return document.querySelector('#toast').classList.contains('error')", what="the fork's error"
    )
    assert await browser.js(IN_VIEW, "#toast"), "the error is not in view"
    text = await browser.js("return document.querySelector('#toast-text').textContent")
    assert text.startswith("Fork failed: ") and "no-such-entry" in text, text
    assert "/" not in text and "ENTRY_NOT_FOUND" not in text and "SESSION_NOT_FOUND" not in text, text
    await screenshot(browser, "web-error.png")
    # Fork at the first answer, with the sessions directory relative (the default layout).
    first_answer = "[...document.querySelectorAll('.message.assistant[data-entry]')].find(m => m.innerText.includes('= 60'))"
    await browser.wait_for(f"return {first_answer}", what="entry ids on the answers")
    await browser.js(f"{first_answer}.querySelector('.actions button.fork').click()")
    await browser.wait_for(f"return !location.pathname.endsWith('/{agent.session_id}')", what="the fork")
    await browser.wait_for(OPENED)
    users = await browser.js(
        "return [...document.querySelectorAll('.message.user')].map(m => m.innerText.trim())"
    )
    assert users == ["What is 3 * 20?"]
    assert (
        Path(".agentcore/sessions").resolve()
        / f"{await browser.js('return window.agentcoreChat.session')}.jsonl"
    ).is_file()


async def test_controls_follow_the_connection(web: WebDeployment, browser: Browser) -> None:
    agent = await web.start()
    async with serve_web(web.app, port=0) as server:
        port = server.port
        await browser.get(f"{server.url}/c/{agent.session_id}")
        await browser.wait_for(OPENED)
        await send(browser, "Could you hold the door for me?")
        await browser.wait_for(
            "return document.querySelector('.tool.running .tool-name')", what="hold running"
        )
        assert await browser.js("return !document.querySelector('#abort').disabled")
    # The server is gone: the page says so by the message box, and what needs the server is off.
    await browser.wait_for(IN_VIEW, "#connection", what="the connection notice")
    assert "Connection lost" in await browser.js("return document.querySelector('#connection').textContent")
    for button in ("#send", "#abort", "#follow-up"):
        assert await browser.js(f"return document.querySelector('{button}').disabled"), button
    await screenshot(browser, "web-connection-lost.png")
    # Back (a restarted dev on the same port): reconnected, usable again.
    async with serve_web(web.app, port=port):
        await browser.wait_for(
            "return document.querySelector('#connection').hidden && !document.querySelector('#abort').disabled",
            what="the page reconnected",
        )
        web.hold.release()
        await runs_ended(browser, 1)


async def test_long_unbroken_strings_stay_in_their_block(web: WebDeployment, browser: Browser) -> None:
    agent = await web.start()
    await browser.get(f"{web.url}/c/{agent.session_id}")
    await browser.wait_for(OPENED)
    await send(browser, f"Long strings: {LONG_URL} {'Zm9vYmFy' * 200}")
    await runs_ended(browser, 1)
    for width, height in (DESKTOP, PHONE):
        await browser.set_size(width, height)
        scroll_width, inner = await page_width(browser)
        assert inner == width and scroll_width <= width, f"the page is {scroll_width} px wide at {width}"
        # The code block scrolls inside itself instead.
        assert await browser.js(
            "const pre = document.querySelector('.message.assistant pre'); return pre.scrollWidth > pre.clientWidth"
        )


async def test_phone_layout_keeps_the_message_box_usable(web: WebDeployment, browser: Browser) -> None:
    agent = await web.start()
    await send_first(
        web,
        browser,
        agent.session_id,
        "Hi! We're having roast lamb tonight. Anything from the Rhône under $80?",
    )
    await runs_ended(browser, 1)
    await browser.set_size(*PHONE)
    await send(browser, "Could you hold the door for me?")
    await browser.wait_for("return document.querySelector('.tool.running .tool-name')", what="hold running")
    box = await browser.js(
        "const r = document.querySelector('#message').getBoundingClientRect(); return [r.width, r.height, r.bottom]"
    )
    assert box[0] >= 300 and box[1] >= 48 and box[2] <= PHONE[1], box
    for button in ("#send", "#follow-up", "#abort"):
        assert await browser.js(IN_VIEW, button), f"{button} is not on screen"
    assert (await page_width(browser))[0] <= PHONE[0]
    await browser.js("window.scrollTo(0, document.body.scrollHeight)")
    await screenshot(browser, "web-phone.png")
    web.hold.release()
    await runs_ended(browser, 2)
    # The list of conversations: nothing clipped, the sidebar opens from the menu button.
    await browser.get(f"{web.url}/")
    row = f"document.querySelector('#conversations tr[data-session=\"{agent.session_id}\"]')"
    await browser.wait_for(f"return {row}", what="the row")
    assert (await page_width(browser))[0] <= PHONE[0]
    assert await browser.js(f"const r = {row}.getBoundingClientRect(); return r.right <= window.innerWidth")
    assert await browser.js("return document.querySelector('#search').getBoundingClientRect().right <= 0")
    await browser.click("#menu")
    await browser.wait_for(
        "const r = document.querySelector('#search').getBoundingClientRect(); return r.left >= 0 && r.right <= window.innerWidth",
        what="the sidebar open",
    )
    await screenshot(browser, "web-phone-sidebar.png")


async def send_first(web: WebDeployment, browser: Browser, session_id: str, text: str) -> None:
    await browser.get(f"{web.url}/c/{session_id}")
    await browser.wait_for(OPENED)
    await send(browser, text)


async def test_markdown_renders_while_it_streams_with_highlighted_copyable_code(
    web: WebDeployment, browser: Browser
) -> None:
    agent = await web.start()
    await browser.grant_clipboard(web.url)
    await send_first(web, browser, agent.session_id, "Markdown, with some code please")
    # Half-way: the bold and the highlighted code are already formatted, the answer still streams.
    streaming = "document.querySelector('.message.streaming .body')"
    await browser.wait_for(
        f"return {streaming} && {streaming}.querySelector('strong') && {streaming}.querySelector('pre code .hl-k')"
        f" && {streaming}.textContent.includes('then1 ')",
        what="formatted Markdown while streaming",
    )
    assert await browser.js(f"return !{streaming}.textContent.includes('**')")
    assert await browser.js("return !!document.querySelector('.message.streaming')")
    await screenshot(browser, "web-streaming.png")
    await runs_ended(browser, 1)
    answer = "document.querySelector('.message.assistant .body')"
    assert await browser.js(f"return {answer}.textContent.includes('then149')")
    # Copy the code block, then the whole message (a real click first: the clipboard wants focus).
    await browser.click("#message")
    await browser.js(f"{answer}.querySelector('pre button.copy').click()")
    await browser.wait_for(f"return {answer}.querySelector('pre button.copy').textContent === 'Copied'")
    clipboard = await browser.call(
        browser.driver.execute_async_script,
        "const done = arguments[arguments.length - 1]; navigator.clipboard.readText().then(done, e => done('ERR ' + e));",
    )
    assert clipboard == MARKDOWN_CODE
    await browser.js("document.querySelector('.message.assistant .actions .copy-message').click()")
    await browser.wait_for(
        "return document.querySelector('.message.assistant .actions .copy-message').textContent === 'Copied'"
    )
    clipboard = await browser.call(
        browser.driver.execute_async_script,
        "const done = arguments[arguments.length - 1]; navigator.clipboard.readText().then(done, e => done('ERR ' + e));",
    )
    assert clipboard.startswith("**Pour it slowly.**") and "```python" in clipboard


async def test_a_terminated_conversation_shows_its_transcript_and_why(
    web: WebDeployment, browser: Browser
) -> None:
    agent = await web.start()
    await agent.prompt("What is 3 * 20?")
    await agent.wait_for_idle(timeout=30)
    await web.agents.client.get_workflow_handle(agent.session_id).terminate(reason="stopped by the operator")
    await browser.get(f"{web.url}/c/{agent.session_id}")
    await browser.wait_for(
        "return document.querySelector('#banner').textContent.includes('stopped by the operator')",
        what="the reason",
    )
    assert "terminated" in await browser.js("return document.querySelector('#banner').textContent")
    users = await browser.js(
        "return [...document.querySelectorAll('.message.user')].map(m => m.innerText.trim())"
    )
    assert users == ["What is 3 * 20?"]
    assert "3 * 20 = 60." in await browser.js("return document.querySelector('#transcript').innerText")
    assert await browser.js("return document.querySelector('#chat-status').textContent") == "terminated"
    assert await browser.js("return document.querySelector('#send').disabled")


async def test_keyboard_enter_shift_enter_escape_and_up(web: WebDeployment, browser: Browser) -> None:
    from selenium.webdriver.common.keys import Keys

    agent = await web.start()
    await browser.get(f"{web.url}/c/{agent.session_id}")
    await browser.wait_for(OPENED)
    # Shift+Enter is a new line, Enter sends.
    await browser.type("#message", "What is 3 * 20?")
    await browser.type("#message", Keys.SHIFT + Keys.ENTER + Keys.SHIFT + "Thanks")
    assert await browser.js("return document.querySelector('#message').value") == "What is 3 * 20?\nThanks"
    await browser.type("#message", Keys.ENTER)
    await runs_ended(browser, 1)
    users = [m.text for m in (await agent.get_state()).messages if m.role == "user"]
    assert users == ["What is 3 * 20?\nThanks"]
    # Esc aborts the running turn.
    await send(browser, "Count to 240, please")
    await browser.wait_for(
        "return document.querySelector('.message.streaming .body')?.textContent.includes('w010')",
        what="the answer streaming",
    )
    await browser.type("#message", Keys.ESCAPE)
    await browser.wait_for("return document.querySelector('.notice.aborted')", what="the aborted notice")
    await runs_ended(browser, 2)
    # Up in the empty box edits the last message: a branch from before it, its text in the box.
    await browser.wait_for(
        "return window.agentcoreChat.lastUser && window.agentcoreChat.lastUser.view.entry_id"
    )
    await browser.type("#message", Keys.ARROW_UP)
    await browser.wait_for(
        "return document.querySelector('#message').value === 'Count to 240, please'"
        " && document.querySelectorAll('.message.user').length === 1",
        what="the last message back in the box",
    )
    state = await agent.get_state()
    assert [m.text for m in state.messages if m.role == "user"] == ["What is 3 * 20?\nThanks"]


USER_TEXTS = "return [...document.querySelectorAll('.message.user')].map(m => m.dataset.text)"
SWITCHES = "return [...document.querySelectorAll('.message.user .branch-count')].map(c => c.textContent)"


async def ask_twice_and_regenerate(
    web: WebDeployment, browser: Browser, agent: DurableAgent, second: str, answered: str
) -> str | None:
    """Ask "What is 3 * 20?", then ``second``; once its answer (holding ``answered``) is in, regenerate
    it from the page and wait for the new answer. The conversation's leaf before the regeneration."""
    await send_first(web, browser, agent.session_id, "What is 3 * 20?")
    await runs_ended(browser, 1)
    await send(browser, second)
    await runs_ended(browser, 2)
    first_leaf = (await agent.get_state()).leaf_id
    last_answer = "[...document.querySelectorAll('.message.assistant[data-entry]')].pop()"
    await browser.wait_for(
        f"return {last_answer} && {last_answer}.innerText.includes(arguments[0])", answered
    )
    await browser.js(f"{last_answer}.querySelector('.actions button.regenerate').click()")
    await runs_ended(browser, 3)
    return first_leaf


async def hold_send_reply(browser: Browser, until: str, then: str) -> None:
    """Hold the page's reply to its next send (``/messages``) until the JS expression ``until`` is
    true, then run the statement ``then`` and hand the reply on."""
    await browser.js(
        "const real = window.fetch;"
        " window.fetch = async (...args) => {"
        "   const response = await real(...args);"
        "   if (String(args[0]).endsWith('/messages')) {"
        f"     while (!({until})) await new Promise((ok) => setTimeout(ok, 20));"
        f"     {then}"
        "   }"
        "   return response;"
        " };"
    )


async def test_a_run_that_ends_before_the_send_is_answered_leaves_the_page_idle(
    web: WebDeployment, browser: Browser
) -> None:
    """A quick run can end, its events streamed, before the reply to the send that started it
    reaches the page (a prompt is answered when its workflow task ends, and a quick run's local model
    calls and tool end in that task). The late reply must not mark the page running again: it stayed
    "Thinking" with no run going (seen once in CI as a regeneration that never ended)."""
    agent = await web.start()
    await browser.get(f"{web.url}/c/{agent.session_id}")
    await browser.wait_for(OPENED)
    # Hold the reply to the send until the run's events have been applied.
    await hold_send_reply(
        browser,
        "window.agentcoreChat.runs >= 1",
        "setTimeout(() => { window.sendReplied = true; }, 0);",
    )
    await send(browser, "What is 3 * 20?")
    await browser.wait_for("return window.sendReplied", what="the send's reply")
    await runs_ended(browser, 1)
    assert await browser.js("return document.querySelector('#activity').hidden")
    assert "3 * 20 = 60." in await browser.js(
        "return [...document.querySelectorAll('.message.assistant .body')].map(b => b.innerText).join()"
    )


async def test_a_send_the_worker_has_not_taken_says_what_it_waits_for(
    web: WebDeployment, browser: Browser
) -> None:
    """With no worker running, a send waits (the server holds it until one takes it): after a while
    the page says so, and the notice goes once the send is answered."""
    agent = await web.start()
    await browser.get(f"{web.url}/c/{agent.session_id}")
    await browser.wait_for(OPENED)
    # The reply to the send held until the notice is up (as if no worker had taken it yet).
    await browser.js("window.agentcoreChat.sendSlowMs = 200")
    await hold_send_reply(
        browser,
        "!document.querySelector('#toast').hidden",
        "window.sendNotice = document.querySelector('#toast-text').textContent;",
    )
    await send(browser, "What is 3 * 20?")
    notice = await browser.wait_for("return window.sendNotice", what="the notice")
    assert "worker" in notice and "Not taken yet" in notice, notice
    await runs_ended(browser, 1)
    await browser.wait_for("return document.querySelector('#toast').hidden", what="the notice to go")


async def _opened_then_worker_gone(
    web: WebDeployment, browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[DurableAgent, Callable[[], Any]]:
    """A conversation on a task queue of its own, open in the page, whose worker has stopped (the
    client's no-worker checks shortened to seconds); and how to start a worker for it again."""
    queue = f"web-own-{uuid.uuid4().hex[:8]}"
    sessions = tmp_path / "own-sessions"
    agents = AgentClient(web.agents.client, task_queue=queue, sessions_dir=sessions, limits=FAST_LIMITS)
    async with create_worker(web.agents.client, task_queue=queue, sessions_dir=sessions):
        agent = await agents.start(f"web-{uuid.uuid4().hex[:8]}", AgentOptions(model=web.model))
        await browser.get(f"{web.url}/c/{agent.session_id}")
        await browser.wait_for(OPENED)
    monkeypatch.setattr(client_calls, "WORKER_CHECK_SECONDS", 0.5)
    monkeypatch.setattr(client_calls, "WORKER_GONE_SECONDS", 1.0)
    monkeypatch.setattr(client_calls, "WORKER_CONFIRM_SECONDS", 1.0)
    return agent, lambda: create_worker(web.agents.client, task_queue=queue, sessions_dir=sessions)


async def test_a_send_no_worker_takes_stays_sent_and_runs_when_one_starts(
    web: WebDeployment, browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The conversation's worker has gone: the send is answered as waiting (not failed, so the text is
    not put back to be sent twice), the page says so, and a worker that starts runs it."""
    agent, restart = await _opened_then_worker_gone(web, browser, tmp_path, monkeypatch)
    await asyncio.sleep(1.5)
    await send(browser, "What is 3 * 20?")
    await browser.wait_for(
        "return document.querySelector('#toast-text').textContent.includes('no worker is running')",
        what="the no-worker notice",
    )
    assert await browser.js("return document.querySelector('#message').value") == ""
    async with restart():
        await runs_ended(browser, 1)
        await browser.wait_for("return document.querySelector('#toast').hidden", what="the notice to go")
        assert await browser.js(USER_TEXTS) == ["What is 3 * 20?"]
        last = (await agent.get_state()).messages[-1]
        assert last.role == "assistant" and last.stop_reason != "error", last


async def test_the_event_stream_waits_out_a_time_without_a_worker(
    web: WebDeployment, browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No worker for a while (one restarting, a deploy): the page's event stream says it waits, and
    stays open; a worker that starts then answers a message sent meanwhile, and the run shows."""
    _, restart = await _opened_then_worker_gone(web, browser, tmp_path, monkeypatch)
    await browser.wait_for("return window.agentcoreChat.workerless", what="the stream to find no worker")
    assert "no worker is running" in await browser.js(
        "return document.querySelector('#toast-text').textContent"
    )
    assert await browser.js("return window.agentcoreChat.connected")
    async with restart():
        await send(browser, "What is 3 * 20?")
        await runs_ended(browser, 1)
        assert not await browser.js("return window.agentcoreChat.workerless")
        await browser.wait_for("return document.querySelector('#toast').hidden", what="the notice to go")


async def test_regenerate_the_last_answer_and_go_back_to_the_other_branch(
    web: WebDeployment, browser: Browser
) -> None:
    agent = await web.start()
    first_leaf = await ask_twice_and_regenerate(web, browser, agent, "What is 4 * 10?", "= 40")
    # A new branch from before the question: asked again, answered again, the old answer set aside.
    assert await browser.js(USER_TEXTS) == ["What is 3 * 20?", "What is 4 * 10?"]
    regenerated_leaf = (await agent.get_state()).leaf_id
    assert regenerated_leaf != first_leaf
    # And back: the branch the regeneration left.
    await browser.click("#other-branch")
    await browser.wait_for("return document.querySelectorAll('.message.user').length === 2")
    for _ in range(50):
        if (await agent.get_state()).leaf_id == first_leaf:
            break
        await asyncio.sleep(0.1)
    assert (await agent.get_state()).leaf_id == first_leaf


async def answers(browser: Browser) -> list[str]:
    texts: list[str] = await browser.js(
        "return [...document.querySelectorAll('.message.assistant .body')].map(b => b.innerText.trim())"
    )
    return texts


async def test_the_versions_of_a_regenerated_answer_survive_a_reload_and_show_in_another_tab(
    web: WebDeployment, browser: Browser
) -> None:
    agent = await web.start()
    first_leaf = await ask_twice_and_regenerate(web, browser, agent, "Pick a number", "Number 1.")
    # "‹ 2/2 ›" on the question asked again, the new answer below it.
    await browser.wait_for(f"{SWITCHES}.join() === '2/2'", what="the switch on the question")
    assert await browser.js(USER_TEXTS) == ["What is 3 * 20?", "Pick a number"]
    assert await answers(browser) == ["3 * 20 = 60.", "Number 2."]

    # Reloaded, the switch is still there (the server lists the branches from the session file);
    # back to the first version: the first answer again, the conversation at its end.
    await browser.call(browser.driver.refresh)
    await browser.wait_for(OPENED)
    await browser.wait_for(f"{SWITCHES}.join() === '2/2'", what="the switch after a reload")
    await browser.click(".message.user .branch-prev")
    await browser.wait_for(f"{SWITCHES}.join() === '1/2'", what="the first version")
    assert await answers(browser) == ["3 * 20 = 60.", "Number 1."]
    assert (await agent.get_state()).leaf_id == first_leaf
    assert await browser.js("return document.querySelector('.message.user .branch-prev').disabled")

    # A second tab shows the same switch, and switches the conversation for both.
    await browser.call(browser.driver.switch_to.new_window, "tab")
    await browser.get(f"{web.url}/c/{agent.session_id}")
    await browser.wait_for(OPENED)
    await browser.wait_for(f"{SWITCHES}.join() === '1/2'", what="the switch in another tab")
    assert await answers(browser) == ["3 * 20 = 60.", "Number 1."]
    await browser.click(".message.user .branch-next")
    await browser.wait_for(f"{SWITCHES}.join() === '2/2'", what="the second version again")
    assert await answers(browser) == ["3 * 20 = 60.", "Number 2."]
    # And the conversation goes on from there.
    await send(browser, "What is 4 * 10?")
    await runs_ended(browser, 1)
    assert await answers(browser) == ["3 * 20 = 60.", "Number 2.", "4 * 10 = 40."]
    assert await browser.js(SWITCHES) == ["2/2"]
