"""Conversation history: every user turn and bot reply, text or voice, stored and searchable (RET-7, VOICE-5)."""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from .clock import Clock
from .corpus import Filter, MessageCorpus
from .embeddings import EmbeddingService, content_hash
from .errors import InvalidInput
from .knobs import KnobStore
from .retrieval import ALL_CHANNELS, Channel, Hit, Retriever
from .safety import normalise_text
from .scopes import RecallContext, message_partition, partition_token, placeholders

log = logging.getLogger(__name__)
MAX_MESSAGE_CHARS = 20_000
CONTEXT_CHARS = 600
CONTEXT_TURNS = 2


def _context(lines: list[str]) -> str:
    return "\n".join(lines)[-CONTEXT_CHARS:]


def _speaker_line(row: dict[str, Any]) -> str:
    return f"{row['author_name']}: {row['content']}" if row.get("author_name") else row["content"]


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
    dm_person_id: str | None = None  # for a DM: whose DM it is (the human side), decides its partition
    created_at: float | None = None


class MessageLog:
    def __init__(self, corpus: MessageCorpus, embeddings: EmbeddingService, knobs: KnobStore, clock: Clock) -> None:
        self.corpus = corpus
        self.db = corpus.db
        self.embeddings = embeddings
        self.knobs = knobs
        self.clock = clock
        self.retriever = Retriever(corpus, embeddings, clock)

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
                where = (row["platform"], row["channel_id"])
                row["prev_rid"] = last_rid[where]
                self.db.execute(
                    "INSERT INTO messages (id, platform, guild_id, channel_id, author_id, author_name, role, modality, content, context, "
                    "prev_rid, platform_message_id, partition_key, ptoken, content_hash, created_at) VALUES "
                    "(:id, :platform, :guild_id, :channel_id, :author_id, :author_name, :role, :modality, :content, :context, "
                    ":prev_rid, "
                    ":platform_message_id, :partition_key, :ptoken, :content_hash, :created_at)",
                    row,
                )
                ids.append(row["id"])
                last_rid[where] = int(self.db.con.last_insert_rowid())
                rids.append(last_rid[where])
                if vectors is not None:
                    vec_rows.append((last_rid[where], row["partition_key"], vectors[i]))
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
        content = normalise_text(m.content)[:MAX_MESSAGE_CHARS]
        if not content:
            raise InvalidInput("an empty message is not stored")
        if m.role not in ("user", "assistant"):
            raise InvalidInput(f"role must be 'user' or 'assistant', not {m.role!r}")
        if m.guild_id is None and not m.dm_person_id:
            raise InvalidInput("a DM message must say whose DM it is (dm_person_id)")
        key = message_partition(m.guild_id, m.dm_person_id or "")
        return {
            "id": str(uuid.uuid4()), "platform": m.platform, "guild_id": m.guild_id, "channel_id": str(m.channel_id),
            "author_id": str(m.author_id), "author_name": m.author_name, "role": m.role, "modality": m.modality,
            "content": content, "platform_message_id": m.platform_message_id, "partition_key": key,
            "ptoken": partition_token(key),
            "created_at": m.created_at if m.created_at is not None else self.clock.now(),
        }

    def _vectors(self, texts: list[str]) -> np.ndarray | None:
        if not self.embeddings.available:
            return None
        try:
            return self.embeddings.embed(texts)
        except Exception:
            log.exception("embedding messages failed; they stay searchable by BM25 until reembed")
            return None

    # -- reads -------------------------------------------------------------------------------------
    def search(self, ctx: RecallContext, query: str, *, top_k: int | None = None, channel_id: str | None = None,
               channels: frozenset[Channel] = ALL_CHANNELS, query_vector: np.ndarray | None = None) -> list[Hit]:
        where = Filter("t.channel_id = ?", (channel_id,)) if channel_id else Filter()
        return self.search_partitions(ctx.message_partitions(), query, top_k=top_k, where=where, channels=channels, query_vector=query_vector)

    def search_partitions(self, partitions: tuple[str, ...], query: str, *, top_k: int | None = None, where: Filter = Filter(),
                          channels: frozenset[Channel] = ALL_CHANNELS, query_vector: np.ndarray | None = None) -> list[Hit]:
        return self.retriever.search(query, partitions, self.knobs.get("messages"), where=where, top_k=top_k,
                                     channels=channels, query_vector=query_vector)

    def recent(self, ctx: RecallContext, channel_id: str, limit: int = 20) -> list[dict[str, Any]]:
        """The last messages of a channel the context may see, oldest first (channel_recall, history window)."""
        rows = self.corpus.ordered(ctx.message_partitions(), Filter("t.channel_id = ?", (str(channel_id),)),
                                  (("created_at", True), ("rid", True)), limit)
        return list(reversed(rows))

    def in_channel_after(self, platform: str, channel_id: str, after: float) -> list[dict[str, Any]]:
        """A channel's turns stored after ``after``, oldest first."""
        return self.db.rows("SELECT * FROM messages WHERE platform = ? AND channel_id = ? AND created_at > ? ORDER BY created_at, rid",
                            (platform, channel_id, after))

    def count_in_channel_after(self, platform: str, channel_id: str, after: float) -> int:
        return int(self.db.scalar("SELECT COUNT(*) FROM messages WHERE platform = ? AND channel_id = ? AND created_at > ?",
                                  (platform, channel_id, after)))

    def delete_by_author(self, author_ids: list[str]) -> int:
        """Every message a person wrote, with vectors and FTS rows (SEC-3)."""
        if not author_ids:
            return 0
        rows = self.db.rows(f"SELECT rid, content_hash FROM messages WHERE author_id IN ({placeholders(author_ids)})", author_ids)
        return self.delete_rids([r["rid"] for r in rows], [r["content_hash"] for r in rows])

    def delete_rids(self, rids: list[int], hashes: list[str]) -> int:
        """Delete messages with vectors, FTS rows and cached vectors; later turns lose them as context too."""
        if not rids:
            return 0
        spots = self.db.rows(
            f"SELECT DISTINCT platform, channel_id, MIN(created_at) AS since FROM messages WHERE rid IN ({placeholders(rids)}) "
            "GROUP BY platform, channel_id", rids)
        with self.db.transaction():
            self.corpus.vectors.delete(rids)
            for i in range(0, len(rids), 400):
                chunk = rids[i : i + 400]
                self.db.execute(f"DELETE FROM messages WHERE rid IN ({placeholders(chunk)})", chunk)
            for spot in spots:
                self._rebuild_context(spot["platform"], spot["channel_id"], spot["since"])
            for h in set(hashes):
                self.embeddings.forget_hash(h)
        self.corpus.vectors.mirror_remove(rids)
        return len(rids)

    def _rebuild_context(self, platform: str, channel_id: str, since: float) -> None:
        """Recompute the context of turns from ``since`` on, so no deleted words stay indexed in a neighbour."""
        later = self.db.rows(
            "SELECT rid, created_at FROM messages WHERE platform = ? AND channel_id = ? AND created_at >= ? "
            "ORDER BY created_at, rid", (platform, channel_id, since))
        for row in later:
            prev = self._turns_before(platform, channel_id, (row["created_at"], row["rid"]))
            self.db.execute("UPDATE messages SET context = ?, prev_rid = ? WHERE rid = ?",
                            (_context([_speaker_line(p) for p in reversed(prev)]), prev[0]["rid"] if prev else None, row["rid"]))

    def _turns_before(self, platform: str, channel_id: str, at: tuple[float, int] | None = None) -> list[dict[str, Any]]:
        """The CONTEXT_TURNS turns of a channel just before ``at`` (created_at, rid), or its latest; newest first."""
        cond, params = ("", ()) if at is None else (" AND (created_at < ? OR (created_at = ? AND rid < ?))", (at[0], *at))
        return self.db.rows(f"SELECT rid, author_name, content FROM messages WHERE platform = ? AND channel_id = ?{cond} "
                            "ORDER BY created_at DESC, rid DESC LIMIT ?", (platform, channel_id, *params, CONTEXT_TURNS))
