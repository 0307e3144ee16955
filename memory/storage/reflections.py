"""The reflections audit: one row per model-calling run (consolidation, micro- and daily reflection),
what it read and what it stored; the one owner of ``reflections``.

    start(kind, hint, excerpt, channel_key, people)   a run's row opened ("running"); its id
    finish(audit_id, stored, facts, error)            the row closed: ``failed`` when it erred and
                                                      stored nothing, else ``done``
    reap_stale(older_than_s)                          rows a killed run left "running", closed
    newest(limit)                                     the newest rows (the operator's view)
    blank_excerpts(before)                            SEC-7: the excerpts of rows older than the
                                                      retention window dropped
    forget_chats(channel_keys)                        the rows of these chats gone (a forget there)

A row quotes its chat (the excerpt, the facts found), so it records the chat and the people it read:
forgetting finds it (``memory.upkeep.registry``), and a forget in a chat removes the chat's rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..clock import Clock
from ..safety import redact_secrets
from ..scopes import placeholders
from .db import Database

# No run holds its row this long (a chat-day is one model call: at most llm_timeout_s x 3 tries,
# minutes), so a row still "running" past it belongs to a process that was killed mid-run.
STALE_AUDIT_S = 3600.0


class ReflectionAudits:
    def __init__(self, db: Database, clock: Clock) -> None:
        self.db, self.clock = db, clock

    def start(
        self,
        kind: str,
        hint: str,
        excerpt: str = "",
        *,
        channel_key: str | None = None,
        people: tuple[str, ...] = (),
    ) -> int:
        """Open a row for a run (consolidation, micro-reflection, the day's reflection)."""
        self.db.execute(
            "INSERT INTO reflections (kind, scope_hint, started_at, input_excerpt, channel_key, "
            "people) VALUES (?, ?, ?, ?, ?, ?)",
            (
                kind,
                hint,
                self.clock.now(),
                redact_secrets(excerpt),
                channel_key,
                json.dumps(sorted(set(people))),
            ),
        )
        return int(self.db.con.last_insert_rowid())

    def finish(
        self,
        audit_id: int,
        *,
        stored: Sequence[str] = (),
        facts: Sequence[Any] = (),
        error: str | None = None,
    ) -> None:
        """Close a row: ``failed`` when it erred and stored nothing, else ``done``."""
        self.db.execute(
            "UPDATE reflections SET finished_at = ?, status = ?, stored_ids = ?, facts = ?, "
            "error = ? WHERE id = ?",
            (
                self.clock.now(),
                "failed" if error and not stored else "done",
                json.dumps(list(stored)),
                redact_secrets(json.dumps(list(facts), ensure_ascii=False)),
                error,
                audit_id,
            ),
        )

    def reap_stale(self, older_than_s: float = STALE_AUDIT_S) -> int:
        """Close the rows a killed run left "running": marked failed and their transcript excerpt
        dropped (it quotes the chat, and nothing will ever finish the row). The day they read was
        never marked done, so the next daily run reflects it again. Returns how many were closed."""
        now = self.clock.now()
        self.db.execute(
            "UPDATE reflections SET status = 'failed', finished_at = ?, input_excerpt = '', "
            "error = ? WHERE status = 'running' AND started_at < ?",
            (now, "interrupted: the run stopped before it finished", now - older_than_s),
        )
        return int(self.db.con.changes())

    def newest(self, limit: int) -> list[dict[str, Any]]:
        """The newest rows (the operator's view)."""
        return self.db.rows(
            "SELECT * FROM reflections ORDER BY started_at DESC, id DESC LIMIT ?", (limit,)
        )

    def blank_excerpts(self, before: float) -> None:
        """SEC-7: rows started before ``before`` quote only turns older than it, which retention
        deletes: their excerpts go (the facts found, which are memories' words, stay)."""
        self.db.execute(
            "UPDATE reflections SET input_excerpt = '' WHERE started_at < ? AND input_excerpt != ''",
            (before,),
        )

    def forget_chats(self, channel_keys: list[str]) -> None:
        """Rows of these chats quote them (excerpt, facts): they go when something said there is
        forgotten."""
        self.db.execute(
            f"DELETE FROM reflections WHERE channel_key IN ({placeholders(channel_keys)})",
            channel_keys,
        )
