"""A "forget that" also finds what is not a memory yet (SEC-3, issue 31 item 8).

"Forget my race bib number", said before extraction has run, finds no memory; the message with the number is
still in history (replayed to the model as recent turns, searchable, in the store's files) and in the
extraction buffer. So a forget also searches the person's OWN messages, in the places the asking context may
read (``RecallContext.message_partitions`` and ``channels``: the same rule as what the prompt may show), for
every word of what they asked to forget (less the asking: "forget", "please", "my", ...), and removes what
holds them all with the cascade of any forgotten message (``MessageLog.delete_rids``: the row, its FTS entry
and vector, its buffered and parked copies, the context quoted by later turns; the bot's replies to it; the
chat's summaries and reflection audits), then scrubs the file. Someone else's message is never touched: a
person forgets what they said, not what others said.

    said_matching  the rids of such messages (``memory_search`` offers them to the model as ``said:<id>``)
    forget_said    remove them, with the cascade; returns how many of the person's messages went
    forget_echoes  the bot's replies to the person that repeat it ("what was in the photo I sent?" answered a week
                   later with the photo's caption): removed as well, or the reply would keep what was forgotten
"""

from __future__ import annotations

from collections.abc import Iterable

from ..engine import MemoryEngine
from ..scopes import RecallContext
from ..write.sources import forget_chat_summaries
from ..write.wording import content_words

SCAN = 5_000  # the person's newest messages read in the place (a forget is rare; history of one person is small)
# The words of asking, not of what is to be forgotten (stems, as ``memory.write.wording`` makes them)
ASKING = content_words(
    "forget forgot forgets delete remove erase please that this what about said told mention"
)
SAID_PREFIX = "said:"


def asked_words(query: str) -> frozenset[str]:
    """The words of what is to be forgotten: "Forget my race bib number" -> {"race", "bib", "number"}."""
    return content_words(query) - ASKING


def said_matching(
    engine: MemoryEngine,
    ctx: RecallContext,
    person_ids: Iterable[str],
    query: str,
    *,
    skip: Iterable[str] = (),
) -> list[int]:
    """The rids of the person's own messages the context may read that hold every word of ``query`` (none when
    it has no word of its own); ``skip``: stored ids to leave (the asking turn, which its caller removes)."""
    words, left = asked_words(query), set(skip)
    if not words:
        return []
    own = _own(engine, ctx, person_ids)
    return sorted(
        rid for rid, mid, content, _ in own if mid not in left and words <= content_words(content)
    )


def forget_said(
    engine: MemoryEngine, ctx: RecallContext, person_ids: Iterable[str], rids: list[int]
) -> int:
    """Remove these messages of the person (and the bot's replies to them) with the whole cascade; the buffer's
    copies go with their rows. Rids that are not the person's own, or that the context may not read, are left."""
    if not rids:
        return 0
    own = _own(engine, ctx, person_ids, rids)
    mine = [rid for rid, *_ in own]
    if not mine:
        return 0
    engine.messages.delete_rids(sorted({*mine, *engine.messages.replies_to(mine)}))
    engine.buffer.drop_messages(mine)  # parked copies (dead letters) too
    forget_chat_summaries(engine, {chat for *_, chat in own})
    engine.db.scrub()
    return len(mine)


def forget_echoes(
    engine: MemoryEngine, ctx: RecallContext, person_ids: Iterable[str], query: str
) -> int:
    """Remove the bot's replies to the person's own messages (that the context may read) holding every word of
    ``query``; the person's questions stay (they did not say it). Returns how many replies went."""
    words = asked_words(query)
    if not words:
        return 0
    own = _own(engine, ctx, person_ids)
    replies = engine.messages.get_rids(engine.messages.replies_to([rid for rid, *_ in own]))
    echoes = [m for m in replies if words <= content_words(m.content)]
    if echoes:
        engine.messages.delete_rids([m.rid for m in echoes])
        forget_chat_summaries(engine, {f"{m.platform}:{m.channel_id}" for m in echoes})
        engine.db.scrub()
    return len(echoes)


def _own(
    engine: MemoryEngine,
    ctx: RecallContext,
    person_ids: Iterable[str],
    rids: list[int] | None = None,
) -> list[tuple[int, str, str, str]]:
    """(rid, id, content, "platform:channel") of the person's newest messages the context may read."""
    return engine.messages.own(ctx, sorted(set(person_ids)), SCAN, rids)
