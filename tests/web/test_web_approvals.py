"""Approve / Edit / Deny on the web chat's tool card and the badge in the conversation list, in a real
headless Chromium at a desktop size (1280 x 800) and at a phone's (390 x 844).

``AGENTCORE_WEB_SCREENSHOTS=docs`` refreshes ``docs/approval-card.png`` from this run."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from agentcore.testing.scripted import ScriptedModel, scripted_model, text, tool_calls
from agentcore.web import WebSettings, create_app, serve_web
from tests.agent.test_approvals import call, deploy_tool
from tests.support.durable import running_worker
from tests.support.web import Browser, needs_chromium

pytestmark = [needs_chromium, pytest.mark.timeout(180)]

SCREENSHOTS = os.environ.get("AGENTCORE_WEB_SCREENSHOTS")
CARD = "#transcript .tool[data-tool-call-id='{}']"


async def size(browser: Browser, width: int, height: int) -> None:
    await browser.call(browser.driver.set_window_size, width, height)


async def badge_shows(browser: Browser, url: str, session: str, label: str, timeout: float = 30) -> None:
    """The list comes from the visibility index (eventually consistent): reload until it shows."""
    deadline = time.monotonic() + timeout
    script = "return [...document.querySelectorAll('#conversations tr')].find(r => r.dataset.session === arguments[0])?.querySelector('.badge')?.textContent"
    while True:
        await browser.get(url)
        shown = None
        for _ in range(20):
            shown = await browser.js(script, session)
            if shown:
                break
            await asyncio.sleep(0.1)
        if shown == label:
            return
        assert time.monotonic() < deadline, f"the list shows {shown!r} for {session}, not {label!r}"
        await asyncio.sleep(0.5)


async def test_approve_edit_and_deny_on_the_tool_card(
    temporal_client: Client, tmp_path: Path, browser: Browser
) -> None:
    runs: list[dict[str, Any]] = []
    model = ScriptedModel(
        [
            tool_calls([call("c1", service="web")]),
            text("Deployed two replicas."),
            tool_calls([call("c2", service="db")]),
            text("The database stays as it is."),
            tool_calls([call("c3", service="api")]),
            text("The API is out."),
        ]
    )
    async with running_worker(temporal_client, tmp_path, model, tools=[deploy_tool(runs)]) as h:
        settings = WebSettings(resolve_model=lambda spec: scripted_model(), tools=["deploy"])
        async with serve_web(create_app(h.agents, settings), port=0) as server:
            agent = await h.agents.start("web-approvals", model=scripted_model(), tools=["deploy"])
            await size(browser, 1280, 800)

            # Desktop: the list shows the badge, the card asks; Edit with bad then good arguments.
            await agent.prompt("Deploy web.")
            await badge_shows(browser, server.url + "/", "web-approvals", "awaiting approval")
            await browser.get(f"{server.url}/c/web-approvals")
            card = CARD.format("c1")
            await browser.wait_for(
                f'return document.querySelector("{card} .approval button.approve")', what="the card's buttons"
            )
            labels = await browser.js(
                f'return [...document.querySelectorAll("{card} .approval button")].map(b => b.textContent)'
            )
            assert labels == ["Approve", "Edit", "Deny"]
            assert (
                await browser.js(f'return document.querySelector("{card} .tool-state").textContent')
                == "awaiting approval"
            )
            element = await browser.call(browser.driver.find_element, "css selector", card)
            await browser.call(element.screenshot, str(tmp_path / "approval-card.png"))
            if SCREENSHOTS:
                await browser.call(element.screenshot, str(Path(SCREENSHOTS) / "approval-card.png"))
            await browser.click(f"{card} button.edit")
            editor = f"{card} textarea.approval-args"
            await browser.js(
                f'document.querySelector("{editor}").value = arguments[0]',
                '{"service": "web", "replicas": 0}',
            )
            await browser.click(f"{card} button.approve")
            problem = await browser.wait_for(
                f'return document.querySelector("{card} .approval-problem").textContent', what="the refusal"
            )
            assert problem.startswith("INVALID_PARAMETERS")
            assert runs == []
            await browser.js(
                f'document.querySelector("{editor}").value = arguments[0]',
                '{"service": "web", "replicas": 2}',
            )
            await browser.click(f"{card} button.approve")
            await browser.wait_for(
                f'return document.querySelector("{card}.done")', what="the edited call to run"
            )
            decision = await browser.js(
                f'return document.querySelector("{card} .approval-decision").textContent'
            )
            assert decision == "approved (edited)"
            assert runs == [{"service": "web", "replicas": 2}]
            await agent.wait_for_idle(timeout=30)
            await badge_shows(browser, server.url + "/", "web-approvals", "idle")

            # Deny with a reason.
            await browser.get(f"{server.url}/c/web-approvals")
            await agent.prompt("Deploy db.")
            card = CARD.format("c2")
            await browser.wait_for(
                f'return document.querySelector("{card} button.deny")', what="the deny button"
            )
            await browser.click(f"{card} button.deny")
            await browser.type(f"{card} input.approval-reason", "the database is frozen")
            await browser.click(f"{card} button.deny")
            await browser.wait_for(
                f'return document.querySelector("{card}.failed")', what="the denied result"
            )
            decision = await browser.js(
                f'return document.querySelector("{card} .approval-decision").textContent'
            )
            assert decision == "denied: the database is frozen"
            assert runs == [{"service": "web", "replicas": 2}]
            await agent.wait_for_idle(timeout=30)

            # Phone: the card fits the screen and Approve works from there; the card was asked for
            # before the page opened (the snapshot shows it).
            await size(browser, 390, 844)
            await agent.prompt("Deploy the API.")
            await badge_shows(browser, server.url + "/", "web-approvals", "awaiting approval")
            await browser.get(f"{server.url}/c/web-approvals")
            card = CARD.format("c3")
            await browser.wait_for(
                f'return document.querySelector("{card} button.approve")', what="the card on a phone"
            )
            width = await browser.js("return document.documentElement.clientWidth")
            right = await browser.js(
                f'return Math.max(...[...document.querySelectorAll("{card} .approval button")].map(b => b.getBoundingClientRect().right))'
            )
            assert width <= 390 and right <= width, "the buttons run off a phone's screen"
            await browser.js(f'document.querySelector("{card} button.approve").scrollIntoView()')
            await browser.click(f"{card} button.approve")
            await browser.wait_for(
                f'return document.querySelector("{card}.done")', what="the approved call to run on the phone"
            )
            assert runs[-1] == {"service": "api"}
            await browser.wait_for(
                "return [...document.querySelectorAll('#transcript .message.assistant .body')].some(b => b.innerText.includes('The API is out.'))",
                what="the answer after approval",
            )
