"""The tombstones' repository (``memory.storage.tombstones``): rows bound to whom they are about,
read back as ``Buried`` values."""

from __future__ import annotations

from memory.engine import MemoryEngine
from memory.storage.tombstones import Buried, TombstoneRows


def _stone(person: str, mac: str, at: float) -> tuple:
    return ("user", person, None, f"c-{mac}", f"f-{mac}", "0000a:3", "", at)


def test_a_persons_tombstones_are_theirs_alone(engine: MemoryEngine) -> None:
    rows = TombstoneRows(engine.db)
    assert not rows.any()
    rows.add([_stone("alice", "a1", 10.0), _stone("alice", "a2", 11.0), _stone("bob", "b1", 12.0)])
    alice = rows.of("user", "alice")
    assert all(isinstance(b, Buried) for b in alice)
    assert [(b.content_mac, b.fact_mac, b.keyed, b.buried_at) for b in alice] == [
        ("c-a1", "f-a1", 1, 10.0),
        ("c-a2", "f-a2", 1, 11.0),
    ]
    assert rows.of("user", "alice'; DROP TABLE tombstones; --") == []
    assert rows.of("guild", "alice") == []  # bound to the scope too, not just the id
    rows.delete([])  # nothing to lift: no statement (PostgreSQL refuses "IN ()")
    rows.delete([alice[0].id])
    assert [b.content_mac for b in rows.of("user", "alice")] == ["c-a2"]
    assert (rows.count(), rows.any()) == (2, True)
