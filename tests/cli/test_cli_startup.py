"""``agentcore --help`` starts at once: the parser is built, and help printed, without loading Temporal,
pydantic or httpx. Each check runs in a fresh interpreter and reads ``sys.modules`` (deterministic;
the time itself is measured in bench/log/049-otel-interceptor-and-cli-startup.md, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import agentcore

HEAVY = ("temporalio", "pydantic", "httpx")

_REPORT = """
import json, sys
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(HEAVY))
print(json.dumps({"heavy": heavy, "result": result}))
"""


def _fresh(code: str) -> dict[str, object]:
    """Run ``code`` (which sets ``result``) in a new interpreter; the heavy packages it loaded."""
    script = f"HEAVY = {HEAVY!r}\n" + textwrap.dedent(code) + _REPORT
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_building_the_parser_and_parsing_a_command_loads_nothing_heavy() -> None:
    report = _fresh(
        """
        from agentcore.cli import build_parser
        args = build_parser().parse_args(["send", "my-session", "hello", "--address", "h:7233"])
        result = [args.command, args.session, args.text, args.address, args.handler.__name__]
        """
    )
    assert report == {"heavy": [], "result": ["send", "my-session", "hello", "h:7233", "cmd_send"]}


def test_help_of_the_cli_and_of_a_command_loads_nothing_heavy() -> None:
    for argv in (["--help"], ["chat", "--help"], ["worker", "--help"]):
        report = _fresh(
            f"""
            import contextlib, io
            from agentcore.cli import main
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                try:
                    main({argv!r})
                except SystemExit as exit:
                    code = exit.code
            result = [code, "usage: agentcore" in out.getvalue()]
            """
        )
        assert report == {"heavy": [], "result": [0, True]}, argv


def test_a_usage_error_loads_nothing_heavy() -> None:
    report = _fresh(
        """
        import contextlib, io
        from agentcore.cli import main
        with contextlib.redirect_stderr(io.StringIO()):
            try:
                main(["export"])  # its SESSION_OR_PATH is missing
            except SystemExit as exit:
                code = exit.code
        result = code
        """
    )
    assert report == {"heavy": [], "result": 2}


def test_the_package_loads_its_names_on_first_use() -> None:
    report = _fresh(
        """
        import sys
        import agentcore
        before = sorted({name.split(".")[0] for name in sys.modules} & set(HEAVY))
        from agentcore import Agent, AgentError, AgentTool
        result = [before, Agent.__module__, AgentTool.__module__, AgentError.__module__]
        """
    )
    assert report["result"] == [[], "agentcore.agent", "agentcore.tools", "agentcore.errors"]
    assert "pydantic" in report["heavy"]  # the names are the real ones, loaded when asked for


def test_every_public_name_resolves_to_its_module_object() -> None:
    import importlib

    for name in agentcore.__all__:
        value = getattr(agentcore, name)
        module = importlib.import_module(f"agentcore.{agentcore._MODULE_OF[name]}")
        assert value is getattr(module, name), name
    assert set(agentcore.__all__) <= set(dir(agentcore))
    try:
        agentcore.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as err:
        assert "NoSuchName" in str(err)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
