"""Long-term memory: one SQLite file with sqlite-vec and FTS5.

Layering: this package knows nothing of Discord, Telegram, voice or any LLM SDK. It takes plain
data and callables (an ``Embedder`` and a ``Completer``, see ``memory.protocols``).
"""
