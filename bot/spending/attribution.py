"""Who each model call is for (ORCH-14): the charge the usage ledger files its cost under.

The model clients (``bot.model.client.ChatClient``) are shared by every conversation and job, so they cannot know whose call
they make; the one who asks says it, for the duration of the ask, in a context variable (``charging``), and the
client's usage hook reads it (``current``) when the server's answer says what the call cost:

    caller                        kind          person                               place
    a reply (budgets)             reply, voice  the speaker                          the server or group; '' in a DM
    a photo's caption             caption       the one who shared it (group talk    the server or group; '' in a DM
    (bot.images.vision)                         not for the bot too)
    a check-in (bot.jobs)         checkin       the person followed up               '' (their DM)
    extraction, reflection,       extraction,   the one person who spoke in the      the chat's server or group
    compaction, daily reflection  reflection,   turns read, '' when several did
    (bot.jobs)                    compaction,
                                  daily
    the contradiction judge       judge         the person the learned facts are     where they were said
    (bot.jobs, after a learning job)            about, when one
    and a learned fact's English
    reading (SEC-5)
    a bulletin (bot.jobs)         bulletin      the scope's person                   the scope's server
    a voice session's summary     compaction    ''                                   the voice channel's server
    (bot.spoken.sessions)
    nightly consolidation         consolidation ''                                   ''
    blocking clients: the ingest  ingest,       ''                                   ''
    folder, CLI maintenance       bulletin,
    (budgets.ledger_hook)         consolidation
    anything else                 other         ''                                   ''

The charges of memory's jobs are read from the job and what it gathered (``memory.job_charge``;
None for a job it does not know: the enclosing charge, or ``OTHER``, then applies). A charge is set
on the event loop and follows the awaits of that task (and tasks it starts); work on the memory
thread never sees it, which is why the clients read it on the loop.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from memory import Charge, RecallContext

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
