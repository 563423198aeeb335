"""Payload encryption: the server stores ciphertext, clients and the UI's codec server decode it."""

from __future__ import annotations

import asyncio
import base64
import os
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path

import orjson
import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.client import Client, WorkflowExecutionStatus

from agentcore import AgentOptions, cli
from agentcore.client import AgentClient
from agentcore.errors import AgentError
from agentcore.temporal import DATA_CONVERTER, ensure_data_converter
from agentcore.temporal.codec import (
    EncryptionCodec,
    EncryptionKeyError,
    codec_from_env,
    parse_key,
    with_codec,
)
from agentcore.temporal.codec_server import CodecServer
from agentcore.testing.scripted import ScriptedModel, scripted_model, text
from tests.support.durable import collect_run, running_worker

SECRET = "the vault code is PLUM-4417"


def test_round_trip_key_mismatch_and_clear_payloads_pass_through() -> None:
    codec = EncryptionCodec(os.urandom(32))
    clear = Payload(metadata={"encoding": b"json/plain"}, data=b'{"prompt": "hello"}')
    (sealed,) = codec.encode_sync([clear])
    assert b"hello" not in sealed.SerializeToString()
    assert codec.decode_sync([sealed]) == [clear]
    assert codec.decode_sync([clear]) == [clear]  # written before encryption was switched on
    with pytest.raises(EncryptionKeyError, match="AGENTCORE_ENCRYPTION_KEY"):
        EncryptionCodec(os.urandom(32)).decode_sync([sealed])
    # A process without a key names the missing key (not "Unknown payload encoding").
    with pytest.raises(
        EncryptionKeyError, match=f"{codec.key_id.decode()}.*no key.*AGENTCORE_ENCRYPTION_KEY"
    ):
        DATA_CONVERTER.payload_converter.from_payloads([sealed])
    assert DATA_CONVERTER.payload_converter.to_payloads(["hello"])[0].metadata["encoding"] == b"json/plain"


def test_key_from_the_environment() -> None:
    key = os.urandom(32)
    assert codec_from_env({}) is None
    codec = codec_from_env({"AGENTCORE_ENCRYPTION_KEY": base64.b64encode(key).decode()})
    assert codec is not None and codec.key_id == EncryptionCodec(key).key_id
    assert parse_key(base64.urlsafe_b64encode(key).decode().rstrip("=")) == key
    with pytest.raises(EncryptionKeyError, match="32 bytes"):
        parse_key(base64.b64encode(b"short").decode())


def _post(
    url: str, body: bytes, origin: str = "http://localhost:8233", bearer: str | None = None
) -> tuple[int, Message, bytes]:
    headers = {"Content-Type": "application/json", "Origin": origin}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    # The reply's headers as a Message: looked up by name in any case, as HTTP names them.
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


async def test_history_holds_no_prompt_in_clear_and_the_codec_server_decodes_it(
    temporal_client: Client, tmp_path: Path
) -> None:
    codec = EncryptionCodec(os.urandom(32))
    config = temporal_client.config()
    config["data_converter"] = with_codec(DATA_CONVERTER, codec)
    client = Client(**config)
    assert ensure_data_converter(client).data_converter.payload_codec is codec

    model = ScriptedModel(lambda context: text(f"Noted: {SECRET}"))
    async with running_worker(client, tmp_path, model) as h:
        agent = await h.agents.start(
            "encrypted-1", AgentOptions(model=scripted_model(), system_prompt=SECRET)
        )
        await agent.prompt(f"Remember this: {SECRET}")
        events = await collect_run(agent)
        await agent.wait_for_idle()
        # Clients with the key see clear text: events, queries.
        assert events[-1].type == "agent_end"
        assert (await agent.get_state()).messages[-1].text == f"Noted: {SECRET}"
        history = await client.get_workflow_handle("encrypted-1").fetch_history()

    raw = b"".join(event.SerializeToString() for event in history.events)
    assert b"PLUM-4417" not in raw
    assert b"binary/encrypted" in raw

    started = next(
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    )
    encrypted_input = started.workflow_execution_started_event_attributes.input
    body = json_format.MessageToJson(encrypted_input).encode()
    server = CodecServer(codec, port=0).start()
    try:
        # Without the token, or from another site, nothing is decrypted.
        for refused, expected in (
            (_post(f"{server.url}/decode", body), 401),
            (_post(f"{server.url}/not-the-token/decode", body), 401),
            (_post(f"{server.endpoint}/decode", body, origin="http://evil.example"), 403),
        ):
            assert refused[0] == expected and SECRET.encode() not in refused[2]
        assert _post(f"{server.url}/decode", body, bearer=server.token)[0] == 200
        status, headers, reply = _post(f"{server.endpoint}/decode", body)
        assert status == 200
        assert headers["Access-Control-Allow-Origin"] == "http://localhost:8233"
        decoded = json_format.Parse(reply, Payloads())
        assert SECRET.encode() in decoded.payloads[0].data
        assert orjson.loads(decoded.payloads[0].data)["session_id"] == "encrypted-1"

        # /encode is the inverse (the UI uses it to send signals with encrypted payloads).
        status, _, reply = _post(f"{server.endpoint}/encode", json_format.MessageToJson(decoded).encode())
        assert status == 200
        assert codec.decode_sync(json_format.Parse(reply, Payloads()).payloads) == list(decoded.payloads)

        status, headers, _ = _post(f"{server.endpoint}/decode", body, origin="http://evil.example")
        assert status == 403 and "Access-Control-Allow-Origin" not in headers
        status, _, reply = _post(f"{server.endpoint}/nope", body)
        assert status == 404
        wrong = CodecServer(EncryptionCodec(os.urandom(32)), port=0).start()
        try:
            status, _, reply = _post(f"{wrong.endpoint}/decode", body)
            assert status == 400 and b"AGENTCORE_ENCRYPTION_KEY" in reply
        finally:
            wrong.stop()
    finally:
        server.stop()


def _messages(failure: Failure) -> str:
    """A failure's message and its causes'."""
    messages = []
    while failure.message:
        messages.append(failure.message)
        failure = failure.cause
    return ": ".join(messages)


async def test_a_process_without_the_key_says_so(
    temporal_client: Client,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A client or a worker started without the key, beside processes with it: its calls fail, and
    the workflow tasks it takes fail, with an error that names the missing key."""
    config = temporal_client.config()
    config["data_converter"] = with_codec(DATA_CONVERTER, EncryptionCodec(os.urandom(32)))
    keyed = Client(**config)
    model = ScriptedModel(lambda context: text("Noted."))
    # Only a worker without the key serves this queue.
    async with running_worker(temporal_client, tmp_path, model) as keyless:
        encrypted = AgentClient(keyed, task_queue=keyless.task_queue, sessions_dir=keyless.sessions_dir)
        agent = await encrypted.start("no-key", AgentOptions(model=scripted_model()))
        handle = temporal_client.get_workflow_handle("no-key")
        for _ in range(100):
            failed = [
                _messages(e.workflow_task_failed_event_attributes.failure)
                for e in (await handle.fetch_history()).events
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
            ]
            if failed:
                break
            await asyncio.sleep(0.1)
        assert failed and "no key" in failed[0] and "AGENTCORE_ENCRYPTION_KEY" in failed[0], failed
        # And it can still be terminated (it cannot name its schedules).
        await agent.terminate("test over")
        assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED
    # A client without the key reading an encrypted conversation.
    async with running_worker(keyed, tmp_path, model) as with_key:
        agent = await with_key.agents.start("no-key-2", AgentOptions(model=scripted_model()))
        await agent.prompt("hello")
        await agent.wait_for_idle()
        reader = await AgentClient(
            temporal_client, task_queue=with_key.task_queue, sessions_dir=with_key.sessions_dir
        ).attach("no-key-2")
        with pytest.raises(EncryptionKeyError, match="no key") as raised:
            await reader.get_state()
        assert isinstance(raised.value, AgentError) and raised.value.code == "ENCRYPTION_KEY"
        # The CLI says so in a line, as a refusal (not a traceback).
        address = temporal_client.service_client.config.target_host
        base = ["--address", address, "--task-queue", with_key.task_queue]
        monkeypatch.delenv("AGENTCORE_ENCRYPTION_KEY", raising=False)
        assert await cli.run([*base, "state", "no-key-2"]) == 1
        assert "ENCRYPTION_KEY: payload encrypted" in capsys.readouterr().err
        assert (await agent.get_state()).messages[-1].text == "Noted."


async def test_stored_payloads_are_encrypted_too(temporal_client: Client, tmp_path: Path) -> None:
    # The codec runs before the payload store: files beside the sessions hold ciphertext only.
    config = temporal_client.config()
    config["data_converter"] = with_codec(DATA_CONVERTER, EncryptionCodec(os.urandom(32)))
    client = Client(**config)
    model = ScriptedModel(lambda context: text(f"read {len(context.messages[-1].text)}"))
    async with running_worker(client, tmp_path, model) as h:
        agent = await h.agents.start("encrypted-big", AgentOptions(model=scripted_model()))
        big = f"{SECRET} " * 40_000  # 400 KB: stored, not inline
        await agent.prompt(big)
        await agent.wait_for_idle()
        assert (await agent.get_state()).messages[-1].text == f"read {len(big)}"
        stored = list((h.sessions_dir / ".payloads").iterdir())
    assert stored and all(b"PLUM-4417" not in path.read_bytes() for path in stored)
    assert any(b"binary/encrypted" in path.read_bytes() for path in stored)
