"""Daily budgets (ORCH-14): what one person and one server or group may cost a day, in tokens the model servers
reported (``memory.UsageLedger``), and how the bot spends less as a day's spend nears a budget instead of
stopping at once:

    spent of the budget   level   what changes
    below 60 %            FULL    nothing
    60 %                  SHORT   a shorter context: the last 6 history turns (of up to 20), and no briefing,
                                  session summaries or entity list (the memories about the people stay)
    80 %                  QUIET   no chime-ins (group talk not spoken to the bot is stored, not answered) and no
                                  check-ins (they wait for a new day)
    100 %                 SPENT   no reply: one polite line, said once a day to each person, then silence; the
                                  messages are still stored and learned from (extraction is counted, not held)

A turn's level is the higher of its person's (everywhere, linked accounts are one person) and, in a server or group,
the place's. 0 is no budget. The owner is never held back: the bill is theirs; their calls are counted all the same.
Days are UTC days (the ledger's), by the project clock, so a new day starts everyone afresh.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from memory import AsyncRunner, Charge, Clock, MemoryEngine, People, Spend, UsageLedger, day_of

from ..turn.mode import names
from ..types import IncomingMessage, PassThrough, Reply, StreamSink
from .attribution import charging, current
from .usage import Usage

if TYPE_CHECKING:
    from ..assembly import Snapshot
    from ..health import Metrics
    from ..resolution import OwnerPolicy

log = logging.getLogger(__name__)
# shares of a budget: first the context shrinks, then the bot stops speaking unasked
SHORT_AT, QUIET_AT = (
    0.6,
    0.8,
)
SHORT_HISTORY_TURNS = (
    6  # of the 20 read (``Assembler.history_turns``): about a third of the history's tokens
)
# Sections a short context leaves out: they paraphrase (a briefing, past sessions) or list (entities); none carries a
# memory the reply may be said to have used, so what the prompt shows of memories stays exact
DROPPED_WHEN_SHORT = frozenset({"bulletin", "sessions", "text_sessions", "entities"})
PERSON_SPENT = (
    "I've talked a lot with you today and have to rest until the day ends (UTC). Your messages are saved; "
    "I'll read them and answer again tomorrow."
)
PLACE_SPENT = (
    "I've used up what I may spend in this server today, so I'll only listen until the day ends (UTC). Your "
    "messages are saved; I'll answer again tomorrow."
)


class Level(IntEnum):
    FULL = 0
    SHORT = 1
    QUIET = 2
    SPENT = 3


@dataclass(frozen=True, slots=True)
class Limits:
    """Daily budgets in tokens (prompt + completion); 0: none."""

    person_tokens: int = 0
    server_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Standing:
    """A turn's level, and whether the place's budget (not the person's) set it."""

    level: Level = Level.FULL
    by_place: bool = False


def level_of(spent: int, budget: int) -> Level:
    if budget <= 0:
        return Level.FULL
    share = spent / budget
    if share >= 1.0:
        return Level.SPENT
    return Level.QUIET if share >= QUIET_AT else Level.SHORT if share >= SHORT_AT else Level.FULL


class Budgets:
    """The ledger's recorder (the model clients' usage hook) and the daily budgets' reader."""

    def __init__(
        self,
        ledger: UsageLedger,
        runner: AsyncRunner,
        clock: Clock,
        limits: Limits = Limits(),
        metrics: Metrics | None = None,
    ) -> None:
        self.ledger, self.runner, self.clock, self.limits, self.metrics = (
            ledger,
            runner,
            clock,
            limits,
            metrics,
        )

    @property
    def day(self) -> str:
        return day_of(self.clock.now())

    async def record(self, model: str, usage: Usage | None) -> None:
        """One answered model call, filed under the charge of whoever asked (``bot.spending.attribution``)."""
        charge, spend = current(), spend_of(usage)
        if self.metrics is not None:
            self.metrics.spent(charge.kind, model, spend)
        await self.runner.run(self.ledger.add, self.day, charge, model, spend)

    async def assessed(
        self, message: IncomingMessage, people: People, owners: OwnerPolicy
    ) -> tuple[Charge, Standing]:
        """Whose a message's turn is, and how their and its place's day stands (the owner's: never
        held back)."""
        return await self.runner.run(_assess, self, message, people, owners)

    async def noticed(self, charge: Charge, by_place: bool) -> bool:
        """``first_notice`` from the event loop."""
        return await self.runner.run(self.first_notice, charge, by_place)

    def standing(self, person_id: str, place_id: str) -> Standing:
        """The level a turn of ``person_id`` in ``place_id`` ('' in a DM) has now (memory thread)."""
        day, limits = self.day, self.limits
        mine = (
            level_of(self.ledger.person_spent(day, person_id).tokens, limits.person_tokens)
            if limits.person_tokens
            else Level.FULL
        )
        theirs = Level.FULL
        if place_id and limits.server_tokens:
            theirs = level_of(self.ledger.place_spent(day, place_id).tokens, limits.server_tokens)
        return Standing(max(mine, theirs), theirs > mine)

    def first_notice(self, charge: Charge, by_place: bool) -> bool:
        """Whether the polite line is due: the first time today for this person (in this place, for its budget)."""
        return self.ledger.first_notice(
            self.day, charge.person_id, charge.place_id if by_place else ""
        )

    async def allows_checkin(self, person_id: str, owner: bool) -> bool:
        """ORCH-8 check-ins are proactive: none once the person's day reached QUIET."""
        return owner or (await self.runner.run(self.standing, person_id, "")).level < Level.QUIET

    def held(self, level: Level) -> None:
        if self.metrics is not None:
            self.metrics.budget_held[level.name.lower()] += 1


def spend_of(usage: Usage | None) -> Spend:
    """One call as the ledger counts it; an answer that said nothing of its cost is a call without figures."""
    if usage is None:
        return Spend(calls=1, unreported=1)
    return Spend(1, 0, usage.prompt, usage.cached or 0, usage.completion)


def ledger_hook(
    engine: MemoryEngine, kind: str, runner: AsyncRunner | None = None
) -> Callable[[str, Usage | None], None]:
    """The usage hook of a blocking client (``SyncCompleter``: the ingest folder, CLI maintenance): each call filed
    under ``kind``, with no person and no place (the operator's work). Without ``runner`` it is written at once, on
    the caller's thread, which must be the store's (a CLI command); with it, queued on the memory thread (the ingest
    folder asks its model on a worker thread, and one connection must never see two threads' transactions)."""
    ledger = engine.ledger

    def record(model: str, usage: Usage | None) -> None:
        day, spend = day_of(engine.clock.now()), spend_of(usage)
        if runner is None:
            ledger.add(day, Charge(kind), model, spend)
        else:
            runner.submit(ledger.add, day, Charge(kind), model, spend)

    return record


_short: ContextVar[bool] = ContextVar("short_context", default=False)
_spent: ContextVar[bool] = ContextVar("spent_day", default=False)


@contextlib.contextmanager
def budgeted_turn(charge: Charge, level: Level) -> Iterator[None]:
    """The turn's model calls are filed under ``charge``, its context is short from ``Level.SHORT``,
    and at ``Level.SPENT`` (a held-back message, stored) no photo of it is looked at (``spent``)."""
    short, spent = _short.set(level >= Level.SHORT), _spent.set(level is Level.SPENT)
    try:
        with charging(charge):
            yield
    finally:
        _spent.reset(spent)
        _short.reset(short)


def spent() -> bool:
    """Whether the message being handled is of a person or a place whose day is spent: a look at its
    photos (``bot.images.vision``) would be a model call nobody may make for them today."""
    return _spent.get()


def fitted(snap: Snapshot) -> Snapshot:
    """The memory slice as the turn's budget allows (read on the event loop, where ``budgeted_turn`` set it)."""
    if not _short.get():
        return snap
    sections = [s for s in snap.sections if s.key not in DROPPED_WHEN_SHORT]
    return replace(snap, sections=sections, history=snap.history[-SHORT_HISTORY_TURNS:])


class Budgeted(PassThrough):
    """The orchestrator behind the daily budgets: each reply is charged to its person and place, and held back as the
    day's spend nears a budget (see the module's table). Commands, edits and deletions pass unchanged."""

    _inner: Any  # the orchestrator: ``without_model`` besides the Conversation protocol

    def __init__(
        self,
        inner: Any,
        budgets: Budgets,
        people: People,
        owners: OwnerPolicy,
        bot_name: Callable[[], str],
    ) -> None:
        super().__init__(inner)
        self._budgets, self._people, self._owners, self._bot_name = (
            budgets,
            people,
            owners,
            bot_name,
        )

    async def reply(self, message: IncomingMessage, stream: StreamSink | None = None) -> Reply:
        charge, standing = await self._budgets.assessed(message, self._people, self._owners)
        if standing.level is Level.SPENT or (
            standing.level >= Level.QUIET and self._chime_in(message)
        ):
            return await self._held_back(message, charge, standing)
        with budgeted_turn(charge, standing.level):
            return await self._inner.reply(message, stream)

    async def observe(self, message: IncomingMessage) -> None:
        """Group talk not for the bot: stored, its photos looked at on its person's and place's bill
        (not at all once either's day is spent)."""
        charge, standing = await self._budgets.assessed(message, self._people, self._owners)
        await self._observed(message, charge, standing)

    async def _observed(self, message: IncomingMessage, charge: Charge, standing: Standing) -> None:
        with budgeted_turn(charge, standing.level):
            await self._inner.observe(message)

    def _chime_in(self, message: IncomingMessage) -> bool:
        """A group turn not spoken to the bot (``bot.turn.mode``'s rule): the bot may answer it, not must."""
        spoken_to = message.addressed or names(message.text, self._bot_name())
        return bool(message.participants) and not message.is_dm and not spoken_to

    async def _held_back(
        self, message: IncomingMessage, charge: Charge, standing: Standing
    ) -> Reply:
        """Stored like group talk the bot does not answer; at SPENT the polite line, once a day, else silence. A
        "yes" to "/forget everything?" is still carried out: forgetting needs no model."""
        answered = await self._inner.without_model(message)
        if answered is not None:
            return answered
        await self._observed(message, charge, standing)
        self._budgets.held(standing.level)
        if standing.level is not Level.SPENT:
            return Reply("", skipped=True)
        if not await self._budgets.noticed(charge, standing.by_place):
            return Reply("", skipped=True)
        log.info(
            "a daily budget is spent (%s); the polite line said",
            "the place's" if standing.by_place else "a person's",
        )
        return Reply(PLACE_SPENT if standing.by_place else PERSON_SPENT)


def _assess(
    budgets: Budgets, message: IncomingMessage, people: People, owners: OwnerPolicy
) -> tuple[Charge, Standing]:
    """On the memory thread: the message's charge and standing."""
    person = people.lookup(message.platform, message.author_id)
    # the resolver's guild key
    place = f"{message.platform}:{message.guild_id}" if message.guild_id else ""
    charge = Charge(
        "voice" if message.modality == "voice" else "reply", person, message.platform, place
    )
    if owners.is_owner(message.platform, message.author_id):
        return charge, Standing()
    return charge, budgets.standing(person, place)
