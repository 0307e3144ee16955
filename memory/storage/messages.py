"""Conversation history: every user turn and bot reply, text or voice, stored and searchable (RET-7, VOICE-5)."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, tzinfo
from typing import Any

import numpy as np

from ..clock import Clock
from ..errors import EmbeddingError, InvalidInput
from ..models import StoredMessage, bounded
from ..safety import normalise_text, redact_secrets, valid_unicode
from ..scopes import RecallContext, message_partition, partition_token, placeholders
from .corpus import Filter, MessageCorpus
from .embeddings import EmbeddingService, content_hash
from .knobs import KnobStore
from .ranking import ALL_CHANNELS, Channel, Hit, MessageRanker

log = logging.getLogger(__name__)
CONTEXT_CHARS = 600
CONTEXT_TURNS = 2
# SEC-5: what the jobs that learn from history (micro-reflection, compaction, daily reflection) may read. /privacy off
# keeps the past (until /forget everything) but nothing new may be made of it: a summary or a fact from words stored
# before the opt-out would be learning them after all. So these jobs skip every turn of a person who said /privacy
# off, the bot's replies to those turns, both sides of their DM, and everything said in a server or group whose
# admins said /privacy server off. ('remember' is ``people.REMEMBER_KEY``; the tables are people's and privacy's.)
LEARNABLE = Filter(
    "NOT EXISTS (SELECT 1 FROM person_settings AS s WHERE s.key = 'remember' AND s.value = 'off' AND s.person_id IN "
    "(t.author_id, CASE WHEN t.guild_id IS NULL THEN substr(t.partition_key, 4) END, "
    "(SELECT a.author_id FROM messages AS a WHERE a.rid = t.answers_rid))) "
    "AND NOT EXISTS (SELECT 1 FROM privacy_places AS p WHERE p.guild_id = t.guild_id)"
)


def _context(lines: list[str]) -> str:
    return "\n".join(lines)[-CONTEXT_CHARS:]


def _speaker_line(row: dict[str, Any]) -> str:
    return f"{row['author_name']}: {row['content']}" if row.get("author_name") else row["content"]


def clean_text(text: str) -> str:
    """A message as it is stored and shown to the model: normalised, secrets redacted, at most
    ``MAX_MESSAGE_CHARS`` (a 1 MB paste is not sent whole to the model or to extraction). '' if nothing is left."""
    return redact_secrets(bounded(normalise_text(text)))


@dataclass(frozen=True, slots=True)
class NewMessage:
    platform: str
    channel_id: str
    author_id: str
    content: str
    guild_id: str | None = None
    author_name: str = ""
    role: str = "user"
    modality: str = "text"
    platform_message_id: str | None = None
    dm_person_id: str | None = (
        None  # for a DM: whose DM it is (the human side), decides its partition
    )
    created_at: float | None = None
    answers_id: str | None = None  # a bot reply: the stored id of the user turn it answers
    id: str | None = None  # given on import (keeps an export's ids); new messages get a fresh one


class MessageLog:
    def __init__(
        self,
        corpus: MessageCorpus,
        embeddings: EmbeddingService,
        knobs: KnobStore,
        clock: Clock,
        retriever: MessageRanker,
    ) -> None:
        """``retriever``: recall's ranker over ``corpus`` (the engine builds it: storage imports
        nothing of recall)."""
        self.corpus = corpus
        self.db = corpus.db
        self.embeddings = embeddings
        self.knobs = knobs
        self.clock = clock
        self.retriever = retriever

    def add(self, message: NewMessage) -> str:
        return self.add_many([message])[0]

    def add_many(self, messages: list[NewMessage], *, embed: bool = True) -> list[str]:
        rows = [self._row(m) for m in messages]
        for row in rows:  # the hash of what is embedded, so forgetting can drop its cached vector
            row["content_hash"] = content_hash(self.corpus.search_text(row))
        last_rid = self._add_context(rows)
        vectors = self._vectors([self.corpus.search_text(r) for r in rows]) if embed else None
        ids, rids, vec_rows = [], [], []
        with self.db.transaction():
            for i, row in enumerate(rows):
                if known := self._delivered_id(row):
                    # a re-delivered message is stored once (idempotent on its platform id)
                    ids.append(known)
                    continue
                where = (row["platform"], row["channel_id"])
                row["prev_rid"] = last_rid[where]
                self.db.execute(
                    "INSERT INTO messages (id, platform, guild_id, channel_id, author_id, author_name, role, modality, content, context, "
                    "prev_rid, platform_message_id, partition_key, ptoken, content_hash, created_at, answers_rid) VALUES "
                    "(:id, :platform, :guild_id, :channel_id, :author_id, :author_name, :role, :modality, :content, :context, "
                    ":prev_rid, :platform_message_id, :partition_key, :ptoken, :content_hash, :created_at, "
                    "(SELECT rid FROM messages WHERE id = :answers_id))",
                    row,
                )
                ids.append(row["id"])
                rid = last_rid[where] = int(self.db.con.last_insert_rowid())
                rids.append(rid)
                if vectors is not None:
                    vec_rows.append((rid, row["partition_key"], vectors[i]))
            self.corpus.vectors.write_many(vec_rows)
            self.corpus.index_text(rids)
        self.corpus.vectors.mirror_add(vec_rows)
        return ids

    def _add_context(self, rows: list[dict[str, Any]]) -> dict[tuple[str, str], int | None]:
        """Each turn is indexed with the turns just before it in its channel, so an answer is found by its question.

        Returns, per channel, the rid of the last stored turn before this batch (the first new turn's predecessor).
        """
        recent: dict[tuple[str, str], list[str]] = {}
        before: dict[tuple[str, str], int | None] = {}
        for row in rows:
            where = (row["platform"], row["channel_id"])
            if where not in recent:
                prev = self._turns_before(*where)
                recent[where] = [_speaker_line(p) for p in reversed(prev)]
                before[where] = prev[0]["rid"] if prev else None
            row["context"] = _context(recent[where])
            recent[where] = (recent[where] + [_speaker_line(row)])[-CONTEXT_TURNS:]
        return before

    def _row(self, m: NewMessage) -> dict[str, Any]:
        content = clean_text(m.content)
        if not content:
            raise InvalidInput("an empty message is not stored")
        if m.role not in ("user", "assistant"):
            raise InvalidInput(f"role must be 'user' or 'assistant', not {m.role!r}")
        if m.guild_id is None and not m.dm_person_id:
            raise InvalidInput("a DM message must say whose DM it is (dm_person_id)")
        key = message_partition(m.guild_id, m.dm_person_id or "")
        return {
            "id": m.id or str(uuid.uuid4()),
            "platform": m.platform,
            "guild_id": m.guild_id,
            "channel_id": str(m.channel_id),
            "author_id": str(m.author_id),
            "author_name": valid_unicode(m.author_name),
            "role": m.role,
            "modality": m.modality,
            "content": content,
            "platform_message_id": m.platform_message_id,
            "partition_key": key,
            "answers_id": m.answers_id,
            "ptoken": partition_token(key),
            "created_at": m.created_at if m.created_at is not None else self.clock.now(),
        }

    def _vectors(self, texts: list[str]) -> np.ndarray | None:
        if not self.embeddings.available:
            return None
        try:
            return self.embeddings.embed(texts)
        except EmbeddingError:  # the message itself is never lost to its vector (ORCH-6)
            log.exception("embedding messages failed; they stay searchable by BM25 until reembed")
            return None

    # -- reads -------------------------------------------------------------------------------------
    def search(
        self,
        ctx: RecallContext,
        query: str,
        *,
        top_k: int | None = None,
        channel_id: str | None = None,
        channels: frozenset[Channel] = ALL_CHANNELS,
        query_vector: np.ndarray | None = None,
    ) -> list[Hit[StoredMessage]]:
        readable = (channel_id,) if channel_id else ctx.channels()
        if channel_id and channel_id not in ctx.channels():
            return []
        # In a server, only the channels the asker can read; a DM's partition is the person's own DMs.
        where = (
            Filter(f"t.channel_id IN ({placeholders(readable)})", readable)
            if not ctx.is_dm or channel_id
            else Filter()
        )
        return self.search_partitions(
            ctx.message_partitions(),
            query,
            top_k=top_k,
            where=where,
            channels=channels,
            query_vector=query_vector,
            asker=ctx.speaker_id,
            zone=ctx.tz,
        )

    def search_partitions(
        self,
        partitions: tuple[str, ...],
        query: str,
        *,
        top_k: int | None = None,
        where: Filter = Filter(),
        channels: frozenset[Channel] = ALL_CHANNELS,
        query_vector: np.ndarray | None = None,
        asker: str | None = None,
        zone: tzinfo = UTC,
    ) -> list[Hit[StoredMessage]]:
        return self.retriever.search(
            query,
            partitions,
            self.knobs.get("messages"),
            where=where,
            top_k=top_k,
            channels=channels,
            query_vector=query_vector,
            asker=asker,
            zone=zone,
        )

    def recent(
        self, ctx: RecallContext, channel_id: str, limit: int = 20, *, learnable: bool = False
    ) -> list[StoredMessage]:
        """The last messages of a channel the context may see, oldest first (channel_recall, history window);
        with ``learnable``, only those a job may learn from (``LEARNABLE``: micro-reflection)."""
        if str(channel_id) not in ctx.channels():
            return []
        where = Filter("t.channel_id = ?", (str(channel_id),)) & (
            LEARNABLE if learnable else Filter()
        )
        rows = self.corpus.ordered(
            ctx.message_partitions(), where, (("created_at", True), ("rid", True)), limit
        )
        return [StoredMessage.from_row(r) for r in reversed(rows)]

    def in_channel_after(self, platform: str, channel_id: str, after: float) -> list[StoredMessage]:
        """A channel's turns stored after ``after`` that may be learned from (``LEARNABLE``), oldest first: what
        compaction summarises and daily reflection reads."""
        rows = self.db.rows(
            "SELECT * FROM messages AS t WHERE t.platform = ? AND t.channel_id = ? AND t.created_at > ? "
            f"AND {LEARNABLE.sql} ORDER BY t.created_at, t.rid",
            (platform, channel_id, after, *LEARNABLE.params),
        )
        return [StoredMessage.from_row(r) for r in rows]

    def count_in_channel_after(self, platform: str, channel_id: str, after: float) -> int:
        """How many of ``in_channel_after``'s turns there are (compaction's pressure, daily reflection's due days)."""
        sql = f"SELECT COUNT(*) FROM messages AS t WHERE t.platform = ? AND t.channel_id = ? AND t.created_at > ? AND {LEARNABLE.sql}"
        return int(self.db.scalar(sql, (platform, channel_id, after, *LEARNABLE.params)))

    def move_person(self, source: str, target: str) -> None:
        """Linking: ``source``'s DM history and authorship become ``target``'s."""
        self.corpus.move_partition(message_partition(None, source), message_partition(None, target))
        self.db.execute("UPDATE messages SET author_id = ? WHERE author_id = ?", (target, source))

    def count(self) -> int:
        return int(self.db.scalar("SELECT COUNT(*) FROM messages"))

    def guild_counts(self) -> dict[str, int]:
        """Stored messages per guild (the operator's view)."""
        return {
            g: int(n)
            for g, n in self.db.execute(
                "SELECT guild_id, COUNT(*) FROM messages WHERE guild_id IS NOT NULL GROUP BY 1"
            )
        }

    def group_chats(self) -> list[tuple[str, str]]:
        """(channel key, guild id) of every server channel and group that has messages (the dashboard's manners)."""
        rows = self.db.execute(
            "SELECT DISTINCT platform || ':' || channel_id, guild_id FROM messages WHERE guild_id IS NOT NULL ORDER BY 1"
        )
        return [(str(key), str(guild)) for key, guild in rows]

    # -- retention (SEC-7) -------------------------------------------------------------------------
    def chats_before(self, cutoff: float) -> list[tuple[str, str]]:
        """(platform, channel) of every chat with a message older than ``cutoff``."""
        rows = self.db.execute(
            "SELECT DISTINCT platform, channel_id FROM messages WHERE created_at < ?", (cutoff,)
        )
        return [(p, c) for p, c in rows]

    def older_than(
        self, platform: str, channel_id: str, cutoff: float, after: tuple[float, int], limit: int
    ) -> list[dict[str, Any]]:
        """A chat's messages older than ``cutoff``, oldest first, from just after ``after`` (created_at, rid): their
        rid, id, created_at and answers_rid (no words)."""
        return self.db.rows(
            "SELECT rid, id, created_at, answers_rid FROM messages WHERE platform = ? AND channel_id = ? AND created_at < ? "
            "AND (created_at > ? OR (created_at = ? AND rid > ?)) ORDER BY created_at, rid LIMIT ?",
            (platform, channel_id, cutoff, after[0], after[0], after[1], limit),
        )

    # -- finding rows to forget --------------------------------------------------------------------
    def rids_by_id(self, ids: list[str]) -> list[int]:
        return self._rids("id IN ({})", ids)

    def rids_by_platform_id(
        self, platform: str, channel_id: str, platform_ids: list[str]
    ) -> list[int]:
        """Platform ids are unique only within a chat (Telegram numbers each chat from 1)."""
        return self._rids(
            "platform = ? AND channel_id = ? AND platform_message_id IN ({})",
            platform_ids,
            (platform, channel_id),
        )

    def delivered(
        self, platform: str, channel_id: str, platform_message_id: str
    ) -> tuple[str, bool] | None:
        """A message already stored under this platform id (a re-delivery): its stored id, and whether the bot's
        reply to it is stored too. None for a message never seen."""
        row = self.db.one(
            "SELECT id, EXISTS (SELECT 1 FROM messages AS r WHERE r.answers_rid = m.rid) AS answered FROM messages AS m "
            "WHERE platform = ? AND channel_id = ? AND platform_message_id = ? AND legacy_copy = 0",
            (platform, str(channel_id), platform_message_id),
        )
        return (row["id"], bool(row["answered"])) if row else None

    def _delivered_id(self, row: dict[str, Any]) -> str | None:
        if row["platform_message_id"] is None:
            return None
        found = self.delivered(row["platform"], row["channel_id"], row["platform_message_id"])
        return found[0] if found else None

    def own(
        self, ctx: RecallContext, people: list[str], limit: int, rids: list[int] | None = None
    ) -> list[tuple[int, str, str, str]]:
        """(rid, id, content, "platform:channel") of these people's newest turns that ``ctx`` may read (its message
        partitions and channels), or of those among ``rids``: what a forget searches (``memory.upkeep.said``)."""
        channels, parts = ctx.channels(), ctx.message_partitions()
        if not people or rids == []:
            return []
        cond, values = (
            (f" AND rid IN ({placeholders(rids)})", rids) if rids is not None else ("", [])
        )
        rows = self.db.execute(
            "SELECT rid, id, content, platform || ':' || channel_id FROM messages WHERE role = 'user' "
            f"AND author_id IN ({placeholders(people)}) AND partition_key IN ({placeholders(parts)}) AND platform = ? "
            f"AND channel_id IN ({placeholders(channels)}){cond} ORDER BY created_at DESC, rid DESC LIMIT ?",
            (*people, *parts, ctx.platform, *channels, *values, limit),
        )
        return [(int(rid), str(mid), str(content), str(chat)) for rid, mid, content, chat in rows]

    def replies_to(self, rids: list[int]) -> list[int]:
        """The bot's replies to these turns."""
        return self._rids("answers_rid IN ({})", rids)

    def answered_author(self, reply_rid: int) -> str | None:
        """The author of the turn a reply of the bot answered (ORCH-12: whose reaction on it is theirs)."""
        row = self.db.execute(
            "SELECT q.author_id FROM messages AS r JOIN messages AS q ON q.rid = r.answers_rid WHERE r.rid = ? AND r.role = 'assistant'",
            (reply_rid,),
        ).fetchone()
        return str(row[0]) if row else None

    def chats_of(self, author_ids: list[str], dm_partitions: list[str]) -> list[str]:
        """ "platform:channel" keys of the chats where these people spoke, and their DMs."""
        rows = self.db.execute(
            f"SELECT DISTINCT platform || ':' || channel_id FROM messages WHERE author_id IN ({placeholders(author_ids)}) "
            f"OR partition_key IN ({placeholders(dm_partitions)})",
            (*author_ids, *dm_partitions),
        )
        return [r for (r,) in rows]

    def speakers_in(self, guild_id: str) -> list[tuple[str, str]]:
        """(person id, name shown) of everyone who said something still stored in this guild, each name they
        used there: a participant's old names count as theirs (SEC-5 ties a name to nobody when two share it)."""
        sql = "SELECT DISTINCT author_id, author_name FROM messages WHERE partition_key = ? AND role = 'user'"
        return [(a, n) for a, n in self.db.execute(sql, (message_partition(guild_id, ""),))]

    def _rids(self, condition: str, values: list, before: tuple = ()) -> list[int]:
        found: list[int] = []
        for i in range(0, len(values), 400):
            chunk = values[i : i + 400]
            sql = f"SELECT rid FROM messages WHERE {condition.format(placeholders(chunk))}"
            found += [r for (r,) in self.db.execute(sql, (*before, *chunk))]
        return found

    def get_rids(self, rids: list[int]) -> list[StoredMessage]:
        if not rids:
            return []  # "IN ()" is SQLite's; PostgreSQL refuses it
        return [
            StoredMessage.from_row(r)
            for r in self.db.rows(
                f"SELECT * FROM messages WHERE rid IN ({placeholders(rids)}) ORDER BY rid", rids
            )
        ]

    def replace_content(self, rid: int, text: str) -> StoredMessage:
        """A message edited at its source: the stored text becomes the new one, re-indexed (FTS by trigger, its
        vector re-embedded) and re-quoted as context by the turns after it; the old text's cached vector goes."""
        old = self.db.one("SELECT * FROM messages WHERE rid = ?", (rid,))
        if old is None:
            raise InvalidInput(f"no stored message with rid {rid}")
        content = clean_text(text)
        if not content:
            raise InvalidInput("an empty message is not stored")
        row = {**old, "content": content}
        row["content_hash"] = content_hash(self.corpus.search_text(row))
        vectors = self._vectors([self.corpus.search_text(row)])
        with self.db.transaction():
            self.db.execute(
                "UPDATE messages SET content = ?, content_hash = ? WHERE rid = ?",
                (content, row["content_hash"], rid),
            )
            self.corpus.vectors.delete([rid])
            if vectors is not None:
                self.corpus.vectors.write(rid, old["partition_key"], vectors[0])
            self._rebuild_context(old["platform"], old["channel_id"], old["created_at"])
            if old["content_hash"] != row["content_hash"]:
                self.embeddings.forget_hash(old["content_hash"])
        self.corpus.vectors.mirror_remove([rid])
        if vectors is not None:
            self.corpus.vectors.mirror_add([(rid, old["partition_key"], vectors[0])])
        return StoredMessage.from_row(row)

    def delete_rids(self, rids: list[int]) -> int:
        """Delete messages with vectors, FTS rows, cached vectors and pending extractions; later turns lose
        them as context too."""
        if not rids:
            return 0
        hashes = [
            h
            for i in range(0, len(rids), 400)
            for (h,) in self.db.execute(
                f"SELECT content_hash FROM messages WHERE rid IN ({placeholders(rids[i : i + 400])})",
                rids[i : i + 400],
            )
        ]
        spots = self.db.rows(
            f"SELECT DISTINCT platform, channel_id, MIN(created_at) AS since, MAX(created_at) AS until FROM messages "
            f"WHERE rid IN ({placeholders(rids)}) GROUP BY platform, channel_id",
            rids,
        )
        with self.db.transaction():
            self.corpus.vectors.delete(rids)
            for i in range(0, len(rids), 400):
                chunk = rids[i : i + 400]
                self.db.execute(
                    f"DELETE FROM extraction_buffer WHERE message_rid IN ({placeholders(chunk)})",
                    chunk,
                )
                self.db.execute(f"DELETE FROM messages WHERE rid IN ({placeholders(chunk)})", chunk)
            for spot in spots:
                self._rebuild_context(
                    spot["platform"], spot["channel_id"], spot["since"], spot["until"]
                )
            self.embeddings.forget_hashes(set(hashes))
        self.corpus.vectors.mirror_remove(rids)
        return len(rids)

    def _rebuild_context(
        self, platform: str, channel_id: str, since: float, until: float | None = None
    ) -> None:
        """Recompute the context of turns from ``since`` on, so no deleted words stay indexed in a neighbour. With
        ``until`` (the newest deleted turn's time), only the ``CONTEXT_TURNS`` turns after it can have quoted a
        deleted one: the rest are left as they are (retention deletes a channel's oldest turns; its newer ones
        are many)."""
        later = self.db.rows(
            "SELECT rid, created_at, context, prev_rid FROM messages WHERE platform = ? AND channel_id = ? AND created_at >= ? "
            "ORDER BY created_at, rid",
            (platform, channel_id, since),
        )
        after = 0
        for row in later:
            if until is not None and row["created_at"] > until:
                after += 1
                if after > CONTEXT_TURNS:
                    break
            prev = self._turns_before(platform, channel_id, (row["created_at"], row["rid"]))
            context, prev_rid = (
                _context([_speaker_line(p) for p in reversed(prev)]),
                prev[0]["rid"] if prev else None,
            )
            if (context, prev_rid) == (row["context"], row["prev_rid"]):
                continue  # unchanged: rewriting it would only re-index it (retention deletes a channel's oldest turns)
            self.db.execute(
                "UPDATE messages SET context = ?, prev_rid = ? WHERE rid = ?",
                (context, prev_rid, row["rid"]),
            )

    def _turns_before(
        self, platform: str, channel_id: str, at: tuple[float, int] | None = None
    ) -> list[dict[str, Any]]:
        """The CONTEXT_TURNS turns of a channel just before ``at`` (created_at, rid), or its latest; newest first."""
        cond, params = (
            ("", ())
            if at is None
            else (" AND (created_at < ? OR (created_at = ? AND rid < ?))", (at[0], *at))
        )
        return self.db.rows(
            f"SELECT rid, author_name, content FROM messages WHERE platform = ? AND channel_id = ?{cond} "
            "ORDER BY created_at DESC, rid DESC LIMIT ?",
            (platform, channel_id, *params, CONTEXT_TURNS),
        )
