"""A store opened on its own, with no engine, only to be looked at or copied: the doctor's checks,
``companion restore``'s source, the upgrade check before a read-only engine opens. It answers with
values (a verdict, a count, a setting, the model's sight), never with rows: the operator's code holds
this, not the ``Database`` under it.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from .db import Database, read_only
from .memories import count_memories
from .model_traits import ModelTraits, SightTrait
from .pg import is_postgres, open_database


class StoreFile:
    def __init__(self, where: str | Path) -> None:
        """``where``: an SQLite file, opened read-only (nothing is written or migrated: ``behind``
        says what a writable open would apply; no store there is an error), or a PostgreSQL URL.

        :raises MemoryStoreError: not a store, or one of a newer version.
        :raises OSError: nothing to read there."""
        self._db = open_database(where) if is_postgres(where) else Database(read_only(where))

    @staticmethod
    def upgrade(path: str | Path) -> None:
        """Opens the SQLite store writable once, which applies its pending migrations.

        :raises StoreUnavailable: the file cannot be written."""
        Database(path).close()

    @property
    def behind(self) -> int:
        """Schema migrations a read-only open found missing (0 for PostgreSQL: opening migrates)."""
        return self._db.behind

    def get_setting(self, key: str) -> str | None:
        return self._db.get_setting(key)

    def quick_check(self) -> str:
        """ "ok", or the first problems SQLite's quick integrity check found."""
        return self._db.quick_check()

    def memories(self) -> int:
        """How many memory rows the store holds, live or not."""
        return count_memories(self._db)

    def sight(self, model_key: str) -> SightTrait | None:
        """What the store recorded of whether the model sees images (``ModelTraits.sight``)."""
        return ModelTraits(self._db).sight(model_key)

    def backup_to(self, target: Path) -> None:
        """A consistent copy of the SQLite store at ``target`` (SQLite's backup API)."""
        self._db.backup_to(target)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> StoreFile:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()
