"""Who each model call is for (ORCH-14): the charge the usage ledger files its cost under.

The model clients (``bot.llm.ChatClient``) are shared by every conversation and job, so they cannot know whose call
they make; the one who asks says it, for the duration of the ask, in a context variable (``charging``), and the
client's usage hook reads it (``current``) when the server's answer says what the call cost:

    caller                        kind          person                               place
    a reply (bot.budgets)         reply, voice  the speaker                          the server or group; '' in a DM
    a check-in (bot.jobs)         checkin       the person followed up               '' (their DM)
    extraction, reflection,       extraction,   the one person who spoke in the      the chat's server or group
    compaction, daily reflection  reflection,   turns read, '' when several did
    (bot.jobs)                    compaction,
                                  daily
    the contradiction judge       judge         the person the learned facts are     where they were said
    (bot.jobs, after a learning job)            about, when one
    a bulletin (bot.jobs)         bulletin      the scope's person                   the scope's server
    a voice session's summary     compaction    ''                                   the voice channel's server
    (bot.voice_mode)
    nightly consolidation         consolidation ''                                   ''
    blocking clients: the ingest  ingest,       ''                                   ''
    folder, CLI maintenance       bulletin,
    (bot.budgets.ledger_hook)     consolidation
    anything else                 other         ''                                   ''

A charge is set on the event loop and follows the awaits of that task (and tasks it starts); work on the memory
thread never sees it, which is why the clients read it on the loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from memory import Charge, DayReflection, RecallContext
from memory.jobs.base import Judged, WriteFacts
from memory.jobs.checkin import CheckinDraft
from memory.jobs.conversation import Batch, Compaction, Extraction, Folding, Reflection, Session
from memory.jobs.day import BulletinWrite, Day
from memory.jobs.upkeep import Consolidation
from memory.write.extraction import Transcript

OTHER = Charge("other")
_current: ContextVar[Charge | None] = ContextVar("charge", default=None)


@contextlib.contextmanager
def charging(charge: Charge | None) -> Iterator[None]:
    """Model calls made inside the block are filed under ``charge``; None leaves the enclosing charge."""
    if charge is None:
        yield
        return
    token = _current.set(charge)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> Charge:
    """The charge of the call being made now: ``OTHER`` when nobody said."""
    return _current.get() or OTHER


def in_place(kind: str, ctx: RecallContext, person_id: str = "") -> Charge:
    return Charge(kind, person_id, ctx.platform, ctx.guild_id or "")


def of_job(job: Any, plan: Any) -> Charge | None:
    """The charge of one job's ask, from the job and what it gathered; None for a job it does not know (the enclosing
    charge, or ``OTHER``, then applies)."""
    if isinstance(job, Extraction) and isinstance(plan, Batch):
        return _spoken("extraction", plan.ctx, plan.transcript)
    if isinstance(job, Reflection) and isinstance(plan, Session):
        return _spoken("reflection", job.state.ctx, plan.transcript)
    if isinstance(job, Compaction) and isinstance(plan, Folding):
        return _spoken("compaction", job.state.ctx, plan.transcript)
    if isinstance(job, DayReflection) and isinstance(plan, Day):
        return _spoken("daily", job.chat.ctx, plan.transcript)
    if isinstance(job, CheckinDraft):
        return Charge("checkin", job.checkin.person_id, job.where.platform)
    if isinstance(job, BulletinWrite):
        return _bulletin(job.plan.where.scope, job.plan.where.scope_id)
    if isinstance(job, WriteFacts):
        return _judged(plan)
    if isinstance(job, Consolidation):
        return Charge("consolidation")
    return None


def _spoken(kind: str, ctx: RecallContext, transcript: Transcript) -> Charge:
    """A job over a chat's turns: the person when one person spoke in them, else the place alone (a group batch is
    everyone's: no one of them pays for the others)."""
    speakers = {c.speaker_id for c in transcript.speakers().values()}
    return in_place(kind, ctx, next(iter(speakers)) if len(speakers) == 1 else "")


def _bulletin(scope: str, scope_id: str) -> Charge:
    if scope == "guild":
        return Charge("bulletin", "", scope_id.partition(":")[0], scope_id)
    return Charge("bulletin", scope_id)


def _judged(plan: tuple[Judged, ...]) -> Charge:
    """The judge's pairs: the person the facts are about when one, where they were said when one place."""
    people = {
        j.new.subject_person_id
        or (j.new.scope_id if j.new.scope.value in ("user", "owner") else "")
        for j in plan
    }
    places = {(j.new.provenance.platform or "", j.new.provenance.guild_id or "") for j in plan}
    person = next(iter(people)) if len(people) == 1 else ""
    platform, place = next(iter(places)) if len(places) == 1 else ("", "")
    return Charge("judge", person, platform, place)
