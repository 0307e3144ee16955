"""SEC-6 on the bot side: no reply is posted, spoken or streamed, and no tool call runs, before the leak check.

The check itself is ``memory.recall.leaks.LeakCheck`` (below the bot, on the memory thread); here is how it is
applied, in every place (a DM too: only its own person's memories are inside it). A tool call's arguments
(``tool_text``) are checked before it runs. ``LeakGate`` sits in a streamed reply's path (a voice channel
speaks as the model writes): it passes text a sentence at a time, each time after the whole of what would then have been said
is checked, and passes nothing more once something would leak. The orchestrator checks the finished reply,
asks the model once again (with a general instruction, never the words) and otherwise withholds it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable

from ..types import StreamSink

# What a shared place gets when even the second answer would reveal something it may not see.
WITHHELD = "Sorry, I can't share that here."
# What the model is told when a tool call's arguments carry words this place may not see (the words are not repeated).
TOOL_REFUSED = (
    "Error: these arguments hold words from a conversation this place may not see; leave them out."
)
_SENTENCE_END = re.compile(r"[.!?…]+[\"')\]]*\s+|\n+")

# True when the text would reveal what the place may not see (the orchestrator's check, on the memory thread)
WouldLeak = Callable[[str], Awaitable[bool]]


def tool_text(arguments: str) -> str:
    """The words of a tool call's arguments (JSON as the model sent it): every value, but not the keys, and not
    the ids a call names (a memory id is a reference the place was shown, never words of a conversation)."""
    try:
        parsed = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        # not JSON, or nested past the parser's depth: the tool will refuse it, but its words are
        # checked as they are
        return arguments
    return "\n".join(_strings(parsed))


def _strings(value: object) -> list[str]:
    """Every string and number in ``value``, in order, walked without recursion (any depth)."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed([v for k, v in item.items() if not str(k).endswith("id")]))
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, int | float) and not isinstance(item, bool):
            out.append(str(item))
    return out


class LeakGate:
    """A stream sink that passes whole sentences once ``check`` finds nothing in all that was passed plus them."""

    def __init__(self, sink: StreamSink, check: WouldLeak) -> None:
        self._sink, self._check = sink, check
        self.passed = ""  # what reached the sink
        self._held = ""
        self.tripped = False  # something would have leaked: nothing more passes

    async def __call__(self, delta: str) -> None:
        if self.tripped:
            return
        self._held += delta
        ends = [m.end() for m in _SENTENCE_END.finditer(self._held)]
        if ends:
            await self._release(ends[-1])

    async def finish(self, final: str | None, drafted: str | None) -> None:
        """The reply is settled as ``final``. Unchanged: the held rest goes out (it was checked with the whole
        reply). Replaced after part of the draft went out: the replacement follows it. Replaced before anything
        went out: nothing (the adapter sends or speaks the reply itself)."""
        if final is None or self.tripped and not self.passed:
            return
        if final == drafted and not self.tripped:
            rest, self._held = self._held, ""
            if rest:
                await self._sink(rest)
        elif self.passed:
            await self._sink("\n" + final)

    async def _release(self, end: int) -> None:
        part = self._held[:end]
        if await self._check(self.passed + part):
            self.tripped = True
            return
        self._held = self._held[end:]
        self.passed += part
        await self._sink(part)
