"""The web chat as a person uses it: a real headless Chromium against the app on a real deployment.

Set ``AGENTCORE_WEB_SCREENSHOTS=docs`` to refresh the README's screenshots from these runs.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client

from agentcore.protocol import QueuesState
from tests.support.web import (
    COUNTING,
    Browser,
    WebDeployment,
    needs_chromium,
    runs_ended,
    send,
    web_deployment,
)

pytestmark = [needs_chromium, pytest.mark.timeout(180)]

SCREENSHOTS = os.environ.get("AGENTCORE_WEB_SCREENSHOTS")

OPENED = "return window.agentcoreChat && window.agentcoreChat.snapshotOffset !== undefined"


@pytest.fixture
async def web(temporal_client: Client, tmp_path: Path) -> AsyncIterator[WebDeployment]:
    async with web_deployment(temporal_client, tmp_path) as deployment:
        yield deployment


async def screenshot(browser: Browser, tmp_path: Path, name: str) -> None:
    await browser.screenshot(tmp_path / name)
    if SCREENSHOTS:
        await browser.screenshot(Path(SCREENSHOTS) / name)


async def assistant_texts(browser: Browser) -> list[str]:
    texts: list[str] = await browser.js(
        "return [...document.querySelectorAll('#transcript .message.assistant .body')].map(b => b.innerText.trim()).filter(t => t)"
    )
    return texts


async def applied_offsets_are_in_order(browser: Browser) -> None:
    offsets = await browser.js("return window.agentcoreChat.applied")
    assert offsets == sorted(set(offsets)), "an event was applied twice or out of order"


async def test_start_a_conversation_and_watch_a_tool_turn_stream(
    web: WebDeployment, browser: Browser, tmp_path: Path
) -> None:
    await browser.get(web.url + "/")
    # The form opens by itself when there is no conversation yet; the server may hold others.
    await browser.wait_for("return document.querySelector('#new-model').value === 'demo'", what="the form")
    await browser.js("document.querySelector('#new-panel').open = true")
    await browser.type("#new-session", "cellar-tour")
    await browser.click("#new-start")
    await browser.wait_for(
        "return location.pathname === '/c/cellar-tour' && window.agentcoreChat", what="the chat"
    )
    await browser.wait_for("return document.querySelector('#chat-status').textContent === 'idle'")
    await send(browser, "Hi! We're having roast lamb tonight. Anything from the Rhône under $80?")

    # The tool calls appear as they run, with their arguments, then their results.
    await browser.wait_for(
        "return [...document.querySelectorAll('.tool.done .tool-name')].map(n => n.textContent).join(',') === 'search_wines,wine_details'",
        what="both tool calls done",
    )
    await runs_ended(browser, 1)
    args = await browser.js("return document.querySelector('.tool .tool-args').textContent")
    assert 'region="Rhône"' in args and "max_price=80" in args
    # The result table is rendered as a table; the answer's Markdown as Markdown.
    assert await browser.js("return document.querySelectorAll('.tool-result table').length") >= 1
    strong = await browser.js("return document.querySelector('.message.assistant .body strong').textContent")
    assert "Châteauneuf-du-Pape" in strong
    # The page saw the answer stream in: deltas, the tool events, each once and in order.
    assert await browser.js("return window.agentcoreChat.applied.length") > 20
    await applied_offsets_are_in_order(browser)
    state = await (await web.agents.attach("cellar-tour")).get_state()
    rendered = [m.text.replace("**", "") for m in state.messages if m.role == "assistant" and m.text]
    assert await assistant_texts(browser) == rendered

    await send(browser, "Sounds perfect. How much would six bottles cost with our 10% club discount?")
    await browser.wait_for("return document.body.innerText.includes('$405.00')", what="the second answer")
    await runs_ended(browser, 2)
    await browser.js("window.scrollTo(0, 0)")
    await screenshot(browser, tmp_path, "web-chat.png")

    # The list shows it, from the search attributes (eventually consistent: waited for).
    await browser.get(web.url + "/")
    row = "document.querySelector('tr[data-session=\"cellar-tour\"]')"
    count = (await (await web.agents.attach("cellar-tour")).get_state()).message_count
    await browser.wait_for(
        f"return {row} && {row}.children[3].textContent === '{count}'", what="the list's message count"
    )
    assert await browser.js(f"return {row}.children[1].textContent") == "idle"
    assert await browser.js(f"return {row}.children[2].textContent") == "demo/cellar-demo"
    await browser.type("#filter", "no-such-thing")
    assert await browser.js(f"return {row} === null")
    await browser.js("document.querySelector('#filter').value = ''; renderRows();")
    await browser.js("document.querySelector('#new-panel').open = true")
    await screenshot(browser, tmp_path, "web-conversations.png")


async def test_steer_mid_turn_shows_the_queued_message_until_it_is_taken(
    web: WebDeployment, browser: Browser, tmp_path: Path
) -> None:
    agent = await web.start()
    await browser.get(f"{web.url}/c/{agent.session_id}")
    await browser.wait_for(OPENED)
    await send(browser, "Could you hold the door for me?")
    await browser.wait_for(
        "return document.querySelector('.tool.running .tool-name')?.textContent === 'hold'",
        what="hold running",
    )
    assert await browser.js("return document.querySelector('#send').textContent") == "Steer"
    await browser.wait_for(
        "return document.querySelector('#activity-text').textContent.startsWith('Running hold')",
        what="the activity line",
    )
    await send(browser, "What time is it?")
    await browser.wait_for(
        "return document.querySelector('#queued li.steer')?.innerText.includes('What time is it?')",
        what="the queued steering message",
    )
    await screenshot(browser, tmp_path, "web-steering.png")
    web.hold.release()
    # Taken after the tool batch: it becomes a user message in the transcript and leaves the queue.
    await runs_ended(browser, 1)
    users = await browser.js(
        "return [...document.querySelectorAll('.message.user')].map(m => m.innerText.trim())"
    )
    assert users == ["Could you hold the door for me?", "What time is it?"]
    assert await browser.js("return document.querySelector('#queued').hidden")
    assert "clock" in await browser.js(
        "return [...document.querySelectorAll('.tool-name')].map(n => n.textContent)"
    )
    await applied_offsets_are_in_order(browser)


async def test_queued_messages_can_be_cleared_before_they_are_sent(
    web: WebDeployment, browser: Browser
) -> None:
    agent = await web.start()
    # Queued while idle, from another client: unless cleared they would go with the next prompt.
    await agent.steer("Only half bottles.")
    await agent.follow_up("And a dessert wine?")
    await browser.get(f"{web.url}/c/{agent.session_id}")
    await browser.wait_for(OPENED)
    queued = "return [...document.querySelectorAll('#queued li.queued')].map(li => li.lastChild.textContent)"
    shown = await browser.wait_for(queued, what="the queued messages")
    assert shown == ["Only half bottles.", "And a dessert wine?"]
    await browser.click("#clear-queued")
    await browser.wait_for("return document.querySelector('#queued').hidden", what="the queue cleared")
    assert await agent.get_queues() == QueuesState()

    await send(browser, "What is 12 * 7.5?")
    await runs_ended(browser, 1)
    users = await browser.js(
        "return [...document.querySelectorAll('.message.user')].map(m => m.innerText.trim())"
    )
    assert users == ["What is 12 * 7.5?"]


async def test_abort_stops_the_turn_and_keeps_what_was_said(web: WebDeployment, browser: Browser) -> None:
    agent = await web.start()
    await browser.get(f"{web.url}/c/{agent.session_id}")
    await browser.wait_for(OPENED)
    await send(browser, "Count to 240, please")
    await browser.wait_for(
        "return document.querySelector('.message.streaming .body')?.textContent.includes('w010')",
        what="the answer streaming",
    )
    await browser.click("#abort")
    await browser.wait_for("return document.querySelector('.notice.aborted')", what="the aborted notice")
    await runs_ended(browser, 1)
    kept = (await assistant_texts(browser))[-1]
    assert COUNTING.startswith(kept) and "w010" in kept and kept != COUNTING
    state = await agent.get_state()
    last = state.messages[-1]
    assert last.role == "assistant" and last.stop_reason == "aborted" and last.text.strip() == kept


async def test_a_reload_mid_stream_resumes_without_a_gap_or_a_repeat(
    web: WebDeployment, browser: Browser
) -> None:
    agent = await web.start()
    url = f"{web.url}/c/{agent.session_id}"
    await browser.get(url)
    await browser.wait_for(OPENED)
    await send(browser, "Count to 240, please")
    await browser.wait_for(
        "return document.querySelector('.message.streaming .body')?.textContent.includes('w030')",
        what="the answer streaming",
    )
    await browser.call(browser.driver.refresh)
    await browser.wait_for(OPENED)
    # The snapshot had the answer so far; the events from its offset continue it.
    partial = await browser.wait_for(
        "const b = document.querySelector('.message.streaming .body'); return b && b.textContent.includes('w090') && b.textContent",
        what="the stream continuing after the reload",
    )
    assert COUNTING.startswith(partial)
    snapshot_offset, applied = await browser.js(
        "return [window.agentcoreChat.snapshotOffset, window.agentcoreChat.applied]"
    )
    assert applied[0] == snapshot_offset
    await runs_ended(browser, 1)
    assert await assistant_texts(browser) == [COUNTING]
    await applied_offsets_are_in_order(browser)


async def test_a_hostile_answer_is_shown_as_text(web: WebDeployment, browser: Browser) -> None:
    agent = await web.start()
    await browser.get(f"{web.url}/c/{agent.session_id}")
    await browser.wait_for(OPENED)
    await send(browser, "Show me some XSS <b>please</b>")
    await runs_ended(browser, 1)
    for view in ("live", "after a reload"):
        answer = await browser.js("return document.querySelector('.message.assistant .body').innerText")
        assert '<script>window.__xss = "script"</script>' in answer, view
        assert '<img src="x" onerror=' in answer, view
        assert await browser.js("return window.__xss === undefined"), view
        assert (
            await browser.js("return document.querySelectorAll('#transcript script, #transcript img').length")
            == 0
        )
        hrefs = await browser.js("return [...document.querySelectorAll('#transcript a')].map(a => a.href)")
        assert not any(href.startswith("javascript:") for href in hrefs), view
        assert await browser.js("return document.querySelector('.message.user b')") is None
        assert (
            await browser.js("return document.querySelector('.message.assistant strong').textContent")
            == "Safe"
        )
        await browser.call(browser.driver.refresh)
        await browser.wait_for(OPENED)


async def test_two_tabs_on_one_conversation_see_the_same_events(web: WebDeployment, browser: Browser) -> None:
    agent = await web.start()
    url = f"{web.url}/c/{agent.session_id}"
    await browser.get(url)
    first = browser.driver.current_window_handle
    await browser.call(browser.driver.switch_to.new_window, "tab")
    await browser.get(url)
    second = browser.driver.current_window_handle
    await browser.wait_for(OPENED)
    await browser.call(browser.driver.switch_to.window, first)
    await send(browser, "What is 3 * 20?")
    await runs_ended(browser, 1)
    answer = await assistant_texts(browser)
    await browser.call(browser.driver.switch_to.window, second)
    await runs_ended(browser, 1)
    assert await assistant_texts(browser) == answer
    await applied_offsets_are_in_order(browser)


RETRY_NOTICES = (
    "return [...document.querySelectorAll('.message.assistant')].filter(m => m.querySelector('.body'))"
    ".map(m => [m.querySelector(':scope > .notice.retry')?.textContent || null,"
    " m.querySelector('.body').innerText.trim()])"
)


async def test_a_retried_model_call_shows_as_a_retry(web: WebDeployment, browser: Browser) -> None:
    agent = await web.start()
    await browser.get(f"{web.url}/c/{agent.session_id}")
    await browser.wait_for(OPENED)
    await send(browser, "A flaky question")
    await runs_ended(browser, 1)
    notice = await browser.js("return document.querySelector('.notice.retry')?.textContent")
    assert notice and "retried (attempt 2)" in notice and "overloaded" in notice
    assert await browser.js("return document.querySelectorAll('.notice.retry').length") == 1
    assert await assistant_texts(browser) == ["Made it on the second attempt."]
    assert await browser.js("return document.querySelector('#banner').hidden")
    await send(browser, "What is 3 * 20?")
    await runs_ended(browser, 2)
    live = await browser.js(RETRY_NOTICES)
    assert live == [[notice, "Made it on the second attempt."], [None, "3 * 20 = 60."]]

    # Reloaded, the page shows the same one line on the message whose call was retried, and none
    # on the other.
    await browser.call(browser.driver.refresh)
    await browser.wait_for(OPENED)
    await browser.wait_for("return document.querySelectorAll('.message.assistant .body').length === 2")
    assert await browser.js(RETRY_NOTICES) == live


async def test_fork_and_branch_from_a_message(web: WebDeployment, browser: Browser) -> None:
    agent = await web.start()
    await browser.get(f"{web.url}/c/{agent.session_id}")
    await browser.wait_for(OPENED)
    await send(browser, "What is 3 * 20?")
    await runs_ended(browser, 1)
    await send(browser, "What is 4 * 10?")
    await runs_ended(browser, 2)
    first_answer = "document.querySelectorAll('.message.assistant[data-entry]')"
    await browser.wait_for(f"return {first_answer}.length >= 2", what="entry ids on the streamed messages")
    # Fork at the first answer: a new conversation with the first exchange only.
    await browser.js(
        f"[...{first_answer}].find(m => m.innerText.includes('= 60'))"
        ".querySelector('.actions button:nth-child(2)').click()"
    )
    await browser.wait_for(f"return !location.pathname.endsWith('/{agent.session_id}')", what="the fork")
    await browser.wait_for(OPENED)
    users = await browser.js(
        "return [...document.querySelectorAll('.message.user')].map(m => m.innerText.trim())"
    )
    assert users == ["What is 3 * 20?"]
    # Branch the original back to its first answer: the second exchange leaves the transcript.
    await browser.get(f"{web.url}/c/{agent.session_id}")
    await browser.wait_for(f"return {first_answer}.length >= 2")
    await browser.js(
        f"[...{first_answer}].find(m => m.innerText.includes('= 60'))"
        ".querySelector('.actions button:nth-child(1)').click()"
    )
    await browser.wait_for(
        "return document.querySelectorAll('.message.user').length === 1", what="the branch"
    )
    state = await agent.get_state()
    assert [m.role for m in state.messages if m.role != "toolResult"][-1] == "assistant"
    assert state.messages[-1].text == "3 * 20 = 60."
