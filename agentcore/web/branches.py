"""The other branches of a conversation's user messages, from its session file.

A regeneration or an edit moves the conversation back to before a user message and asks again: the
new user message hangs from the same message as the old one (the one before them, or the start),
and both branches stay in the session file's tree. ``message_branches`` finds, for each user message
on the current path, its siblings (user messages with the same message before them, settings and
other non-message entries in between not counting), each with where its branch ends now: its newest
entry, the place ``branch`` moves to for switching to it (the way back survives a reload and shows
in every tab, as the file does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

# A sibling's text, cut to this many characters (a title for its switch).
PREVIEW_CHARS = 120


@dataclass
class SessionTree:
    """What the branches need of a session file: entry ids in file order, parents, user messages."""

    order: list[str] = field(default_factory=list)
    parents: dict[str, str | None] = field(default_factory=dict)
    # Entry id -> the nearest message entry above it (None: none before it, the start).
    message_above: dict[str, str | None] = field(default_factory=dict)
    # User message entry id -> its text (cut).
    user_texts: dict[str, str] = field(default_factory=dict)
    # Entry id -> the newest entry of the subtree it heads (itself included) a conversation can be at.
    newest: dict[str, str] = field(default_factory=dict)


def user_text(message: dict[str, Any]) -> str:
    """The text of a user message as the session file holds it (its text blocks, joined)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            block.get("text", "")
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        )
    return ""


def _preview(message: dict[str, Any]) -> str:
    text = " ".join(user_text(message).split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1].rstrip() + "…"


def read_tree(path: Path) -> SessionTree:
    """The tree of the session file at ``path`` (a torn or unreadable line is skipped)."""
    tree = SessionTree()
    kinds: dict[str, str] = {}
    with path.open("rb") as lines:
        for line in lines:
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(entry, dict) or entry.get("type") in (None, "session"):
                continue
            entry_id, above = entry.get("id"), entry.get("parent_id")
            if not isinstance(entry_id, str) or entry_id in kinds:
                continue
            parent = above if isinstance(above, str) and above in kinds else None
            kind = str(entry["type"])
            kinds[entry_id] = kind
            tree.order.append(entry_id)
            tree.parents[entry_id] = parent
            if parent is None:
                tree.message_above[entry_id] = None
            else:
                tree.message_above[entry_id] = (
                    parent if kinds[parent] == "message" else tree.message_above[parent]
                )
            message = entry.get("message")
            if kind == "message" and isinstance(message, dict) and message.get("role") == "user":
                tree.user_texts[entry_id] = _preview(message)
    # Parents come before their children in the file: from the end, each subtree's newest entry is
    # known before its parent's. A ``leaf`` entry is a move, not a place to be.
    for entry_id in reversed(tree.order):
        if kinds[entry_id] != "leaf":
            tree.newest.setdefault(entry_id, entry_id)
        parent = tree.parents[entry_id]
        if parent is not None and entry_id in tree.newest:
            tree.newest.setdefault(parent, tree.newest[entry_id])
    return tree


def message_branches(
    tree: SessionTree,
    path: Sequence[tuple[str | None, str]],
    leaf_id: str | None,
    *,
    from_start: bool = True,
) -> dict[str, list[dict[str, Any]]]:
    """``branches``: for each user message of ``path`` (the current path's messages as ``(entry id,
    role)``, oldest first) that has siblings, ``{"entry_id", "position", "siblings": [{"entry_id",
    "leaf_id", "text", "current"}]}``, siblings oldest first, ``position`` the current one's place
    among them (0-based). ``continuations``: the user messages hanging below the path's last message
    (the conversation was moved back from them: an edit not sent yet, "branch from here"), oldest
    first, as siblings are.

    ``leaf_id`` is where the conversation is (the current sibling's branch ends there); a message the
    file does not hold yet (the workflow writes a run's entries a moment later) has the message before
    it on ``path`` above it (the start, for the first when ``from_start``)."""
    groups: dict[str | None, list[str]] = {}
    for user in tree.user_texts:
        groups.setdefault(tree.message_above[user], []).append(user)
    found: list[dict[str, Any]] = []
    previous: str | None = None
    for i, (entry_id, role) in enumerate(path):
        if entry_id is not None and role == "user":
            above: str | None
            if entry_id in tree.message_above:
                above = tree.message_above[entry_id]
            elif i > 0 or from_start:
                above = previous
            else:
                above = "?"  # the message before is not known: no siblings to tell
            siblings = list(groups.get(above, []))
            if entry_id not in siblings:
                siblings.append(entry_id)
            if len(siblings) > 1:
                found.append(
                    {
                        "entry_id": entry_id,
                        "position": siblings.index(entry_id),
                        "siblings": [
                            {
                                "entry_id": sibling,
                                "leaf_id": leaf_id
                                if sibling == entry_id
                                else tree.newest.get(sibling, sibling),
                                "text": tree.user_texts.get(sibling, ""),
                                "current": sibling == entry_id,
                            }
                            for sibling in siblings
                        ],
                    }
                )
        previous = entry_id
    last: str | None = path[-1][0] if path else None
    continuations = [
        {
            "entry_id": entry_id,
            "leaf_id": tree.newest.get(entry_id, entry_id),
            "text": tree.user_texts[entry_id],
        }
        for entry_id in (groups.get(last, []) if (last is not None if path else from_start) else [])
    ]
    return {"branches": found, "continuations": continuations}


__all__ = ["SessionTree", "message_branches", "read_tree", "user_text"]
