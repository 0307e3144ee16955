"""Vector storage and nearest-neighbour search.

sqlite-vec's ``vec0`` table is where vectors live (durable, in the one SQLite file, partitioned by the
same partition keys as the rows, see ``memory.scopes``). A brute-force vec0 scan costs ~50 ms at 100k
rows on two cores (STACK.md), too slow for a reply path, so queries run against an in-process numpy
mirror of the table, grouped by partition: one matrix product over only the partitions a context may
see. Each partition is loaded from vec0 the first time a search needs it (so a process holds only the
partitions its conversations see), kept in step by this process's own writes, and all are dropped
when ``PRAGMA data_version`` shows that another connection (the CLI, say) committed. With the mirror
off (``use_mirror=False``) the same search runs as vec0 KNN queries, one per partition.

The mirror is small: each row is int8 with a float32 scale (388 bytes at 384 dims, a quarter of
float32), its rowid in an int64 array, and, once a partition is large enough for the shortlist, its
sign bits (48 bytes). Against the float32 exact scan it keeps 99.6% of the top 10 and 99.9% of the top
40 on MiniLM sentence vectors, 99.5% and 99.7% on the LoCoMo dev turns
(``tests/memory/test_memory_mirror_recall.py``). int8 rather than float16: numpy has no float16 BLAS, and an
int8 block upcast to float32 then multiplied is 12x faster than the same float16 block (1.6 ms vs 18 ms
for 20k rows on two cores; float32 itself takes 3.1 ms). A partition loads in chunks
straight into its int8 arrays, with no full float32 copy on the way.

A ``MirrorBudget`` caps the bytes all mirrors of a store hold together. Past it, the least recently
searched partition is evicted; a partition that does not fit (or would push out another partition the
same search needs) is searched through vec0 until a later search finds room to load it again::

    search(context partitions)
      |-- loaded, or fits the budget after LRU eviction --> int8 scan (shortlist above exact_limit)
      `-- does not fit -------------------------------> vec0 KNN for that partition
    results of both merged by cosine similarity
"""

from __future__ import annotations

import functools
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from typing import TypeVar

import numpy as np
from threadpoolctl import threadpool_limits

from .db import Database
from .footprint import trim_heap

log = logging.getLogger(__name__)
T = TypeVar("T")


EXACT_LIMIT = 20_000  # below this many visible vectors, scan exactly
OVERSAMPLE = 10  # above it, keep k x this many by sign-bit Hamming distance, then rescore exactly
MIN_SHORTLIST = 200
DEFAULT_MIRROR_MB = (
    512  # 1M rows of one community in int8 need ~445 MB: they stay hot on a 1-2 GB machine
)
PARALLEL_ROWS = 50_000  # a scan this large runs beside the caller's full-text search (a thread handoff is ~0.1 ms)
LOAD_CHUNK = (
    4096  # rows read from vec0 and quantized at a time while a partition loads (6 MB of float32)
)


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
    # two scratch rows for the whole scan, not two per word
    xor = np.empty(bits.shape[1], dtype=np.uint64)
    ones = np.empty(bits.shape[1], dtype=np.uint8)
    dist = np.bitwise_count(np.bitwise_xor(bits[0], query_bits[0], out=xor)).astype(np.uint16)
    for word, q in zip(bits[1:], query_bits[1:], strict=True):
        np.add(dist, np.bitwise_count(np.bitwise_xor(word, q, out=xor), out=ones), out=dist)
    return dist


def nearest(dist: np.ndarray, keep: int) -> np.ndarray:
    """Positions of the ``keep`` smallest distances (small integers: a histogram finds the cut, no sort)."""
    if len(dist) <= keep:
        return np.arange(len(dist))
    cut = int(np.searchsorted(np.cumsum(np.bincount(dist)), keep))
    # one pass over all rows; the split below is over ~keep of them
    near = np.flatnonzero(dist <= cut)
    below = near[dist[near] < cut]
    return np.concatenate([below, near[dist[near] == cut][: keep - len(below)]])


def quantize(vecs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows as int8 with one float32 scale each (row ~= scale * int8 row); a zero row keeps scale 0."""
    vecs = np.asarray(vecs, dtype=np.float32)
    peak = np.abs(vecs).max(axis=1) if vecs.size else np.zeros(len(vecs), dtype=np.float32)
    scale = (peak / 127.0).astype(np.float32)
    safe = np.where(scale > 0, scale, 1.0).astype(np.float32)
    return np.rint(vecs / safe[:, None]).astype(np.int8), scale


def _dot(mat: np.ndarray, scale: np.ndarray, q: np.ndarray, block: int = 2048) -> np.ndarray:
    """``(scale * mat) @ q`` for int8 ``mat``, upcast one block at a time (never the whole matrix)."""
    out = np.empty(len(mat), dtype=np.float32)
    buf = np.empty((min(block, len(mat)), mat.shape[1]), dtype=np.float32)
    for lo in range(0, len(mat), block):
        rows = mat[lo : lo + block]
        tmp = buf[: len(rows)]
        tmp[...] = rows
        np.dot(tmp, q, out=out[lo : lo + len(rows)])
    return out * scale


@dataclass(slots=True)
class _Partition:
    """One partition's rows. ``rids``, ``mat``, ``scale`` and ``bits`` may be views of longer buffers: rows
    written while the partition is loaded go into spare room (a sixteenth more, made when it runs out), not
    into a fresh copy of the whole partition per new row, which at 1M rows would copy 400 MB for each
    and double the mirror's memory while it did."""

    rids: np.ndarray
    mat: np.ndarray  # int8, one row per rid
    scale: np.ndarray  # float32, one per row
    bits: np.ndarray | None = None
    pending_rids: list[int] = field(default_factory=list)
    pending_vecs: list[np.ndarray] = field(default_factory=list)
    _ascending: bool | None = (
        None  # whether rids are in order (None: not looked at since they changed)
    )
    _order: np.ndarray | None = None  # else their argsort: lookups by rowid without a Python dict
    _top: int | None = (
        None  # the largest rid in the arrays: new rows are above it, nothing to remove
    )
    _bufs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    _bits_buf: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        rids, mat, scale = self._bufs or (self.rids, self.mat, self.scale)
        bits = self._bits_buf if self._bits_buf is not None else self.bits
        pending = len(self.pending_rids) * self.mat.shape[1] * 4
        return (
            rids.nbytes
            + mat.nbytes
            + scale.nbytes
            + (bits.nbytes if bits is not None else 0)
            + pending
        )

    def positions(self, rids: np.ndarray) -> np.ndarray:
        """Position of each rowid in this partition, -1 where it is not here."""
        self.flush()
        if not len(self.rids):
            return np.full(len(rids), -1, dtype=np.int64)
        if self._ascending is None:
            # rows load in rowid order and new rows have larger rowids, so the rids are usually sorted
            # already: a 1 ms check at 1M rows instead of an 80 ms argsort after every write
            self._ascending = bool(np.all(self.rids[1:] >= self.rids[:-1]))
            self._order = None if self._ascending else np.argsort(self.rids, kind="stable")
        at = np.minimum(np.searchsorted(self.rids, rids, sorter=self._order), len(self.rids) - 1)
        pos = at if self._order is None else self._order[at]
        return np.where(self.rids[pos] == rids, pos, -1)

    def vector(self, pos: int) -> np.ndarray:
        return self.mat[pos].astype(np.float32) * self.scale[pos]

    def scores(self, q: np.ndarray, pick: np.ndarray | None = None) -> np.ndarray:
        if pick is None:
            return _dot(self.mat, self.scale, q)
        return (self.mat[pick].astype(np.float32) @ q) * self.scale[pick]

    def flush(self) -> None:
        if not self.pending_rids:
            return
        mat, scale = quantize(np.vstack(self.pending_vecs))
        n, m = len(self.rids), len(mat)
        if self._bufs is None or n + m > len(self._bufs[0]):
            cap = n + m + max(1024, (n + m) // 16)
            self._bufs = (_grown(self.rids, cap), _grown(self.mat, cap), _grown(self.scale, cap))
        rid_buf, mat_buf, scale_buf = self._bufs
        if self.bits is not None and (
            self._bits_buf is None or self._bits_buf.shape[1] != len(rid_buf)
        ):
            # word-major like the bits themselves: each word's row stays one contiguous pass for hamming()
            self._bits_buf = np.empty((self.bits.shape[0], len(rid_buf)), dtype=np.uint64)
            self._bits_buf[:, :n] = self.bits
        rid_buf[n : n + m], mat_buf[n : n + m], scale_buf[n : n + m] = self.pending_rids, mat, scale
        self.rids, self.mat, self.scale = rid_buf[: n + m], mat_buf[: n + m], scale_buf[: n + m]
        if self._bits_buf is not None:
            self._bits_buf[:, n : n + m] = sign_bits(mat)
            self.bits = self._bits_buf[:, : n + m]
        self.pending_rids.clear()
        self.pending_vecs.clear()
        self._order = self._top = self._ascending = None

    def remove(self, rids: np.ndarray) -> None:
        if self.pending_rids:
            gone = set(rids.tolist())
            kept = [
                (r, v)
                for r, v in zip(self.pending_rids, self.pending_vecs, strict=True)
                if r not in gone
            ]
            self.pending_rids[:] = [r for r, _ in kept]
            self.pending_vecs[:] = [v for _, v in kept]
        if not len(self.rids):
            return
        if self._top is None:
            self._top = int(self.rids.max())
        if int(rids.min()) > self._top:  # the common case: rows just inserted, never here
            return
        hit = np.isin(self.rids, rids)
        if not hit.any():
            return
        keep = ~hit
        self.rids, self.mat, self.scale = self.rids[keep], self.mat[keep], self.scale[keep]
        self.bits = self.bits[:, keep] if self.bits is not None else None
        self._bufs = self._bits_buf = None
        self._order = self._top = self._ascending = None


def _grown(arr: np.ndarray, cap: int) -> np.ndarray:
    """``arr`` copied to the front of a buffer of ``cap`` rows."""
    out = np.empty((cap, *arr.shape[1:]), dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


class MirrorBudget:
    """The bytes the vector mirrors of one store may hold together, shared by its ``VectorIndex`` es.

    Partitions are kept in least-recently-searched order; ``admit`` makes room by evicting from the
    old end, but never a partition in ``keep`` (the ones the current search is using), so a context
    whose partitions together exceed the budget does not evict its own partitions in a loop: what does
    not fit is searched through vec0 instead. ``max_bytes=None`` is no limit.
    """

    def __init__(self, max_bytes: int | None) -> None:
        self.max_bytes = max_bytes
        self._lru: OrderedDict[tuple[int, str], tuple[VectorIndex, int]] = OrderedDict()

    @classmethod
    def megabytes(cls, mb: float | None) -> MirrorBudget:
        return cls(None if mb is None else int(mb * 1024 * 1024))

    @property
    def used(self) -> int:
        return sum(n for _, n in self._lru.values())

    def loaded(self) -> list[tuple[str, str]]:
        """(table, partition key) of every loaded partition, least recently used first."""
        return [(index.table, key) for (_, key), (index, _) in self._lru.items()]

    def admit(self, index: VectorIndex, key: str, nbytes: int, keep: set[tuple[int, str]]) -> bool:
        """Make room for ``nbytes`` more; False (nothing evicted) when that cannot be done."""
        if self.max_bytes is None:
            return True
        if nbytes > self.max_bytes:
            return False
        used = self.used
        victims = []
        for slot, (_, size) in self._lru.items():
            if used + nbytes <= self.max_bytes:
                break
            if slot not in keep:
                victims.append(slot)
                used -= size
        if used + nbytes > self.max_bytes:
            return False
        for slot in victims:
            self._evict(slot)
        return True

    def touch(self, index: VectorIndex, key: str, nbytes: int) -> None:
        slot = (id(index), key)
        self._lru[slot] = (index, nbytes)
        self._lru.move_to_end(slot)

    def trim(self, keep: set[tuple[int, str]]) -> None:
        """Evict the least recently used partitions outside ``keep`` while the total is over the budget
        (loaded partitions grow as rows are written)."""
        if self.max_bytes is None:
            return
        over = self.used - self.max_bytes
        for slot in [s for s in self._lru if s not in keep]:
            if over <= 0:
                break
            over -= self._lru[slot][1]
            self._evict(slot)

    def forget(self, index: VectorIndex, key: str | None = None) -> None:
        for slot in [s for s in self._lru if s[0] == id(index) and key in (None, s[1])]:
            del self._lru[slot]

    def _evict(self, slot: tuple[int, str]) -> None:
        index, _ = self._lru.pop(slot)
        index.evict(slot[1])
        log.debug("evicted %s of %s from the vector mirror", slot[1], index.table)


class VectorIndex:
    """One vec0 table (``{table}``) keyed by the integer rowid of ``owner`` (whose rows carry ``partition_key``).

    This process's own commits do not move ``data_version``, so its writes update the mirror directly
    (``mirror_add``/``mirror_remove``, called after the transaction commits).
    """

    def __init__(
        self,
        db: Database,
        table: str,
        owner: str,
        *,
        use_mirror: bool = True,
        exact_limit: int = EXACT_LIMIT,
        parallel_rows: int = PARALLEL_ROWS,
        budget: MirrorBudget | None = None,
    ) -> None:
        self.db = db
        self.table = table
        self.owner = owner
        self.use_mirror = use_mirror
        self.exact_limit = exact_limit
        self.parallel_rows = parallel_rows
        self.budget = budget or MirrorBudget(None)
        self.dim: int | None = None
        self._parts: dict[str, _Partition] | None = None
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
        self.invalidate()

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
        if self._parts is None or not rows:
            return
        # a rewritten row may also have changed partition
        self.mirror_remove([rid for rid, _, _ in rows])
        for rid, key, vector in rows:
            part = self._parts.get(key)
            if part is not None:
                part.pending_rids.append(rid)
                part.pending_vecs.append(np.asarray(vector, dtype=np.float32)[None, :])

    def mirror_remove(self, rids: list[int]) -> None:
        if self._parts is None or not rids:
            return
        gone = np.array(rids, dtype=np.int64)
        for part in self._parts.values():
            part.remove(gone)

    def invalidate(self) -> None:
        self._parts = None
        self.budget.forget(self)

    def evict(self, key: str) -> None:
        """Drop one partition from the mirror (the budget's call); the next search reads it from vec0."""
        if self._parts is not None:
            self._parts.pop(key, None)

    def loaded_partitions(self) -> list[str]:
        return list(self._parts or {})

    # -- reads ----------------------------------------------------------------------------------
    def get(self, rids: list[int]) -> dict[int, np.ndarray]:
        """Stored vectors by rowid (from the mirror when it is loaded, else from vec0)."""
        if self.dim is None or not rids:
            return {}
        if self.use_mirror:
            return self._mirror_get(rids)
        return self._vec0_get(rids)

    def _mirror_get(self, rids: list[int]) -> dict[int, np.ndarray]:
        """From loaded partitions where the row is there (dequantized); the rest straight from vec0."""
        wanted = np.array(rids, dtype=np.int64)
        found: dict[int, np.ndarray] = {}
        for part in self._mirror().values():
            for rid, pos in zip(wanted.tolist(), part.positions(wanted).tolist(), strict=True):
                if pos >= 0:
                    found[rid] = part.vector(pos)
        return found | self._vec0_get([rid for rid in rids if rid not in found])

    def _vec0_get(self, rids: list[int]) -> dict[int, np.ndarray]:
        if not rids:
            return {}
        # one json array, not an IN-list: vec0 serves IN (?, ?, ...) about 20x slower
        sql = f"SELECT rowid, embedding FROM {self.table} WHERE rowid IN (SELECT value FROM json_each(?))"
        return {
            rid: np.frombuffer(blob, dtype=np.float32)
            for rid, blob in self.db.execute(sql, (json.dumps(rids),))
        }

    def search(
        self, query: np.ndarray, partitions: tuple[str, ...], k: int
    ) -> list[tuple[int, float]]:
        """(rowid, cosine similarity) of the k nearest rows within the given partitions, best first."""
        return self.search_alongside(query, partitions, k, lambda: None)[0]

    def search_alongside(
        self, query: np.ndarray, partitions: tuple[str, ...], k: int, other: Callable[[], T]
    ) -> tuple[list[tuple[int, float]], T]:
        """``search``, and ``other()`` run in this thread meanwhile: a scan of ``parallel_rows`` or more
        loaded rows runs on a worker thread (numpy alone, no database call: numpy lets go of the GIL
        in its loops, as SQLite does while it steps), so a full-text search on this connection and the
        vector scan use the machine's two cores at once instead of one after the other. ``other`` must not
        write: the scan reads the loaded partitions that this connection's writes would change."""
        if self.dim is None or k <= 0 or not partitions or len(query) != self.dim:
            return [], other()
        if not self.use_mirror:
            return self._search_vec0(query, partitions, k), other()
        return self._scan(query, partitions, k, other)

    def _scan(
        self, query: np.ndarray, partitions: tuple[str, ...], k: int, other: Callable[[], T]
    ) -> tuple[list[tuple[int, float]], T]:
        mirror = self._mirror()  # one data_version check per search
        keep = {(id(self), key) for key in partitions}
        hot = {
            key: part
            for key in partitions
            if (part := mirror.get(key) or self._admit(mirror, key, keep)) is not None
        }
        for part in hot.values():
            part.flush()
        loaded, q = [p for p in hot.values() if len(p.rids)], np.asarray(query, dtype=np.float32)
        if sum(len(p.rids) for p in loaded) >= self.parallel_rows:
            scan = _worker().submit(self._scan_loaded, loaded, q, k)
            try:
                also = other()
            finally:
                # never left running over partitions this thread may change next
                found = scan.result()
        else:
            found, also = self._scan_loaded(loaded, q, k), other()
        # what grew (new rows, sign bits) is counted now; past the budget, older partitions make way
        for key, part in hot.items():
            self.budget.touch(self, key, part.nbytes)
        self.budget.trim(keep)
        cold = tuple(key for key in partitions if key not in hot)
        if not cold:
            return found, also
        # a cold partition did not fit the budget: vec0 searches it, and the results merge by similarity
        return sorted(found + self._search_vec0(query, cold, k), key=lambda h: -h[1])[:k], also

    def _scan_loaded(
        self, loaded: list[_Partition], q: np.ndarray, k: int
    ) -> list[tuple[int, float]]:
        if not loaded:
            return []
        if sum(len(p.rids) for p in loaded) <= self.exact_limit:
            found = [(p.rids, p.scores(q)) for p in loaded]
        else:
            found = self._shortlist(loaded, q, k)
        return _top(np.concatenate([r for r, _ in found]), np.concatenate([s for _, s in found]), k)

    def _shortlist(
        self, loaded: list[_Partition], q: np.ndarray, k: int
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Hamming distance on sign bits picks a shortlist (memory-bandwidth bound: 48 bytes a row, not 384);
        the int8 rows of just the shortlist, upcast, rank it."""
        qbits = sign_bits(q[None, :])[:, 0]
        keep = max(k * OVERSAMPLE, MIN_SHORTLIST)
        found = []
        for part in loaded:
            if part.bits is None:
                part.bits = _bits_in_blocks(part)
            pick = nearest(hamming(part.bits, qbits), keep)
            found.append((part.rids[pick], part.scores(q, pick)))
        return found

    def _search_vec0(
        self, query: np.ndarray, partitions: tuple[str, ...], k: int
    ) -> list[tuple[int, float]]:
        hits: list[tuple[int, float]] = []
        blob = np.asarray(query, dtype=np.float32).tobytes()
        for key in partitions:
            sql = f"SELECT rowid, distance FROM {self.table} WHERE embedding MATCH ? AND k = ? AND partition_key = ?"
            hits.extend((rid, 1.0 - dist) for rid, dist in self.db.execute(sql, (blob, k, key)))
        return sorted(hits, key=lambda h: -h[1])[:k]

    def _mirror(self) -> dict[str, _Partition]:
        version = self.db.data_version()
        if self._parts is None or version != self._version:
            self.invalidate()
            self._parts = {}
            self._version = version
        assert self._parts is not None
        return self._parts

    def _admit(
        self, mirror: dict[str, _Partition], key: str, keep: set[tuple[int, str]]
    ) -> _Partition | None:
        """Load a partition if the budget has (or can make) room for it; None leaves it to vec0."""
        dim = self.dim or 0
        count = int(
            self.db.scalar(f"SELECT count(*) FROM {self.owner} WHERE partition_key = ?", (key,))
        )
        row_bytes = dim + 4 + 8 + (dim // 8 if count > self.exact_limit else 0)
        if not self.budget.admit(self, key, count * row_bytes, keep):
            return None
        part = mirror[key] = self._load(key, count)
        # counted at once: the next partition of this search sees it
        self.budget.touch(self, key, part.nbytes)
        return part

    def _load(self, key: str, count: int) -> _Partition:
        """Read the partition's vectors ``LOAD_CHUNK`` rows at a time into preallocated int8 arrays."""
        dim = self.dim or 0
        part = _Partition(
            np.empty(count, dtype=np.int64),
            np.empty((count, dim), dtype=np.int8),
            np.empty(count, dtype=np.float32),
        )
        n = 0
        for rids, vecs in self._chunks(key, dim):
            if n + len(rids) > count:  # rows committed between the count and the read: grow (rare)
                part.pending_rids.extend(rids)
                part.pending_vecs.append(vecs)
                continue
            part.rids[n : n + len(rids)] = rids
            part.mat[n : n + len(rids)], part.scale[n : n + len(rids)] = quantize(vecs)
            n += len(rids)
        if n < count:  # rows of the owner table without a vector
            part.rids, part.mat, part.scale = (
                part.rids[:n].copy(),
                part.mat[:n].copy(),
                part.scale[:n].copy(),
            )
        part.flush()
        trim_heap()  # the chunks' transient buffers leave holes in the heap that RSS would keep counting
        log.debug("loaded %d vectors of %s from %s", len(part.rids), key, self.table)
        return part

    def _chunks(self, key: str, dim: int) -> Iterator[tuple[list[int], np.ndarray]]:
        # vec0 scans the whole table for a partition_key filter; looking rows up by rowid is ~5x faster
        sql = f"SELECT rowid, embedding FROM {self.table} WHERE rowid IN (SELECT rid FROM {self.owner} WHERE partition_key = ?)"
        cursor = iter(self.db.execute(sql, (key,)))
        while chunk := list(islice(cursor, LOAD_CHUNK)):
            rids = [rid for rid, _ in chunk]
            yield (
                rids,
                np.frombuffer(b"".join(blob for _, blob in chunk), dtype=np.float32).reshape(
                    len(rids), dim
                ),
            )


@functools.cache
def _worker() -> ThreadPoolExecutor:
    """The one thread large scans run on (a search waits for its scan, so one is enough)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="vector-scan")


def _bits_in_blocks(part: _Partition, block: int = 65_536) -> np.ndarray:
    """Sign bits of an int8 partition, a block at a time (a value that rounds to 0 counts as negative, as
    in ``flush``: the shortlist is a coarse filter and the re-score is exact up to int8)."""
    words = (part.mat.shape[1] + 63) // 64
    bits = np.empty((words, len(part.rids)), dtype=np.uint64)
    for lo in range(0, len(part.rids), block):
        bits[:, lo : lo + block] = sign_bits(part.mat[lo : lo + block])
    return bits


def _top(rids: np.ndarray, sims: np.ndarray, k: int) -> list[tuple[int, float]]:
    top = np.argpartition(-sims, k - 1)[:k] if len(sims) > k else np.arange(len(sims))
    top = top[np.argsort(-sims[top])]
    return [(int(rids[i]), float(sims[i])) for i in top]
