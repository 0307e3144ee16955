"""Edits and deletes at the source: when a person edits or deletes a message, what was learned from it follows.

    message_deleted   the stored message goes (row, vector, FTS entry, cached vector, buffered and parked
                      copies) with the bot's reply to it; every memory whose only source it was is
                      withdrawn with its history; a memory with other sources left lives on without it
    message_edited    the stored text becomes the new text (re-indexed, re-quoted as context); memories
                      whose only source it was are withdrawn (superseded by what the new text says, not
                      kept live) and the new text is buffered for extraction again, dated when
                      it was said, due ``EDIT_SETTLE_S`` after the edit: a message edited again
                      meanwhile replaces its buffered text and waits again, so ten edits of one
                      message 31 s apart cost one extraction, of the last words, not ten (issue 44
                      item 11). The old words are gone at once; only learning the new ones waits.

A memory learned from several messages keeps living while one of them remains: the others still say
it. Both end like any forget: the chat's summaries (which may paraphrase the old words) are dropped and
``Database.scrub`` checkpoints the WAL, so the old text's bytes are gone from the files.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..engine import MemoryEngine
from ..models import Memory, Withdrawn
from ..scopes import RecallContext
from ..storage.messages import clean_text
from ..storage.sessions import ExtractionBuffer

EDIT_SETTLE_S = (
    300.0  # an edit is extracted once its message has not been edited again for 5 minutes
)


@dataclass(frozen=True, slots=True)
class Edit:
    """A message as it reads after an edit, with the context of its author (for re-extraction)."""

    platform: str
    channel_id: str
    platform_message_id: str
    text: str
    ctx: RecallContext
    channel_key: str
    author_name: str = ""


def message_deleted(
    engine: MemoryEngine,
    buffer: ExtractionBuffer,
    platform: str,
    channel_id: str,
    platform_ids: list[str],
) -> Withdrawn:
    """Messages deleted at the source (one, or a bulk delete); unknown ids (never stored) are ignored."""
    rids = engine.messages.rids_by_platform_id(
        platform, str(channel_id), [str(i) for i in platform_ids]
    )
    if not rids:
        return Withdrawn()
    done = _withdraw(engine, [m.id for m in engine.messages.get_rids(rids)])
    doomed = sorted(set(rids) | set(engine.messages.replies_to(rids)))
    buffer.drop_messages(doomed)
    done = replace(done, messages=engine.messages.delete_rids(doomed))
    _scrub_chat(engine, platform, channel_id)
    return done


def message_edited(engine: MemoryEngine, buffer: ExtractionBuffer, edit: Edit) -> Withdrawn | None:
    """A message edited at the source; None when it was never stored. An edit that leaves nothing
    readable is a delete."""
    rids = engine.messages.rids_by_platform_id(
        edit.platform, str(edit.channel_id), [edit.platform_message_id]
    )
    if not rids:
        return None
    if not clean_text(edit.text):
        return message_deleted(
            engine, buffer, edit.platform, edit.channel_id, [edit.platform_message_id]
        )
    old = engine.messages.get_rids(rids[:1])[0]
    if old.content == clean_text(edit.text):
        # an embed or pin update re-sends the same text: nothing was learned differently
        return Withdrawn()
    buffer.drop_messages([old.rid])
    stored = engine.messages.replace_content(old.rid, edit.text)
    done = _withdraw(engine, [old.id])
    buffer.push(
        edit.channel_key,
        edit.ctx,
        stored.content,
        author_name=edit.author_name,
        message_id=old.id,
        said_at=old.created_at,
        wait_s=EDIT_SETTLE_S,
    )
    _scrub_chat(engine, edit.platform, edit.channel_id)
    return done


def _withdraw(engine: MemoryEngine, message_ids: list[str]) -> Withdrawn:
    """Memories learned only from these messages go, with their lineage; the others lose these sources."""
    gone = set(message_ids)
    kept: list[str] = []
    orphans: list[Memory] = []
    for memory in engine.memory_rows.learned_from(message_ids):
        left = tuple(s for s in memory.provenance.sources if s not in gone)
        if left:
            engine.memory_rows.set_provenance(memory.rid, replace(memory.provenance, sources=left))
            kept.append(memory.id)
        else:
            orphans.append(memory)
    withdrawn = (
        engine.memories.delete_rids(engine.memories.versions([m.rid for m in orphans]))
        if orphans
        else []
    )
    return Withdrawn(memories=tuple(withdrawn), kept=tuple(kept))


def forget_chat_summaries(engine: MemoryEngine, chats: set[str]) -> None:
    """Summaries and reflection audits paraphrase whole conversations, so those of a chat where a
    forgotten (or edited, or deleted) thing was said may repeat it: they go, and the chat's turns are
    compacted afresh (the turns stay). Every forget ends with it (``memory.upkeep.forgetting``)."""
    if not chats:
        return
    keys = sorted(chats)
    with engine.db.transaction():
        engine.summaries.forget_chats(keys)
        engine.channels.forget_summaries(keys)
        engine.reflections.forget_chats(keys)


def _scrub_chat(engine: MemoryEngine, platform: str, channel_id: str) -> None:
    """Summaries of the chat may paraphrase the old words: they go (as for a forget), then the WAL is checkpointed."""
    forget_chat_summaries(engine, {f"{platform}:{channel_id}"})
    engine.db.scrub()
