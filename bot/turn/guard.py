"""The model's answer, checked before anyone sees it (SEC-6): nothing of it is streamed, sent or
spoken before the leak check (a DM too: another person's DM is a shared place for what someone else
said, issue 31). The operator's own DM and console are the one place exempt: the operator holds the
store (the dashboard and the CLI show every memory), so a check there would protect nothing and cost
the console its word-by-word stream."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import prompts
from memory import Turns
from memory.models import bounded

from ..assembly import Turn
from ..model.client import ChatClient, LLMError
from ..types import NO_ANSWER, StreamSink
from .leak_guard import WITHHELD, LeakGate
from .mode import SkipGate
from .tools import AsyncTools

log = logging.getLogger("bot.orchestrator")  # the name operators filter the leak warnings by


class CheckedAnswer:
    """Asks the model (the tool loop) and withholds what the place may not see."""

    def __init__(self, llm: ChatClient, turns: Turns, bot_name: Callable[[], str]) -> None:
        """:param bot_name: the persona's current name (it may change at run time)."""
        self.llm, self.turns, self.bot_name = llm, turns, bot_name

    async def __call__(
        self,
        turn: Turn,
        convo: list[dict[str, Any]],
        tools: AsyncTools,
        stream: StreamSink | None,
        may_skip: bool,
    ) -> str | None:
        """The model's reply (``LLMError`` when the model failed)."""
        checked = not turn.ctx.owner_private
        if checked:
            tools.guard = lambda arguments: self.leaks(turn, arguments, "the tool call refused")
        gate = LeakGate(stream, lambda said: self.leaks(turn, said)) if stream and checked else None
        sink = gate or stream
        drafted = await self._ask(convo, tools, SkipGate(sink) if sink and may_skip else sink)
        text = await self._guarded(turn, convo, tools, drafted)
        if gate is not None:
            await gate.finish(text, drafted)
        return text

    async def _ask(
        self, convo: list[dict[str, Any]], tools: AsyncTools, stream: StreamSink | None
    ) -> str:
        """The LLM tool loop. An answer is cut to what history keeps (a 400,000-character answer
        went out as 98 Telegram messages; history kept 8,000)."""
        return bounded((await self.llm.run(convo, tools, stream)).text or NO_ANSWER)

    async def _guarded(
        self, turn: Turn, convo: list[dict[str, Any]], tools: AsyncTools, text: str | None
    ) -> str | None:
        """A reply that would reveal what the place may not see is asked for once more, with a
        general instruction (the words stay out of the prompt), and withheld if it still would. Only
        what the person of a DM may see passes there: their own memories, never another person's."""
        if (
            text is None
            or turn.ctx.owner_private
            or not await self.leaks(turn, text, "asking the model again")
        ):
            return text
        try:
            again = await self._ask(
                [*convo, {"role": "system", "content": prompts.render("leak_retry")}], tools, None
            )
        except LLMError:
            log.exception("no second answer for %s", turn.channel_key)
            return WITHHELD
        return WITHHELD if await self.leaks(turn, again, "withheld") else again

    async def leaks(self, turn: Turn, text: str, outcome: str = "") -> bool:
        """Would ``text`` reveal memories this place may not see? Logged with ids and kinds, never
        the words. The conversation shown is not "seen" as a whole: who said a word matters (a
        caption of Bob's holding Alice's DM fact is his guess or leak, not her word), which the
        check reads from the stored messages; only the names and the asker's words of this turn are
        passed."""
        seen = "\n".join([*turn.names.values(), self.bot_name()])
        leaks = await self.turns.leaks(turn.ctx, text, seen, turn.text)
        if leaks and outcome:
            found = ", ".join(f"{leak.memory_id} ({leak.kind})" for leak in leaks)
            log.warning(
                "a reply (or tool call) in %s would reveal what this place may not see: %s; %s",
                turn.channel_key,
                found,
                outcome,
            )
        return bool(leaks)
