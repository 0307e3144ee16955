"""What the dashboard's routes are given: the bot's own store and memory thread, never a second copy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from memory import AsyncMemory, AsyncRunner, MemoryEngine

    from ..orchestrator import Orchestrator
    from ..spending.budgets import Limits

T = TypeVar("T")
NO_TOKEN = (
    "the dashboard needs a token: set COMPANION_DASHBOARD_TOKEN in the environment or .env, e.g. "
    "COMPANION_DASHBOARD_TOKEN=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
)


@dataclass(frozen=True, slots=True)
class DashboardServices:
    """``orchestrator`` resolves a context and assembles its prompt slice (the snapshot), and its voice caches
    are emptied after a forget; ``owners`` are the configured owner ids ("discord:123"), shown in the page."""

    engine: MemoryEngine
    runner: AsyncRunner
    orchestrator: Orchestrator
    owners: tuple[str, ...] = ()
    limits: Limits | None = (
        None  # ORCH-14: the daily budgets, shown beside the usage (None: none configured)
    )

    @classmethod
    def of(
        cls,
        engine: MemoryEngine,
        runner: AsyncRunner,
        orchestrator: Orchestrator,
        limits: Limits | None = None,
    ) -> DashboardServices:
        """The services over a running bot's parts (never ``bot.runtime`` itself: that module starts the dashboard)."""
        return cls(engine, runner, orchestrator, tuple(sorted(orchestrator.owners.owners)), limits)

    @property
    def memory(self) -> AsyncMemory:
        """Memory's face: the services the bot's own turns use (one runner, one set of repositories)."""
        return self.orchestrator.memory

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Bot code that reads the store on the memory thread (the snapshot's assembly, a time zone,
        the usage report); the rest of the store is ``memory.dashboard``'s."""
        return await self.runner.run(fn, *args, **kwargs)

    async def forgot(self) -> None:
        """Something was forgotten: no in-process cache (voice warm snapshots) may keep a copy of it (SEC-3)."""
        await self.orchestrator.voice.forgot()
