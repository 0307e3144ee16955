"""What file ingest (WRITE-7) has read; the one owner of ``ingest_files`` and ``ingest_passages``. Reading a
file and learning from it is ``memory.write.ingest``'s business: this keeps which passage went into which memory.

    known(path, partition)          the file's id and the hash it was last ingested with
    open_file(...)                  the file's row, made on first sight with no hash
    rows(file_id) / add_rows(...)   its passages (one row per memory made of a passage, or one with none)
    finish(...)                     its passages as they are now, its hash, size and passage count
    exists(file_id)                 False once the file was forgotten
    files_at(path) / memory_ids(files) / drop(files)   what forgetting a file reads and deletes
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..clock import Clock
from ..scopes import placeholders
from .db import Database


@dataclass(frozen=True, slots=True)
class PassageRow:
    """One passage of a file and a memory made of it (None: the passage gave none)."""

    seq: int
    digest: str
    page: int | None
    start: int
    end: int
    memory_id: str | None


class IngestLog:
    def __init__(self, db: Database, clock: Clock) -> None:
        self.db, self.clock = db, clock

    def known(self, path: str, partition: str) -> tuple[int, str] | None:
        row = self.db.one(
            "SELECT id, content_hash FROM ingest_files WHERE path = ? AND partition_key = ?",
            (path, partition),
        )
        return (row["id"], row["content_hash"]) if row else None

    def open_file(self, path: str, partition: str, scope: str, scope_id: str, size: int) -> int:
        """The file's row (made on first sight with no hash, so a crash before ``finish`` ingests it again)."""
        found = self.known(path, partition)
        if found:
            return found[0]
        self.db.execute(
            "INSERT INTO ingest_files "
            "(path, partition_key, scope, scope_id, content_hash, size, ingested_at) "
            "VALUES (?, ?, ?, ?, '', ?, ?)",
            (path, partition, scope, scope_id, size, self.clock.now()),
        )
        return int(self.db.con.last_insert_rowid())

    def rows(self, file_id: int) -> list[PassageRow]:
        cur = self.db.execute(
            "SELECT seq, passage_hash, page, start_line, end_line, memory_id FROM ingest_passages "
            "WHERE file_id = ? ORDER BY seq, rowid",
            (file_id,),
        )
        return [PassageRow(*r) for r in cur]

    def add_rows(self, file_id: int, rows: Iterable[PassageRow]) -> None:
        self.db.con.executemany(
            "INSERT INTO ingest_passages "
            "(file_id, seq, passage_hash, page, start_line, end_line, memory_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(file_id, r.seq, r.digest, r.page, r.start, r.end, r.memory_id) for r in rows],
        )

    def finish(
        self, file_id: int, rows: list[PassageRow], digest: str, size: int, passages: int
    ) -> None:
        with self.db.transaction():
            self.db.execute("DELETE FROM ingest_passages WHERE file_id = ?", (file_id,))
            self.add_rows(file_id, rows)
            self.db.execute(
                "UPDATE ingest_files SET content_hash = ?, size = ?, passages = ?, ingested_at = ? "
                "WHERE id = ?",
                (digest, size, passages, self.clock.now(), file_id),
            )

    def exists(self, file_id: int) -> bool:
        return bool(self.db.scalar("SELECT 1 FROM ingest_files WHERE id = ?", (file_id,)))

    def files_at(self, path: str) -> list[int]:
        """The file's ids (one per partition it was ingested into)."""
        return [
            int(i)
            for (i,) in self.db.execute("SELECT id FROM ingest_files WHERE path = ?", (path,))
        ]

    def memory_ids(self, files: list[int]) -> list[str]:
        """The memories made of these files' passages."""
        return [
            str(m)
            for (m,) in self.db.execute(
                "SELECT DISTINCT memory_id FROM ingest_passages "
                f"WHERE file_id IN ({placeholders(files)}) AND memory_id IS NOT NULL",
                tuple(files),
            )
        ]

    def drop(self, files: list[int]) -> None:
        marks = placeholders(files)
        with self.db.transaction():
            self.db.execute(f"DELETE FROM ingest_passages WHERE file_id IN ({marks})", tuple(files))
            self.db.execute(f"DELETE FROM ingest_files WHERE id IN ({marks})", tuple(files))
