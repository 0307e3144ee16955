"""Whom a fact is about (SEC-5), decided by identity when the fact is written, never by a display
name, then or at read time: ``/about me`` lists and vetoes what carries the asker's person id, and a
name anyone can take for themselves ("Dave", "Rules", "Music", "Will") reaches nothing.

    names in the fact   the person entities the model named, and the names of the accounts the
                        speaker @mentioned or replied to that the fact's words write as a name
    only the speaker's  the speaker (a first-person fact, "I'm moving to Oslo")
    one other person    an account the speaker @mentioned or replied to (the platform said who),
                        when the fact's words write its name as a name: "@Dave", or "Dave" not in
                        lower case and either a rare word or one the model named as a person
                        ("will" in "Bob will be in Oslo" is a word; a subject label is a label)
    anything else       nobody: a name no account was pointed at by, whoever here shows it (a name
                        many people could have is nobody's identity), two pointed accounts with
                        that name, two people at once, or an admin's or the owner's fact about
                        someone else (what admins write is never vetoable by the members it names)

Lore (guild scope) and the bot's facts about itself are about nobody. Only write paths that know who
spoke (extraction, the ``memory_store`` tool, ``/remember``) say so in ``NewMemory.written_by``; the
rest (ingest, imports, the dashboard) bind nothing, so their facts are vetoable only by the person
they are filed under.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ..engine import MemoryEngine
from ..models import NewMemory, Scope, WrittenBy
from ..scopes import RecallContext
from .ownership import distinctive

FIRST_PERSON = frozenset({"i", "me", "myself", "user", "the user"})
MIN_NAME_CHARS = 2


@dataclass(frozen=True, slots=True)
class PlaceNames:
    """Who could be named in a fact written in one place: person id -> the names they use(d)."""

    pointed: dict[str, frozenset[str]]  # accounts the speaker @mentioned or replied to
    present: dict[str, frozenset[str]]  # participants who spoke there (the speaker among them)

    @classmethod
    def of(
        cls, pointed: dict[str, frozenset[str]], present: dict[str, frozenset[str]]
    ) -> PlaceNames:
        return cls(pointed, present)


def written_by(ctx: RecallContext, said_in: Iterable[RecallContext] | None = None) -> WrittenBy:
    """What a write path knows of the speaker of ``ctx``: the accounts pointed at in the lines the
    fact came from (``said_in``: their contexts; None: the fact came from this turn, ``ctx``)."""
    lines = (ctx,) if said_in is None else tuple(said_in)
    pointed = dict.fromkeys(p for c in lines for p in c.pointed if p != ctx.speaker_id)
    return WrittenBy(tuple(pointed), trusted=ctx.admin or ctx.owner_private)


def bound(engine: MemoryEngine, new: NewMemory) -> NewMemory:
    """``new`` with ``subject_person_id`` decided (see the module's table); unchanged when its write
    path said nothing of its speaker. Reads the speaker's and the pointed accounts' names."""
    return bound_all(engine, [new])[0]


def bound_all(engine: MemoryEngine, memories: list[NewMemory]) -> list[NewMemory]:
    """``bound`` of each, each place's participants read once (a job's facts mostly share one)."""
    places: dict[str, PlaceNames] = {}
    return [_bound(engine, new, places) for new in memories]


def _bound(engine: MemoryEngine, new: NewMemory, places: dict[str, PlaceNames]) -> NewMemory:
    said = new.written_by
    if said is None:
        return new
    if new.scope is Scope.GUILD:
        return replace(new, written_by=None, subject_person_id=None)
    guild = new.guild_id or new.provenance.guild_id or ""
    if guild not in places:
        places[guild] = PlaceNames.of({}, participants(engine, guild) if guild else {})
    return replace(
        new,
        written_by=None,
        subject_person_id=subject_of(new, said, place_of(engine, new, said, places[guild])),
    )


def participants(engine: MemoryEngine, guild: str) -> dict[str, frozenset[str]]:
    """Everyone who spoke in the guild, with every name they showed there and every display name
    they have (what the speaker's own names are read from)."""
    present: dict[str, set[str]] = {}
    for person, name in engine.messages.speakers_in(guild):
        present.setdefault(person, set()).add(name)
    names = engine.people.names_of(sorted(present))
    return {p: frozenset(shown | names.get(p, set())) for p, shown in present.items()}


def place_of(
    engine: MemoryEngine, new: NewMemory, said: WrittenBy, place: PlaceNames
) -> PlaceNames:
    """The place's participants, with the speaker (who may not have spoken there before) and the
    accounts the speaker pointed at, by their display names."""
    speaker = new.scope_id
    names = engine.people.names_of(sorted({speaker, *said.pointed}))
    own = place.present.get(speaker, frozenset()) | names.get(speaker, set())
    pointed = {p: frozenset(names.get(p, set())) for p in said.pointed}
    return PlaceNames(pointed, {**place.present, speaker: own})


def subject_of(new: NewMemory, said: WrittenBy, place: PlaceNames) -> str | None:
    """The person ``new`` is about, by the module's rules, or None."""
    speaker = new.scope_id
    own = {_key(n) for n in place.present.get(speaker, frozenset())} | FIRST_PERSON
    written = _pointed_written(new, place)
    others = (_entities(new) | {n for names in written.values() for n in names}) - own
    if not others:
        return speaker
    people = {_person(name, written) for name in others}
    if len(people) != 1 or None in people:
        return None
    person = people.pop()
    return None if said.trusted and person != speaker else person


def _entities(new: NewMemory) -> set[str]:
    """The names (folded) the model gave the people of the fact."""
    return {
        _key(e.name)
        for e in new.entities
        if e.type == "person" and len(e.name.strip()) >= MIN_NAME_CHARS
    }


def _pointed_written(new: NewMemory, place: PlaceNames) -> dict[str, set[str]]:
    """Pointed-at account -> its names (folded) the fact's words write as a name (``_as_name``)."""
    persons = _entities(new)
    return {
        person: {_key(n) for n in names if _as_name(new.content, n, persons)}
        for person, names in place.pointed.items()
    }


def _person(name: str, written: dict[str, set[str]]) -> str | None:
    """The one pointed-at account whose name the fact writes as ``name``; None when several or
    none (a name nobody was pointed at by is nobody's identity, whoever here shows it)."""
    matches = [p for p, names in written.items() if name in names]
    return matches[0] if len(matches) == 1 else None


def _as_name(text: str, name: str, persons: set[str]) -> bool:
    """Whether ``text`` writes ``name`` as someone's name: "@Dave" (the speaker's own pointing),
    or "Dave" not in lower case and either rare as a word or named a person by the model
    (``persons``). A lower-case "will" or "music" is a word; a subject label is not read."""
    if len(name.strip()) < MIN_NAME_CHARS:
        return False
    for found in re.finditer(rf"(?<!\w)(@?)({re.escape(name)})(?!\w)", text, re.IGNORECASE):
        at, shown = found.groups()
        if at:
            return True
        if not shown[0].islower() and (_key(name) in persons or _rare(name)):
            return True
    return False


def _rare(name: str) -> bool:
    """A name no common English word nor common first name spells: "Grzegorz", not "Will"."""
    return any(distinctive(w) for w in re.findall(r"\w+", name.casefold()))


def _key(name: str) -> str:
    return " ".join(name.casefold().lstrip("@").split())
