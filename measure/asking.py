"""A LoCoMo-format conversation told to the bot, and questions asked of it, through its own pipeline
(EVAL-2).

The conversation's two people talk in one channel of a Discord server made for the
sample (``SampleServer``): each turn goes through ``Orchestrator.observe``, the path group talk the
bot does not answer takes (stored, buffered for extraction), at its session's date on an injected clock. After
each session the clock moves past the quiet time and the background jobs run as the bot's loop runs
them (``Background.tick``: extraction by the configured model, then a session's reflection and
compaction); with ``raw``, no job runs and each turn is also filed as one memory of the server, as
it was said.

A question is asked in the same server by a third person, addressed to the bot, through
``Orchestrator.reply`` (the path a person's message takes: the system prompt, the recall, the
tools), each in a channel of its own, so no question sees another's answer; the two people are
present and the conversation's channel is readable. The server, not a DM: what people say in a
server stays there and in their own DMs (SEC-1), so a DM of a third person would rightly see none of
it.

The run closes a runtime without ``Runtime.stop``: its flush would extract the questions, which are
not the conversation."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

import prompts
from bot.modelcheck import Build
from bot.types import IncomingMessage
from memory import FakeClock, MemoryEngine
from memory.models import MemoryType, NewMemory, Scope, Source
from memory.scopes import place_key

from .bench import ProgressLine
from .locomo import SampleTurn

if TYPE_CHECKING:
    from bot.config import Settings
    from bot.runtime import Runtime

PLATFORM = "discord"
TALK = "talk"  # the channel the two people talk in
ASKER = ("eval-asker", "Quinn")  # the third person who asks the questions
QUESTION_GAP_S = 60.0  # the clock moves a minute a question
# background ticks after a session: each runs what is due; a stuck job is not waited for forever
MAX_TICKS = 100


@dataclass(frozen=True, slots=True)
class SampleServer:
    """The sample's server: its id and its two (or more) people as (platform user id, name)."""

    guild: str
    people: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, sample_id: str, said: list[SampleTurn]) -> SampleServer:
        names = dict.fromkeys(t.speaker for t in said)
        return cls(f"eval-{sample_id}", tuple((f"speaker-{i}", n) for i, n in enumerate(names, 1)))

    @property
    def key(self) -> str:
        return place_key(PLATFORM, self.guild)

    def told(self, turn: SampleTurn) -> IncomingMessage:
        """A turn as the adapter hands group talk not spoken to the bot."""
        author = next(p for p in self.people if p[1] == turn.speaker)
        return IncomingMessage(
            platform=PLATFORM,
            channel_id=TALK,
            author_id=author[0],
            author_name=turn.speaker,
            text=turn.text,
            guild_id=self.guild,
            message_id=turn.dia_id,
            participants=tuple(p for p in self.people if p != author),
            created_at=turn.at,
            addressed=False,
        )

    def asked(self, number: int, question: str, at: float) -> IncomingMessage:
        """A question spoken to the bot in a channel of its own, the conversation's channel
        readable."""
        return IncomingMessage(
            platform=PLATFORM,
            channel_id=f"question-{number}",
            author_id=ASKER[0],
            author_name=ASKER[1],
            text=question,
            guild_id=self.guild,
            message_id=f"q{number}",
            participants=self.people,
            created_at=at,
            readable_channels=(TALK,),
            addressed=True,
        )


def scratch_settings(settings: Settings, folder: Path) -> Settings:
    """The operator's model settings on a new store in ``folder``: nothing of theirs is opened or
    written."""
    return settings.model_copy(
        update={
            "db_path": folder / "companion.db",
            "database_url": "",
            "journal_dir": None,
            "ingest_dir": None,
            "scheduler_enabled": False,
            "dashboard_enabled": False,
            # the forgotten facts' key: a scratch store's own, kept nowhere (it is deleted with the
            # store)
            "secret_key": SecretStr(secrets.token_hex(32)),
        }
    )


@contextlib.asynccontextmanager
async def bot_on(
    settings: Settings, folder: Path, clock: FakeClock, build: Build
) -> AsyncIterator[Runtime]:
    """A started runtime on a new store in ``folder`` (no background loop: the eval ticks it)."""
    folder.mkdir(parents=True, exist_ok=True)
    runtime = build(scratch_settings(settings, folder), clock)
    try:
        await runtime.start(background_loop=False)
        yield runtime
    finally:
        await runtime.runner.run(runtime.engine.close)
        runtime.runner.shutdown()
        for model in runtime.models:
            with contextlib.suppress(Exception):  # the pool's close only; the answers are in
                await model.aclose()


async def tell(
    runtime: Runtime,
    clock: FakeClock,
    place: SampleServer,
    said: list[SampleTurn],
    *,
    raw: bool,
    quiet_s: float,
    progress: ProgressLine,
) -> int:
    """The conversation, session by session; the memories its background jobs (or, ``raw``, its
    turns) stored."""
    stored = 0
    sessions = [list(g) for _, g in groupby(said, key=lambda t: t.session)]
    for n, session in enumerate(sessions, 1):
        for turn in session:
            move_to(clock, turn.at)
            await runtime.orchestrator.observe(place.told(turn))
            if raw:
                stored += await runtime.runner.run(remember_turn, runtime.engine, place, turn)
        if not raw:
            move_to(clock, session[-1].at + quiet_s)
            stored += await learn(runtime)
        progress(
            f"  session {n} of {len(sessions)} told ({len(session)} turns);"
            f" memories so far: {stored}"
        )
    return stored


async def learn(runtime: Runtime) -> int:
    """What the bot's loop would do now: ticks until nothing more is due; the facts extracted or
    reflected."""
    stored = 0
    for _ in range(MAX_TICKS):
        done = await runtime.background.tick()
        stored += done["extracted"] + done["reflected"]
        if not any(done.values()):
            break
    return stored


def remember_turn(engine: MemoryEngine, place: SampleServer, turn: SampleTurn) -> int:
    """``raw``: a turn filed as one memory of the server, in the speaker's words, who and when."""
    result = engine.memories.add(
        NewMemory(
            content=f"{turn.speaker} said on {spoken_date(turn.at)}: {turn.text}",
            subject=turn.speaker,
            scope=Scope.GUILD,
            scope_id=place.key,
            type=MemoryType.EPISODIC,
            source=Source.INGEST,
        )
    )
    return 1 if result.status == "stored" else 0


class Apologised(Exception):
    """The model failed and the reply path apologised (``apology``, what the person read); why, as
    the client knows."""

    def __init__(self, why: str, apology: str) -> None:
        super().__init__(why)
        self.apology = apology


async def ask(
    runtime: Runtime, clock: FakeClock, place: SampleServer, number: int, question: str
) -> str:
    """The bot's reply to the question, as the person would read it; ``NoAnswer`` when the model
    failed."""
    clock.advance(QUESTION_GAP_S)
    reply = await runtime.orchestrator.reply(place.asked(number, question, clock.now()))
    if reply.failed:
        raise Apologised(str(reply.failure or "the model gave no answer"), reply.text)
    return reply.text


def transcript(said: list[SampleTurn], dates: dict[int, str]) -> str:
    """The whole conversation as text: each session under its date, a line a turn."""
    lines: list[str] = []
    for session, group in groupby(said, key=lambda t: t.session):
        turns = list(group)
        lines += ["", f"Session {session} ({dates.get(session) or spoken_date(turns[0].at)}):"]
        lines += [f"{t.speaker}: {t.text}" for t in turns]
    return "\n".join(lines).strip()


def full_prompt(said: list[SampleTurn], dates: dict[int, str]) -> str:
    names = list(dict.fromkeys(t.speaker for t in said))
    speakers = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
    return prompts.render("answer_full", speakers=speakers, conversation=transcript(said, dates))


def rough_tokens(text: str) -> int:
    """A cautious token count without the model's tokenizer: a character of a CJK script is about a
    token, other text about four characters a token."""
    wide = sum(1 for c in text if ord(c) >= 0x2E80)
    return wide + (len(text) - wide + 3) // 4


async def ask_whole(llm: Any, system: str, question: str) -> str:
    """The whole-conversation baseline: the conversation and the question, no memory, no tools."""
    return await llm.complete(
        [{"role": "system", "content": system}, {"role": "user", "content": question}]
    )


def move_to(clock: FakeClock, at: float) -> None:
    if at > clock.now():
        clock.advance(at - clock.now())


def spoken_date(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%d %B %Y")
