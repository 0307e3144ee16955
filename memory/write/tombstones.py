"""Tombstones (SEC-5): a forgotten fact is not learned again from what remains, unless the person says it again.

A targeted forget (``memory.upkeep.forgetting.forget_memory``: the /forget command, the memory_delete tool, the
dashboard's delete, a veto) buries each memory it removes: two keyed hashes, bound to whom the fact was about
(scope and scope id), of

    content   its content's words, normalised (``memory.write.wording``: case, punctuation, stop words, word
              order and common endings do not count)
    fact      its subject's and content's words together

The key is random per store and kept in its settings (``KEY``), so a hash reveals nothing without the store, and
the table holds no word of the fact. A candidate matches a tombstone when either of its own two hashes equals
either of the tombstone's (a fact that moved a word from its content into its subject still matches), or when its
content less any one of its words does: a model that relearns "Alice keeps a tortoise called Quintrell" as
"Alice keeps a pet tortoise called Quintrell" adds a word, and that alone got past an exact hash. (Only for
contents of more than ``WIDEN_FROM`` content words: "Alice likes green tea" less a word is "Alice likes tea", too
short a remainder to say it is the same fact.)

What learns from what remains consults the tombstones and drops a matching candidate: extraction, micro- and
daily reflection (``bot.background``), consolidation (``memory.upkeep.maintenance``), bulletins (``memory.upkeep.bulletin``,
which read only memories no tombstone matches) and file ingest (``memory.write.ingest``). The exception: a candidate
whose supporting messages are all newer than the tombstone was said again after the forget; it is allowed,
and storing it lifts the tombstone (``MemoryStore`` lifts the tombstones of everything it stores, so an
explicit /remember of the same fact lifts it too). A candidate with no messages (a file, a merge) is never
"said again". Forgetting the whole person removes their tombstones (``memory.upkeep.registry``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..clock import Clock
from ..scopes import placeholders
from ..storage.db import Database
from .wording import content_words, normalised

if TYPE_CHECKING:
    from ..engine import MemoryEngine
    from ..models import NewMemory

log = logging.getLogger(__name__)
KEY = "tombstones.key"
WIDEN_FROM = 4  # a candidate of more content words than this also matches with any one left out (4 or more remain)


class Fact(Protocol):
    """What a tombstone is made from and matched against: a stored memory or a candidate."""

    @property
    def scope(self) -> str: ...
    @property
    def scope_id(self) -> str: ...
    @property
    def subject(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def guild_id(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Tombstone:
    id: int
    buried_at: float


class Tombstones:
    """Owner of ``tombstones``."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db, self.clock = db, clock
        self._key: bytes | None = None

    def bury(self, facts: Iterable[Fact]) -> int:
        """A tombstone for each fact (one with no content word leaves none: it could match nothing)."""
        rows = [(f.scope, f.scope_id, f.guild_id, *macs[:2], self.clock.now()) for f in facts if (macs := self._macs(f))]
        self.db.con.executemany(
            "INSERT INTO tombstones (scope, scope_id, guild_id, content_mac, fact_mac, buried_at) VALUES (?, ?, ?, ?, ?, ?)", rows
        )
        return len(rows)

    def matching(self, fact: Fact) -> list[Tombstone]:
        """The tombstones this fact matches (the same person's, by either normalised form, or by its content less
        one word)."""
        macs = self._macs(fact, widened=True)
        if not macs or not self.any():
            return []
        marks = placeholders(macs)
        rows = self.db.execute(
            f"SELECT id, buried_at FROM tombstones WHERE content_mac IN ({marks}) OR fact_mac IN ({marks})", (*macs, *macs)
        )
        return [Tombstone(int(i), float(at)) for i, at in rows]

    def lift(self, facts: Iterable[Fact]) -> int:
        """Facts stored again (said again, or stated outright): their tombstones are lifted."""
        if not self.any():
            return 0
        ids = [t.id for f in facts for t in self.matching(f)]
        if ids:
            self.db.execute(f"DELETE FROM tombstones WHERE id IN ({placeholders(ids)})", ids)
        return len(ids)

    def any(self) -> bool:
        """Whether there is a tombstone at all (most stores have none: every check is then free)."""
        return bool(self.db.scalar("SELECT EXISTS (SELECT 1 FROM tombstones)"))

    def count(self) -> int:
        return int(self.db.scalar("SELECT COUNT(*) FROM tombstones"))

    def _macs(self, fact: Fact, *, widened: bool = False) -> tuple[str, ...]:
        """The content's and the whole fact's hashes (what a tombstone keeps); ``widened``, also the content's
        less each one of its words (what a candidate is matched by)."""
        words = sorted(content_words(fact.content))
        if not words:
            return ()
        forms = [normalised(fact.content), normalised(f"{fact.subject} {fact.content}")]
        if widened and len(words) > WIDEN_FROM:
            forms += [" ".join(words[:i] + words[i + 1 :]) for i in range(len(words))]
        owner = f"{fact.scope}|{fact.scope_id}\x00"
        return tuple(self._mac(owner + form) for form in forms)

    def _mac(self, text: str) -> str:
        return hmac.new(self._store_key(), text.encode("utf-8", "replace"), hashlib.sha256).hexdigest()

    def _store_key(self) -> bytes:
        """The store's own key, made on first use; two processes making it at once agree on the first one written."""
        if self._key is None:
            known = self.db.get_setting(KEY)  # read first: a read-only store can check, never make, the key
            self._key = bytes.fromhex(known or self.db.setting_once(KEY, secrets.token_hex(32)))
        return self._key


def unforgotten(engine: MemoryEngine, candidates: list[NewMemory]) -> list[NewMemory]:
    """The candidates no tombstone holds back: those matching none, and those said again after the forget."""
    tombstones = engine.memories.tombstones
    if not candidates or not tombstones.any():
        return candidates
    kept = []
    for new in candidates:
        found = tombstones.matching(new)
        if not found or said_after(engine, new, max(t.buried_at for t in found)):
            kept.append(new)
        else:
            log.info("a candidate fact matched a tombstone: it was forgotten and is not learned again")
    return kept


def said_after(engine: MemoryEngine, new: NewMemory, buried_at: float) -> bool:
    """Every message the candidate came from is stored and was written after the forget (and there is one)."""
    sources = list(dict.fromkeys(new.provenance.sources))
    if not sources:
        return False
    rids = engine.messages.rids_by_id(sources)
    said = engine.messages.get_rids(rids) if rids else []
    return len(said) == len(sources) and all(m.created_at > buried_at for m in said)


def learnable(engine: MemoryEngine, candidates: list[NewMemory]) -> list[NewMemory]:
    """The candidates a job may still store, checked again in its write transaction (issue 33): a forget can land
    while the model writes, between a job's gather and its apply. A candidate whose source messages are not all
    still stored (forgotten, deleted at the source, or expired) is dropped, and so is one a tombstone laid
    meanwhile holds back. A candidate with no source messages (a file, a merge) is judged by tombstones alone."""
    return unforgotten(engine, [new for new in candidates if sources_stored(engine, new.provenance.sources)])


def sources_stored(engine: MemoryEngine, sources: Iterable[str]) -> bool:
    """Every one of these stored message ids still names a stored message (True for none)."""
    wanted = list(dict.fromkeys(s for s in sources if s))
    return not wanted or len(engine.messages.rids_by_id(wanted)) == len(wanted)
