"""Model text as safe HTML: Markdown rendered with raw HTML off, then sanitised.

Two layers, because either alone has failed somewhere before: ``markdown-it-py`` with ``html=False``
turns any tag a model writes (``<script>``, ``<img onerror=...>``) into visible text and refuses
``javascript:`` links; ``nh3`` (the Ammonia sanitiser) then keeps only the tags and attributes a chat
answer needs, so a renderer bug cannot put markup on the page either. Images stay links: a remote
image shown inline would let a model (or a prompt injection) make the browser call out unasked.

Fenced code with a language name is highlighted by Pygments: ``<span class="hl-k">`` and the like,
coloured by the page's stylesheet (classes only, no inline style).
"""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

ALLOWED_TAGS = frozenset(
    {
        "p", "br", "hr", "em", "strong", "del", "s", "code", "pre", "blockquote",
        "ul", "ol", "li", "a", "h1", "h2", "h3", "h4", "h5", "h6",
        "table", "thead", "tbody", "tr", "th", "td", "span",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "th": {"style"},
    "td": {"style"},
    "span": {"class"},
    "code": {"class"},
}
# Highlighting is skipped for code longer than this (a pasted log): plain text is as useful there.
HIGHLIGHT_MAX_CHARS = 20_000
URL_SCHEMES = frozenset({"http", "https", "mailto"})


@lru_cache(maxsize=1)
def _formatter() -> HtmlFormatter:
    return HtmlFormatter(nowrap=True, classprefix="hl-")


def _highlight(code: str, language: str, attrs: str) -> str:
    """Highlighted HTML for a fenced block, or "" (markdown-it then escapes it as plain text)."""
    if not language or len(code) > HIGHLIGHT_MAX_CHARS:
        return ""
    try:
        lexer = get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return ""
    html: str = highlight(code, lexer, _formatter())
    return html


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return (
        MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True, "highlight": _highlight})
        .enable(["table", "strikethrough"])
        .disable("image")
    )


def render_markdown(text: str) -> str:
    """``text`` (Markdown from a model or a user) as HTML holding no markup the text itself carried."""
    html = _parser().render(text)
    return nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        filter_style_properties={"text-align"},
    )


__all__ = ["render_markdown"]
