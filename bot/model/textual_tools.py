"""Tool calls a model wrote as text instead of structured ``tool_calls`` (ORCH-9).

Small and mid-size local models often answer a tool call in the shape their chat template taught them,
as plain text. Recognised here:

    {"name": "memory_store", "arguments": {...}}        bare JSON ("parameters" too; arguments as a string)
    ```json {"name": ...} ```                           the same in a code fence
    <tool_call>{"name": ...}</tool_call>                Hermes / Qwen (one block or several)
    <|python_tag|>{"name": ...}                         Llama 3.1 (also {"type": "function", ...})
    <function=memory_store>{...}</function>             Llama 3.x's other form
    [TOOL_CALLS] [{"name": ...}, ...]                   Mistral
    <tools><function name="x" arguments='{...}'>        XML with attributes (the real Qwen2.5 1.5B)

A call of a tool nobody offered that only carries the answer (``{"name": "reply", "arguments":
{"text": "..."}}``: the real 1.5B answered so) is that answer, in words; a reply that is nothing
but a call of a tool nobody offered is the text it carries, or nothing (then asked again).

``find_calls`` returns the calls that name an offered tool and the prose left around them; ``HoldBack``
keeps a stream from showing a call while it arrives: text that may start a call is held until it is clear.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import prompts

from .honesty import Ran

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TextCall:
    name: str
    arguments: str  # JSON text, as a structured call carries it


# Template markup: never prose, so always hidden; what it carries runs only when it names an offered tool.
_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_FUNCTION = re.compile(r"<function=([\w.-]+)>(.*?)(?:</function>|\Z)", re.DOTALL)
_TAGS = ("<|python_tag|>", "[TOOL_CALLS]")  # Llama 3.1, Mistral: the calls' JSON follows the tag
_TOOLS = re.compile(r"<tools>(.*?)(?:</tools>|\Z)", re.DOTALL)
_NAMED = re.compile(r"""<function\s+name=["']([\w.-]+)["']\s+arguments=(?:'([^']*)'|"([^"]*)")""")
# the tools a model calls to say its answer: none is offered; the text they carry is the reply
REPLY_TOOLS = frozenset({"reply", "answer", "respond", "response", "say", "final_answer", "send"})
_REPLY_KEYS = ("text", "content", "message", "answer", "reply", "response")
_SPECIAL = re.compile(r"<\|(?:eom_id|eot_id|im_end)\|>|</?tool_call>")
# A fenced block: shown unless all it holds is calls to offered tools.
_FENCE = re.compile(r"```[\w-]*[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
# Where bare JSON may begin: an object, or a list of objects, whose first key is quoted.
_JSON_START = re.compile(r"[\[{](?:\s*[\[{])*\s*\"")
_VALUE = re.compile(r"[\[{]")
# The opening of a bare call that names its tool: what a call cut short by max_tokens still shows
# (a 0.5B ran a memory_store's arguments on for 1,000 tokens, echoing its system prompt, and the cut
# JSON reached the person)
# (a 1.5B stopped after '{{{"name": "conversation_search': its name cut too, at the text's end)
_CUT_CALL = re.compile(
    r'[\[{](?:\s*[\[{])*\s*"(?:name|function)"\s*:\s*(?:\{\s*"name"\s*:\s*)?"([\w.-]+)("|\Z)'
)

# An empty JSON value beside a call ("{}" then the call: the real 1.5B wrote it so, and the person
# saw "{}I saved it."): the husk of a call, never prose, at the start or the end of a line. Inside a
# sentence ("use {} for an empty dict") it stays.
# A line that opens with a stray closing brace ("}I saved it.": a 0.5B closed its call once too
# often) is the husk's too.
_EMPTY = r"(?:\{\s*\}|\[\s*\])"
_HUSK = re.compile(rf"(?m)^[ \t]*{_EMPTY}(?=\s|$)|(?<=\s){_EMPTY}[ \t]*$|^[ \t]*[}}\]]+[ \t]*")
_HUSK_RUN = re.compile(rf"{_EMPTY}[\s,;]*")

MARKERS = ("<tool_call>", "<|python_tag|>", "[TOOL_CALLS]", "<function=", "<tools>")
CALL_KEYS = ("name", "type", "function", "tool_calls")


def find_calls(
    text: str, names: Collection[str], *, whole: bool = True
) -> tuple[list[TextCall], str]:
    """The calls to offered tools written in ``text``, and the prose left when every call is taken
    out; ``whole``: ``text`` is a whole reply, not the end of one already partly shown."""
    calls: list[TextCall] = []

    def markup(body: str, name: str = "") -> str:
        calls.extend(c for c in _calls_in(body, name) if c.name in names)
        return ""

    def only_calls(body: str) -> str | None:
        if not body.strip():
            return ""  # a fence around markup taken out above, or around nothing
        found = list(_calls_in(body))
        if found and _is_only_json(body) and (said := _said_by(found)) is not None:
            return said
        if found and all(c.name in names for c in found) and _is_only_json(body):
            calls.extend(found)
            return ""
        return None

    def attributed(body: str) -> str:
        for m in _NAMED.finditer(body):
            if m.group(1) in names:
                calls.append(TextCall(m.group(1), _arguments(m.group(2) or m.group(3) or "")))
        return ""

    text = _undoubled(text or "")
    out = _TOOLS.sub(lambda m: attributed(m.group(1)), text)
    out = _BLOCK.sub(lambda m: markup(m.group(1)), out)
    out = _FUNCTION.sub(lambda m: markup(m.group(2), m.group(1)), out)
    for tag in _TAGS:
        out = _after_tag(out, tag, names, calls)
    out = _FENCE.sub(lambda m: _or(only_calls(m.group(1)), m.group(0)), out)
    out = _SPECIAL.sub("", _bare(out, names, calls))
    if calls:
        out = _HUSK.sub("", out)
    if (lone := _lone_call(out)) is not None:
        return calls, lone
    # a reply with nothing cut out keeps its layout
    return calls, without_debris(_tidy(out) if out != text else out.strip(), whole=whole)


def without_debris(text: str, *, whole: bool = True) -> str:
    """A reply less the start of a call the model gave up on: "{{{" or '{"' alone is no reply
    (nothing: asked again), and "{Hey there!" is "Hey there!" (the real 1.5B, in German and
    English modelcheck runs)."""
    if whole and (_JSON_REPLY.match(text) or _JSON_TAIL.match(text)):
        # a JSON object, or the end of one, is no reply to a person: the real 0.5B answered every
        # turn after a reminder_set with that tool's result, '{"status": "set", "id": 1, ...}',
        # and another run's first turn with ', "tags": ["user-stated", "concern"]}'
        return ""
    # a line in the form tool results are shown to the model in ("memory_store({...}) returned:
    # Error: ..."), said back as the reply: the real 0.5B, 15 turns of a modelcheck run
    text = _RETURNED.sub("", text).strip()
    opened = text.count("{") + text.count("[")
    closed = text.count("}") + text.count("]")
    if not re.search(r"[^\W_]", text) and opened > closed:
        return ""  # brackets opened and never closed, and not a word ("{}" is one's answer)
    lead = _DEBRIS.match(text)
    return text[lead.end() :] if lead and not closed else text


def _after_tag(text: str, tag: str, names: Collection[str], calls: list[TextCall]) -> str:
    """The tag and the JSON values right after it cut out (to the end when they are cut short)."""
    while (start := text.find(tag)) >= 0:
        decoder, at = json.JSONDecoder(), start + len(tag)
        while (at := _skip(text, at)) < len(text) and text[at] in "[{":
            try:
                value, at = decoder.raw_decode(text, at)
            except ValueError:
                at = len(text)  # cut short: nothing of it is prose
                break
            calls.extend(c for c in _shaped(value) if c.name in names)
        text = text[:start] + text[at:]
    return text


def _skip(text: str, at: int) -> int:
    while at < len(text) and (text[at].isspace() or text[at] in ",;"):
        at += 1
    return at


def _or(value: str | None, default: str) -> str:
    return default if value is None else value


_DOUBLED = re.compile(r'\{\{\s*"(?:name|type|function)"')


def _undoubled(text: str) -> str:
    """A call written with its template's braces doubled (``{{"name": ...}}}}``: the real Qwen2.5 1.5B wrote
    every reply so) read with single ones. Only text that holds such a call is touched."""
    return text.replace("{{", "{").replace("}}", "}") if _DOUBLED.search(text) else text


def _bare(text: str, names: Collection[str], calls: list[TextCall]) -> str:
    """Bare JSON calls to offered tools cut out of the text; any other JSON stays as written."""
    out, at = [], 0
    decoder = json.JSONDecoder()
    for match in _JSON_START.finditer(text):
        if match.start() < at:
            continue
        try:
            value, end = decoder.raw_decode(text, match.start())
        except ValueError:
            named = _CUT_CALL.match(text, match.start())
            if named and _names_one(named, names):  # a call cut short: nothing of it is prose
                out.append(text[at : match.start()])
                at = len(text)
                break
            continue
        found = list(_shaped(value))
        if (said := _said_by(found)) is not None:
            out.append(text[at : match.start()] + said)
            at = end
        elif found and all(c.name in names for c in found):
            calls.extend(found)
            out.append(text[at : match.start()])
            at = end
    out.append(text[at:])
    return "".join(out)


_WHOLE_FENCE = re.compile(r"^```[\w-]*\s*(.*?)\s*```$", re.DOTALL)


def _lone_call(text: str) -> str | None:
    """A reply that is nothing but a call of a tool nobody offered (bare or fenced): the text it
    carries, or "" (the real 1.5B answered a German chat 17 times with '```json {"name":
    "message", "arguments": {"sender": "Jonas", "text": <his own line>}}```'). None: not such a
    reply."""
    body = text.strip()
    fenced = _WHOLE_FENCE.match(body)
    body = fenced.group(1) if fenced else body
    if not body.startswith(("{", "[")):
        return None
    try:
        found = _shaped(json.loads(body))
    except ValueError:
        return None
    if not found:
        return None
    return _said_by(found, any_tool=True) or ""


def _said_by(found: list[TextCall], *, any_tool: bool = False) -> str | None:
    """The answer a lone call of a reply tool carries (``REPLY_TOOLS``); None for any other call."""
    if len(found) != 1 or not (any_tool or found[0].name.lower() in REPLY_TOOLS):
        return None
    try:
        arguments = json.loads(found[0].arguments)
    except ValueError:
        return None
    said = [arguments.get(k) for k in _REPLY_KEYS] if isinstance(arguments, dict) else []
    return next((s.strip() for s in said if isinstance(s, str) and s.strip()), None)


def _names_one(named: re.Match[str], names: Collection[str]) -> bool:
    """The cut call names an offered tool (its name whole, or cut short at the text's end)."""
    name, closed = named.group(1), named.group(2)
    return name in names if closed else any(n.startswith(name) for n in names)


def _calls_in(body: str, name: str = "") -> Iterator[TextCall]:
    """Every call-shaped JSON value in ``body`` (several may follow each other, separated by ; or commas)."""
    decoder = json.JSONDecoder()
    at = 0
    while True:
        match = _VALUE.search(body, at)
        if match is None:
            return
        try:
            value, at = decoder.raw_decode(body, match.start())
        except ValueError:
            return  # cut short (max_tokens) or not JSON: nothing more to run
        if name and isinstance(value, dict):  # <function=name>{arguments}
            yield TextCall(name, json.dumps(value, ensure_ascii=False))
            continue
        yield from _shaped(value)


def _shaped(value: Any) -> list[TextCall]:
    """The calls a decoded JSON value is shaped as (an object or a list of them, in any known wording); [] when
    any part of it is not a call."""
    calls = [_one(item) for item in (value if isinstance(value, list) else [value])]
    return [c for c in calls if c is not None] if calls and None not in calls else []


def _one(item: Any) -> TextCall | None:
    if not isinstance(item, dict):
        return None
    if isinstance(
        item.get("function"), dict
    ):  # {"type": "function", "function": {"name", "arguments"}}
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        return None
    keys = ("arguments", "parameters")
    if not any(key in item for key in keys) and item.get("type") != "function":
        return None  # {"name": "Alice"} is data, not a call
    raw = next((item[key] for key in keys if key in item), None)
    return TextCall(name.strip(), _arguments(raw))


def _arguments(raw: Any) -> str:
    if raw is None:
        return "{}"
    if isinstance(raw, str):
        try:  # arguments sent as a JSON string: the object inside
            inner = json.loads(raw)
        except ValueError:
            return raw  # the tool answers with an error the model can act on
        return json.dumps(inner, ensure_ascii=False) if isinstance(inner, dict) else raw
    return json.dumps(raw, ensure_ascii=False)


def _is_only_json(body: str) -> bool:
    """A fence holding nothing but JSON values (and comment lines): prose in it makes it someone's example."""
    # a model's comment line is not prose
    rest = re.sub(r"(?m)^\s*(?://|#).*$", "", _strip_json(body))
    return not re.sub(r"[\s;,]", "", rest)


def _strip_json(body: str) -> str:
    decoder, out, at = json.JSONDecoder(), [], 0
    for match in re.finditer(r"[\[{]", body):
        if match.start() < at:
            continue
        try:
            _, end = decoder.raw_decode(body, match.start())
        except ValueError:
            continue
        out.append(body[at : match.start()])
        at = end
    out.append(body[at:])
    return "".join(out)


def _tidy(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", text).strip()


_JSON_REPLY = re.compile(r'\s*\[?\s*\{\s*"[^"\n]{1,40}"\s*:')  # a reply that opens as a JSON object
_JSON_TAIL = re.compile(r'\s*,?\s*"[^"\n]{1,40}"\s*:.*[}\]]\s*$', re.DOTALL)
_RETURNED = re.compile(r"(?m)^[^\n]*\b\w+\s*\([^\n]*\)\s*returned:[^\n]*$")
_DEBRIS = re.compile(r"\s*[\[{]+\s*(?=[^\W\d_])")  # brackets opened before a word


# -- streaming ---------------------------------------------------------------------------------------------
# JSON or markup: held to the end (HTML in a fence waits too)
_FENCE_OPEN = re.compile(r"```[\w-]*\s*[\[{<]")
_FENCE_MAYBE = re.compile(r"`{1,3}|```[\w-]*\s*")
_KEY_MAYBE = re.compile(r"\[?\s*\{?\s*(?:\"([a-z_]*)(\"?)\s*)?")
_KEY_OPEN = re.compile(r"\[?\s*\{\s*\"([a-z_]+)\"\s*:")


def _opens(tail: str) -> str:
    """Whether ``tail`` starts a tool call ("yes"), may still turn out to ("maybe"), or does not ("no")."""
    husk = _HUSK_RUN.match(tail)
    if husk:  # "{}" waits for what follows it: a call ("{}" goes with it) or prose (shown)
        rest = tail[husk.end() :]
        return _opens(rest) if rest else "maybe"
    for marker in MARKERS:
        if tail.startswith(marker):
            return "yes"
        if marker.startswith(tail):
            return "maybe"
    if tail.startswith("`"):
        if _FENCE_OPEN.match(tail):
            return "yes"
        return "maybe" if _FENCE_MAYBE.fullmatch(tail) else "no"
    if tail[:1] in "{[":
        opened = _KEY_OPEN.match(tail)
        if opened:
            return "yes" if opened.group(1) in CALL_KEYS else "no"
        partial = _KEY_MAYBE.fullmatch(tail)
        key = (partial.group(1) or "") if partial else None
        if (
            key is not None
            and partial
            and (
                key in CALL_KEYS if partial.group(2) else any(k.startswith(key) for k in CALL_KEYS)
            )
        ):
            return "maybe"
    return "no"


def hold_from(text: str) -> tuple[int, bool]:
    """Where held-back text begins in ``text`` (len(text): nothing to hold), and whether a call surely began."""
    for match in re.finditer(r"[<\[{`]", text):
        verdict = _opens(text[match.start() :])
        if verdict != "no":
            return match.start(), verdict == "yes"
    return len(text), False


class HoldBack:
    """A stream sink that never shows a tool call written as text (ORCH-9).

    Text passes through at once, except from a point that may begin a call (``{``, a code fence,
    ``<tool_call>``...): that part waits until the next characters show it is ordinary text (a brace
    followed by anything but a call's first key), or, once a call has surely begun, until the stream
    ends, when ``end`` shows whatever of it is prose.
    """

    def __init__(self, sink: Callable[[str], Awaitable[None]]) -> None:
        self.sink = sink
        self.pending = ""
        self.holding = False  # a call began: everything from there waits for the end
        self.shown = False

    async def __call__(self, text: str) -> None:
        self.pending += text
        if self.holding:
            return
        if not self.shown and self.pending.lstrip()[:1] == "{":
            # a reply that opens with a brace is shown at its end, as ``find_calls`` reads it whole:
            # a call, a tool's result said back, or the brace of a call given up on
            self.holding = True
            return
        cut, self.holding = hold_from(self.pending)
        out, self.pending = self.pending[:cut], self.pending[cut:]
        await self._show(out)

    async def end(self, names: Collection[str]) -> None:
        """The stream ended: what was held is shown, less the calls in it."""
        held, self.pending = self.pending, ""
        if held:
            _, prose = find_calls(held, names, whole=not self.shown)
            await self._show(prose if prose != held.strip() else held)

    async def _show(self, text: str) -> None:
        if not self.shown and (lead := _DEBRIS.match(text)):
            text = text[lead.end() :]  # "{Hey there!": the brace of a call given up on
        if text:
            self.shown = True
            await self.sink(text)


# -- running them ------------------------------------------------------------------------------------------
class Tools(Protocol):
    async def call(self, name: str, arguments: str) -> str: ...


async def run_written(
    said: str, written: list[TextCall], tools: Tools, ran: list[Ran]
) -> list[dict[str, Any]]:
    """Calls written as text, run like structured ones; the messages that carry on the conversation. The
    results go back in a user message: a server without a tool-aware template (llama.cpp without --jinja)
    may drop or refuse role "tool" and ids the model never sent; every server takes a user message."""
    log.info(
        "the model wrote %d tool call(s) as text (%s); run as tool calls",
        len(written),
        ", ".join(c.name for c in written),
    )
    results = []
    for call in written:
        ran.append(Ran(call.name, call.arguments, await tools.call(call.name, call.arguments)))
        results.append(f"{call.name}({call.arguments}) returned: {ran[-1].result}")
    answer = prompts.render("tool_results", results="\n".join(results))
    return [{"role": "assistant", "content": said}, {"role": "user", "content": answer}]


def not_run_yet(written: list[TextCall], ran: list[Ran]) -> bool:
    """Whether any of these written calls was not already run this turn (same tool, same arguments)."""
    done = {(r.name, r.arguments) for r in ran}
    return any((c.name, c.arguments) not in done for c in written)
