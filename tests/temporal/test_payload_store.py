"""The payload store and the answer budgets (agentcore.temporal.payloads, agentcore.budget), piece by piece;
tests/workflows/test_payload_size.py runs them together in conversations."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    ExternalStorage,
    StorageDriverRetrieveContext,
    StorageDriverSelectContext,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)

from agentcore.budget import (
    CUT_NOTE,
    approx_size,
    json_size,
    newest_in_answer,
    oldest_in_answer,
    shrink_to_fit,
)
from agentcore.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agentcore.temporal import DATA_CONVERTER
from agentcore.temporal.payloads import (
    PAYLOAD_STORE_BYTES,
    DirectoryPayloadStore,
    PayloadStoreError,
    is_directory_store,
    payload_store,
    with_payload_store,
)
from agentcore.temporal.runner import is_context_free

KB = 1024
_TARGET = StorageDriverWorkflowInfo(namespace="default", id="wf", run_id="r", type="T")


def _result(*texts: str, image: str | None = None) -> ToolResultMessage:
    content: list = [TextContent(text=t) for t in texts]
    if image is not None:
        content.append(ImageContent(data=image, mime_type="image/png"))
    return ToolResultMessage(tool_call_id="c1", tool_name="dump", content=content, timestamp=1)


async def test_the_store_writes_each_payload_once_and_reads_it_back(tmp_path: Path) -> None:
    store = DirectoryPayloadStore(tmp_path / "p")
    big = Payload(metadata={"encoding": b"json/plain"}, data=b"x" * (300 * KB))
    other = Payload(metadata={"encoding": b"json/plain"}, data=b"y" * 10)
    claims = await store.store(StorageDriverStoreContext(target=_TARGET), [big, other, big])
    assert claims[0].claim_data == claims[2].claim_data != claims[1].claim_data
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == sorted(
        {c.claim_data["sha256"] for c in claims}
    ), "one file per distinct payload, no temporary file left"
    back = await store.retrieve(StorageDriverRetrieveContext(), claims)
    assert back == [big, other, big]


async def test_a_missing_or_altered_file_is_refused_by_name(tmp_path: Path) -> None:
    store = DirectoryPayloadStore(tmp_path)
    (claim,) = await store.store(StorageDriverStoreContext(target=_TARGET), [Payload(data=b"z" * 100)])
    path = tmp_path / claim.claim_data["sha256"]
    path.write_bytes(path.read_bytes() + b"!")
    with pytest.raises(PayloadStoreError, match="does not match its hash"):
        await store.retrieve(StorageDriverRetrieveContext(), [claim])
    path.unlink()
    with pytest.raises(PayloadStoreError, match="payloads_dir"):
        await store.retrieve(StorageDriverRetrieveContext(), [claim])
    bad = type(claim)(claim_data={"sha256": "../../etc/passwd"})
    with pytest.raises(PayloadStoreError, match="not a stored payload"):
        await store.retrieve(StorageDriverRetrieveContext(), [bad])


def test_only_payloads_going_to_a_workflow_or_activity_are_stored(tmp_path: Path) -> None:
    storage = payload_store(tmp_path)
    assert storage.payload_size_threshold == PAYLOAD_STORE_BYTES and is_directory_store(storage)
    payload = Payload(data=b"x")
    assert storage.driver_selector(StorageDriverSelectContext(target=None), payload) is None  # type: ignore[misc,operator]
    chosen = storage.driver_selector(StorageDriverSelectContext(target=_TARGET), payload)  # type: ignore[misc,operator]
    assert isinstance(chosen, DirectoryPayloadStore)


def test_a_converter_with_the_store_stays_context_free(tmp_path: Path) -> None:
    converter = with_payload_store(DATA_CONVERTER, tmp_path)
    assert with_payload_store(converter, tmp_path) is converter
    assert with_payload_store(DATA_CONVERTER, None) is DATA_CONVERTER
    assert is_context_free(converter)
    foreign = ExternalStorage(drivers=[DirectoryPayloadStore(tmp_path)])
    assert not is_directory_store(foreign)
    assert not is_context_free(DATA_CONVERTER.__class__(external_storage=foreign))


def test_shrink_cuts_the_longest_strings_and_keeps_the_type() -> None:
    message = _result("a" * (900 * KB), "b" * (200 * KB), "short")
    shrunk = shrink_to_fit(message, 100 * KB)
    assert isinstance(shrunk, ToolResultMessage) and shrunk.tool_call_id == "c1"
    assert json_size(shrunk) <= 100 * KB
    texts = [block.text for block in shrunk.content]  # type: ignore[union-attr]
    assert texts[2] == "short"
    for text, original in zip(texts[:2], (900 * KB, 200 * KB), strict=True):
        head, note = text.split("\n[", 1)
        assert len(head) >= 256 and set(head) <= {"a", "b"}
        assert "\n[" + note == CUT_NOTE.format(count=original - len(head))
    assert shrink_to_fit(message, 2 * 1024 * KB) is message, "what fits is untouched"


def test_shrink_says_how_much_it_left_out_and_handles_wide_characters() -> None:
    text = "é" * (300 * KB)  # two bytes each in JSON as UTF-8
    shrunk = shrink_to_fit(_result(text), 64 * KB)
    assert json_size(shrunk) <= 64 * KB
    cut = shrunk.content[0].text  # type: ignore[union-attr]
    head, note = cut.split("\n[", 1)
    assert (
        set(head) == {"é"}
        and note == f"{len(text) - len(head)} characters left out here; the session file holds them all]"
    )


def test_shrink_replaces_images_with_a_line_naming_them() -> None:
    image = "A" * (400 * KB)
    shrunk = shrink_to_fit(_result("caption", image=image), 64 * KB)
    assert [block.type for block in shrunk.content] == ["text", "text"]
    assert shrunk.content[1].text.startswith(f"[image/png image of {len(image)} base64")  # type: ignore[union-attr]


def test_the_size_estimate_counts_every_large_field() -> None:
    """``approx_size`` (what an answer's budget is counted in) follows the JSON size of each kind of
    message, its strings, a thinking block's signature, a tool call's arguments and a result's details
    included: each grows the estimate as much as the message."""
    messages = [
        UserMessage(content=[TextContent(text="hello " * 50)], timestamp=1),
        AssistantMessage(
            content=[
                ThinkingContent(thinking="hmm " * 100, thinking_signature="S" * 3000),
                TextContent(text="ok"),
                ToolCall(id="c1", name="lookup", arguments={"q": "x" * 500}),
            ],
            timestamp=1,
        ),
        ToolResultMessage(
            tool_call_id="c1",
            tool_name="lookup",
            content=[TextContent(text="r" * 1000), ImageContent(data="A" * 5000, mime_type="image/png")],
            details={"k": "v" * 3000},
            timestamp=1,
        ),
    ]
    for message in messages:
        assert 0.85 < approx_size(message) / json_size(message) < 1.4, message
    grown = messages[1].model_copy(
        update={"content": [ThinkingContent(thinking="hmm", thinking_signature="S" * 50_000)]}
    )
    assert approx_size(grown) >= 50_000


def test_answers_keep_the_newest_or_oldest_messages_within_budget() -> None:
    messages = [UserMessage(content=[TextContent(text=c * (300 * KB))], timestamp=1) for c in "abcdef"]
    first, newest = newest_in_answer(messages, 1024 * KB)
    assert first == 3 and [m.text[0] for m in newest] == ["d", "e", "f"]
    assert [m.text[0] for m in oldest_in_answer(messages, 1024 * KB)] == ["a", "b", "c"]
    assert newest_in_answer(messages[:2]) == (0, messages[:2])
    assert newest_in_answer([]) == (0, [])
    huge = [UserMessage(content=[TextContent(text="z" * (3000 * KB))], timestamp=1)]
    index, (alone,) = newest_in_answer(huge, 1024 * KB)
    assert index == 0 and json_size(alone) <= 1024 * KB, "one message over the budget is cut, never dropped"
