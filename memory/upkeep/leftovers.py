"""What remains of a person or of a word on every surface of the store (SEC-7, ``companion audit forget``).

A forget is meant to leave nothing; this looks, and reports counts per surface, never the words it looked for
nor what it found. ``Found.remaining`` is None when a surface could not be read (a PostgreSQL data directory this
user may not read); the caller decides what that means.

    surface         a word                                        a person
    tables          rows with it in any text column, every        their rows, as the forget registry finds them
                    ordinary table (not the index's own)          (memory.upkeep.registry)
    fts             index entries of its term, in each full-text  index entries left by a row that is gone
                    index (fts5vocab: what MATCH would find)      (orphans), and those of their rows
    fts shadow      its bytes in the index's own tables           their ids' bytes there
    vectors         vectors whose row is gone (no text says what  vectors of their rows and their DM partitions,
                    a vector holds; an orphan may be anyone's)    and orphans
    journals,       its bytes in every file under the folder      their ids' bytes, and journal lines in their
    exports,                                                      own folder
    backups
    db file, wal,   its bytes in the file and in each side file   their ids' bytes
    shm, journal    (a stray rollback journal too)
    beside the      its bytes in every other file in the store's  their ids' bytes
    store           folder: the chat's log, a MEMORY.md ...
    data directory  (PostgreSQL) its bytes in every file there, when this user may read it

The file surfaces are ``memory.upkeep.leftover_files``'s.

Bytes are compared without ASCII case (a word is found as typed, lowercased or capitalised); the full-text
indexes keep lowercased stems, looked for as the index's tokenizer makes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..engine import MemoryEngine
from ..scopes import message_partition, placeholders
from ..storage.catalog import column_types
from ..storage.corpus import Corpus
from .leftover_files import FileHit, beside, bytes_in, data_directory, in_folder, store_files
from .registry import REGISTRY, person_keys, person_rows

NOT_TEXT = (
    "blob",
    "int",
    "real",
    "float",
    "double",
    "numeric",
    "bool",
    "bytea",
    "vector",
    "tsvector",
)


@dataclass(frozen=True, slots=True)
class Folders:
    """Folders beside the store that may hold copies (None: not configured, or not there)."""

    journals: Path | None = None
    exports: Path | None = None
    backups: Path | None = None
    beside: Path | None = None  # the store's folder: the chat's log and any other file there


@dataclass(frozen=True, slots=True)
class Sought:
    """What is looked for: words, or a person (their ids, which are also what their bytes are looked for by)."""

    words: tuple[str, ...] = ()
    person_ids: tuple[str, ...] = ()

    def needles(self) -> list[bytes]:
        return [n.lower().encode("utf-8") for n in (*self.words, *self.person_ids) if n]


def audit(engine: MemoryEngine, target: Sought, folders: Folders) -> list[FileHit]:
    """Every surface, in the order of the module's table."""
    if not target.needles():
        raise ValueError("name a person or a word to look for")
    found = [_tables(engine, target), *_fts(engine, target), _vectors(engine, target)]
    needles = target.needles()
    for name, folder in (
        ("journals", folders.journals),
        ("exports", folders.exports),
        ("backups", folders.backups),
    ):
        found.append(in_folder(name, folder, needles, target.person_ids))
    store = None if engine.db.engine == "postgresql" else Path(engine.db.path)
    found += [_data_directory(engine, target)] if store is None else store_files(store, needles)
    found.append(beside(folders.beside, store, needles))
    return found


def remaining(found: Iterable[FileHit]) -> int:
    return sum(f.remaining or 0 for f in found)


@dataclass(frozen=True, slots=True)
class Presence:
    """A word looked for, as the store holds it now: ``rows``, the memories and messages that hold
    it (what the person said, what was learned); ``buried``, whether a tombstone may hold it (a
    targeted forget lays one). Held by rows and by no tombstone, it was never forgotten (or was
    said again, which lifts its tombstone): present, not left behind."""

    rows: int
    buried: bool

    @property
    def never_forgotten(self) -> bool:
        return self.rows > 0 and not self.buried


def presence(engine: MemoryEngine, word: str) -> Presence:
    rows = _rows_with(engine, "memories", ["subject", "content"], word)
    rows += _rows_with(engine, "messages", ["content"], word)
    return Presence(rows, engine.memories.tombstones.may_hold(word))


# -- tables ----------------------------------------------------------------------------------------------
def _tables(engine: MemoryEngine, target: Sought) -> FileHit:
    counts: dict[str, int] = {}
    if target.person_ids:
        keys = person_keys(engine, list(target.person_ids))
        for holder in REGISTRY:
            if holder.person and (n := len(person_rows(engine, holder, keys))):
                counts[holder.table] = counts.get(holder.table, 0) + n
    for word in target.words:
        for table, columns in _text_columns(engine):
            if n := _rows_with(engine, table, columns, word):
                counts[table] = counts.get(table, 0) + n
    return FileHit("tables", sum(counts.values()), tuple(sorted(counts.items())))


def _text_columns(engine: MemoryEngine) -> Iterator[tuple[str, list[str]]]:
    """Every ordinary table's text columns (an index's own tables are the fts shadow surface)."""
    shadows = _shadow_tables(engine)
    tables: dict[str, list[str]] = {}
    for found in column_types(engine.db):
        if (
            found.table not in shadows
            and not found.table.startswith("sqlite_")
            and not any(k in found.type.lower() for k in NOT_TEXT)
        ):
            tables.setdefault(found.table, []).append(found.column)
    yield from tables.items()


def _rows_with(engine: MemoryEngine, table: str, columns: list[str], word: str) -> int:
    """Rows holding ``word`` in a text column (a number not inside a longer one: ``bytes_in``)."""
    texts = ", ".join(f"CAST({_quoted(c)} AS TEXT)" for c in columns)  # bytes_in lowers them
    test = " OR ".join(f"instr(lower(CAST({_quoted(c)} AS TEXT)), ?) > 0" for c in columns)
    needle = [word.lower().encode("utf-8")]
    rows = engine.db.execute(
        f"SELECT {texts} FROM {_quoted(table)} WHERE {test}", (word.lower(),) * len(columns)
    )
    return sum(1 for row in rows if any(bytes_in(_raw(v or ""), needle) for v in row))


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# -- the full-text indexes -------------------------------------------------------------------------------
def _corpora(engine: MemoryEngine) -> tuple[Corpus, Corpus]:
    return engine.memory_rows.corpus, engine.messages.corpus


def _shadow_tables(engine: MemoryEngine) -> set[str]:
    if engine.db.engine == "postgresql":
        return set()
    virtual = [
        n
        for (n,) in engine.db.execute(
            "SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'"
        )
    ]
    every = [n for (n,) in engine.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {t for t in every for v in virtual if t.startswith(v + "_")}


def _fts(engine: MemoryEngine, target: Sought) -> list[FileHit]:
    if engine.db.engine == "postgresql":
        return [_pg_words(engine, target)]
    entries: dict[str, int] = {}
    for corpus in _corpora(engine):
        n = sum(_term_entries(engine, corpus, word) for word in target.words)
        n += _orphan_entries(engine, corpus) if target.person_ids else 0
        n += _their_entries(engine, corpus, target) if target.person_ids else 0
        if n:
            entries[corpus.fts_table] = n
    return [
        FileHit("fts", sum(entries.values()), tuple(sorted(entries.items()))),
        _shadow_bytes(engine, target),
    ]


def _term_entries(engine: MemoryEngine, corpus: Corpus, word: str) -> int:
    """Documents the index lists under the word's terms (its stem, and the word as typed): MATCH would find them."""
    terms = list(dict.fromkeys(t for pair in corpus.fts.words(word, 200) for t in pair))
    vocab = ".".join(("temp", f"{corpus.fts_table}_vocab"))  # made by the corpus's FtsQueryBuilder
    if not terms:
        return 0
    return int(
        engine.db.scalar(
            f"SELECT COALESCE(SUM(doc), 0) FROM {vocab} WHERE term IN ({placeholders(terms)})",
            terms,
        )
    )


def _orphan_entries(engine: MemoryEngine, corpus: Corpus) -> int:
    """Index entries whose row is gone (``{fts}_docsize`` has a row per indexed document)."""
    docsize = _docsize(corpus)
    return int(
        engine.db.scalar(
            f"SELECT COUNT(*) FROM {docsize} WHERE id NOT IN (SELECT rid FROM {corpus.table})"
        )
    )


def _their_entries(engine: MemoryEngine, corpus: Corpus, target: Sought) -> int:
    rids = _their_rids(engine, corpus, target)
    if not rids:
        return 0
    docsize = _docsize(corpus)
    return int(
        engine.db.scalar(f"SELECT COUNT(*) FROM {docsize} WHERE id IN ({placeholders(rids)})", rids)
    )


def _docsize(corpus: Corpus) -> str:
    """FTS5's table of one row per indexed document (its id is the row's rid)."""
    return corpus.fts_table + "_docsize"


def _their_rids(engine: MemoryEngine, corpus: Corpus, target: Sought) -> list[int]:
    holder = next(h for h in REGISTRY if h.table == corpus.table)
    return [
        r["row_key"]
        for r in person_rows(engine, holder, person_keys(engine, list(target.person_ids)))
    ]


def _shadow_bytes(engine: MemoryEngine, target: Sought) -> FileHit:
    """The needles' bytes (and each word's index terms) in the index's own tables, row by row."""
    needles = target.needles()
    for corpus in _corpora(engine):
        needles += [
            t.encode()
            for word in target.words
            for pair in corpus.fts.words(word, 200)
            for t in pair
        ]
    counts: dict[str, int] = {}
    for table in sorted(_shadow_tables(engine)):
        if table.startswith(tuple(c.vectors.table for c in _corpora(engine))):
            continue  # a vector's bytes are numbers: the vectors surface
        n = sum(bytes_in(_raw(v), needles) for row in _all_values(engine, table) for v in row)
        if n:
            counts[table] = n
    return FileHit("fts shadow tables", sum(counts.values()), tuple(sorted(counts.items())))


def _raw(value: object) -> bytes:
    return (
        bytes(value)
        if isinstance(value, (bytes, bytearray, memoryview))
        else str(value).encode("utf-8", "replace")
    )


def _all_values(engine: MemoryEngine, table: str) -> Iterator[tuple]:
    yield from engine.db.execute(f"SELECT * FROM {_quoted(table)}")


# -- vectors -----------------------------------------------------------------------------------------------
def _vectors(engine: MemoryEngine, target: Sought) -> FileHit:
    counts: dict[str, int] = {}
    for corpus in _corpora(engine):
        table, key = corpus.vectors.table, "rid" if engine.db.engine == "postgresql" else "rowid"
        if not _has_table(engine, table):
            continue
        n = int(
            engine.db.scalar(
                f"SELECT COUNT(*) FROM {table} WHERE {key} NOT IN (SELECT rid FROM {corpus.table})"
            )
        )
        if target.person_ids:
            rids = _their_rids(engine, corpus, target)
            dms = (
                [message_partition(None, p) for p in target.person_ids]
                if corpus.table != "memories"
                else []
            )
            n += (
                int(
                    engine.db.scalar(
                        f"SELECT COUNT(*) FROM {table} WHERE {key} IN ({placeholders(rids)})", rids
                    )
                )
                if rids
                else 0
            )
            n += sum(_in_partition(engine, table, dm) for dm in dms)
        if n:
            counts[table] = n
    return FileHit(
        "vectors",
        sum(counts.values()),
        tuple(sorted(counts.items())),
        "orphans, and for a person their rows' vectors",
    )


def _in_partition(engine: MemoryEngine, table: str, partition: str) -> int:
    return int(
        engine.db.scalar(f"SELECT COUNT(*) FROM {table} WHERE partition_key = ?", (partition,))
    )


def _has_table(engine: MemoryEngine, table: str) -> bool:
    if engine.db.engine == "postgresql":
        return bool(engine.db.scalar("SELECT to_regclass(?) IS NOT NULL", (table,)))
    return bool(engine.db.scalar("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)))


def _pg_words(engine: MemoryEngine, target: Sought) -> FileHit:
    """PostgreSQL's full-text index is each table's generated ``words`` column: the rows it still matches."""
    counts: dict[str, int] = {}
    for corpus in _corpora(engine):
        sql = f"SELECT COUNT(*) FROM {corpus.table} WHERE words @@ plainto_tsquery('english', ?)"
        n = sum(int(engine.db.scalar(sql, (w,))) for w in target.words)
        if n:
            counts[corpus.table + ".words"] = n
    return FileHit("fts", sum(counts.values()), tuple(sorted(counts.items())))


def _data_directory(engine: MemoryEngine, target: Sought) -> FileHit:
    """PostgreSQL's files, when this role may ask where they are and this user may read them."""
    try:
        where = Path(str(engine.db.scalar("SHOW data_directory")))
    except Exception:  # a role without pg_read_all_settings may not ask: reported, not guessed
        return FileHit(
            "data directory", None, note="not readable by this role (needs pg_read_all_settings)"
        )
    return data_directory(where, target.needles())
