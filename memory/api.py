"""The root of memory's face, as the bot's event loop holds it: one store, its one memory thread, and the
services by use case built once on them (``memory.turns``, ...), so every service shares the same runner
and the same repositories (a setting given to one copy cannot be missing from another).

The root holds services only: a memory is added one way, by a job's ``WriteFacts`` (the contradiction judge
that runs, WRITE-5), a person's ``OwnMemory.remember`` or a tool call (``MemoryTools``), and forgotten one way,
``Forgetting``.
"""

from __future__ import annotations

from .dashboard import Dashboard
from .engine import MemoryEngine
from .forget import Forgetting
from .reactions import Reactions
from .reminding import Reminding
from .storage.db import AsyncRunner
from .storage.sessions import ChannelState, ExtractionBuffer
from .turns import Turns


class AsyncMemory:
    """One engine's memory for async callers: the services by use case."""

    def __init__(
        self,
        engine: MemoryEngine,
        runner: AsyncRunner,
        *,
        buffer: ExtractionBuffer | None = None,
        channels: ChannelState | None = None,
    ) -> None:
        """:param engine: the store. :param runner: its worker thread.
        :param buffer: the extraction buffer the background drains; the engine's if None.
        :param channels: the channels' state the background reads; the engine's if None."""
        self.forgetting = Forgetting(engine, runner)
        self.dashboard = Dashboard(engine, runner)
        self.reactions = Reactions(engine, runner)
        self.reminding = Reminding(engine, runner)
        self.turns = Turns(
            engine, runner, buffer or engine.buffer, engine.privacy, channels or engine.channels
        )
