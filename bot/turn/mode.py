"""How the bot should answer one turn: spoken or written, and whether it may stay silent (VOICE-1).

    DM, or spoken to (a mention, a reply to the bot, its name, a voice follow-up)  ->  it answers
    group talk with other people present, not spoken to                           ->  it may answer [SKIP]
    voice                                                                          ->  short spoken sentences

A ``[SKIP]`` answer is a turn like any other (the user's words are stored and extracted), but no reply is
stored, sent or spoken. ``SkipGate`` holds a streamed reply back until it is clear it does not start with
``[SKIP]``, so a voice never says the token and a console never prints it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import prompts
from voice.sentences import SKIP_TOKEN

from ..assembly import Turn
from ..types import StreamSink


@dataclass(frozen=True, slots=True)
class TurnMode:
    voice: bool = False
    may_skip: bool = False
    name: str = ""  # the persona's name (ORCH-7): the one that would have addressed the bot

    @classmethod
    def of(cls, turn: Turn, bot_name: str, *, follow_up: bool = False) -> TurnMode:
        message = turn.message
        spoken_to = message.addressed or follow_up or names(turn.text, bot_name)
        # Alone with the bot, every turn is for it; with others present it may only be chatter between them.
        may_skip = bool(message.participants) and not message.is_dm and not spoken_to
        return cls(voice=message.modality == "voice", may_skip=may_skip, name=bot_name)

    @property
    def style(self) -> str | None:
        """The manner of speaking for the system prompt; None keeps the default."""
        parts = [prompts.render("voice")] if self.voice else []
        if self.may_skip:
            parts += [] if self.voice else ["In a group, address people by name."]
            parts.append(prompts.render("skip", bot_name=self.name or "the bot"))
        return " ".join(p.strip() for p in parts) if parts else None


def names(text: str, bot_name: str) -> bool:
    """The bot's name said as a word ("hey Companion," yes; "companionship" no)."""
    return (
        bool(bot_name)
        and re.search(rf"(?<!\w){re.escape(bot_name)}(?!\w)", text, re.IGNORECASE) is not None
    )


def is_skip(reply: str) -> bool:
    """The model chose silence. Also honoured when it was not offered: the token must never reach a person."""
    return reply.lstrip().startswith(SKIP_TOKEN)


class SkipGate:
    """A stream sink that passes nothing until the reply is known not to be ``[SKIP]``, then everything."""

    def __init__(self, sink: StreamSink) -> None:
        self._sink = sink
        self._held = ""
        self._state = "undecided"  # -> "pass" | "skip"

    async def __call__(self, delta: str) -> None:
        if self._state == "pass":
            await self._sink(delta)
            return
        if self._state == "skip":
            return
        self._held += delta
        head = self._held.lstrip()
        if head.startswith(SKIP_TOKEN):
            self._state = "skip"
        elif not SKIP_TOKEN.startswith(head):
            self._state = "pass"
            await self._sink(self._held)
