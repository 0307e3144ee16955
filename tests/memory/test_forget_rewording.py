"""A forgotten fact is not learned again in other words, and the store alone cannot test a guess (issue 31,
items 2 and 3; SEC-5).

The paraphrase suite (``data/forget_rewordings.txt``): 50 facts Alice asked to forget, each with five rewordings
a model might learn back (synonyms, reordering or passive, possessive, a translation into German, French or
Spanish, another tense or number), and 204 other facts about her that must still be learned. It runs on the
real embedding model (MiniLM, bundled) and a real store, and prints both rates.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import Counter
from pathlib import Path

import apsw
import pytest
from conftest import remember

from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.models import NewMemory, Provenance, Scope, Source
from memory.storage.embeddings import OnnxMiniLM
from memory.upkeep.forgetting import forget_memory
from memory.write.tombstones import KEY, LEGACY, unforgotten
from memory.write.wording import normalised

DATA = Path(__file__).parent / "data" / "forget_rewordings.txt"
# the operator's key in these tests (fixed: an outcome must not hang on a key drawn)
KEY_A = bytes(range(32))
# What the suite holds now, on MiniLM (measured: 221/250, English 192/200, translations 29/50; 0/204 blocked).
# A name or a code holds in any language; a translation of plain words has only its cognates to go by.
HELD_AT_LEAST, ENGLISH_HELD_AT_LEAST = 0.85, 0.95


def suite() -> tuple[list[tuple[str, list[tuple[str, str]]]], list[str]]:
    lines = DATA.read_text(encoding="utf-8").splitlines()
    cut = lines.index("== unrelated ==")
    blocks = (
        "\n".join(line for line in lines[:cut] if not line.startswith("#")).strip().split("\n\n")
    )
    facts = [
        (b.splitlines()[0], [tuple(x.split(": ", 1)) for x in b.splitlines()[1:]]) for b in blocks
    ]
    return facts, [line for line in lines[cut + 1 :] if line.strip()]  # type: ignore[misc]


def about(person: str, content: str, sources: tuple[str, ...] = ()) -> NewMemory:
    return NewMemory(
        content=content,
        subject="alice",
        scope=Scope.USER,
        scope_id=person,
        source=Source.AUTO_EXTRACTION,
        provenance=Provenance(platform="discord", channel_id="dm-alice", sources=sources),
    )


@pytest.fixture(scope="module")
def minilm() -> OnnxMiniLM:
    return OnnxMiniLM()


def test_the_suite_is_what_it_says():
    facts, unrelated = suite()
    assert len(facts) >= 50 and all(len(rewordings) == 5 for _, rewordings in facts)
    assert len(unrelated) >= 200 and len(set(unrelated)) == len(unrelated)
    assert {kind for _, rw in facts for kind, _ in rw} == {
        "synonym",
        "reorder",
        "possessive",
        "inflection",
        "de",
        "fr",
        "es",
    }


def test_forgotten_facts_are_held_back_in_other_words_and_no_other_fact_of_the_person_is(
    tmp_path, minilm, capsys
):
    facts, unrelated = suite()
    with MemoryEngine(tmp_path / "m.db", minilm, FakeClock(), secret_key=KEY_A) as engine:
        alice = engine.people.resolve("discord", "alice", "Alice")
        # as the composition root wires it
        engine.memories.tombstones.own_names = engine.people.own_names
        assert engine.memories.tombstones.bury([about(alice, fact) for fact, _ in facts]) == len(
            facts
        )
        held, total = Counter(), Counter()
        for _, rewordings in facts:
            for kind, text in rewordings:
                group = "translation" if kind in ("de", "fr", "es") else "english"
                total[group] += 1
                held[group] += not unforgotten(engine, [about(alice, text)])
        blocked = [text for text in unrelated if not unforgotten(engine, [about(alice, text)])]
        # another person's, same words
        bob = [fact for fact, _ in facts if unforgotten(engine, [about("bob", fact)])]
    rate = sum(held.values()) / sum(total.values())
    with capsys.disabled():
        print(
            f"\nparaphrase suite: {sum(held.values())}/{sum(total.values())} rewordings held ({rate:.0%}; English "
            f"{held['english']}/{total['english']}, translations {held['translation']}/{total['translation']}), "
            f"{len(blocked)}/{len(unrelated)} unrelated facts blocked"
        )
    assert blocked == []
    assert len(bob) == len(facts)  # a tombstone holds for the person it was about only
    assert rate >= HELD_AT_LEAST and held["english"] / total["english"] >= ENGLISH_HELD_AT_LEAST


def test_a_name_holds_a_forgotten_fact_in_any_language_and_any_order(engine):
    forget_memory(engine, remember(engine, "Alice keeps a tortoise called Quintrell").id)
    again = [
        "Quintrell is Alice's tortoise",
        "Alice hat eine Schildkröte namens Quintrell",
        "Alice owns a tortoise named Quintrell",
    ]
    assert unforgotten(engine, [about("alice", text) for text in again]) == []
    assert unforgotten(engine, [about("alice", "Alice keeps a hamster called Biscuit")]) != []


# -- the key (item 3) ---------------------------------------------------------------------------------------------
TRUE = "Alice keeps a tortoise called Quintrell"


def guesses() -> list[str]:
    """10,000 guesses at the forgotten sentence, the true one among them (what an attacker with a name list tries)."""
    animals = [
        "tortoise",
        "turtle",
        "parrot",
        "hamster",
        "rabbit",
        "ferret",
        "gecko",
        "iguana",
        "cat",
        "dog",
    ]
    names = [
        f"{a}{b}"
        for a in ("Quin", "Bram", "Tess", "Orla", "Mick", "Zed", "Puck", "Rolo", "Fen", "Gil")
        for b in NAME_ENDS
    ]
    found = [f"Alice keeps a {animal} called {name}" for animal in animals for name in names]
    return found[:10_000] if TRUE in found[:10_000] else [TRUE, *found[:9_999]]


NAME_ENDS = [
    f"{s}{t}"
    for s in ("trell", "wick", "ley", "ton", "by", "more", "ford", "ham", "well", "stone")
    for t in "abcdefghij"
]


def confirmed(path: Path, keys: list[bytes]) -> list[str]:
    """The guesses whose keyed hash equals a tombstone's, trying each of ``keys`` (the attacker's candidates)."""
    con = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    stored = {
        mac
        for row in con.execute("SELECT scope, scope_id, content_mac, fact_mac FROM tombstones")
        for mac in row[2:]
    }
    owners = {
        f"{s}|{i}\x00"
        for s, i, *_ in con.execute("SELECT scope, scope_id, content_mac, fact_mac FROM tombstones")
    }
    con.close()
    hits = []
    for guess in guesses():
        forms = {normalised(guess)} | {
            normalised(f"{subject} {guess}") for subject in ("pet", "hobby", "")
        }
        macs = {
            hmac.new(k, (o + f).encode(), hashlib.sha256).hexdigest()
            for k in keys
            for o in owners
            for f in forms
        }
        hits += [guess] if macs & stored else []
    return hits


def every_setting_as_a_key(path: Path) -> list[bytes]:
    con = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    values = [str(v) for (v,) in con.execute("SELECT value FROM settings")]
    con.close()
    return [v.encode() for v in values] + [bytes.fromhex(v) for v in values if _is_hex(v)]


def _is_hex(value: str) -> bool:
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True


def test_the_store_file_alone_cannot_confirm_a_guess_at_a_forgotten_fact(tmp_path, embedder):
    path = tmp_path / "store.db"
    with MemoryEngine(path, embedder, FakeClock(), secret_key=KEY_A) as engine:
        forget_memory(engine, remember(engine, TRUE, subject="pet").id)
    # everything the file holds, tried as the key
    assert confirmed(path, every_setting_as_a_key(path)) == []
    # the attack itself works: with the key, the guess is confirmed
    assert TRUE in confirmed(path, [KEY_A])


def test_an_older_store_has_its_in_store_key_moved_out_and_its_tombstones_still_hold(
    tmp_path, embedder
):
    path, old_key = tmp_path / "store.db", bytes.fromhex("ab" * 32)
    with MemoryEngine(
        path, embedder, FakeClock()
    ) as engine:  # a store as issue 31 found it: its key in settings
        engine.db.set_setting(KEY, old_key.hex())
        legacy = engine.memories.tombstones._macs(about("alice", TRUE), old_key)
        engine.db.execute(
            "INSERT INTO tombstones (scope, scope_id, content_mac, fact_mac, buried_at, keyed) VALUES ('user', 'alice', ?, ?, 0, 0)",
            legacy[:2],
        )
    # the finding: the file alone recovers it
    assert TRUE in confirmed(path, every_setting_as_a_key(path))
    with MemoryEngine(path, embedder, FakeClock(), secret_key=KEY_A) as engine:
        # moved out at once
        assert engine.db.get_setting(KEY) is None and engine.db.get_setting(LEGACY) is not None
        # still held back, with the key from outside
        assert unforgotten(engine, [about("alice", TRUE)]) == []
    assert confirmed(path, every_setting_as_a_key(path)) == []
    for file in (p for p in tmp_path.iterdir() if p.name.startswith("store.db")):
        assert old_key.hex().encode() not in file.read_bytes(), file.name
