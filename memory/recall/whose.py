"""Whose each recalled fact is, as a prompt shows it (issue 45): a chat model shown "I work as a
nurse" answered "I'm a nurse at the children's hospital", speaking as the person. So every fact a
prompt shows names whom it is about, and a person's fact in their own first person (stored before
facts were written in the third person, or kept as they said it: ``/remember``, the ``memory_store``
tool, an import) is shown in the third person (``memory.write.third_person``); one in another
language keeps its words, and its label says whose it is:

    - about "Priya": "Priya works as a nurse at the children's hospital." (profile, 2026-10-21)
    - about "Priya": "Ich arbeite als Krankenschwester" (profile, 2026-10-21)
    - about "Tomasz", told by "Priya": "Priya's brother Tomasz lives in Gdansk" (relationship, ...)
    - about you: "My favourite season is autumn" (the bot's own, ORCH-7)
    - lore of this place: "The server's book club meets on Sundays"
    - from the files of "Priya": "Dana plays the cello." (a passage of a file she gave)

The "I" of a stored fact is the person it is filed under (``scope_id``: who said it); whom it is
about is ``subject_person_id`` when the write path bound one (``memory.write.subjects``), else the
same person. Stored rows are not rewritten: what is shown is turned each time, so facts written
before this and facts a person keeps in their own words read the same way, and nothing stored
changes."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Protocol

from ..models import SELF_SUBJECT, Memory, Scope, Source
from ..write.third_person import third_person

SOMEONE = "someone"  # a person whose name the store does not know


class PeopleNames(Protocol):
    def names_of(self, person_ids: list[str]) -> dict[str, set[str]]: ...


def teller(m: Memory) -> str | None:
    """The person whose "I" the fact's words are (None: the bot's own, or a place's lore)."""
    if m.subject == SELF_SUBJECT or m.scope is Scope.GUILD:
        return None
    return m.scope_id or None


def about(m: Memory) -> str | None:
    """The person the fact is about (None: the bot itself, or nobody in particular)."""
    return m.subject_person_id or teller(m)


def people_in(memories: Iterable[Memory]) -> set[str]:
    """Everyone a label may name for these facts."""
    return {p for m in memories for p in (teller(m), about(m)) if p}


def names_of(people: PeopleNames, memories: Iterable[Memory]) -> dict[str, str]:
    """A name for each person a label of ``memories`` may name (the first of their display names,
    in order); a person the store knows no name of is left out."""
    known = people.names_of(sorted(people_in(memories)))
    return {p: min(names) for p, names in known.items() if names}


def labelled(m: Memory, names: Mapping[str, str]) -> tuple[str, str]:
    """(label, words) of ``m`` for a prompt: whose it is, and its words with the teller's "I" turned
    into their name."""
    if m.subject == SELF_SUBJECT:
        return "about you", m.content
    told_by = teller(m)
    if told_by is None:
        return "lore of this place", m.content
    name = names.get(told_by, "")
    if m.source == Source.INGEST:  # a passage of a file they gave: about whatever it says
        return f"from the files of {_quoted(name or SOMEONE)}", m.content
    subject = about(m) or told_by
    label = f"about {_quoted(names.get(subject) or SOMEONE)}"
    if subject != told_by:
        label += f", told by {_quoted(name or SOMEONE)}"
    return label, third_person(m.content, name)


def _quoted(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)
