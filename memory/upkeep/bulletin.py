"""Memory bulletins (MAINT-5): a ~500-word briefing per scope, written by the model from what that scope may see,
stored, and shown at the top of every prompt there (``bot.assembly``) until enough has changed.

    scope   scope_id   built from (the partitions a context of that scope reads, ``memory.scopes``)
    guild   G          the guild's lore and what each person said in G; never a DM's or the owner's memory,
                       nor what someone shared from another server
    dm      p          what a DM with p sees: p's private facts and p's own facts from every server
    owner   o          what the owner's own DM sees: the above for o, and the owner's private memory

A bulletin paraphrases people's words, so it is derived data (``memory.upkeep.registry``): triggers of migration m006
drop every bulletin built from a partition as soon as a memory of it is deleted or reworded, whichever path
does it (forget, a message deleted at its source, ``companion memory delete``, linking), and forgetting a person
deletes the bulletins that could hold their words. The refresh writes a new one later.

Refresh (``due``): a scope that was active lately gets its first bulletin once it has ``MIN_MEMORIES`` memories;
a bulletin is rewritten when ``min_changes`` of its memories are new or changed since it was written, or when it
is a day old and anything changed. Asking the model is the caller's business (the bot's job, or ``refresh`` with
a blocking ``Completer`` for the command line); this module builds the prompt and stores the answer.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

import prompts

from ..clock import DAY
from ..engine import MemoryEngine
from ..errors import InvalidInput
from ..models import Memory, Scope
from ..protocols import Completer
from ..safety import redact_secrets
from ..scopes import RecallContext
from ..storage.bulletins import Bulletin, scope_of
from ..storage.corpus import Filter

log = logging.getLogger(__name__)
SCOPES = ("guild", "dm", "owner")
MAX_WORDS = 500
MAX_CHARS = 4_000  # what is stored of an answer (500 words is ~3,300 characters)
# what the model reads: the most important, then the newest
SOURCE_MEMORIES, SOURCE_CHARS = (
    80,
    12_000,
)
MIN_MEMORIES = 3  # a bulletin of one or two facts says no more than the people section already does
MIN_CHANGES = 5
MAX_AGE_S = DAY
# scopes rewritten per refresh run: the model's time is bounded, the rest waits for the next run
BULLETINS_PER_RUN = 10
SYSTEM = "You write short factual briefings from memory records. Answer with the briefing only."


class EmptyBulletin(ValueError):
    """The model answered nothing usable."""


class StaleBulletin(ValueError):
    """What the bulletin was written from changed before it could be stored; it is written again next run."""


@dataclass(frozen=True, slots=True)
class BulletinScope:
    """A scope and the memory partitions its bulletin is built from (and that its forgetting follows)."""

    scope: str
    scope_id: str
    partitions: tuple[str, ...]

    @property
    def people(self) -> tuple[str, ...]:
        """Whose memories the bulletin may paraphrase (user and owner partitions name their person)."""
        return tuple(
            dict.fromkeys(
                k.split("|")[1]
                for k in self.partitions
                if k.split("|")[0] in (Scope.USER, Scope.OWNER)
            )
        )


@dataclass(frozen=True, slots=True)
class BulletinPlan:
    """A bulletin to write: its scope, the prompt for the model, and the memories it reads (rid, partition, words)."""

    where: BulletinScope
    prompt: str
    read: tuple[tuple[int, str, str], ...]

    @property
    def memory_count(self) -> int:
        return len(self.read)


class Bulletins:
    """Which scopes get a bulletin, from what, and when; stored by ``engine.bulletin_rows``."""

    def __init__(self, engine: MemoryEngine, *, min_changes: int = MIN_CHANGES) -> None:
        self.engine, self.db, self.min_changes = engine, engine.db, min_changes

    # -- which memories a scope sees --------------------------------------------------------------------
    def scope(
        self, scope: str, scope_id: str, known: tuple[str, ...] | None = None
    ) -> BulletinScope:
        """The partitions of a scope, by the same rules as a conversation of it (``RecallContext``). ``known``: the
        store's partitions, when the caller already read them (a guild's people are the ones with a partition there)."""
        if scope not in SCOPES or not scope_id:
            raise InvalidInput(
                f"a bulletin scope is one of {', '.join(SCOPES)} with an id, not {scope!r} {scope_id!r}"
            )
        if scope == "guild":
            suffix = f"|public|{scope_id}"
            known = self.engine.memory_rows.partitions() if known is None else known
            people = tuple(
                k.split("|")[1] for k in known if k.startswith("user|") and k.endswith(suffix)
            )
            ctx = RecallContext(
                "bulletin", "__bulletin__", "bulletin", guild_id=scope_id, participants=people
            )
            keys = tuple(
                k for k in ctx.memory_partitions() if not k.startswith("user|__bulletin__|")
            )
        else:
            owner = scope == "owner"
            reach = tuple(self.engine.memory_rows.partitions_of(scope_id))
            ctx = RecallContext(
                "bulletin",
                scope_id,
                "bulletin",
                is_dm=True,
                owner_private=owner,
                owner_id=scope_id if owner else None,
                reach=reach,
            )
            keys = ctx.memory_partitions()
        return BulletinScope(scope, scope_id, keys)

    def sources(self, where: BulletinScope) -> list[Memory]:
        """The memories the model reads: the most important first, then the newest, within ``SOURCE_CHARS``."""
        corpus = self.engine.memory_rows.corpus
        newest = corpus.newest(
            where.partitions, corpus.live(self.engine.clock.now()), SOURCE_MEMORIES // 2
        )
        listed = self._top(where.partitions, SOURCE_MEMORIES) + self.engine.memory_rows.by_rids(
            newest
        )
        tombstones = self.engine.memories.tombstones
        # SEC-5: a memory matching a forgotten fact (one that outlived it) is not briefed
        buried = tombstones.any()
        picked: dict[str, Memory] = {}
        used = 0
        for m in listed:
            if buried and tombstones.matching(m):
                continue
            if m.id not in picked and used + len(m.content) <= SOURCE_CHARS:
                picked[m.id] = m
                used += len(m.content) + 40
        return list(picked.values())

    def plan(self, where: BulletinScope) -> BulletinPlan | None:
        found = self.sources(where)
        if not found:
            return None
        lines = "\n".join(_line(m) for m in found)
        prompt = prompts.render(
            "bulletin", place=_place(where), memories=lines, max_words=MAX_WORDS
        )
        return BulletinPlan(
            where, prompt, tuple((m.rid, m.partition_key, m.content) for m in found)
        )

    # -- when to write one ------------------------------------------------------------------------------
    def _top(self, partitions: tuple[str, ...], limit: int) -> list[Memory]:
        """The ``limit`` most important memories across the partitions, reading ~``limit`` rows however many partitions
        there are (a big guild has one per person): each gives its best ``limit / partitions``, so every person counts."""
        per = max(1, -(-limit // max(1, len(partitions))))
        found = [
            m
            for key in partitions
            for m in self.engine.memory_rows.listing((key,), order="important", limit=per)
        ]
        return sorted(found, key=lambda m: (m.importance, m.updated_at), reverse=True)[:limit]

    def changes_since(self, where: BulletinScope, since: float, cap: int) -> int:
        """Live memories of the scope written after ``since``, counted up to ``cap``. New rows are the only changes to
        count: a reworded or deleted memory drops the bulletin at once (the m006 triggers), and an update or a merge
        is a new row. An indexed range per partition, no row read."""
        corpus = self.engine.memory_rows.corpus
        return len(
            corpus.newest(
                where.partitions,
                corpus.live(self.engine.clock.now()) & Filter("t.created_at > ?", (since,)),
                cap,
            )
        )

    def is_due(self, where: BulletinScope, now: float) -> bool:
        current = self.get(where.scope, where.scope_id)
        if current is None:
            return self.changes_since(where, 0.0, MIN_MEMORIES) >= MIN_MEMORIES
        changed = self.changes_since(where, current.built_at, self.min_changes)
        return changed >= self.min_changes or (changed > 0 and now - current.built_at >= MAX_AGE_S)

    def due(self, now: float, *, limit: int = BULLETINS_PER_RUN) -> list[BulletinPlan]:
        """Plans for the scopes that need a (new) bulletin (the command line; the bot asks scope by scope)."""
        plans: list[BulletinPlan] = []
        candidates = self.candidates(now)
        known = self.known(candidates)
        for scope, scope_id in candidates:
            if (plan := self.plan_if_due(scope, scope_id, now, known)) is not None:
                plans.append(plan)
            if len(plans) >= limit:
                break
        return plans

    def candidates(self, now: float) -> list[tuple[str, str]]:
        """Scopes that may need a bulletin: those of the chats active in the last day, and those whose bulletin aged."""
        active = [scope_of(state.ctx) for state in self.engine.channels.active(now - MAX_AGE_S)]
        aged = [(b.scope, b.scope_id) for b in self.stored() if now - b.built_at >= MAX_AGE_S]
        return [key for key in dict.fromkeys(active + aged) if key[1]]

    def known(self, candidates: list[tuple[str, str]]) -> tuple[str, ...]:
        """The store's partitions, read once per run when a guild is among the candidates (its people are found in them)."""
        return (
            self.engine.memory_rows.partitions()
            if any(scope == "guild" for scope, _ in candidates)
            else ()
        )

    def plan_if_due(
        self, scope: str, scope_id: str, now: float, known: tuple[str, ...] | None = None
    ) -> BulletinPlan | None:
        where = self.scope(scope, scope_id, known)
        return self.plan(where) if self.is_due(where, now) else None

    # -- the table ---------------------------------------------------------------------------------------
    def save(self, plan: BulletinPlan, answer: str) -> Bulletin:
        """Store the model's briefing for the plan's scope (secrets redacted, at most ``MAX_CHARS``), replacing the old one."""
        text = redact_secrets((answer or "").strip())[:MAX_CHARS].strip()
        if not text:
            raise EmptyBulletin("the model wrote an empty bulletin")
        where = plan.where
        now = self.engine.clock.now()
        bulletin = Bulletin(where.scope, where.scope_id, text, now, plan.memory_count)
        with self.db.transaction():
            if self._changed_meanwhile(plan):
                raise StaleBulletin(
                    "a memory it was written from was forgotten or changed while the model wrote it"
                )
            self.engine.bulletin_rows.replace(bulletin, where.people, where.partitions)
        return bulletin

    def _changed_meanwhile(self, plan: BulletinPlan) -> bool:
        """The model takes seconds: a memory forgotten (or reworded) meanwhile must not come back in its bulletin."""
        now = {
            (m.rid, m.partition_key, m.content)
            for m in self.engine.memory_rows.by_rids([rid for rid, _, _ in plan.read])
        }
        return now != set(plan.read)

    def get(self, scope: str, scope_id: str) -> Bulletin | None:
        return self.engine.bulletin_rows.get(scope, scope_id)

    def stored(self, scope: str | None = None, scope_id: str | None = None) -> list[Bulletin]:
        return self.engine.bulletin_rows.stored(scope, scope_id)


def refresh(bulletins: Bulletins, complete: Completer, plans: list[BulletinPlan]) -> list[Bulletin]:
    """Write the planned bulletins with a blocking model (the command line); one that fails is logged and skipped."""
    written = []
    for plan in plans:
        try:
            written.append(bulletins.save(plan, complete(SYSTEM, plan.prompt, temperature=0.2)))
        except (
            Exception
        ):  # a background-job edge: one scope's failure must not keep the others from being written
            log.exception(
                "could not write the bulletin of %s %s", plan.where.scope, plan.where.scope_id
            )
    return written


def _line(m: Memory) -> str:
    when = datetime.fromtimestamp(m.created_at, UTC).strftime("%Y-%m-%d")
    return f"- ({m.kind.value}, {json.dumps(m.subject, ensure_ascii=False)}, {when}) {json.dumps(m.content, ensure_ascii=False)}"


def _place(where: BulletinScope) -> str:
    if where.scope == "guild":
        return "a group chat (a server or group)"
    return (
        "your own private chat with the person who runs you"
        if where.scope == "owner"
        else "a private chat with one person"
    )
