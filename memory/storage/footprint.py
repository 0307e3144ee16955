"""Keeping the process small on a 1-2 GB machine: the embedding runtime's allocations and freed heap.

Measured on the bench (100k rows, MiniLM int8 on onnxruntime, Linux/glibc):

- Loading the ONNX graph parses the 23 MB file and constant-folds its weights into ~90 MB of float32;
  the parse buffers are freed but glibc keeps them in the heap (~60 MB that RSS still counts) until
  ``malloc_trim`` hands them back. ``trim_heap`` does that, once after a model load and after a vector
  partition load (whose transient chunks leave the same kind of holes).
- onnxruntime's CPU arena keeps the largest run's activations for the life of the session (a batch of
  32 long texts: tens of MB, 2,048-token runs ~170 MB). Runs are now capped at 512 tokens
  (``memory.storage.embeddings.BATCH_TOKENS``), and there the arena is the smaller choice (issue 24, heap peak
  reset before each step, ~180-token passages): 30 passages one at a time raised the heap +40 MB without
  the arena (glibc keeps the freed activations until a trim) and +13 MB with it; 64 passages in one call
  +69 MB against +20 MB, the arena then holding ~30 MB for good. The memory pattern stays off: it plans
  one block per input shape, and every text length is a new shape.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from typing import Any


def lean_session(options: Any) -> Any:
    """Set an ``onnxruntime.SessionOptions`` to reuse one arena for activations and plan no per-shape blocks;
    returns it. Only for runs of bounded size (see above): the arena keeps what the largest run needed."""
    options.enable_cpu_mem_arena = True
    options.enable_mem_pattern = False
    return options


def trim_heap() -> None:
    """Return freed heap pages to the OS (glibc ``malloc_trim``); a no-op where there is no glibc."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        _process_symbols().malloc_trim(0)


@functools.cache
def _process_symbols() -> Any:
    """The symbols already loaded into this process (libc among them on Linux)."""
    return ctypes.CDLL(None)
