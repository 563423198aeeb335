"""The web chat shows a conversation's pending wake-ups in a line under it, kept current by the
events (scheduled, fired, cancelled) and by a reload. A real headless Chromium."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client

from tests.support.web import Browser, needs_chromium, web_deployment

pytestmark = [needs_chromium, pytest.mark.timeout(180)]

OPENED = "return window.agentcoreChat && window.agentcoreChat.snapshotOffset !== undefined"
# The line under the conversation ('' while it is hidden).
LINE = "(() => { const w = document.querySelector('#wakeups'); return w.hidden ? '' : w.textContent; })()"


async def test_pending_wakeups_show_under_the_conversation(
    temporal_client: Client, tmp_path: Path, browser: Browser
) -> None:
    async with web_deployment(temporal_client, tmp_path) as web:
        agent = await web.start("web-wakeups")
        later = await agent.schedule_wakeup("Look at the deploy again.", after=timedelta(hours=2))
        url = f"{web.url}/c/{agent.session_id}"
        await browser.get(url)
        await browser.wait_for(OPENED, what="the chat to open")
        # From the snapshot.
        line = await browser.wait_for(f"return {LINE}", what="the pending wake-up")
        assert "1 wake-up pending" in line and "Look at the deploy again." in line
        # From the events: one more scheduled, then it fires and runs the conversation.
        await agent.schedule_wakeup("What is 3 * 20?", after=timedelta(seconds=2))
        await browser.wait_for(f"return {LINE}.includes('What is 3 * 20?')", what="the second wake-up")
        await browser.wait_for(
            "return document.querySelector('#transcript').textContent.includes('3 * 20 = 60.')",
            what="the wake-up's run",
        )
        line = await browser.wait_for(
            f"const text = {LINE}; return !text.includes('3 * 20') && text", what="the fired one to go"
        )
        assert "Look at the deploy again." in line
        await agent.cancel_wakeup(later)
        await browser.wait_for(f"return {LINE} === ''", what="an empty line")
        await browser.get(url)
        await browser.wait_for(OPENED, what="the chat to reopen")
        assert await browser.js(f"return {LINE}") == ""
