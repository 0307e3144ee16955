"""``companion eval answers``: answers from memory on LoCoMo-format data, end to end (EVAL-2,
``measure.answers``).

It talks to the configured model server (OPENAI_BASE_URL, OPENAI_API_KEY, COMPANION_CHAT_MODEL, the
extraction model's settings, or COMPANION_LOCAL_MODEL), on new stores of its own: the configured
store is never opened. The judge, when ``--judge-model`` names one, is that model on the same
server."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .memories import command, positive_int
from .output import UsageError, measure_installed, note, out, print_json

if TYPE_CHECKING:
    from ..config import Settings

EPILOG = """\
Each conversation is told to the bot as talk between its people in a server of its own (extraction
and the other background jobs run after each session, as the bot's loop runs them; --raw: each turn
is filed as a memory instead), then each question is asked there by a third person through the
reply path a person's message takes. Scores: token F1 as LoCoMo computes it (no stemming);
category 5 is right when the answer abstains ("I don't know", "not mentioned"); with --judge-model,
that model's CORRECT/WRONG (prompts/answer_judge.md) too. Baselines: --baseline none (the same
reply path on an empty store), --baseline full (the whole conversation in the prompt, where it
fits --context-tokens). Progress and the time left go to stderr; --json prints every answer.
A slow local model takes minutes a question: start with --questions 5."""


def register(sub: argparse._SubParsersAction) -> None:
    help = (
        "ask LoCoMo-format questions through the bot and score its answers (the configured model)"
    )
    p = command(sub, "answers", run_eval_answers, help, json_flag=True)
    p.epilog, p.formatter_class = EPILOG, argparse.RawDescriptionHelpFormatter
    p.add_argument("path", type=Path, help="a LoCoMo-format JSON file (.json, or gzipped .json.gz)")
    p.add_argument(
        "--questions", type=positive_int, metavar="N", help="draw N questions (default: all)"
    )
    p.add_argument("--seed", type=int, default=1, help="the draw's seed (default: 1)")
    p.add_argument(
        "--limit",
        type=positive_int,
        metavar="N",
        help="only the first N conversations (each one asked about is told to the bot whole)",
    )
    p.add_argument(
        "--categories",
        type=categories,
        default=(1, 2, 3, 4),
        help="comma-separated, of 1-5 (default: 1,2,3,4; 5 is adversarial, scored as abstention)",
    )
    p.add_argument(
        "--baseline",
        action="append",
        choices=("none", "full"),
        default=[],
        help="also answer without memory (none), or with the whole conversation in the prompt "
        "(full); repeatable",
    )
    p.add_argument(
        "--raw",
        action="store_true",
        help="no extraction: each turn is stored as a memory as it was said",
    )
    p.add_argument(
        "--judge-model", metavar="NAME", help="judge each answer with this model on the same server"
    )
    p.add_argument(
        "--context-tokens",
        type=positive_int,
        metavar="N",
        help="the chat model's context, for --baseline full (default: "
        "COMPANION_LOCAL_MODEL_CONTEXT with a local model, else 16384)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="per request and per turn, for a slow server",
    )
    p.set_defaults(uses_model=True)


def categories(text: str) -> tuple[int, ...]:
    try:
        found = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected numbers 1-5 separated by commas, not {text!r}"
        ) from None
    if not found or not set(found) <= {1, 2, 3, 4, 5}:
        raise argparse.ArgumentTypeError(f"categories are 1 to 5, not {text!r}")
    return found


def run_eval_answers(args: argparse.Namespace, settings: Settings) -> None:
    from ..clients import secret
    from .doctor import reach

    with measure_installed():
        from measure.answers import Options, evaluate_answers, plan
    if args.timeout is not None:
        if not 0 < args.timeout <= 3600:
            raise UsageError("--timeout must be more than 0 and at most 3600 seconds")
        settings = settings.model_copy(
            update={"llm_timeout_s": args.timeout, "turn_deadline_s": args.timeout * 3}
        )
    options = Options(
        methods=("memory", *dict.fromkeys(args.baseline)),
        categories=args.categories,
        questions=args.questions,
        limit=args.limit,
        seed=args.seed,
        raw=args.raw,
        judge_model=args.judge_model,
        context_tokens=args.context_tokens
        or (settings.local_model_context if settings.local_model else 16384),
    )
    try:
        todo = plan(args.path, options)
    except OSError as exc:
        raise UsageError(f"cannot read {args.path}: {exc.strerror or exc}") from None
    except (KeyError, ValueError) as exc:  # the data, not the program
        raise UsageError(f"{args.path} is not usable LoCoMo data: {exc!s}") from None
    problem = reach(settings.llm_base_url, secret(settings.llm_api_key))
    if problem:
        raise UsageError(problem.message)
    result = asyncio.run(evaluate_answers(todo, settings, options, progress=note))
    if args.json:
        return print_json(result)
    out().print(summary_text(result), markup=False, highlight=False, soft_wrap=True)
    for line in result["notes"]:
        note(line)


def summary_text(result: dict[str, Any]) -> str:
    """Mean F1 per category and overall, a line per method; the judge's share where it judged."""
    cats = [str(c) for c in result["categories"]]
    head = ["method", *(f"cat {c}" for c in cats), "overall", "judge", "answered"]
    rows = [head]
    for method, s in result["summary"].items():
        f1 = s["f1"]
        judge = "-" if s["judge_correct"] is None else f"{s['judge_correct']:.0%} of {s['judged']}"
        answered = f"{s['answered']}" + (f" ({s['skipped']} skipped)" if s["skipped"] else "")
        answered += f" ({s['failed']} failed)" if s["failed"] else ""
        rows.append([method, *(_f1(f1.get(c)) for c in cats), _f1(f1["overall"]), judge, answered])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    what = "turns stored as memories" if result["raw"] else "extraction by the model"
    title = f"Answers of {result['model']} to {result['questions']} questions ({what}); token F1"
    return "\n".join(
        [title, *lines, "category 5: the share of answers that abstained"][
            : None if "5" in cats else -1
        ]
    )


def _f1(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
