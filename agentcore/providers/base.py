"""What both providers share: the partial-message builder, the HTTP/SSE driver and message clean-up.

A provider module only knows its protocol: how to turn our context into a request body, and how to
turn each SSE event into builder calls. Everything else is written once, in these modules (and
importable from here):

* ``builder.py``: ``PartialMessageBuilder`` owns the ``AssistantMessage`` under construction and emits
  the ``StreamEvent``s (``text_start``/``delta``/``end``, ``thinking_*``, ``toolcall_*``, ``done``,
  ``error``). Tool arguments are re-parsed leniently on every delta and strictly at the end.
* ``transport.py``: the shared ``httpx.AsyncClient`` (aiohttp's pooled transport), one per event loop,
  and the producer task that posts the request, reads the body and parses SSE.
* ``driver.py``: ``drive_sse`` guarantees the contract: the stream never raises, it ends with exactly
  one ``done`` or ``error`` event, and an abort closes the HTTP stream at once while keeping the
  partial content.
* ``conversion.py``: ``normalize_messages`` repairs a transcript so any provider accepts it (drops
  failed turns, answers orphaned tool calls); ``ConversionMemo`` lets a call convert only what is new.
"""

from __future__ import annotations

from .builder import ABORTED_MESSAGE, BlockKind, PartialMessageBuilder
from .conversion import NO_RESULT_TEXT, Conversion, ConversionMemo, Normalizer, carry_on, normalize_messages
from .driver import SseHandler, drive_sse, logger, stream_sse_provider
from .transport import HTTP_LIMITS, HTTP_TIMEOUT, HttpRequest, aclose_shared_client, shared_client

__all__ = [
    "ABORTED_MESSAGE",
    "HTTP_LIMITS",
    "HTTP_TIMEOUT",
    "NO_RESULT_TEXT",
    "BlockKind",
    "Conversion",
    "ConversionMemo",
    "HttpRequest",
    "Normalizer",
    "PartialMessageBuilder",
    "SseHandler",
    "aclose_shared_client",
    "carry_on",
    "drive_sse",
    "logger",
    "normalize_messages",
    "shared_client",
    "stream_sse_provider",
]
