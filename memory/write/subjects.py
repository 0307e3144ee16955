"""Whom a fact is about (SEC-5), decided by identity when the fact is written, never by a display name
at read time: ``/about me`` lists and vetoes what carries the asker's person id, and a name anyone can
take for themselves ("Dave", "Rules", "House") reaches nothing that was written before.

    names in the fact       the person entities the model named, the subject when it is a name someone
                            here uses, and the names of the accounts the speaker @mentioned or replied to
                            when the fact's words carry them
    none but the speaker's  the speaker (a first-person fact, "I'm moving to Oslo")
    one other person        an account the speaker @mentioned or replied to, by that name; else the one
                            known participant of the place (who spoke there) who uses or used that name
    anything else           nobody: a name several participants share ("Sam" and "Sam"), a name nobody here
                            uses, two people at once, or an admin's or the owner's fact about someone else
                            (what admins write is never vetoable by the members it names)

Lore (guild scope) and the bot's facts about itself are about nobody. Only write paths that know who spoke
(extraction, the ``memory_store`` tool, ``/remember``) say so in ``NewMemory.written_by``; the rest (ingest,
imports, the dashboard) bind nothing, so their facts are vetoable only by the person they are filed under.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ..engine import MemoryEngine
from ..models import NewMemory, Scope, WrittenBy
from ..scopes import RecallContext

FIRST_PERSON = frozenset({"i", "me", "myself", "user", "the user"})
MIN_NAME_CHARS = 2


@dataclass(frozen=True, slots=True)
class Place:
    """Who could be named in a fact written in one place: person id -> the names they use(d) there."""

    pointed: dict[str, frozenset[str]]  # accounts the speaker @mentioned or replied to
    present: dict[str, frozenset[str]]  # participants who spoke there (the speaker among them)
    # a folded name -> the participants using it (``present`` turned round)
    by_name: dict[str, frozenset[str]]

    @classmethod
    def of(cls, pointed: dict[str, frozenset[str]], present: dict[str, frozenset[str]]) -> Place:
        return cls(pointed, present, index(present))


def index(present: dict[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    """Folded name -> who uses it: built once per place, so a batch of facts does not walk every participant each."""
    found: dict[str, set[str]] = {}
    for person, names in present.items():
        for name in names:
            found.setdefault(_key(name), set()).add(person)
    return {name: frozenset(people) for name, people in found.items()}


def written_by(ctx: RecallContext, said_in: Iterable[RecallContext] | None = None) -> WrittenBy:
    """What a write path knows of the speaker of ``ctx``: the accounts pointed at in the lines the fact came
    from (``said_in``: their contexts; None: the fact came from this turn, ``ctx`` itself)."""
    lines = (ctx,) if said_in is None else tuple(said_in)
    pointed = dict.fromkeys(p for c in lines for p in c.pointed if p != ctx.speaker_id)
    return WrittenBy(tuple(pointed), trusted=ctx.admin or ctx.owner_private)


def bound(engine: MemoryEngine, new: NewMemory) -> NewMemory:
    """``new`` with ``subject_person_id`` decided (see the module's table); unchanged when its write path said
    nothing of its speaker. Reads the place's participants and names from the store."""
    return bound_all(engine, [new])[0]


def bound_all(engine: MemoryEngine, memories: list[NewMemory]) -> list[NewMemory]:
    """``bound`` of each, each place's participants read once (a job's facts mostly come from one place)."""
    places: dict[str, Place] = {}
    return [_bound(engine, new, places) for new in memories]


def _bound(engine: MemoryEngine, new: NewMemory, places: dict[str, Place]) -> NewMemory:
    said = new.written_by
    if said is None:
        return new
    if new.scope is Scope.GUILD:
        return replace(new, written_by=None, subject_person_id=None)
    guild = new.guild_id or new.provenance.guild_id or ""
    if guild not in places:
        places[guild] = Place.of({}, participants(engine, guild) if guild else {})
    return replace(
        new,
        written_by=None,
        subject_person_id=subject_of(new, said, place_of(engine, new, said, places[guild])),
    )


def participants(engine: MemoryEngine, guild: str) -> dict[str, frozenset[str]]:
    """Everyone who spoke in the guild, with every name they showed there and every display name they have."""
    present: dict[str, set[str]] = {}
    for person, name in engine.messages.speakers_in(guild):
        present.setdefault(person, set()).add(name)
    names = engine.people.names_of(sorted(present))
    return {p: frozenset(shown | names.get(p, set())) for p, shown in present.items()}


def place_of(engine: MemoryEngine, new: NewMemory, said: WrittenBy, place: Place) -> Place:
    """The place's participants, with the speaker (who may not have spoken there before) and the accounts
    the speaker pointed at, by their display names."""
    speaker = new.scope_id
    names = engine.people.names_of(sorted({speaker, *said.pointed}))
    own = place.present.get(speaker, frozenset()) | names.get(speaker, set())
    by_name = dict(place.by_name)
    for name in own:
        by_name[_key(name)] = by_name.get(_key(name), frozenset()) | {speaker}
    pointed = {p: frozenset(names.get(p, set())) for p in said.pointed}
    return Place(pointed, {**place.present, speaker: own}, by_name)


def subject_of(new: NewMemory, said: WrittenBy, place: Place) -> str | None:
    """The person ``new`` is about, by the module's rules, or None."""
    speaker = new.scope_id
    own = {_key(n) for n in place.present.get(speaker, frozenset())} | FIRST_PERSON
    others = {n for n in _named(new, place) if n not in own}
    if not others:
        return speaker
    people = {_person(name, place) for name in others}
    if len(people) != 1 or None in people:
        return None
    person = people.pop()
    return None if said.trusted and person != speaker else person


def _named(new: NewMemory, place: Place) -> set[str]:
    """The names (folded) the fact uses for people: person entities, a subject that is someone's name here,
    and pointed-at accounts' names written in its words."""
    found = {
        _key(e.name)
        for e in new.entities
        if e.type == "person" and len(e.name.strip()) >= MIN_NAME_CHARS
    }
    subject = _key(new.subject)
    if subject in place.by_name or any(
        subject in {_key(n) for n in names} for names in place.pointed.values()
    ):
        found.add(subject)
    words = f"{new.subject} {new.content}"
    for names in place.pointed.values():
        found |= {_key(n) for n in names if len(n) >= MIN_NAME_CHARS and _says(words, n)}
    return found


def _person(name: str, place: Place) -> str | None:
    """The one person this name is: a pointed-at account first (the platform said who), else the one
    participant using it; None when several or nobody do."""
    matches = [p for p, names in place.pointed.items() if name in {_key(n) for n in names}]
    if not matches:
        matches = sorted(place.by_name.get(name, ()))
    return matches[0] if len(matches) == 1 else None


def _says(text: str, name: str) -> bool:
    return re.search(rf"(?<!\w)@?{re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None


def _key(name: str) -> str:
    return " ".join(name.casefold().lstrip("@").split())
