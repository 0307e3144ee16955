"""Every periodic job of the running bot, in one table: how often it runs, and the claim that keeps it to one
process at a time across every process on the store (SCALE-1, ``memory.storage.claims``). Nothing else decides
when a job runs: ``Runtime`` ticks the background loop every ``TICK_S`` and puts the cron jobs on its scheduler
from this table, and each job's claim key is made here (``Periodic.key``).

    job               cadence (UTC)                                   claim key                        at start
    extraction        every tick: chats whose buffer is due (30 s     extract:<chat>
                      after their last turn, extraction_debounce_s)
    reflection        every tick: sessions silent 10 min              reflect:<chat>:<session start>
                      (reflection_silence_s)
    compaction        every tick: chats whose turns outgrew the       compact:<chat>
                      summary window
    summary-expiry    every tick                                      - (deletes expired rows: idempotent)
    journals          every tick (MAINT-6)                            - (this process's own writes)
    consolidation     COMPANION_CONSOLIDATION_CRON (03:00)            consolidation
    decay-prune       COMPANION_MAINTENANCE_CRON (03:30)              - (idempotent updates)
    daily-reflection  COMPANION_DAILY_REFLECTION_CRON (04:00)         daily:<chat>:<day>               yes
    bulletins         COMPANION_BULLETIN_CRON (every 15 min)          bulletin:<scope>:<scope id>
    checkins          COMPANION_CHECKIN_CRON (every 10 min)           checkin:<row id>                 yes
    reminders         every minute                                    the row itself (Reminders.claim) yes
    retention         COMPANION_RETENTION_CRON (hourly, at :20)       retention

"At start": also once when the bot starts, so what fell due while it was down runs now (each is idempotent and
bounded). The tick's jobs run in the table's order (``Background.tick``, then the journals).
"""

from __future__ import annotations

from dataclasses import dataclass

TICK_S = (
    1.0  # the background loop's period: a due extraction waits at most this long past its debounce
)
TICK = "tick"  # a job's cadence: every tick of the background loop


@dataclass(frozen=True, slots=True)
class Schedule:
    """The cron expressions of the scheduled jobs (UTC, validated by Settings) and whether the scheduler runs."""

    enabled: bool
    consolidation_cron: str
    maintenance_cron: str
    daily_cron: str = "0 4 * * *"  # MAINT-4
    bulletin_cron: str = "*/15 * * * *"  # MAINT-5: looks for scopes whose bulletin is due
    checkin_cron: str = "*/10 * * * *"  # ORCH-8: looks for check-ins that are due
    reminder_cron: str = "* * * * *"  # ORCH-13: sends the reminders that are due (to the minute)
    retention_cron: str = (
        "20 * * * *"  # SEC-7: expires old messages, purges places left long enough ago
    )


@dataclass(frozen=True, slots=True)
class Periodic:
    """One periodic job: its name (the scheduler's job id), its cadence (``TICK``, or the ``Schedule`` field that
    holds its cron), its claim key's shape ("" when it takes none) and whether it also runs once at start."""

    name: str
    cadence: str
    claim: str = ""
    at_start: bool = False

    def key(self, **parts: object) -> str:
        """The claim key of one run: ``EXTRACTION.key(chat="telegram:42")`` is ``"extract:telegram:42"``."""
        if not self.claim:
            raise ValueError(f"{self.name} takes no claim")
        return self.claim.format(**parts)

    def cron(self, schedule: Schedule) -> str:
        """The job's cron expression (a ticked job has none)."""
        if self.cadence == TICK:
            raise ValueError(f"{self.name} runs every tick, not on a cron")
        return str(getattr(schedule, self.cadence))


EXTRACTION = Periodic("extraction", TICK, "extract:{chat}")  # WRITE-1
REFLECTION = Periodic("reflection", TICK, "reflect:{chat}:{session}")  # WRITE-3, CROSS-1
COMPACTION = Periodic("compaction", TICK, "compact:{chat}")  # WRITE-4, ORCH-4
SUMMARY_EXPIRY = Periodic("summary-expiry", TICK)
JOURNALS = Periodic("journals", TICK)  # MAINT-6
CONSOLIDATION = Periodic("consolidation", "consolidation_cron", "consolidation")  # MAINT-1
DECAY_PRUNE = Periodic("decay-prune", "maintenance_cron")  # MAINT-2, MAINT-3
# MAINT-4
DAILY_REFLECTION = Periodic("daily-reflection", "daily_cron", "daily:{chat}:{day}", at_start=True)
BULLETINS = Periodic("bulletins", "bulletin_cron", "bulletin:{scope}:{scope_id}")  # MAINT-5
CHECKINS = Periodic("checkins", "checkin_cron", "checkin:{row}", at_start=True)  # ORCH-8
# ORCH-13: each row is claimed in its table
REMINDERS = Periodic("reminders", "reminder_cron", at_start=True)
RETENTION = Periodic("retention", "retention_cron", "retention")  # SEC-7

PERIODIC = (
    EXTRACTION,
    REFLECTION,
    COMPACTION,
    SUMMARY_EXPIRY,
    JOURNALS,
    CONSOLIDATION,
    DECAY_PRUNE,
    DAILY_REFLECTION,
    BULLETINS,
    CHECKINS,
    REMINDERS,
    RETENTION,
)
TICKED = tuple(job for job in PERIODIC if job.cadence == TICK)
CRONS = tuple(job for job in PERIODIC if job.cadence != TICK)
