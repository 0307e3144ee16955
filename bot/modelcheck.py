"""The real-model check (ORCH-9): a fixed conversation through the console pipeline against any endpoint.

``companion modelcheck`` runs the same runtime as ``companion chat`` (``bot.composition.build_runtime``, the
console adapter, the model's own tool calls) on a new store, over a scripted conversation
(``bot.modelcheck_scripts``: English, 20 turns, or German or Chinese, 17): facts about the
person, a preference, a dated plan, a "remember that", in English two forgets (one before
extraction ran, one after), a restart of the bot on the same store (which runs the buffered
extraction), and "what do you remember about me?". It scores what the model did to the memory,
not how it chatted:

- tool calls made, and honoured (the tool ran without an error);
- turns whose shown text looks like a tool call written out (must be 0), and such replies stored;
- the person's facts stored against the conversation's gold facts, matched by key words: precision, recall;
- the person's facts in the conversation's language (LANG-3), and those in the first person;
- facts filed as the bot's own that hold the person's words (must be 0);
- forgotten words left in any file of the store folder, byte for byte (must be 0);
- the share of each request's prompt the server read from its cache (where it says), and seconds per turn.

The clock is injected and moves a minute a turn: the prompt's clock changes as in a real chat, while the
background jobs run only at the restart and the end (a slow local model is not raced by its own extraction).
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory import FakeClock
from memory.models import SELF_SUBJECT

from .counts import counted
from .modelcheck_scripts import ENGLISH, Script
from .spending.usage import Usage

if TYPE_CHECKING:
    from .config import Settings
    from .model.client import Answer, ToolBox
    from .runtime import Runtime

USER_ID = "modelcheck"
TURN_S = 60.0  # the clock moves a minute a turn


# the English script's lines and gold facts, by their old names
BEFORE_RESTART, AFTER_RESTART, GOLD = ENGLISH.before, ENGLISH.after, ENGLISH.gold
TOOL_NAMES = (
    "memory_store|memory_search|memory_recall|memory_update|memory_delete|memory_reflect|memory_graph"
    "|conversation_search|channel_recall"
)
# A tool call written out as text: bare or fenced JSON with a name and arguments, Hermes/Qwen <tool_call>,
# Llama 3.1 <|python_tag|>, Mistral [TOOL_CALLS], or a tool's name called like a function.
TOOL_TEXT = re.compile(
    rf"<tool_call>|<\|python_tag\|>|\[TOOL_CALLS\]|\"(arguments|parameters)\"\s*:|\{{\s*\"name\"\s*:|```json|\b({TOOL_NAMES})\s*\(",
    re.IGNORECASE,
)


@dataclass(slots=True)
class TurnRecord:
    said: str
    shown: str = ""
    seconds: float = 0.0
    tool_calls: list[str] = field(default_factory=list)  # "name" or "name!" (refused)
    usage: list[Usage] = field(default_factory=list)

    @property
    def cached_share(self) -> float | None:
        """Cached prompt tokens over prompt tokens, summed over the turn's requests that say."""
        known = [u for u in self.usage if u.cached is not None and u.prompt > 0]
        if not known:
            return None
        return sum(u.cached or 0 for u in known) / sum(u.prompt for u in known)


@dataclass(slots=True)
class Report:
    model: str
    base_url: str
    turns: list[TurnRecord] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)  # the person's live facts at the end
    self_facts: list[str] = field(default_factory=list)
    json_stored: int = 0
    words_left: list[str] = field(default_factory=list)  # "word in file"
    reminders: int = 0  # the person's reminders pending at the end
    script: Script = ENGLISH

    # -- figures --------------------------------------------------------------------------------------------
    @property
    def tool_calls(self) -> int:
        return sum(len(t.tool_calls) for t in self.turns)

    @property
    def tool_calls_honoured(self) -> int:
        return sum(1 for t in self.turns for c in t.tool_calls if not c.endswith("!"))

    @property
    def json_shown(self) -> int:
        return sum(1 for t in self.turns if TOOL_TEXT.search(t.shown))

    @property
    def gold_found(self) -> list[str]:
        return [g.label for g in self.script.gold if any(g.matches(f) for f in self.facts)]

    @property
    def precision(self) -> float | None:
        hits = [f for f in self.facts if any(g.matches(f) for g in self.script.gold)]
        return len(hits) / len(self.facts) if self.facts else None

    @property
    def recall(self) -> float:
        return len(self.gold_found) / len(self.script.gold)

    @property
    def in_language(self) -> list[str]:
        """The person's facts written in the conversation's language (LANG-3)."""
        return [f for f in self.facts if self.script.in_language(f)]

    @property
    def first_person(self) -> list[str]:
        """The person's facts in their own first person ("I have a cat"): a name belongs there
        (ORCH-15)."""
        return [f for f in self.facts if self.script.first_person(f)]

    @property
    def invented(self) -> list[str]:
        """The person's facts that hold nothing they said."""
        return [f for f in self.facts if self.script.invented(f)]

    @property
    def answers(self) -> list[tuple[str, bool]]:
        """Each recall question the script scores, and whether its reply was right."""
        scored = ((t.said, self.script.answered(t.said, t.shown)) for t in self.turns)
        return [(said, right) for said, right in scored if right is not None]

    @property
    def wrong_self_facts(self) -> list[str]:
        return [f for f in self.self_facts if self.script.persons(f)]

    @property
    def cached_from_turn_2(self) -> float | None:
        usage = [
            u for t in self.turns[1:] for u in t.usage if u.cached is not None and u.prompt > 0
        ]
        return sum(u.cached or 0 for u in usage) / sum(u.prompt for u in usage) if usage else None

    @property
    def failures(self) -> list[str]:
        """The must-be-0 figures that are not."""
        out = []
        if self.json_shown or self.json_stored:
            out.append(
                f"tool-call text shown in {counted(self.json_shown, 'turn')}, "
                f"stored in {counted(self.json_stored, 'message')}"
            )
        if self.wrong_self_facts:
            out.append(f"{len(self.wrong_self_facts)} of the person's facts filed as the bot's own")
        if self.words_left:
            out.append(f"forgotten words left: {', '.join(self.words_left)}")
        if self.reminders < self.script.reminders:
            out.append(f"{self.reminders} of {self.script.reminders} reminders asked for stored")
        return out

    def as_dict(self) -> dict[str, Any]:
        seconds = [t.seconds for t in self.turns]
        return {
            "model": self.model,
            "base_url": self.base_url,
            "language": self.script.language,
            "turns": len(self.turns),
            "tool_calls": self.tool_calls,
            "tool_calls_honoured": self.tool_calls_honoured,
            "json_shown": self.json_shown,
            "json_stored": self.json_stored,
            "facts_stored": len(self.facts),
            "gold_facts": len(self.script.gold),
            "gold_found": self.gold_found,
            "facts_in_language": len(self.in_language),
            "facts_not_in_language": [f for f in self.facts if f not in self.in_language],
            "facts_in_first_person": self.first_person,
            "precision": _round(self.precision),
            "recall": _round(self.recall),
            "wrong_self_facts": self.wrong_self_facts,
            "invented_facts": self.invented,
            "answers_right": sum(right for _, right in self.answers),
            "answers": [{"question": q, "right": right} for q, right in self.answers],
            "reminders_stored": self.reminders,
            "forgotten_words_left": self.words_left,
            "cached_share_from_turn_2": _round(self.cached_from_turn_2),
            "seconds_total": round(sum(seconds), 1),
            "seconds_per_turn": round(sum(seconds) / len(seconds), 1) if seconds else None,
            "failures": self.failures,
            "per_turn": [
                {
                    "said": t.said,
                    "seconds": round(t.seconds, 1),
                    "tool_calls": t.tool_calls,
                    "cached_share": _round(t.cached_share),
                    "prompt_tokens": [u.prompt for u in t.usage],
                    "json_shown": bool(TOOL_TEXT.search(t.shown)),
                    "shown": t.shown,
                }
                for t in self.turns
            ],
            "facts": self.facts,
            "self_facts": self.self_facts,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


# -- the run ----------------------------------------------------------------------------------------------------
class CountingTools:
    """The turn's tools as the model sees them; each call is noted with whether the tool honoured it."""

    def __init__(self, tools: ToolBox, calls: list[str]) -> None:
        self.tools, self.calls = tools, calls

    @property
    def remembering(self) -> bool:
        return self.tools.remembering

    @property
    def forgot(self) -> bool:
        return self.tools.forgot

    def schemas(self) -> list[dict[str, Any]]:
        return self.tools.schemas()

    async def call(self, name: str, arguments: str) -> str:
        result = await self.tools.call(name, arguments)
        self.calls.append(name + ("!" if result.startswith("Error") else ""))
        return result


class Watched:
    """The runtime's chat client, with each turn's tool calls and the server's usage noted on ``record``."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.record: TurnRecord | None = None

    async def run(
        self, messages: list[dict[str, Any]], tools: Any = None, stream: Any = None
    ) -> Answer:
        record = self.record or TurnRecord("")
        answer = await self.llm.run(
            messages, CountingTools(tools, record.tool_calls) if tools else None, stream
        )
        record.usage.extend(answer.usage)  # a failed run's requests are not counted
        return answer


Build = Callable[["Settings", FakeClock], "Runtime"]


async def run_check(
    settings: Settings,
    folder: Path,
    build: Build | None = None,
    on_turn: Callable[[TurnRecord], None] | None = None,
    script: Script = ENGLISH,
) -> Report:
    """The scripted conversation (English, German or Chinese) on a new store in ``folder``; the
    report."""
    from .composition import build_runtime

    build = build or (lambda s, c: build_runtime(s, clock=c))
    settings = settings.model_copy(
        update={
            "db_path": folder / "companion.db",
            "database_url": "",
            "journal_dir": None,
            "ingest_dir": None,
            "scheduler_enabled": False,
            "dashboard_enabled": False,
            # the check reads what extraction filed: each stop waits for it, however slow the model (a person's
            # /quit stops after COMPANION_SHUTDOWN_FLUSH_S and leaves the rest for the next start)
            "shutdown_flush_s": 3600.0,
        }
    )
    clock = FakeClock(time.time())
    report = Report(settings.chat_model, settings.llm_base_url, script=script)
    for lines in (script.before, script.after):  # the restart: a new runtime on the same store
        runtime = build(settings, clock)
        try:
            await _converse(runtime, lines, clock, report, on_turn)
        finally:
            await _stop(runtime)  # runs the buffered extraction (Runtime.stop flushes it)
        clock.advance(settings.extraction_debounce_s + TURN_S)
    _score_store(settings, clock, report, build)
    return report


async def _converse(
    runtime: Runtime, lines: tuple[str, ...], clock: FakeClock, report: Report, on_turn: Any
) -> None:
    from .adapters.console import ConsoleChat

    watched = Watched(runtime.orchestrator.llm)
    runtime.orchestrator.llm = watched  # type: ignore[assignment]  # the same client, watched
    screen = io.StringIO()
    pending = iter(lines)
    state: dict[str, Any] = {"record": None, "start": 0.0, "mark": 0}

    def finish_turn() -> None:
        record = state["record"]
        if record is not None:
            record.seconds = time.perf_counter() - state["start"]
            record.shown = screen.getvalue()[state["mark"] :]
            report.turns.append(record)
            if on_turn is not None:
                on_turn(record)

    def next_line(prompt: str) -> str:
        finish_turn()
        line = next(pending, None)
        if line is None:
            state["record"] = None
            raise EOFError
        clock.advance(TURN_S)
        state.update(
            record=TurnRecord(line), start=time.perf_counter(), mark=len(screen.getvalue())
        )
        watched.record = state["record"]
        return line

    await runtime.start(background_loop=False)
    await ConsoleChat(
        runtime.orchestrator,
        user_id=USER_ID,
        user_name=report.script.user_name,
        input_fn=next_line,
        output=screen,
    ).run()


async def _stop(runtime: Runtime) -> None:
    engine = runtime.engine
    if engine.journals is not None:  # what the running bot's loop writes each tick
        await runtime.runner.run(engine.journals.flush)
    await runtime.stop()


def _score_store(settings: Settings, clock: FakeClock, report: Report, build: Build) -> None:
    """What the store holds at the end, read through a third runtime (nothing is said to it), then its bytes."""
    runtime = build(settings, clock)
    engine = runtime.engine
    memories = [m for batch in engine.memory_rows.in_written_order() for m in batch]
    live = [m for m in memories if not (m.forgotten or m.superseded_by or m.consolidated_into)]
    report.facts = [m.content for m in live if m.subject != SELF_SUBJECT]
    report.self_facts = [m.content for m in live if m.subject == SELF_SUBJECT]
    replies = [
        m
        for m in engine.messages.in_channel_after("console", "console", 0.0)
        if m.role == "assistant"
    ]
    report.json_stored = sum(1 for m in replies if TOOL_TEXT.search(m.content))
    report.reminders = len(engine.reminders.mine(engine.people.lookup("console", USER_ID)))
    runtime.engine.close()
    runtime.runner.shutdown()
    report.words_left = words_left(Path(settings.db_path).parent, report.script.forgotten)


def words_left(folder: Path, words: tuple[str, ...]) -> list[str]:
    """Each word (case-insensitive) found in the bytes of any file under ``folder``: the store, its WAL and
    journals, the memory journals and their snapshots. Digits inside an id (a UUID, a hex digest) are not the
    word: one run in ten had a random memory id with "-4417-" in it."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes().lower()
        ids = [m.span() for m in _ID.finditer(data)]
        found += [
            f"{w} in {path.relative_to(folder)}"
            for w in words
            if any(
                not _inside(m.span(), ids) for m in re.finditer(re.escape(w.lower().encode()), data)
            )
        ]
    return found


# a UUID or a hex digest of 32 characters or more, as the store writes ids and hashes
_ID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32,}")


def _inside(span: tuple[int, int], ids: list[tuple[int, int]]) -> bool:
    return any(start <= span[0] and span[1] <= end for start, end in ids)
