"""``Transcript.split_committed``: what a local activity may write from inside a workflow task."""

from __future__ import annotations

from itertools import count

from agentcore.messages import UserMessage
from agentcore.session import MessageEntry, ModelChangeEntry
from agentcore.testing import scripted_model
from agentcore.transcript import Transcript


def test_entries_made_in_the_running_workflow_task_are_not_committed() -> None:
    ids = count()
    task = [3]
    carried = MessageEntry(id="carried", message=UserMessage(content="from the last run", timestamp=1))
    transcript = Transcript(
        new_id=lambda: f"e{next(ids)}", now_ms=lambda: 1, unwritten=[carried], task=lambda: task[0]
    )
    transcript.add(ModelChangeEntry(model=scripted_model()))
    transcript.add_message(UserMessage(content="first", timestamp=1))
    committed, pending = transcript.split_committed()
    assert [e.id for e in committed] == ["carried"]
    assert [e.id for e in pending] == ["e0", "e1"]

    task[0] = 11  # the next workflow task: the previous one is in the history now
    transcript.add_message(UserMessage(content="second", timestamp=1), entry_id="answer")
    committed, pending = transcript.split_committed()
    assert [e.id for e in committed] == ["carried", "e0", "e1"]
    assert [e.id for e in pending] == ["answer"]

    transcript.mark_written(committed)
    assert transcript.split_committed() == ([], pending)


def test_without_a_task_counter_everything_is_committed() -> None:
    transcript = Transcript(new_id=lambda: "e", now_ms=lambda: 1)
    transcript.add_message(UserMessage(content="hi", timestamp=1))
    assert [e.id for e in transcript.split_committed()[0]] == ["e"]
