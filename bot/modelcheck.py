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
- replies made only of the prompts' words, or the reply before said again (must be 0);
- the share of each request's prompt the server read from its cache (where it says), and seconds per turn.

The clock is injected and moves a minute a turn: the prompt's clock changes as in a real chat, while the
background jobs run only at the restart and the end (a slow local model is not raced by its own extraction).
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory import FakeClock
from memory.models import SELF_SUBJECT

from .modelcheck_report import TOOL_TEXT, Report, TurnRecord
from .modelcheck_scripts import ENGLISH, Script

if TYPE_CHECKING:
    from .config import Settings
    from .model.client import Answer, ToolBox
    from .runtime import Runtime

USER_ID = "modelcheck"
TURN_S = 60.0  # the clock moves a minute a turn


# the English script's lines and gold facts, by their old names
BEFORE_RESTART, AFTER_RESTART, GOLD = ENGLISH.before, ENGLISH.after, ENGLISH.gold


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
