"""Vector storage and exact nearest-neighbour search.

sqlite-vec's ``vec0`` table is where vectors live (durable, in the one SQLite file, partitioned by the
same partition keys as the rows, see ``memory.scopes``). A brute-force vec0 scan costs ~50 ms at 100k
rows on two cores (STACK.md), too slow for a reply path, so queries run against an in-process numpy
mirror of the table, grouped by partition: one matrix product over only the partitions a context may
see. Each partition is loaded from vec0 the first time a search needs it (so a process holds only the
partitions its conversations see), kept in step by this process's own writes, and all are dropped
when ``PRAGMA data_version`` shows that another connection (the CLI, say) committed. With the mirror
off (``use_mirror=False``) the same search runs as vec0 KNN queries, one per partition.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from .db import Database

log = logging.getLogger(__name__)


EXACT_LIMIT = 20_000  # below this many visible vectors, scan exactly
OVERSAMPLE = 10  # above it, keep k x this many by sign-bit Hamming distance, then rescore exactly
MIN_SHORTLIST = 200


def limit_blas_threads() -> None:
    """One BLAS thread for the process. The scans here are memory-bound matrix-vector products that a
    second thread barely speeds up, while BLAS workers left spinning after each call starve the
    embedding model and SQLite of the machine's few cores (a turn took ~1.5x as long on two cores)."""
    threadpool_limits(limits=1, user_api="blas")


def sign_bits(mat: np.ndarray) -> np.ndarray:
    """Each vector's sign pattern packed into uint64 words, one row per word (384 dims -> 6 x n): 1/32 of
    the bytes, and word-major so the Hamming distance is a few contiguous passes."""
    packed = np.packbits(mat > 0, axis=1)
    pad = (-packed.shape[1]) % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    return np.ascontiguousarray(np.ascontiguousarray(packed).view(np.uint64).T)


def hamming(bits: np.ndarray, query_bits: np.ndarray) -> np.ndarray:
    """Distance from the query's sign bits (one word per row of ``bits``) to every column."""
    dist = np.bitwise_count(bits[0] ^ query_bits[0]).astype(np.uint16)
    for word, q in zip(bits[1:], query_bits[1:], strict=True):
        dist += np.bitwise_count(word ^ q)
    return dist


def nearest(dist: np.ndarray, keep: int) -> np.ndarray:
    """Positions of the ``keep`` smallest distances (small integers: a histogram finds the cut, no sort)."""
    if len(dist) <= keep:
        return np.arange(len(dist))
    cut = int(np.searchsorted(np.cumsum(np.bincount(dist)), keep))
    below = np.flatnonzero(dist < cut)
    return np.concatenate([below, np.flatnonzero(dist == cut)[: keep - len(below)]])


@dataclass(slots=True)
class _Partition:
    rids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    mat: np.ndarray | None = None
    bits: np.ndarray | None = None
    pending_rids: list[int] = field(default_factory=list)
    pending_vecs: list[np.ndarray] = field(default_factory=list)
    _index: dict[int, int] | None = None

    def position(self, rid: int, dim: int) -> int | None:
        self.flush(dim)
        if self._index is None:
            self._index = {int(r): i for i, r in enumerate(self.rids)}
        return self._index.get(rid)

    def flush(self, dim: int) -> None:
        if not self.pending_rids:
            return
        fresh = np.vstack(self.pending_vecs).astype(np.float32)
        base = self.mat if self.mat is not None else np.zeros((0, dim), dtype=np.float32)
        self.mat = np.vstack([base, fresh])
        if self.bits is not None:
            self.bits = np.hstack([self.bits, sign_bits(fresh)])
        self.rids = np.concatenate([self.rids, np.array(self.pending_rids, dtype=np.int64)])
        self.pending_rids.clear()
        self.pending_vecs.clear()
        self._index = None


class VectorIndex:
    """One vec0 table (``{table}``) keyed by the integer rowid of ``owner`` (whose rows carry ``partition_key``).

    This process's own commits do not move ``data_version``, so its writes update the mirror directly
    (``mirror_add``/``mirror_remove``, called after the transaction commits).
    """

    def __init__(self, db: Database, table: str, owner: str, *, use_mirror: bool = True, exact_limit: int = EXACT_LIMIT) -> None:
        self.db = db
        self.table = table
        self.owner = owner
        self.use_mirror = use_mirror
        self.exact_limit = exact_limit
        self.dim: int | None = None
        self._parts: dict[str, _Partition] | None = None
        self._where: dict[int, str] = {}
        self._version = -1
        if self._exists():
            self.dim = self._read_dim()

    # -- schema ---------------------------------------------------------------------------------
    def _exists(self) -> bool:
        return bool(self.db.scalar("SELECT 1 FROM sqlite_master WHERE name = ?", (self.table,)))

    def _read_dim(self) -> int:
        sql = self.db.scalar("SELECT sql FROM sqlite_master WHERE name = ?", (self.table,))
        return int(sql.split("float[")[1].split("]")[0])

    def ensure(self, dim: int) -> None:
        if self.dim is None:
            self.db.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.table} USING vec0("
                f"partition_key TEXT PARTITION KEY, embedding float[{dim}] distance_metric=cosine, chunk_size=64)"
            )
            self.dim = dim

    def drop(self) -> None:
        """Remove every vector (reembed with another dimension)."""
        self.db.execute(f"DROP TABLE IF EXISTS {self.table}")
        self.dim = None
        self._parts = None

    # -- writes (call inside the caller's transaction; the mirror follows after commit) -----------
    def write(self, rid: int, partition_key: str, vector: np.ndarray) -> None:
        self.ensure(len(vector))
        self.db.execute(f"DELETE FROM {self.table} WHERE rowid = ?", (rid,))
        self.db.execute(
            f"INSERT INTO {self.table} (rowid, partition_key, embedding) VALUES (?, ?, ?)",
            (rid, partition_key, np.asarray(vector, dtype=np.float32).tobytes()),
        )

    def write_many(self, rows: list[tuple[int, str, np.ndarray]]) -> None:
        if not rows:
            return
        self.ensure(len(rows[0][2]))
        self.db.con.executemany(
            f"INSERT INTO {self.table} (rowid, partition_key, embedding) VALUES (?, ?, ?)",
            [(rid, key, np.asarray(v, dtype=np.float32).tobytes()) for rid, key, v in rows],
        )

    def delete(self, rids: list[int]) -> None:
        if self.dim is None or not rids:
            return
        self.db.con.executemany(f"DELETE FROM {self.table} WHERE rowid = ?", [(r,) for r in rids])

    def mirror_add(self, rows: list[tuple[int, str, np.ndarray]]) -> None:
        """Committed rows into the loaded partitions (a partition not loaded yet will read them from vec0)."""
        if self._parts is None:
            return
        for rid, key, vector in rows:
            self._mirror_remove(rid)
            part = self._parts.get(key)
            if part is None:
                continue
            part.pending_rids.append(rid)
            part.pending_vecs.append(np.asarray(vector, dtype=np.float32)[None, :])
            self._where[rid] = key

    def mirror_remove(self, rids: list[int]) -> None:
        if self._parts is None:
            return
        for rid in rids:
            self._mirror_remove(rid)

    def _mirror_remove(self, rid: int) -> None:
        key = self._where.pop(rid, None)
        if key is None or self._parts is None:
            return
        part = self._parts[key]
        part.flush(self.dim or 0)
        keep = part.rids != rid
        part.rids = part.rids[keep]
        part.mat = part.mat[keep] if part.mat is not None else None
        part.bits = part.bits[:, keep] if part.bits is not None else None
        part._index = None

    def invalidate(self) -> None:
        self._parts = None

    # -- reads ----------------------------------------------------------------------------------
    def get(self, rids: list[int]) -> dict[int, np.ndarray]:
        """Stored vectors by rowid (from the mirror when it is loaded, else from vec0)."""
        if self.dim is None or not rids:
            return {}
        if self.use_mirror:
            return self._mirror_get(rids)
        return self._vec0_get(rids)

    def _mirror_get(self, rids: list[int]) -> dict[int, np.ndarray]:
        """From loaded partitions where the row is there; the rest straight from vec0."""
        parts = self._mirror()
        found: dict[int, np.ndarray] = {}
        missing = []
        for rid in rids:
            key = self._where.get(rid)
            part = parts[key] if key is not None else None
            pos = part.position(rid, self.dim or 0) if part is not None else None
            if part is not None and part.mat is not None and pos is not None:
                found[rid] = part.mat[pos]
            else:
                missing.append(rid)
        return found | self._vec0_get(missing)

    def _vec0_get(self, rids: list[int]) -> dict[int, np.ndarray]:
        if not rids:
            return {}
        # one json array, not an IN-list: vec0 serves IN (?, ?, ...) about 20x slower
        sql = f"SELECT rowid, embedding FROM {self.table} WHERE rowid IN (SELECT value FROM json_each(?))"
        return {rid: np.frombuffer(blob, dtype=np.float32) for rid, blob in self.db.execute(sql, (json.dumps(rids),))}

    def search(self, query: np.ndarray, partitions: tuple[str, ...], k: int) -> list[tuple[int, float]]:
        """(rowid, cosine similarity) of the k nearest rows within the given partitions, best first."""
        if self.dim is None or k <= 0 or not partitions or len(query) != self.dim:
            return []
        if not self.use_mirror:
            return self._search_vec0(query, partitions, k)
        return self._scan(query, partitions, k)

    def _scan(self, query: np.ndarray, partitions: tuple[str, ...], k: int) -> list[tuple[int, float]]:
        mirror = self._mirror()  # one data_version check per search
        parts = [self._partition(mirror, key) for key in partitions]
        for part in parts:
            part.flush(self.dim or 0)
        loaded = [(p, p.mat) for p in parts if p.mat is not None and len(p.rids)]
        if not loaded:
            return []
        q = np.asarray(query, dtype=np.float32)
        total = sum(len(p.rids) for p, _ in loaded)
        if total <= self.exact_limit:
            sims = np.concatenate([mat @ q for _, mat in loaded])
            rids = np.concatenate([p.rids for p, _ in loaded])
            return _top(rids, sims, k)
        return self._shortlist_search(loaded, q, k)

    def _shortlist_search(self, loaded: list[tuple[_Partition, np.ndarray]], q: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Hamming distance on sign bits picks a shortlist (memory-bandwidth bound: 48 bytes a row, not 1536); exact cosine ranks it."""
        qbits = sign_bits(q[None, :])[:, 0]
        keep = max(k * OVERSAMPLE, MIN_SHORTLIST)
        rids, sims = [], []
        for part, mat in loaded:
            if part.bits is None:
                part.bits = sign_bits(mat)
            pick = nearest(hamming(part.bits, qbits), keep)
            rids.append(part.rids[pick])
            sims.append(mat[pick] @ q)
        return _top(np.concatenate(rids), np.concatenate(sims), k)

    def _search_vec0(self, query: np.ndarray, partitions: tuple[str, ...], k: int) -> list[tuple[int, float]]:
        hits: list[tuple[int, float]] = []
        blob = np.asarray(query, dtype=np.float32).tobytes()
        for key in partitions:
            sql = f"SELECT rowid, distance FROM {self.table} WHERE embedding MATCH ? AND k = ? AND partition_key = ?"
            hits.extend((rid, 1.0 - dist) for rid, dist in self.db.execute(sql, (blob, k, key)))
        return sorted(hits, key=lambda h: -h[1])[:k]

    def _mirror(self) -> dict[str, _Partition]:
        version = self.db.data_version()
        if self._parts is None or version != self._version:
            self._parts, self._where = {}, {}
            self._version = version
        assert self._parts is not None
        return self._parts

    def _partition(self, mirror: dict[str, _Partition], key: str) -> _Partition:
        part = mirror.get(key)
        if part is None:
            part = mirror[key] = self._load(key)
        return part

    def _load(self, key: str) -> _Partition:
        # vec0 scans the whole table for a partition_key filter; looking rows up by rowid is ~5x faster
        sql = f"SELECT rowid, embedding FROM {self.table} WHERE rowid IN (SELECT rid FROM {self.owner} WHERE partition_key = ?)"
        rids, blobs = [], []
        for rid, blob in self.db.execute(sql, (key,)):
            rids.append(rid)
            blobs.append(blob)
        self._where.update((rid, key) for rid in rids)
        mat = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(rids), self.dim or 0).copy()
        log.debug("loaded %d vectors of %s from %s", len(rids), key, self.table)
        return _Partition(rids=np.array(rids, dtype=np.int64), mat=mat)


def _top(rids: np.ndarray, sims: np.ndarray, k: int) -> list[tuple[int, float]]:
    top = np.argpartition(-sims, k - 1)[:k] if len(sims) > k else np.arange(len(sims))
    top = top[np.argsort(-sims[top])]
    return [(int(rids[i]), float(sims[i])) for i in top]
