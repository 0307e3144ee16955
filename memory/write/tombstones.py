"""Tombstones (SEC-5): a forgotten fact is not learned again from what remains, however it is worded, unless the
person says it again.

A targeted forget (``memory.upkeep.forgetting.forget_memory``: the /forget command, the memory_delete tool, the
dashboard's delete, a veto) buries each memory it removes, bound to whom the fact was about (scope and scope id):

    content_mac, fact_mac   keyed hashes of its normalised content, and of its subject with its content
                            (``memory.write.wording``: case, punctuation, stop words, word order and common
                            endings do not count)
    marks, signature        its ``Trace`` (``memory.write.traces``): short keyed hashes of the forms of its
                            telling words and names, and a few keyed sign bits of its meaning, so that "Quintrell
                            is Alice's tortoise" or "Alice hat eine Schildkröte namens Quintrell" still match
                            "Alice keeps a tortoise called Quintrell"

The key is the operator's, kept OUTSIDE the store (``bot.secret_key``: a key file beside the config, or derived
from COMPANION_SECRET_KEY) and given to the engine as a value: the store file alone, or any copy or backup of
it, cannot test a guess against a tombstone. Stores made before that kept a key in their settings; on first use
with the outside key that key is wrapped with it (``LEGACY``, readable only with the outside key) and the plain one
deleted and scrubbed, so the old tombstones (exact hashes only: their words are gone, nothing else can be made
of them) still hold but the store alone no longer opens them.

A candidate matches a tombstone of the same person when its own hashes equal the tombstone's, or its
content less any one word does (for contents of more than ``WIDEN_FROM`` content words), or its
trace matches, or (a fact in another language learned by a job, ``memory.jobs.base.WriteFacts``) the
trace of the model's English reading of it matches (``memory.write.glosses``; the ``memory_store``
tool and file ingest go by the words alone).

What learns from what remains consults the tombstones and drops a matching candidate: extraction,
micro- and daily reflection (``memory.jobs.base``), consolidation (``memory.upkeep.maintenance``),
bulletins (``memory.upkeep.bulletin``, which read only memories no tombstone matches), file ingest
(``memory.write.ingest``) and the memory_store tool (``memory.tools``). The exception: the fact was
said again after the forget (``said_after``): a source of the candidate is the person's own message,
written after the forget, whose words state it (or state the candidate, in any language, which the
tombstone matched), the same way round: "I would never keep a tortoise" does not say "Alice keeps a
tortoise" again (``memory.write.wording.denies``). Storing it lifts the tombstone (``MemoryStore``
lifts the tombstones of everything it stores, so an explicit /remember of the same fact lifts it
too). A candidate with no messages (a file, a merge) is never "said again". Forgetting the whole
person removes their tombstones (``memory.upkeep.registry``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..clock import Clock
from ..storage.db import Database
from ..storage.tombstones import Buried, TombstoneRows
from .glosses import foreign
from .traces import Trace, Tracer
from .wording import content_words, denies, normalised

if TYPE_CHECKING:
    from ..models import NewMemory
    from ..storage.embeddings import EmbeddingService
    from ..storage.messages import MessageLog

log = logging.getLogger(__name__)
KEY = "tombstones.key"  # where stores before issue 31 kept their key in plain: moved out on first use (``LEGACY``)
LEGACY = "tombstones.legacy_key"  # that key, wrapped with the outside key
_TOKEN = re.compile(r"[^\W_]+")
WIDEN_FROM = 4  # a candidate of more content words than this also matches with any one left out (4 or more remain)
# forgotten facts in another language waiting, in this process's memory only, for a reading
UNREAD_AT_MOST = 64


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
class Worded:
    """A fact's whom with other words: a message or an English reading judged as the fact would be;
    or a fact just buried in another language than English, waiting for the model's English
    reading (``memory.jobs.readings``), held in this process's memory only, never written
    anywhere: once read, a second tombstone is laid from the reading (``bury_reading``) and the
    text let go."""

    scope: str
    scope_id: str
    subject: str
    content: str
    guild_id: str | None


@dataclass(frozen=True, slots=True)
class Tombstone:
    id: int
    buried_at: float
    trace: Trace | None = None  # None: a tombstone of a store before traces (exact hashes only)


ENGLISH_MODEL = "onnx:"  # the bundled MiniLM and operators' own ONNX models (English family)
_COMMON: dict[str, np.ndarray] = {}  # model fingerprint -> the everyday sentences' mean vector


def everyday_sentences() -> list[str]:
    text = (Path(__file__).parents[1] / "assets" / "everyday.txt").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


class Tombstones:
    """What is buried and what it holds back (the rows are ``stones``'s). ``key``: the operator's
    secret (None: one for this process only, with a warning)."""

    def __init__(
        self,
        db: Database,
        stones: TombstoneRows,
        clock: Clock,
        key: bytes | None = None,
        embeddings: EmbeddingService | None = None,
        own_names: Callable[[str], list[str]] = lambda person_id: [],
    ) -> None:
        """``own_names``: a person's own display names (``People.own_names``): every fact about them says them, so
        they tell nothing apart."""
        self.db, self.clock, self.embeddings, self.own_names = db, clock, embeddings, own_names
        self.stones = stones  # the rows; ``db`` keeps the settings the legacy key lives in
        # a scratch engine (an eval, a test): said once, when something is buried
        self._ephemeral = key is None
        self._key = key or secrets.token_bytes(32)
        self._tracer = Tracer(self._key)
        self._legacy: bytes | None = None  # the old in-store key, once read (``_legacy_key``)
        self._legacy_read = False
        self._unread: list[Worded] = []  # LANG-4: see ``Worded``

    def take_unread(self) -> tuple[Worded, ...]:
        """The facts buried in another language since the last take (each given out once)."""
        taken, self._unread = tuple(self._unread), []
        return taken

    def bury_reading(self, unread: Worded, reading: str) -> int:
        """LANG-4: a tombstone laid in another language is laid again in the model's English reading
        of it, so that an English wording, or another language's read in English, is known too
        (the words of two languages share no marks; a meaning check alone cannot tell "afraid of
        wasps" from "afraid of dogs" across languages). The reading is hashed and traced like any
        forgotten fact, never kept. Nothing is laid when the first tombstone is gone meanwhile (the
        fact said again, or the whole person forgotten)."""
        if not self.matching(unread, exact=True):
            return 0
        return self.bury([worded(unread, reading)], read=True)

    def bury(self, facts: Iterable[Fact], *, read: bool = False) -> int:
        """A tombstone for each fact (one with no content word leaves none: it could match nothing);
        a fact in another language waits to be read in English too (``read``: it is that
        reading)."""
        kept = [f for f in facts if content_words(f.content)]
        if not read:
            self._wait_for_readings(kept)
        traces = self.traces(kept, synonyms=True)
        rows = []
        for fact, trace in zip(kept, traces, strict=True):
            content_mac, fact_mac = self._macs(fact, self._key)[:2]
            marks, signature = trace.encode()
            rows.append(
                (
                    fact.scope,
                    fact.scope_id,
                    fact.guild_id,
                    content_mac,
                    fact_mac,
                    marks,
                    signature,
                    self.clock.now(),
                )
            )
        if rows and self._ephemeral:
            self._ephemeral = False
            log.warning(
                "no tombstone key was given: what is forgotten now is kept out only until this process ends"
            )
        self.stones.add(rows)
        return len(rows)

    def _wait_for_readings(self, facts: list[Fact]) -> None:
        for fact in facts:
            if foreign(fact.content, self.own_names(fact.scope_id)):
                self._unread.append(worded(fact, fact.content))
        # the oldest past the bound are not read: their own tombstones still hold
        del self._unread[:-UNREAD_AT_MOST]

    def matching(
        self, fact: Fact, trace: Trace | None = None, *, exact: bool = False
    ) -> list[Tombstone]:
        """The same person's tombstones this fact matches (by its wording, its content less one word, or its trace;
        ``exact``: by its wording only)."""
        buried = self._buried(fact)
        if not buried:
            return []
        found = []
        macs = {1: set(self._macs(fact, self._key, widened=True))}
        for row in buried:
            keyed = row.keyed
            if keyed not in macs:
                legacy = self._legacy_key()
                macs[keyed] = set(self._macs(fact, legacy, widened=True)) if legacy else set()
            stone = Tombstone(
                row.id, row.buried_at, Trace.decode(row.marks, row.signature) if keyed else None
            )
            if {row.content_mac, row.fact_mac} & macs[keyed]:
                found.append(stone)
            elif stone.trace is not None and not exact:
                trace = trace or self.traces([fact])[0]
                if stone.trace.matches(trace):
                    found.append(stone)
        return found

    def may_hold(self, words: str) -> bool:
        """Whether a tombstone holds a mark of each telling word of ``words`` (``companion audit
        forget``: was a thing said with them forgotten?). A mark is 12 or 16 bits, so a yes may be
        chance; a tombstone without marks (a store before issue 31) cannot say no."""
        tokens = [w for w in _TOKEN.findall(words or "") if w]
        for scope, scope_id in self.stones.owners() if self.any() else ():
            owner, names = f"{scope}|{scope_id}", self.own_names(scope_id)
            traces = [self._tracer.trace(owner, w, None, names) for w in tokens]
            wanted = [set(t.marks) | set(t.older.values()) for t in traces if t.marks]
            for row in self.stones.of(scope, scope_id):
                if not row.keyed:
                    return True
                held = set(Trace.decode(row.marks, row.signature).marks)
                if wanted and all(marks & held for marks in wanted):
                    return True
        return False

    def lift(self, facts: Iterable[Fact]) -> int:
        """Facts stored again in the same words (stated outright: /remember): their tombstones are lifted. Only
        the same words: a fact near a forgotten one ("Alice keeps zebrafinches" after "Alice breeds zebrafinches"
        was forgotten) may be stored, but does not undo the forget; ``unforgotten`` lifts what was said again."""
        if not self.any():
            return 0
        return self.lift_ids([t.id for f in facts for t in self.matching(f, exact=True)])

    def lift_ids(self, ids: list[int]) -> int:
        self.stones.delete(ids)
        return len(ids)

    def hold_any(self, fact: Fact) -> bool:
        """Whether the person (or place) this fact is about has any tombstone."""
        return bool(self._buried(fact))

    def any(self) -> bool:
        """Whether there is a tombstone at all (most stores have none: every check is then free)."""
        return self.stones.any()

    def count(self) -> int:
        return self.stones.count()

    def traces(self, facts: Sequence[Fact], *, synonyms: bool = False) -> list[Trace]:
        """The traces of facts' contents (their meaning embedded in one run; never cached in the store);
        ``synonyms`` for what is buried."""
        vectors = self._vectors([f.content for f in facts])
        return [
            self._tracer.trace(
                f"{f.scope}|{f.scope_id}",
                f.content,
                None if vectors is None else vectors[i],
                self.own_names(f.scope_id),
                synonyms=synonyms,
            )
            for i, f in enumerate(facts)
        ]

    def _vectors(self, texts: list[str]) -> np.ndarray | None:
        """Meaning vectors for traces (query vectors: not written to the embedding cache), less the
        direction the model gives every sentence alike (``_common``): the multilingual model puts
        any two sentences about a person at a cosine of ~0.9, which sign bits cannot tell apart;
        less that direction, the suite's unrelated facts fall to ~0.25 while its rewordings stay at
        ~0.9."""
        if not texts or self.embeddings is None or not self.embeddings.available:
            return None
        vectors = self.embeddings.embed_queries(texts)
        if vectors is None or self._english():
            return vectors
        common = self._common()
        if common is None:
            return (
                None  # its mean could not be read this time: no signature rather than a wrong one
            )
        centred = vectors - common
        return centred / np.clip(np.linalg.norm(centred, axis=1, keepdims=True), 1e-12, None)

    def _common(self) -> np.ndarray | None:
        """The mean meaning of everyday sentences in several languages (``assets/everyday.txt``) for
        the model that draws the traces (not the English MiniLM's: ``_english``); None when the
        model fails to embed them now (never kept: the next trace asks again)."""
        assert self.embeddings is not None
        fingerprint = self.embeddings.fingerprint or ""
        if fingerprint not in _COMMON:
            vectors = self.embeddings.embed_queries(everyday_sentences())
            if vectors is None:
                return None  # a failure now is not the model's mean: asked again next time
            _COMMON[fingerprint] = vectors.mean(axis=0)
        return _COMMON[fingerprint]

    def _english(self) -> bool:
        """The English MiniLM (or no known model), whose tombstones were tuned uncentred."""
        assert self.embeddings is not None
        fingerprint = self.embeddings.fingerprint
        return fingerprint is None or fingerprint.startswith(ENGLISH_MODEL)

    def _buried(self, fact: Fact) -> list[Buried]:
        if not self.any():
            return []
        return self.stones.of(str(fact.scope), fact.scope_id)

    def _macs(self, fact: Fact, key: bytes, *, widened: bool = False) -> tuple[str, ...]:
        """The content's and the whole fact's hashes (what a tombstone keeps); ``widened``, also the content's
        less each one of its words (what a candidate is matched by)."""
        words = sorted(content_words(fact.content))
        if not words:
            return ()
        forms = [normalised(fact.content), normalised(f"{fact.subject} {fact.content}")]
        if widened and len(words) > WIDEN_FROM:
            forms += [" ".join(words[:i] + words[i + 1 :]) for i in range(len(words))]
        owner = f"{fact.scope}|{fact.scope_id}\x00"
        return tuple(
            hmac.new(key, (owner + form).encode("utf-8", "replace"), hashlib.sha256).hexdigest()
            for form in forms
        )

    def _legacy_key(self) -> bytes | None:
        """The key a store before issue 31 kept in its settings, unwrapped with the outside key (see the docstring)."""
        if not self._legacy_read:
            self._legacy, self._legacy_read = self.move_legacy_key(), True
        return self._legacy

    def move_legacy_key(self) -> bytes | None:
        """A plain in-store key is wrapped with the outside key and deleted (the file scrubbed of it); returns it.
        The engine calls it on opening a store it may write, given the outside key."""
        plain = self.db.get_setting(KEY)
        if plain is not None and not getattr(self.db, "readonly", False):
            with self.db.transaction():
                self.db.set_setting(LEGACY, _xor(bytes.fromhex(plain), self._pad()).hex())
                self.db.delete_setting(KEY)
            self.db.scrub()
        elif plain is not None:
            return bytes.fromhex(plain)  # a reader cannot move it (the next writer will)
        wrapped = self.db.get_setting(LEGACY)
        return None if wrapped is None else _xor(bytes.fromhex(wrapped), self._pad())

    def _pad(self) -> bytes:
        return hmac.new(self._key, b"tombstones legacy key wrap", hashlib.sha256).digest()


def worded(fact: Fact, content: str) -> Worded:
    """``fact``'s whom with ``content`` as its words."""
    return Worded(fact.scope, fact.scope_id, fact.subject, content, fact.guild_id)


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


class _Buries(Protocol):
    @property
    def tombstones(self) -> Tombstones: ...


class Holder(Protocol):
    """What judging candidates needs of the engine (``MemoryEngine`` is one): the tombstones its
    memory store keeps, and the messages a candidate came from. Not the engine itself, which
    imports this module."""

    @property
    def memories(self) -> _Buries: ...
    @property
    def messages(self) -> MessageLog: ...


def unforgotten(
    engine: Holder, candidates: list[NewMemory], readings: Mapping[str, str] | None = None
) -> list[NewMemory]:
    """The candidates no tombstone holds back: those matching none, by their words or by their
    English reading (``readings``: content -> the model's English, ``memory.write.glosses``), and
    those said again after the forget."""
    tombstones = engine.memories.tombstones
    if not candidates or not tombstones.any():
        return candidates
    kept = []
    for new in candidates:
        found = tombstones.matching(new)
        reading = (readings or {}).get(new.content)
        if not found and reading:
            read = worded(new, reading)
            found = tombstones.matching(read)
        if not found:
            kept.append(new)
        elif said_after(engine, new, found):
            # said again by the person, in whatever words
            tombstones.lift_ids([t.id for t in found])
            kept.append(new)
        else:
            log.info(
                "a candidate fact matched a tombstone: it was forgotten and is not learned again"
            )
    return kept


def said_after(engine: Holder, new: NewMemory, found: list[Tombstone]) -> bool:
    """Said again: every message the candidate came from is stored and newer than the forget, and
    one of them is the person's own (for a fact about a person) and states it (its words match each
    tombstone on their own), not denies it; a "thanks!" or an "I never did" after the forget, or
    someone else's message, lifts nothing."""
    sources = list(dict.fromkeys(new.provenance.sources))
    if not sources:
        return False
    rids = engine.messages.rids_by_id(sources)
    said = engine.messages.get_rids(rids) if rids else []
    buried_at = max(t.buried_at for t in found)
    if len(said) != len(sources) or not all(m.created_at > buried_at for m in said):
        return False
    own = [
        m
        for m in said
        if m.role == "user"
        and (str(new.scope) not in ("user", "owner") or m.author_id == new.scope_id)
    ]
    tombstones = engine.memories.tombstones
    return any(
        not denies(m.content, new.content) and _states(tombstones, new, m.content, found)
        for m in own
    )


def _states(tombstones: Tombstones, new: NewMemory, text: str, found: list[Tombstone]) -> bool:
    """Whether a message's own words say what each matched tombstone keeps out; or whether they say
    the fact itself, which the tombstones matched (a fact in the message's own language, known by
    its English reading: "Ich habe Angst vor Spinnen" says "Alice hat Angst vor Spinnen")."""
    message = worded(new, text)
    again = {t.id for t in tombstones.matching(message)}
    if all(t.id in again for t in found):
        return True
    fact, said = tombstones.traces([new], synonyms=True)[0], tombstones.traces([message])[0]
    return Trace(fact.marks, None, fact.alike).matches(said, names_alone=True)


def learnable(
    engine: Holder, candidates: list[NewMemory], readings: Mapping[str, str] | None = None
) -> list[NewMemory]:
    """The candidates a job may still store, checked again in its write transaction (issue 33): a forget can land
    while the model writes, between a job's gather and its apply. A candidate whose source messages are not all
    still stored (forgotten, deleted at the source, or expired) is dropped, and so is one a tombstone laid
    meanwhile holds back. A candidate with no source messages (a file, a merge) is judged by tombstones alone."""
    return unforgotten(
        engine,
        [new for new in candidates if sources_stored(engine, new.provenance.sources)],
        readings,
    )


def sources_stored(engine: Holder, sources: Iterable[str]) -> bool:
    """Every one of these stored message ids still names a stored message (True for none)."""
    wanted = list(dict.fromkeys(s for s in sources if s))
    return not wanted or len(engine.messages.rids_by_id(wanted)) == len(wanted)
