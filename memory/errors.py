"""Errors raised by the memory package.

MemoryStoreError
├── NotFound            a memory, message or entity id that does not exist
├── InvalidInput        bad arguments: empty text, unknown type, out-of-range importance
│   ├── Rejected        a write refused by the safety filters (WRITE-6)
│   └── CopyRefused     `store copy` will not copy, and says why in one line (nothing was written)
├── NotYours            a change to a memory the speaker may see but does not own (SEC-1)
├── EmbeddingError      the embedder failed or returned something unusable
│   ├── DimensionMismatch  a model of another dimension than the store's (MEM-4)
│   └── ModelMismatch      another model of the same dimension: another vector space (run reembed)
├── StoreUnavailable    the store file cannot be used as asked (read-only for a write, cannot be opened)
└── SchemaError         the database file is from a newer version or is damaged
"""


class MemoryStoreError(Exception):
    """Base of every error this package raises on purpose."""


class NotFound(MemoryStoreError):
    pass


class InvalidInput(MemoryStoreError):
    pass


class Rejected(InvalidInput):
    pass


class CopyRefused(InvalidInput):
    pass


class NotYours(MemoryStoreError):
    pass


class EmbeddingError(MemoryStoreError):
    pass


class DimensionMismatch(EmbeddingError):
    pass


class ModelMismatch(EmbeddingError):
    """The configured model is not the one that made the store's vectors (same dimension, another vector space)."""


class StoreUnavailable(MemoryStoreError):
    """The store file cannot be used as asked; the message names the path."""


class SchemaError(MemoryStoreError):
    pass
