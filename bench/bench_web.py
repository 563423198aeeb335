"""Time to first visible output in the web chat: a prompt sent from the page -> the answer's first
text in the page, on ``agentcore dev``'s offline demo, in headless Chromium.

    python -m bench --only web-first-output
    python -m bench.bench_web [--agentcore PATH] [--prompts N]   # PATH: another tree's executable
    python -m bench.bench_web --against PATH   # this tree and another, prompt by prompt, at once

``agentcore dev --no-chat`` runs as a user starts it (embedded Temporal dev server, worker, the demo
model with its default pacing, the web chat) in a directory of its own; one conversation, ``N``
prompts one after the other (a second apart, as a person reads and types), each timed inside the
page: from just before the composer is submitted to the first mutation that puts text into the new
assistant message (or a tool call's block, if the answer starts with one), with
``performance.now()``, so the WebDriver round trips are not counted. The first prompt warms the page
and the stack up and is left out. Needs Debian's chromium and chromium-driver; the row says so when
they are missing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from .durable import Row

SECTION = "11. web chat: time to first visible output (agentcore dev, offline demo, headless Chromium)"
PROMPT = "Hello"  # the demo introduces itself: text first, the same in every tree since 2c22e40
# Resolves with the milliseconds from submitting ``arguments[0]`` to the first visible output.
MEASURE = """
const [text, done] = [arguments[0], arguments[arguments.length - 1]];
const shown = () => document.querySelectorAll(
  '#transcript .message.assistant .body:not(:empty), #transcript .tool').length;
const before = shown();
const observer = new MutationObserver(() => {
  if (shown() > before) {
    observer.disconnect();
    done(performance.now() - started);
  }
});
observer.observe(document.getElementById('transcript'), {subtree: true, childList: true, characterData: true});
document.getElementById('message').value = text;
const started = performance.now();
document.getElementById('composer').requestSubmit();
"""
# Between an answer's end and the next prompt: a person reads the answer and types (the page's own
# requests after a run, and the workflow's deferred session write, are done by then).
PAUSE_SECONDS = 1.0
IDLE = (
    "const c = window.agentcoreChat; return c && c.runs >= arguments[0] && !c.running && c.current === null"
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1280,800")
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def _wait(driver: Any, script: str, *args: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script, *args)
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"the page never answered {script!r}")
        time.sleep(0.02)


class _Page:
    """A headless Chromium on a new conversation of the web chat at ``url`` (blocking calls: run
    them in a thread)."""

    def __init__(self, url: str) -> None:
        self.driver = _browser()
        self.runs = 0
        self.driver.set_script_timeout(60)
        self.driver.get(url)
        created = self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch('/api/conversations', {method: 'POST', headers: {'Content-Type': 'application/json'},"
            " body: JSON.stringify({model: 'demo'})}).then(r => r.json()).then(done)"
        )
        self.driver.get(f"{url.rstrip('/')}/c/{created['session_id']}")
        _wait(
            self.driver,
            "const c = window.agentcoreChat; return c && c.snapshotOffset !== undefined && !c.running",
        )

    def prompt(self) -> float:
        """One prompt: milliseconds to its first visible output; returns once the run has ended."""
        elapsed = float(self.driver.execute_async_script(MEASURE, PROMPT))
        self.runs += 1
        _wait(self.driver, IDLE, self.runs)
        return elapsed

    def quit(self) -> None:
        self.driver.quit()


def _measure(urls: list[str], prompts: int) -> list[list[float]]:
    """In a thread: ``prompts`` prompts on each web chat of ``urls``, taking turns (one prompt on
    each, then the next round: a machine whose load changes changes it for all), ms each."""
    pages = []
    try:
        for url in urls:
            pages.append(_Page(url))
        times: list[list[float]] = [[] for _ in urls]
        for _ in range(prompts):
            for page, own in zip(pages, times, strict=True):
                own.append(page.prompt())
                time.sleep(PAUSE_SECONDS)
        return times
    finally:
        for page in pages:
            page.quit()


@asynccontextmanager
async def _dev(command: str) -> AsyncIterator[str]:
    """``agentcore dev`` (the executable ``command``) serving the offline demo: its web chat's URL."""
    with tempfile.TemporaryDirectory(prefix="bench-web-") as workdir:
        env = {**os.environ, "AGENTCORE_DEMO_PORT": str(_free_port())}
        for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AGENTCORE_WEB_TOKEN"):
            env.pop(key, None)  # the offline demo, on loopback without a token
        process = await asyncio.create_subprocess_exec(
            command, "dev", "--no-chat", "--port", "0", "--no-ui", "--web-port", "0",
            cwd=workdir, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            yield await asyncio.wait_for(_web_url(process), 90)
        finally:
            if process.returncode is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    await asyncio.wait_for(process.wait(), 30)
                except TimeoutError:
                    os.killpg(process.pid, signal.SIGKILL)
                    await process.wait()


def _rows(label: str, times: list[float]) -> list[Row]:
    kept = times[1:]
    quartiles = statistics.quantiles(kept, n=4, method="inclusive")
    return [
        Row(
            SECTION,
            f"{label}prompt sent -> first text shown, median (p25 / p75) of {len(kept)}",
            f"{statistics.median(kept):.1f} ms ({quartiles[0]:.1f} / {quartiles[2]:.1f})",
            "" if label else "within 10 % of 2c22e40's",
        ),
        Row(
            SECTION,
            f"{label}each prompt, in order (the first one warms up, left out)",
            " / ".join(f"{t:.0f}" for t in times),
        ),
    ]


async def first_output(
    prompts: int = 16, agentcore: str | None = None, against: str | None = None, **_: Any
) -> list[Row]:
    """The scenario: ``prompts`` prompts (the first one left out), their median and spread. With
    ``against`` (another tree's ``agentcore``), both stacks run at once and take turns, prompt by
    prompt, and the paired ratio is added."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return [Row(SECTION, "first visible output", "skipped: selenium is not installed")]
    if not (shutil.which("chromium") or shutil.which("chromium-browser")) or not shutil.which("chromedriver"):
        return [Row(SECTION, "first visible output", "skipped: needs chromium and chromium-driver")]
    commands = [agentcore or str(Path(sys.executable).with_name("agentcore"))]
    if against:
        commands.append(against)
    async with AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(_dev(command)) for command in commands]
        times = await asyncio.to_thread(_measure, urls, prompts)
    if not against:
        return _rows("", times[0])
    ratios = [new / old for new, old in zip(times[0][1:], times[1][1:], strict=True)]
    return [
        *_rows("this tree: ", times[0]),
        *_rows(f"{against}: ", times[1]),
        Row(
            SECTION,
            "this tree against the other, median of the paired ratios",
            f"{statistics.median(ratios):.3f}",
        ),
    ]


async def _web_url(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    seen = []
    while True:
        line = (await process.stdout.readline()).decode(errors="replace")
        if not line:
            raise RuntimeError("agentcore dev ended before serving the web chat:\n" + "".join(seen))
        seen.append(line)
        found = re.search(r"web chat at (http://\S+)", line)
        if found:
            # The rest of its output is not read: drain it so the process never blocks on a full pipe.
            asyncio.get_running_loop().create_task(_drain(process))
            return found.group(1)


async def _drain(process: asyncio.subprocess.Process) -> None:
    assert process.stdout is not None
    while await process.stdout.read(65536):
        pass


def main() -> None:
    from .durable import print_table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agentcore", help="the agentcore executable to run (another tree's venv)")
    parser.add_argument(
        "--against", help="another tree's agentcore executable: both run at once, taking turns"
    )
    parser.add_argument("--prompts", type=int, default=16)
    args = parser.parse_args()
    print_table(asyncio.run(first_output(args.prompts, args.agentcore, args.against)))


if __name__ == "__main__":
    main()
