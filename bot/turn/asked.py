"""What a person asks in words that the bot does itself, whatever the model does: a forget ("forget
my race bib number", SEC-3) before the model answers, and a reminder ("remind me tomorrow at 9am to
call the vet", ORCH-13) after it, when the model called no tool for it (issue 45)."""

from __future__ import annotations

import prompts
from memory import asked_reminder, forgets_in

from ..assembly import Turn
from ..commands import CommandDesk
from ..images.vision import without_notes
from ..reminders.commands import SET
from ..types import StreamSink
from .tools import AsyncTools

# A forget asked in words is a recall and a scan of the person's messages each: a message of a thousand
# "forget x." is not a thousand of them; what a person names fits in a few hundred characters.
MAX_ASKS, MAX_ASK_CHARS = 3, 300


class AskedInWords:
    """The commands a turn's words ask for, run as the command would run them."""

    def __init__(self, commands: CommandDesk) -> None:
        self.commands = commands

    async def forget(self, turn: Turn, tools: AsyncTools) -> tuple[str, bool]:
        """A forget asked in words is done before the model answers, as /forget would (SEC-3): real
        small models rarely call memory_delete for it (a 1.5B never did in 8 runs) and say "done"
        anyway. Only a plain ask (``memory.write.forget_asked``: "forget my bib number", "forget that
        I live in Leeds"), or "forget the half marathon." when they said "half marathon"; "don't keep
        my birthday a secret" is none, "forget the cheese, let's have pasta" and "forget that" are the
        model's to read, "forget everything" asks first (the command's question). Returns the note
        the model is told (without the forgotten words) and whether anything was forgotten (a
        message that is nothing but the ask is then answered without the model: a real 1.5B, told
        it was done, answered "I'm sorry, but I can't forget things ...")."""
        read = [
            a
            for a in forgets_in([turn.person_id], [without_notes(turn.text)])
            if a.what and (a.plain or a.whole)  # "don't keep my birthday a secret": none (issue 44)
        ][:MAX_ASKS]
        asks = [a.what[:MAX_ASK_CHARS] for a in read if a.plain or await self._said(turn, a.what)]
        if not asks:
            return "", False
        skip = (turn.stored_id or "",)
        done = [await self.commands.forget_words(what, turn, skip=skip) for what in asks]
        tools.tools.deleted.extend(word for d in done for word in d.contents)
        forgot = any(d.anything for d in done)
        return prompts.render("forget_done" if forgot else "forget_not_found"), forgot

    async def remind(self, turn: Turn, tools: AsyncTools, stream: StreamSink | None) -> str | None:
        """ "remind me tomorrow at 9am to call the vet" with no reminder_set call (a 1.5B said "I've
        set a reminder" and set none): set as /remind would, and its answer told."""
        asked = asked_reminder(without_notes(turn.text))
        if asked is None or tools.tools.reminders_set:
            return None
        note = await self.commands.run("remind", " ".join(asked), turn.message)
        if not note.startswith(SET):
            return None  # a time it cannot read: the model's question stands, and no promise
        if stream is not None:
            await stream(f"\n\n({note})")
        return note

    async def _said(self, turn: Turn, words: str) -> bool:
        """ "Forget the half marathon" is an ask when the person said "half marathon" themselves."""
        return await self.commands.said_it(turn, words, skip=(turn.stored_id or "",))
