"""Whose cost a memory job's model call is (ORCH-14): the charge the usage ledger files it under,
read from the job and what it gathered. The bot's model clients cannot know whose call they make;
the bot sets this charge around a job's ask (``bot.spending.attribution``, with the table of who pays what).
"""

from __future__ import annotations

from typing import Any

from .jobs.base import Judged, WriteFacts
from .jobs.checkin import CheckinDraft
from .jobs.conversation import Batch, Compaction, Extraction, Folding, Reflection, Session
from .jobs.day import BulletinWrite, Day, DayReflection
from .jobs.upkeep import Consolidation
from .scopes import RecallContext
from .storage.ledger import Charge
from .write.extraction import Transcript


def job_charge(job: Any, plan: Any) -> Charge | None:
    """The charge of one job's ask, from the job and what it gathered; None for a job it does not
    know (the enclosing charge, or the bot's "other", then applies)."""
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
    """A job over a chat's turns: the person when one person spoke in them, else the place alone
    (a group batch is everyone's: no one of them pays for the others)."""
    speakers = {c.speaker_id for c in transcript.speakers().values()}
    person = next(iter(speakers)) if len(speakers) == 1 else ""
    return Charge(kind, person, ctx.platform, ctx.guild_id or "")


def _bulletin(scope: str, scope_id: str) -> Charge:
    if scope == "guild":
        return Charge("bulletin", "", scope_id.partition(":")[0], scope_id)
    return Charge("bulletin", scope_id)


def _judged(plan: tuple[Judged, ...]) -> Charge:
    """The judge's pairs: the person the facts are about when one, where they were said when one
    place."""
    people = {
        j.new.subject_person_id
        or (j.new.scope_id if j.new.scope.value in ("user", "owner") else "")
        for j in plan
    }
    places = {(j.new.provenance.platform or "", j.new.provenance.guild_id or "") for j in plan}
    person = next(iter(people)) if len(people) == 1 else ""
    platform, place = next(iter(places)) if len(places) == 1 else ("", "")
    return Charge("judge", person, platform, place)
