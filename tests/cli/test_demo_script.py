"""The offline demo: the scripted sommelier's replies, and the whole demo conversation through Temporal."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentcore import Agent
from agentcore.cli import run
from agentcore.demo import DEMO_SYSTEM_PROMPT, demo_tools
from agentcore.demo.script import DEMO_QUESTIONS, sommelier_reply, sommelier_responder
from agentcore.messages import AssistantMessage
from agentcore.testing.loopback import LoopbackServer


def _openai(*messages: dict[str, object]) -> dict[str, object]:
    return {
        "model": "cellar-demo",
        "stream": True,
        "messages": [{"role": "system", "content": "x"}, *messages],
    }


def test_replies_are_a_function_of_the_request() -> None:
    body = _openai({"role": "user", "content": "Any Pinot Noir under $50 for salmon?"})
    first = sommelier_responder(pacing=0)(body, "openai")
    again = sommelier_responder(pacing=0)(body, "openai")
    assert first == again  # a retried model call gets the same reply
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        (
            "search_wines",
            {"grape": "Pinot Noir", "max_price": 50.0, "query": "salmon", "in_stock_only": True, "limit": 5,
             "sort_by": "price", "descending": True},
        )
    ]  # fmt: skip


def test_unknown_questions_search_and_greetings_introduce() -> None:
    text, calls = sommelier_reply(_openai({"role": "user", "content": "Something with chocolate?"}), "openai")
    assert calls == [("search_wines", {"query": "chocolate", "limit": 5})]
    text, calls = sommelier_reply(_openai({"role": "user", "content": "Good evening!"}), "openai")
    assert calls == [] and text.startswith("Hello! I'm Cellar")


@pytest.mark.parametrize("api", ["openai-completions", "anthropic-messages"])
async def test_demo_questions_in_process_over_either_protocol(api: str, tmp_path: Path) -> None:
    async with LoopbackServer(sommelier_responder(pacing=0)) as server:
        agent = Agent(
            model=server.model(api),
            tools=demo_tools(tmp_path / "cellar.sqlite"),
            system_prompt=DEMO_SYSTEM_PROMPT,
        )
        for question in DEMO_QUESTIONS:
            await agent.prompt(question)
        messages = agent.get_state().messages
    calls = [call.name for m in messages if isinstance(m, AssistantMessage) for call in m.tool_calls]
    assert calls == [
        "search_wines", "wine_details", "calculator", "clock", "calculator", "update_stock",
        "search_wines", "wine_details",
    ]  # fmt: skip
    answers = [m.text for m in messages if isinstance(m, AssistantMessage) and not m.tool_calls]
    assert "come to **$405.00**" in answers[1]
    assert "Now 4 in stock." in answers[3]
    assert "Barbaresco" in answers[4]


async def test_agentcore_dev_plays_the_demo_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The quick start's main job in-process: an embedded dev server with SQLite, a worker, the
    # loopback demo model, and the scripted conversation through all of them.
    data_dir = tmp_path / "agentcore"
    argv = ["dev", "--demo-script", "--fast", "--port", "0", "--no-ui", "--demo-port", "0"]
    assert await run([*argv, "--data-dir", str(data_dir), "--session", "demo-e2e"]) == 0
    out = capsys.readouterr().out
    assert out.count("you> ") == len(DEMO_QUESTIONS)
    assert "-> update_stock(wine_id=13, change=-2)" in out
    assert "Now 4 in stock." in out
    assert (data_dir / "temporal.db").is_file() and (data_dir / "cellar.sqlite").is_file()
    assert (data_dir / "sessions" / "demo-e2e.jsonl").is_file()


async def test_arithmetic_in_words_uses_the_calculator(tmp_path: Path) -> None:
    # A newcomer's off-script questions: the sommelier's calculator answers them.
    async with LoopbackServer(sommelier_responder(pacing=0)) as server:
        agent = Agent(
            model=server.model("openai-completions"),
            tools=demo_tools(tmp_path / "cellar.sqlite"),
            system_prompt=DEMO_SYSTEM_PROMPT,
        )
        answers = {}
        for question in ("What is 17% of 240?", "What's 12 times 7?", "And 240 divided by 6?"):
            await agent.prompt(question)
            last = agent.get_state().messages[-1]
            assert isinstance(last, AssistantMessage)
            answers[question] = last.text
        messages = agent.get_state().messages
    calls = [call.arguments for m in messages if isinstance(m, AssistantMessage) for call in m.tool_calls]
    assert calls == [{"expression": "240 * 17 / 100"}, {"expression": "12 * 7"}, {"expression": "240 / 6"}]
    assert answers == {
        "What is 17% of 240?": "17% of 240 is 40.8.",
        "What's 12 times 7?": "12 times 7 is 84.",
        "And 240 divided by 6?": "240 divided by 6 is 40.",
    }
