"""Keeping the process small on a 1-2 GB machine: the embedding runtime's allocations and freed heap.

Measured on the bench (100k rows, MiniLM int8 on onnxruntime, Linux/glibc):

- Loading the ONNX graph parses the 23 MB file and constant-folds its weights into ~90 MB of float32;
  the parse buffers are freed but glibc keeps them in the heap (~60 MB that RSS still counts) until
  ``malloc_trim`` hands them back. ``trim_heap`` does that, once after a model load and after a vector
  partition load (whose transient chunks leave the same kind of holes).
- onnxruntime's CPU arena keeps the largest batch's activations for the life of the session (a batch of
  32 long texts: tens of MB); with the arena and the memory pattern off, a one-sentence query takes the
  same time and nothing stays allocated between calls.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from typing import Any


def lean_session(options: Any) -> Any:
    """Set an ``onnxruntime.SessionOptions`` to free activations after each run; returns it."""
    options.enable_cpu_mem_arena = False
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
