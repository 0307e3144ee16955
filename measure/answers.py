"""Answers from memory, end to end, on LoCoMo-format data (EVAL-2): ``companion eval answers``.

For each sample holding a chosen question, the conversation is told to the bot on a new store and
each question is asked through its reply path (``measure.asking``); the answer is scored by token
F1, category 5 as abstention (``measure.scoring``), and by a judge model when one is named
(``prompts/answer_judge.md``, temperature 0). Beside the memory, per question and on request, the
baselines:

    none   no memory: the same reply path on an empty store (the question, the bot's system
           prompt, nothing recalled)
    full   the whole conversation in the prompt (``prompts/answer_full.md``), no tools: where it
           fits the model's context (``context_tokens``, a cautious count, with room for the
           reply), else the row says why it is not

Questions: those of ``categories`` (1-4 by default; LoCoMo's category 3 items without an answer are
left out), all, or ``questions`` of them drawn with ``seed``. Every answer is a row: sample,
question, category, gold, method, answer, f1, judge (CORRECT, WRONG, or None), seconds. Progress,
with the time left at the rate so far, goes to ``progress`` a line at a time."""

from __future__ import annotations

import random
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import prompts
from memory import FakeClock
from memory.clock import DAY

from . import asking
from .locomo import SampleTurn, load_samples, turns
from .scoring import ADVERSARIAL, score_answer, verdict

if TYPE_CHECKING:
    from bot.config import Settings

METHODS = ("memory", "none", "full")
Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Question:
    sample_id: str
    number: int  # its place in the sample's qa list, from 1
    text: str
    category: int
    gold: str  # for category 5, the answer it baits (LoCoMo's adversarial_answer)


@dataclass(frozen=True, slots=True)
class Options:
    methods: tuple[str, ...] = ("memory",)
    categories: tuple[int, ...] = (1, 2, 3, 4)
    questions: int | None = None  # None: all of them
    limit: int | None = None  # only the first N conversations
    seed: int = 1
    raw: bool = False
    judge_model: str | None = None
    context_tokens: int = 16384


@dataclass(slots=True)
class Pace:
    """The rate so far, and the time left at it."""

    total: int
    done: int = 0
    start: float = field(default_factory=time.monotonic)

    def left(self) -> str:
        if not self.done or self.done >= self.total:
            return ""
        each = (time.monotonic() - self.start) / self.done
        seconds = each * (self.total - self.done)
        return (
            f"; about {seconds:.0f} s left"
            if seconds < 90
            else f"; about {seconds / 60:.0f} min left"
        )


def chosen(samples: list[dict[str, Any]], options: Options) -> list[Question]:
    """The questions of the chosen categories in file order, or ``options.questions`` of them drawn
    with the seed (kept in file order, so a sample's questions are asked together)."""
    pool = [
        Question(str(s["sample_id"]), n, str(q["question"]), int(q["category"]), gold(q))
        for s in samples
        for n, q in enumerate(s["qa"], 1)
        if int(q.get("category", 0)) in options.categories
        and (int(q["category"]) == ADVERSARIAL or "answer" in q)
    ]
    if options.questions is None or options.questions >= len(pool):
        return pool
    picked = set(random.Random(options.seed).sample(range(len(pool)), options.questions))
    return [q for i, q in enumerate(pool) if i in picked]


def gold(qa: dict[str, Any]) -> str:
    """The answer; for category 5, the wrong one the question baits (a few carry an "answer")."""
    if int(qa["category"]) == ADVERSARIAL:
        return str(qa.get("adversarial_answer", qa.get("answer", "")))
    return str(qa["answer"])


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What a run will ask, read and checked before the model is asked anything."""

    path: str
    samples: dict[str, dict[str, Any]]  # by sample id, those holding a chosen question
    said: dict[str, list[SampleTurn]]
    asked: list[Question]


def plan(path: str | Path, options: Options) -> RunPlan:
    """Bad data raises ``ValueError`` (``KeyError`` for a missing field), a file that cannot be read
    ``OSError``."""
    samples = load_samples(path)[: options.limit]
    asked = chosen(samples, options)
    if not asked:
        raise ValueError(f"no questions in categories {list(options.categories)}")
    by_id = {str(s["sample_id"]): s for s in samples}
    said = {sid: turns(by_id[sid]) for sid in dict.fromkeys(q.sample_id for q in asked)}
    return RunPlan(str(path), {sid: by_id[sid] for sid in said}, said, asked)


async def evaluate_answers(
    todo: RunPlan,
    settings: Settings,
    options: Options,
    progress: Callable[[str], None] = lambda _: None,
    build: asking.Build | None = None,
) -> dict[str, Any]:
    """Every planned question asked of each method; the rows and a summary."""
    from bot.composition import build_runtime

    run = _Run(settings, options, build or (lambda s, c: build_runtime(s, clock=c)), progress)
    run.pace.total = len(todo.asked) * len(options.methods)
    try:
        with tempfile.TemporaryDirectory(prefix="companion-eval-answers-") as folder:
            for n, (sid, said) in enumerate(todo.said.items(), 1):
                mine = [q for q in todo.asked if q.sample_id == sid]
                progress(f"[{n}/{len(todo.said)}] {sid}: {len(said)} turns, {len(mine)} questions")
                await run.sample(Path(folder) / f"s{n}", todo.samples[sid], said, mine)
    finally:
        await run.close()
    return {
        "data": todo.path,
        "model": settings.chat_model,
        "judge_model": options.judge_model,
        "methods": list(options.methods),
        "raw": options.raw,
        "categories": list(options.categories),
        "seed": options.seed if options.questions is not None else None,
        "questions": len(todo.asked),
        "memories_stored": run.stored,
        "summary": summary(run.rows, options.methods),
        "notes": run.notes,
        "answers": run.rows,
    }


class _Run:
    def __init__(
        self,
        settings: Settings,
        options: Options,
        build: asking.Build,
        progress: Callable[[str], None],
    ) -> None:
        self.settings, self.options, self.build, self.progress = settings, options, build, progress
        self.rows: list[Row] = []
        self.notes: list[str] = []
        self.stored: dict[str, int] = {}
        self.pace = Pace(0)
        self.judge = _judge(settings, options.judge_model) if options.judge_model else None

    async def close(self) -> None:
        if self.judge is not None:
            await self.judge.aclose()

    async def sample(
        self, folder: Path, sample: dict[str, Any], said: list[SampleTurn], mine: list[Question]
    ) -> None:
        place = asking.SampleServer.of(str(sample["sample_id"]), said)
        quiet_s = max(self.settings.extraction_debounce_s, self.settings.reflection_silence_s) + 1
        clock = FakeClock(said[0].at)
        if "memory" in self.options.methods:
            async with asking.bot_on(self.settings, folder / "memory", clock, self.build) as bot:
                self.stored[place.guild] = await asking.tell(
                    bot,
                    clock,
                    place,
                    said,
                    raw=self.options.raw,
                    quiet_s=quiet_s,
                    progress=self.progress,
                )
                asking.move_to(clock, said[-1].at + DAY)
                for q in mine:
                    await self._answer(q, "memory", asking.ask(bot, clock, place, q.number, q.text))
        if not {"none", "full"} & set(self.options.methods):
            return
        clock = FakeClock(said[-1].at + DAY)
        whole = self._whole(sample, said)
        async with asking.bot_on(self.settings, folder / "empty", clock, self.build) as bot:
            for q in mine:
                if "none" in self.options.methods:
                    await self._answer(q, "none", asking.ask(bot, clock, place, q.number, q.text))
                if "full" in self.options.methods:
                    await self._full(q, bot.orchestrator.llm, whole)

    def _whole(self, sample: dict[str, Any], said: list[SampleTurn]) -> str | None:
        """The full baseline's prompt, or None (with a note) when it does not fit the context."""
        if "full" not in self.options.methods:
            return None
        conv = sample["conversation"]
        dates = {t.session: str(conv.get(f"session_{t.session}_date_time", "")) for t in said}
        system = asking.full_prompt(said, dates)
        need = asking.rough_tokens(system) + 200 + self.settings.reply_max_tokens
        if need <= self.options.context_tokens:
            return system
        self.notes.append(
            f"{sample['sample_id']}: the whole conversation (about {need} tokens with the question"
            f" and the reply) does not fit a context of {self.options.context_tokens}:"
            " no full-context answers"
        )
        return None

    async def _full(self, q: Question, llm: Any, whole: str | None) -> None:
        if whole is None:
            self.pace.done += 1
            self.rows.append(_row(q, "full", None, 0.0) | {"skipped": "does not fit the context"})
            return
        await self._answer(q, "full", asking.ask_whole(llm, whole, q.text))

    async def _answer(self, q: Question, method: str, answering: Any) -> None:
        from bot.model.client import LLMError

        start = time.monotonic()
        try:
            answer = await answering
        except (LLMError, asking.Apologised) as exc:  # the model failed (the reply path apologised)
            answer, failure = getattr(exc, "apology", ""), str(exc)
        else:
            failure = ""
        seconds = time.monotonic() - start
        entry = _row(q, method, answer, seconds) | ({"failed": failure} if failure else {})
        if self.judge is not None and q.category != ADVERSARIAL:
            entry["judge"] = await self._verdict(q, answer)
        self.rows.append(entry)
        self.pace.done += 1
        self.progress(
            f"  {method:<6} cat {q.category} F1 {entry['f1']:.2f}{_judged(entry)}"
            f" ({seconds:.1f} s) "
            f"{q.text[:60]}{self.pace.left()}"
        )

    async def _verdict(self, q: Question, answer: str) -> str | None:
        from bot.model.client import LLMError

        assert self.judge is not None
        prompt = prompts.render("answer_judge", question=q.text, gold=q.gold, answer=answer)
        try:
            said = await self.judge.complete([{"role": "user", "content": prompt}], temperature=0)
        except LLMError as exc:
            self.notes.append(f"the judge gave no verdict on {q.sample_id} #{q.number}: {exc}")
            return None
        return verdict(said)


def _row(q: Question, method: str, answer: str | None, seconds: float) -> Row:
    return {
        "sample_id": q.sample_id,
        "number": q.number,
        "question": q.text,
        "category": q.category,
        "gold": q.gold if q.category != ADVERSARIAL else "(not in the conversation: abstain)",
        **({"baited_answer": q.gold} if q.category == ADVERSARIAL else {}),
        "method": method,
        "answer": answer,
        "f1": None if answer is None else round(score_answer(answer, q.gold, q.category), 4),
        "judge": None,
        "seconds": round(seconds, 2),
    }


def _judged(entry: Row) -> str:
    return f" judge {entry['judge']}" if entry.get("judge") else ""


def _judge(settings: Settings, model: str) -> Any:
    """The judge: ``model`` on the chat model's server (OPENAI_BASE_URL, its key), short answers."""
    from bot.clients import secret
    from bot.config import llm_timeouts
    from bot.model.client import ChatClient

    timeout, deadline = llm_timeouts(settings, settings.llm_base_url)
    return ChatClient(
        settings.llm_base_url,
        secret(settings.llm_api_key),
        model,
        timeout=timeout,
        max_retries=settings.llm_max_retries,
        turn_deadline_s=deadline,
        max_tokens=256,
    )


def summary(rows: list[Row], methods: tuple[str, ...]) -> dict[str, Any]:
    """Per method: mean F1 per category and overall (category 5's 1/0 of abstention among them), the
    judge's share of CORRECT where it judged, and the rows skipped or failed."""
    out: dict[str, Any] = {}
    for method in methods:
        mine = [r for r in rows if r["method"] == method]
        scored = [r for r in mine if r["f1"] is not None]
        per: dict[str, list[float]] = defaultdict(list)
        for r in scored:
            per[str(r["category"])].append(r["f1"])
        judged = [r["judge"] for r in mine if r["judge"] is not None]
        out[method] = {
            "f1": {c: round(sum(v) / len(v), 4) for c, v in sorted(per.items())}
            | {"overall": _mean([r["f1"] for r in scored])},
            "judge_correct": _mean([v == "CORRECT" for v in judged]),
            "judged": len(judged),
            "answered": len(scored),
            "skipped": sum(1 for r in mine if "skipped" in r),
            "failed": sum(1 for r in mine if "failed" in r),
        }
    return out


def _mean(values: list[Any]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None
