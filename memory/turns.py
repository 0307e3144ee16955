"""One conversational turn's books, kept by the store around a reply (ORCH-1, ORCH-3, ORCH-6, SEC-5):

    arrive    write-ahead: the message is stored and buffered (held) before any model is asked, so a crash
              or a failing model never loses it; a re-delivery is recognised, not stored twice; after
              /privacy off (the speaker's or the place's) nothing is kept
    finish    the reply joins the history and the held message becomes due for extraction; a turn that
              forgot something keeps none of its own words (deleted, then the files scrubbed)
    observe   a message seen and not answered: arrive and finish at once
    known / edited / deleted   a message changed or removed at the source (``memory.write.sources``)
    used / posted   the memories a reply used, and the platform messages it went out as, so a
              reaction on one finds them (ORCH-12)

Each method is one call on the memory thread (the runner), so a turn's check-and-store cannot interleave
with another's: two deliveries of one Telegram update store it once.
"""

from __future__ import annotations

from dataclasses import replace

from .engine import MemoryEngine
from .models import Arrival, Withdrawn
from .recall.leaks import Leak
from .scopes import RecallContext, Said
from .storage.db import AsyncRunner
from .storage.messages import NewMessage
from .storage.privacy import Privacy
from .storage.sessions import ChannelState, ExtractionBuffer
from .write.sources import Edit, message_deleted, message_edited


class Turns:
    """The turn's store work for the bot's event loop: every method awaits the memory thread."""

    def __init__(
        self,
        engine: MemoryEngine,
        runner: AsyncRunner,
        buffer: ExtractionBuffer,
        privacy: Privacy,
        channels: ChannelState,
    ) -> None:
        self.engine, self.runner, self.buffer, self.privacy, self.channels = (
            engine,
            runner,
            buffer,
            privacy,
            channels,
        )

    async def arrive(self, said: Said) -> Arrival:
        """Store and hold ``said`` before the model is asked anything (ORCH-6)."""
        return await self.runner.run(self._arrive, said)

    async def finish(
        self, said: Said, arrival: Arrival, reply: str | None, *, replier: str, forgot: bool = False
    ) -> None:
        """The turn is done: ``reply`` (None: no reply to keep) is stored as ``replier``'s; ``forgot``: the turn
        forgot something, and its own words go too (ORCH-3)."""
        await self.runner.run(self._finish, said, arrival, reply, replier, forgot)

    async def observe(self, said: Said) -> Arrival:
        """A message the bot saw and does not answer (group chatter): stored and released for extraction."""
        return await self.runner.run(self._observe, said)

    async def known(self, platform: str, channel_id: str, platform_message_id: str | None) -> bool:
        """Was this platform message stored? (An edit of one never stored has nothing to follow.)"""
        ids = [platform_message_id] if platform_message_id else []
        return bool(
            await self.runner.run(
                self.engine.messages.rids_by_platform_id, platform, channel_id, ids
            )
        )

    async def edited(self, said: Said) -> Withdrawn | None:
        """A message edited at the source, ``said`` as it reads now with its author's context (the new text is
        extracted as theirs); None when it was never stored."""
        return await self.runner.run(self._edited, said)

    async def leaks(
        self, ctx: RecallContext, text: str, seen: str = "", said: str = ""
    ) -> tuple[Leak, ...]:
        """SEC-6: the memories and recent messages outside ``ctx``'s view that ``text`` would
        reveal (``seen``: what the place has seen from no one in particular, the names; ``said``:
        the asker's words of this turn)."""
        return await self.runner.run(self.engine.leaks.check, ctx, text, seen, said)

    async def deleted(
        self, platform: str, channel_id: str, platform_message_ids: tuple[str, ...]
    ) -> Withdrawn:
        """Messages deleted at the source (one, or a bulk delete); unknown ids are ignored."""
        return await self.runner.run(
            message_deleted,
            self.engine,
            self.buffer,
            platform,
            channel_id,
            list(platform_message_ids),
        )

    async def used(self, stored_id: str, memory_ids: list[str]) -> None:
        """The reply to the stored message ``stored_id`` was made with these memories."""
        await self.runner.run(self.engine.feedback.record_used, stored_id, memory_ids)

    async def posted(
        self, platform: str, channel_id: str, message_id: str, post_ids: tuple[str, ...]
    ) -> None:
        """The reply to the platform message ``message_id`` went out as ``post_ids``."""
        await self.runner.run(
            self.engine.feedback.record_posts, platform, channel_id, message_id, list(post_ids)
        )

    # -- on the memory thread ----------------------------------------------------------------------------
    def _arrive(self, said: Said) -> Arrival:
        if not said.text:
            return Arrival()  # nothing readable (a lone zero-width space): nothing to keep
        if not self.privacy.remembers(said.ctx):
            # SEC-5: answered from this message alone, nothing stored
            return Arrival(remembered=False)
        ctx, mid = said.ctx, said.platform_message_id
        known = self.engine.messages.delivered(ctx.platform, ctx.channel_id, mid) if mid else None
        if known is not None:
            # Re-delivered after a crash (Telegram re-sends unconfirmed updates): already stored and buffered for
            # extraction, so neither again; answered only if no reply to it was stored.
            return Arrival(stored_id=known[0], answered=known[1])
        stored = self.engine.messages.add(_message(said))
        held = self.buffer.push(
            said.channel_key,
            ctx,
            said.text,
            author_name=said.author_name,
            message_id=stored,
            held=True,
        )
        self.channels.touch(said.channel_key, ctx)
        return Arrival(stored_id=stored, buffer_id=held)

    def _finish(
        self, said: Said, arrival: Arrival, reply: str | None, replier: str, forgot: bool
    ) -> None:
        self.engine.recall.flush_access()
        if forgot:
            self.engine.messages.delete_rids(
                self.engine.messages.rids_by_id([arrival.stored_id or ""])
            )
            self.engine.scrub()
            return
        if not arrival.remembered:
            return  # SEC-5: the bot's reply to someone not remembered is not kept either: it may repeat their words
        self.buffer.release(arrival.buffer_id or 0)
        if reply:
            self.engine.messages.add(_reply(said, reply, replier, arrival.stored_id))

    def _observe(self, said: Said) -> Arrival:
        arrival = self._arrive(said)
        if arrival.buffer_id is not None:  # stored now (not empty, not a re-delivery, remembered)
            self._finish(said, arrival, None, "", False)
        return arrival

    def _edited(self, said: Said) -> Withdrawn | None:
        ctx, mid = said.ctx, said.platform_message_id
        if not mid:
            return None  # no platform id: nothing stored can be this message
        if not self.privacy.remembers(ctx):
            # SEC-5: the new words may not be kept, and the old ones are no longer what was said: withdrawn as a delete.
            return message_deleted(self.engine, self.buffer, ctx.platform, ctx.channel_id, [mid])
        edit = Edit(
            ctx.platform, ctx.channel_id, mid, said.text, ctx, said.channel_key, said.author_name
        )
        return message_edited(self.engine, self.buffer, edit)


def _message(said: Said) -> NewMessage:
    """The person's message, in its place (a DM's partition is its person's)."""
    ctx = said.ctx
    return NewMessage(
        platform=ctx.platform,
        channel_id=ctx.channel_id,
        guild_id=ctx.guild_id,
        dm_person_id=ctx.speaker_id if ctx.is_dm else None,
        author_id=ctx.speaker_id,
        author_name=said.author_name,
        content=said.text,
        modality=said.modality,
        platform_message_id=said.platform_message_id,
    )


def _reply(said: Said, text: str, replier: str, answers_id: str | None) -> NewMessage:
    """The bot's reply to ``said``, in the same place."""
    return replace(
        _message(said),
        author_id="bot",
        author_name=replier,
        content=text,
        role="assistant",
        platform_message_id=None,
        answers_id=answers_id,
    )
