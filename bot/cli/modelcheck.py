"""``companion modelcheck``: the real-model check (ORCH-9, ``bot.modelcheck``) as a command.

It talks to the configured model server (OPENAI_BASE_URL, OPENAI_API_KEY, COMPANION_CHAT_MODEL and the
extraction model's settings), on a new store of its own: the configured store is never opened.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ..modelcheck_scripts import LANGUAGES
from .output import UsageError, note, out, print_json

if TYPE_CHECKING:
    from ..config import Settings
    from ..modelcheck_report import Report, TurnRecord

EPILOG = """\
Exit code 1 when a figure that must be 0 is not: tool-call text shown or stored, a person's fact filed as the
bot's own, a forgotten word left in a file of the store folder, a reply parroting the prompt or the
last replies. A slow local server needs generous timeouts:
--timeout sets both COMPANION_LLM_TIMEOUT_S and COMPANION_TURN_DEADLINE_S for the run."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "modelcheck",
        help="run a fixed conversation against the model server and score what it did to memory",
        description="Run a fixed conversation (English: 20 turns; German or Chinese: 17) of "
        "facts, a preference, a dated plan, a remember (in English two forgets), a restart and "
        "'what do you remember about me?' through the console pipeline against the configured "
        "model server, on a new store, and report tool calls, tool-call text shown, facts stored "
        "against the gold facts, facts in the conversation's language, facts wrongly filed as the "
        "bot's, forgotten words left in the store's files, cached prompt share and seconds per "
        "turn.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="run in this new (or empty) folder and keep the store there",
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="per request and per turn, for a slow local server",
    )
    p.add_argument(
        "--language",
        choices=LANGUAGES,
        default="en",
        help="the conversation's language: English (default), German or Chinese (LANG-3)",
    )
    p.add_argument(
        "--second",
        action="store_true",
        help="the second English conversation: a move, a relative, a reminder and a forget asked "
        "in everyday words, and five recall questions after the restart, scored",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=modelcheck, uses_model=True)


def modelcheck(args: argparse.Namespace, settings: Settings) -> int:
    from ..clients import secret
    from ..modelcheck import run_check
    from ..modelcheck_scripts import SCRIPTS
    from .doctor import reach

    if args.timeout is not None:
        if not 0 < args.timeout <= 600:
            raise UsageError("--timeout must be more than 0 and at most 600 seconds")
        settings = settings.model_copy(
            update={"llm_timeout_s": args.timeout, "turn_deadline_s": args.timeout * 3}
        )
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        raise UsageError(f"{args.keep} is not empty: the check needs a new store")
    problem = reach(settings.llm_base_url, secret(settings.llm_api_key))
    if problem:
        raise UsageError(problem.message)
    if args.second and args.language != "en":
        raise UsageError("--second is an English conversation: leave out --language")
    quiet, script = args.json, SCRIPTS["en2" if args.second else args.language]

    def progress(turn: TurnRecord) -> None:
        if not quiet:  # a slow local model takes minutes a turn: each turn's figures as it ends
            cached = "-" if turn.cached_share is None else f"{turn.cached_share:.0%}"
            prompt = "+".join(str(u.prompt) for u in turn.usage) or "-"
            note(
                f"{turn.seconds:6.1f} s  cached {cached}  prompt {prompt}  {turn.said}  tools: {', '.join(turn.tool_calls) or '-'}"
            )

    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        report = asyncio.run(run_check(settings, args.keep, on_turn=progress, script=script))
    else:
        with tempfile.TemporaryDirectory(prefix="companion-modelcheck-") as folder:
            report = asyncio.run(run_check(settings, Path(folder), on_turn=progress, script=script))
    if args.json:
        print_json(report.as_dict())
    else:
        # a table: never wrapped
        out().print(table(report), markup=False, highlight=False, soft_wrap=True)
    return 1 if report.failures else 0


def table(report: Report) -> str:
    """The figures as a plain text table (the per-turn lines after it)."""
    data = report.as_dict()

    def share(value: float | None) -> str:
        return "not reported" if value is None else f"{value:.0%}"

    rows = [
        ("model", f"{report.model} at {report.base_url}"),
        ("language", report.script.language),
        ("turns", str(data["turns"])),
        ("tool calls made / honoured", f"{report.tool_calls} / {report.tool_calls_honoured}"),
        ("tool-call text shown (must be 0)", str(report.json_shown)),
        ("tool-call text stored (must be 0)", str(report.json_stored)),
        ("person's facts stored", str(len(report.facts))),
        (
            "gold facts found (recall)",
            f"{len(report.gold_found)} of {data['gold_facts']} ({report.recall:.0%})",
        ),
        ("precision", share(report.precision)),
        (
            "facts in the conversation's language",
            f"{len(report.in_language)} of {len(report.facts)}"
            + (f" ({len(report.in_language) / len(report.facts):.0%})" if report.facts else ""),
        ),
        ("person's facts in the first person", str(len(report.first_person))),
        ("person's facts filed as the bot's (must be 0)", str(len(report.wrong_self_facts))),
        ("forgotten words left in files (must be 0)", str(len(report.words_left))),
        ("person's facts holding nothing they said", str(len(report.invented))),
        ("replies parroting the prompt or the last (must be 0)", str(len(report.parroted))),
        *(
            [
                (
                    "recall answers right",
                    f"{sum(r for _, r in report.answers)} of {len(report.answers)}",
                ),
                ("reminders stored", f"{report.reminders} of {report.script.reminders}"),
            ]
            if report.script.questions
            else []
        ),
        ("cached prompt share from turn 2", share(report.cached_from_turn_2)),
        ("seconds per turn (mean)", f"{data['seconds_per_turn']}"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines += ["", "turn  seconds  cached  tools  said"]
    for i, t in enumerate(report.turns, 1):
        cached = "-" if t.cached_share is None else f"{t.cached_share:.0%}"
        lines.append(
            f"{i:>4}  {t.seconds:7.1f}  {cached:>6}  {','.join(t.tool_calls) or '-':<5}  {t.said}"
        )
    odd = [f for f in report.facts if f not in report.in_language]
    if odd:
        lines += ["", f"facts not in the conversation's language ({report.script.language}):"]
        lines += [f"  {f}" for f in odd]
    if report.failures:
        lines += ["", *(f"FAILED: {f}" for f in report.failures)]
    return "\n".join(lines)
