"""The offline demo's model: a scripted sommelier behind the loopback provider server.

``sommelier_responder()`` is a ``LoopbackServer`` responder. It reads the request the provider sent
(OpenAI Chat Completions or Anthropic Messages JSON), works out what the user asked in the newest
user message and which tool results have come back since, and answers the way a tool-calling model
would: a short lead-in and a tool call, then another call that builds on the first result, then a
streamed answer made only of what the tools returned.

It is a pure function of the request body. Durable runs retry and replay model calls, and a retried
call must get the same reply, so nothing here keeps state between requests: the conversation so far
(earlier tool calls and results) is read back from the request each time.

    async with LoopbackServer(sommelier_responder()) as server:
        model = server.model("openai-completions", "cellar-demo")
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..testing.loopback import Protocol, Responder, Script, ScriptToolCall, ScriptUsage
from .wines import SEED_WINES

# The questions ``agentcore dev --demo-script`` asks, in order: a pairing, a sum, the clock, a stock
# change, and a question outside the script's intents (answered by searching).
DEMO_QUESTIONS: tuple[str, ...] = (
    "Hi! We're having roast lamb tonight. Anything from the Rhône under $80?",
    "Sounds perfect. How much would six bottles cost with our 10% club discount?",
    "And how old is that vintage today?",
    "We just opened two bottles of it for dinner.",
    "Do we have anything with truffle?",
)

# --------------------------------------------------------------------------------- reading a request


@dataclass
class _Call:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class _Message:
    role: str  # "user" | "assistant" | "tool"
    text: str = ""
    calls: list[_Call] = field(default_factory=list)
    tool_name: str = ""


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = orjson.loads(raw or "{}")
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(
        block.get("text", "")
        for block in content or []
        if isinstance(block, dict) and block.get("type") == "text"
    )


def _openai_messages(raw: list[dict[str, Any]]) -> list[_Message]:
    names: dict[str, str] = {}
    messages = []
    for item in raw:
        role = item.get("role")
        if role == "assistant":
            calls = [
                _Call(
                    call.get("id", ""),
                    call["function"]["name"],
                    _arguments(call["function"].get("arguments")),
                )
                for call in item.get("tool_calls") or []
            ]
            names.update({call.id: call.name for call in calls})
            messages.append(_Message("assistant", _block_text(item.get("content")), calls))
        elif role == "tool":
            name = names.get(item.get("tool_call_id", ""), "")
            messages.append(_Message("tool", _block_text(item.get("content")), tool_name=name))
        elif role == "user":
            messages.append(_Message("user", _block_text(item.get("content"))))
    return messages


def _anthropic_messages(raw: list[dict[str, Any]]) -> list[_Message]:
    names: dict[str, str] = {}
    messages = []
    for item in raw:
        content = item.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if item.get("role") == "assistant":
            calls = [
                _Call(b.get("id", ""), b.get("name", ""), _arguments(b.get("input")))
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            names.update({call.id: call.name for call in calls})
            messages.append(_Message("assistant", _block_text(blocks), calls))
            continue
        for block in blocks:
            if block.get("type") == "tool_result":
                name = names.get(block.get("tool_use_id", ""), "")
                messages.append(_Message("tool", _block_text(block.get("content")), tool_name=name))
        text = _block_text([b for b in blocks if b.get("type") == "text"])
        if text:
            messages.append(_Message("user", text))
    return messages


@dataclass
class _Request:
    history: list[_Message]  # every message before the newest user message
    question: str  # the newest user message
    results: list[_Message]  # tool results since it, oldest first
    size: int  # messages in the request: makes tool call ids unique per call

    def last_result(self, tool: str) -> str | None:
        for message in reversed(self.history + self.results):
            if message.role == "tool" and message.tool_name == tool:
                return message.text
        return None


def _read_request(body: Any, protocol: Protocol) -> _Request:
    raw = body.get("messages") if isinstance(body, dict) else None
    raw = raw if isinstance(raw, list) else []
    messages = _openai_messages(raw) if protocol == "openai" else _anthropic_messages(raw)
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    question = messages[last_user].text if last_user >= 0 else ""
    results = [m for m in messages[last_user + 1 :] if m.role == "tool"]
    return _Request(messages[: max(last_user, 0)], question, results, len(raw))


# ------------------------------------------------------------------------------ reading tool results


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def _table_ids(table: str) -> list[int]:
    """Wine ids from the first column of a ``search_wines`` table."""
    return [int(match) for match in re.findall(r"^\|\s*(\d+)\s*\|", table, flags=re.MULTILINE)]


def _details_field(details: str, name: str) -> str:
    match = re.search(rf"^{name}: (.*)$", details, flags=re.MULTILINE)
    return match.group(1).strip() if match else ""


@dataclass
class _Wine:
    """What a ``wine_details`` result says about a wine."""

    id: int
    title: str
    region: str
    price: float
    stock: int
    notes: str

    @property
    def vintage(self) -> int | None:
        match = re.search(r"\b(19|20)\d\d$", self.title)
        return int(match.group(0)) if match else None


def _parse_details(details: str | None) -> _Wine | None:
    if not details:
        return None
    head = re.match(r"#(\d+) (.*)$", details.splitlines()[0])
    price = re.match(r"\$([\d,.]+)", _details_field(details, "Price"))
    stock = re.match(r"(\d+)", _details_field(details, "Stock"))
    if head is None or price is None or stock is None:
        return None
    return _Wine(
        id=int(head.group(1)),
        title=head.group(2),
        region=_details_field(details, "Region"),
        price=float(price.group(1).replace(",", "")),
        stock=int(stock.group(1)),
        notes=_details_field(details, "Tasting notes"),
    )


def _result_value(calculation: str) -> str:
    return calculation.rsplit("=", 1)[-1].strip()


def _money(value: float) -> str:
    return f"${value:,.2f}"


# ---------------------------------------------------------------------------------- reading a question

_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a dozen": 12, "dozen": 12,
}  # fmt: skip
_COUNT = r"\d+|" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))
_REGIONS = sorted({w.region for w in SEED_WINES}, key=len, reverse=True)
_COUNTRIES = sorted({w.country for w in SEED_WINES}, key=len, reverse=True)
_GRAPES = sorted({g.strip() for w in SEED_WINES for g in w.grape.split(",")}, key=len, reverse=True)
# Words the cellar's tasting notes use for pairings ("Great with lamb", "Made for oysters").
_FOODS = (
    "lamb", "oyster", "salmon", "steak", "barbecue", "pizza", "pasta", "truffle", "cheese", "spic",
    "seafood", "schnitzel", "salad", "bistecca", "aperitif",
)  # fmt: skip
_STOPWORDS = set(
    "a an and any anything are can could do does for from have i in is it me of on or our please "
    "recommend should some something suggest that the there this to we what which with would you "
    "got find show wine wines bottle bottles cellar".split()
)
_GREETINGS = set("hi hello hey there good morning evening afternoon thanks thank you cheers".split())
_INTRODUCTION = (
    "Hello! I'm Cellar, your sommelier. Ask me for a wine by region, grape, price or dish, tell me "
    "when bottles are opened or bought, and I'll keep the cellar book and do the sums."
)
_TIME_ZONES = {
    "paris": "Europe/Paris", "london": "Europe/London", "new york": "America/New_York",
    "tokyo": "Asia/Tokyo", "sydney": "Australia/Sydney", "san francisco": "America/Los_Angeles",
    "berlin": "Europe/Berlin", "madrid": "Europe/Madrid", "rome": "Europe/Rome",
}  # fmt: skip


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS[word]


def _mentioned(question: str, names: list[str]) -> str | None:
    folded = _fold(question)
    return next((name for name in names if re.search(rf"\b{re.escape(_fold(name))}\b", folded)), None)


def _search_filters(question: str) -> dict[str, Any]:
    folded = _fold(question)
    filters: dict[str, Any] = {}
    if region := _mentioned(question, _REGIONS):
        filters["region"] = region
    elif country := _mentioned(question, _COUNTRIES):
        filters["country"] = country
    if grape := _mentioned(question, _GRAPES):
        filters["grape"] = grape
    if match := re.search(r"(?:under|below|less than|max(?:imum)?|up to)\s*\$?\s*(\d+)", folded):
        filters["max_price"] = float(match.group(1))
    if match := re.search(r"(?:over|above|more than|at least)\s*\$?\s*(\d+)", folded):
        filters["min_price"] = float(match.group(1))
    if food := next((food for food in _FOODS if food in folded), None):
        filters["query"] = food
    return filters


# ------------------------------------------------------------------------------------------ replies


@dataclass
class _Reply:
    text: str
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


Plan = Callable[[_Request], _Reply]


def _pairing(request: _Request, filters: dict[str, Any]) -> _Reply:
    searches = [m for m in request.results if m.tool_name == "search_wines"]
    details = [m for m in request.results if m.tool_name == "wine_details"]
    wanted = ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in filters.values())
    if not searches:
        arguments = {**filters, "in_stock_only": True, "limit": 5}
        if "max_price" in filters:
            arguments |= {"sort_by": "price", "descending": True}
        return _Reply("Let me look through the cellar.", [("search_wines", arguments)])
    ids = _table_ids(searches[-1].text)
    if not ids and "query" in filters and len(filters) > 1 and len(searches) == 1:
        # Nothing pairs by name; widen to the other filters rather than give up.
        relaxed = {k: v for k, v in filters.items() if k != "query"}
        arguments = {**relaxed, "in_stock_only": True, "limit": 5}
        return _Reply(
            "Nothing mentions that dish by name; let me widen the search.", [("search_wines", arguments)]
        )
    if not ids:
        return _Reply(
            f"I found nothing in stock for {wanted}. Try another region or grape, or a higher budget, "
            "and I'll look again."
        )
    if not details:
        return _Reply("", [("wine_details", {"wine_id": ids[0]})])
    wine = _parse_details(details[-1].text)
    if wine is None:
        return _Reply(details[-1].text)
    others = len(ids) - 1
    also = (
        f" There {'is' if others == 1 else 'are'} {others} other option{'s' if others != 1 else ''} in the list above if you'd like a change."
        if others
        else ""
    )
    return _Reply(
        f"I'd open the **{wine.title}** ({wine.region}), {_money(wine.price)} a bottle. "
        f"{wine.notes} You have {wine.stock} bottle{'s' if wine.stock != 1 else ''} left.{also}"
    )


def _discussed_wine(request: _Request) -> _Wine | None:
    return _parse_details(request.last_result("wine_details"))


def _stock_change(request: _Request, count: int, sign: int) -> _Reply:
    if request.results:
        result = request.results[-1].text
        if result.lower().startswith("error") or "cannot" in result.lower():
            return _Reply(f"The cellar book refused that: {result}")
        return _Reply(f"Done. {result}")
    wine = _discussed_wine(request)
    explicit = re.search(r"#(\d+)", request.question)
    wine_id = int(explicit.group(1)) if explicit else wine.id if wine else None
    if wine_id is None:
        return _Reply("Which wine was it? Tell me its id (search_wines shows it) and I'll update the book.")
    return _Reply(
        "I'll update the cellar book.", [("update_stock", {"wine_id": wine_id, "change": sign * count})]
    )


def _cost(request: _Request, count: int) -> _Reply:
    wine = _discussed_wine(request)
    if wine is None:
        return _Reply("Which wine should I price? Ask me for a recommendation first.")
    discount = re.search(r"(\d+(?:\.\d+)?)\s*%", request.question)
    factor = f" * {1 - float(discount.group(1)) / 100:g}" if discount else ""
    if not request.results:
        return _Reply("", [("calculator", {"expression": f"{count} * {wine.price:g}{factor}"})])
    total = _result_value(request.results[-1].text).replace(",", "")
    off = f" with {discount.group(1)}% off" if discount else ""
    return _Reply(
        f"{count} bottle{'s' if count != 1 else ''} of the {wine.title} at {_money(wine.price)}{off} "
        f"come to **{_money(float(total))}**."
    )


def _time(request: _Request) -> _Reply:
    folded = _fold(request.question)
    zone = next((z for city, z in _TIME_ZONES.items() if city in folded), "UTC")
    clocks = [m for m in request.results if m.tool_name == "clock"]
    if not clocks:
        return _Reply("", [("clock", {"timezone": zone})])
    now = clocks[-1].text
    wine = _discussed_wine(request)
    asks_age = any(word in folded for word in ("old", "age", "years"))
    if not asks_age or wine is None or wine.vintage is None:
        return _Reply(f"It is {now}.")
    year = re.search(r"\b(20\d\d)\b", now)
    if not any(m.tool_name == "calculator" for m in request.results) and year:
        return _Reply("", [("calculator", {"expression": f"{year.group(1)} - {wine.vintage}"})])
    age = _result_value(request.results[-1].text)
    return _Reply(
        f"Today is {now.split(',')[0]}, so the {wine.title} is {age} years past its vintage: "
        "mature enough to enjoy now, and it will keep a few more years."
    )


def _summary(request: _Request) -> _Reply:
    if not request.results:
        group = "country" if "countr" in _fold(request.question) else "region"
        return _Reply("", [("cellar_summary", {"group_by": group})])
    lines = request.results[-1].text.splitlines()
    top = [row.strip("| ").split("|")[0].strip() for row in lines[3:6]]
    return _Reply(f"{lines[0]} The most valuable parts of the cellar: {', '.join(top)}.")


def _math(request: _Request, expression: str, answer: str = "") -> _Reply:
    """The calculator's answer; ``answer`` phrases it (``{result}`` is the number)."""
    if not request.results:
        return _Reply("", [("calculator", {"expression": expression})])
    text = request.results[-1].text
    if answer and " = " in text:  # "240 * 17 / 100 = 40.8"; an error is told as it is
        return _Reply(answer.format(result=text.rsplit(" = ", 1)[1]))
    return _Reply(f"{text}.")


_NUMBER = r"(\d+(?:[.,]\d+)?)"
_SPOKEN_OPERATORS = {
    "times": "*",
    "multiplied by": "*",
    "plus": "+",
    "minus": "-",
    "divided by": "/",
    "over": "/",
}


def _spoken_math(question: str) -> tuple[str, str] | None:
    """Arithmetic asked in words ("17% of 240", "12 times 7"): the calculator's expression and how
    the answer is phrased, or None."""
    folded = question.lower().replace("$", "")
    percent = re.search(rf"{_NUMBER}\s*(?:%|percent|per cent)\s+of\s+{_NUMBER}", folded)
    if percent:
        share, whole = (group.replace(",", "") for group in percent.groups())
        return f"{whole} * {share} / 100", f"{share}% of {whole} is {{result}}."
    operators = "|".join(_SPOKEN_OPERATORS)
    spoken = re.search(rf"{_NUMBER}\s+({operators})\s+{_NUMBER}", folded)
    if spoken:
        left, word, right = spoken.groups()
        expression = f"{left.replace(',', '')} {_SPOKEN_OPERATORS[word]} {right.replace(',', '')}"
        return expression, f"{left} {word} {right} is {{result}}."
    return None


def _keyword_search(request: _Request) -> _Reply:
    words = [w for w in re.findall(r"[a-z][a-z'-]+", _fold(request.question)) if w not in _STOPWORDS]
    if not words:
        return _Reply(_INTRODUCTION)
    keyword = max(words, key=len)
    if not request.results:
        return _Reply(
            f"Let me search the cellar for “{keyword}”.", [("search_wines", {"query": keyword, "limit": 5})]
        )
    table = request.results[-1].text
    if not _table_ids(table):
        return _Reply(
            f"Nothing in the cellar mentions “{keyword}”. I can search by region, grape, price or dish; "
            "for example: a Pinot Noir under $50 for salmon."
        )
    rows = [line for line in table.splitlines() if re.match(r"^\|\s*\d+", line)]
    picks = "; ".join(
        f"{cells[1]} {cells[2]} ({cells[5]}, {cells[6]} left)"
        for cells in ([c.strip() for c in row.strip("|").split("|")] for row in rows[:3])
    )
    return _Reply(f"Here is what I found for “{keyword}”: {picks}.")


def _plan(request: _Request) -> _Reply:
    question = request.question
    folded = _fold(question)
    if not question.strip() or set(re.findall(r"[a-z]+", folded)) <= _GREETINGS:
        return _Reply(_INTRODUCTION)
    verbs = r"(?P<verb>opened|drank|drunk|sold|gave away|gave|removed?|bought|added?|got)"
    count = rf"(?P<count>{_COUNT})"
    change = re.search(rf"\b{verbs}\s+(?:another\s+)?{count}\s+bottles?", folded) or re.search(
        rf"\b{count}\s+bottles?\b.*\b{verbs}", folded
    )
    if change:
        sign = 1 if change.group("verb").startswith(("bought", "add", "got")) else -1
        return _stock_change(request, _count(change.group("count")), sign)
    cost = re.search(rf"\b({_COUNT})\s+bottles?\b", folded)
    if cost and re.search(r"\b(cost|price|total|how much|pay)\b", folded):
        return _cost(request, _count(cost.group(1)))
    if re.search(r"\b(how old|vintage today|what time|the time|today|date)\b", folded):
        return _time(request)
    if re.search(r"\b(summary|worth|value|inventory|how many bottles)\b", folded):
        return _summary(request)
    if spoken := _spoken_math(question):
        return _math(request, *spoken)
    if expression := re.search(r"(\d[\d\s.+\-*/()%]*[+\-*/]\s*[\d(][\d\s.+\-*/()]*)", question):
        return _math(request, expression.group(1).strip())
    filters = _search_filters(question)
    if filters:
        return _pairing(request, filters)
    return _keyword_search(request)


def sommelier_reply(body: Any, protocol: Protocol) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """The text and tool calls the demo model answers ``body`` with (deterministic in ``body``)."""
    reply = _plan(_read_request(body, protocol))
    return reply.text, reply.calls


def sommelier_responder(pacing: float = 0.015, chunk_chars: int = 3) -> Responder:
    """A loopback responder playing the demo sommelier; ``pacing`` seconds between streamed chunks."""

    def respond(body: Any, protocol: Protocol) -> Script:
        request = _read_request(body, protocol)
        reply = _plan(request)
        calls = [
            ScriptToolCall(name, arguments, id=f"call_demo_{request.size}_{index}")
            for index, (name, arguments) in enumerate(reply.calls)
        ]
        # Token counts roughly like a real model's, so the demo shows usage (and cost, where priced).
        prompt_tokens = len(orjson.dumps(body)) // 4
        output_tokens = max(1, (len(reply.text) + sum(len(str(a)) for _, a in reply.calls)) // 4)
        return Script(
            text=reply.text,
            tool_calls=calls,
            delay=pacing,
            chunk_chars=chunk_chars,
            usage=ScriptUsage(input=prompt_tokens, output=output_tokens),
        )

    return respond


__all__ = ["DEMO_QUESTIONS", "sommelier_reply", "sommelier_responder"]
