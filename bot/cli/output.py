"""What the CLI prints: rich tables for people, plain JSON for programs, progress on stderr.

With ``--json`` stdout carries the result as one JSON document and nothing else; progress bars,
prompts that are not answers, notes and errors go to stderr (an error as one JSON object,
``{"error": ..., "exit_code": ...}``). Consoles are made per call so they follow the current
``sys.stdout``/``sys.stderr`` (tests capture them).

rich is imported inside the functions that draw: ``companion --help`` must not pay for it.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.models import Memory

from ..counts import counted as counted  # the commands' one way to print a count

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from memory import Hit


MAX_DETAIL_LINES = 12


class CliError(Exception):
    """An expected failure with a one-line message; ``exit_code`` 2 for bad input, 1 for runtime failures."""

    exit_code = 2


class UsageError(CliError):
    exit_code = 2


class CommandFailed(CliError):
    exit_code = 1


def out() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def err() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def say(text: str) -> None:
    """A human-readable line on stdout (user text is escaped, never read as rich markup; never broken by us,
    so a path in it can be copied whole)."""
    out().print(escape(text), soft_wrap=True)


def note(text: str) -> None:
    """A line for the person at the terminal, on stderr, so it never mixes with data on stdout."""
    err().print(escape(text), soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def print_error(message: str, exit_code: int, *, as_json: bool, prefix: str = "companion") -> None:
    """The one error report of a failed command, on stderr: a line for people (details indented below it),
    or one JSON object for programs."""
    if as_json:
        sys.stderr.write(
            json.dumps({"error": message.strip(), "exit_code": exit_code}, ensure_ascii=False)
            + "\n"
        )
        return
    first, *rest = message.strip().splitlines() or [""]
    sys.stderr.write(
        f"{prefix}: error: {first}\n"
        + "".join(f"  {line.strip()}\n" for line in rest[:MAX_DETAIL_LINES])
    )


def new_file(path: Path, force: bool) -> Path:
    """Check that ``path`` may be written: every command that writes a file refuses to replace one without --force."""
    if path.is_dir():
        raise UsageError(f"{path} is a directory; give a file name")
    if path.exists() and not force:
        raise UsageError(f"{path} already exists; pass --force to overwrite it")
    if not path.parent.is_dir():
        raise UsageError(f"directory {path.parent} does not exist")
    return path


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """Write to ``path.partial`` and move it over ``path`` only once complete: an interrupted write leaves nothing half done."""
    partial = path.with_name(path.name + ".partial")
    try:
        yield partial
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "-"


SHORT_ID = 8  # tables show ids like git shows commits; show/edit/delete accept any unique prefix


def memory_table(memories: Iterable[Memory], title: str | None = None) -> Table:
    """Content first: at 80 columns a wide scope column left the content one word per line, so the id stands
    alone and everything else about a memory is one dim line under its words."""
    table = _table(title, ("id", "memory"))
    for m in memories:
        extra = "".join(f" [cyan]#{escape(t)}[/cyan]" for t in m.tags) + (
            "" if _is_live(m) else " [dim](inactive)[/dim]"
        )
        about = f"{m.subject} · {m.scope.value}:{m.scope_id} · {m.type.value[:4]}/{m.kind.value} · imp {m.importance:g}"
        table.add_row(m.id[:SHORT_ID], f"{escape(m.content)}{extra}\n[dim]{escape(about)}[/dim]")
    return table


def hits_table(hits: Iterable[Hit[Memory]]) -> Table:
    """As ``memory_table``, with the score, and for an ingested passage the file and lines it came from."""
    table = _table(None, ("id", "memory"))
    for hit in hits:
        m = hit.item
        about = [f"score {hit.score:.3f}", m.subject, f"{m.type.value[:4]}/{m.kind.value}"]
        if m.provenance.file:
            about.append(f"from {m.provenance.file}")
        table.add_row(
            m.id[:SHORT_ID], f"{escape(m.content)}\n[dim]{escape(' · '.join(about))}[/dim]"
        )
    return table


def _table(title: str | None, columns: Iterable[str]) -> Table:
    """The id never wraps; the memory's own column takes the rest of the width."""
    from rich.table import Table

    table = Table(title=title, show_lines=True)
    for name in columns:
        wide = name == "memory"
        table.add_column(name, overflow="fold", no_wrap=not wide, ratio=1 if wide else None)
    return table


def memory_detail(memory: Memory) -> Table:
    from rich.table import Table

    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in memory.as_dict().items():
        if key in ("created_at", "updated_at", "last_accessed_at", "valid_from", "valid_to", "ttl"):
            value = when(value)
        elif key == "provenance":
            value = json.dumps({k: v for k, v in value.items() if v not in (None, [])})
        elif isinstance(value, list):
            value = ", ".join(value)
        table.add_row(key, escape("-" if value is None else str(value)))
    return table


def mapping_table(data: Mapping[str, Any], title: str | None = None) -> Table:
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in data.items():
        table.add_row(escape(str(key)), escape("-" if value is None else str(value)))
    return table


def records_table(records: list[Mapping[str, Any]], key: str = "size") -> Table:
    """Records side by side, one column each (headed by ``key``), one row per (flattened) field: bench results."""
    from rich.table import Table

    flat = [_flatten(r) for r in records]
    table = Table()
    table.add_column("")
    for i, record in enumerate(flat):
        table.add_column(
            f"{key} {record[key]:,}" if isinstance(record.get(key), int) else str(i + 1),
            justify="right",
        )
    for field in dict.fromkeys(f for record in flat for f in record if f != key):
        table.add_row(escape(field), *(escape(str(record.get(field, ""))) for record in flat))
    return table


def voice_bench_table(voice: Mapping[str, Any]) -> Table:
    """``companion bench voice``: one row per figure, with what it measures (the JSON has the same, by key)."""
    from rich.table import Table

    said = counted(voice["utterances"], "utterance")
    store = counted(voice["store_memories"], "memory")
    table = Table(title=f"voice, {said}, {store}; recommended voice: {voice['tts']}")
    for column, justify in (("", "left"), ("value", "right"), ("what it includes", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in _voice_rows(voice):
        table.add_row(*(escape(cell) for cell in row))
    return table


def _voice_rows(voice: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    def ms(figures: Mapping[str, Any], *keys: str) -> str:
        return " / ".join(f"{figures[k]}" for k in keys) + " ms"

    pause = f"end of speech -> first reply audio: end of turn ({voice['end_of_turn']}), Whisper, recall, model round trip, TTS"
    rows = [
        (f"first audio p50 / p95, {tts}", ms(f, "p50", "p95"), pause)
        for tts, f in voice["first_audio_ms_by_tts"].items()
    ]
    if voice.get("first_audio_ms_streaming"):
        paced = voice["streaming_model"]
        what = f"the same with a model streaming after {paced['ttft_ms']} ms at {paced['tokens_per_s']} tokens/s"
        rows.append(
            (
                f"first audio p50 / p95, {voice['tts']}, paced model",
                ms(voice["first_audio_ms_streaming"], "p50", "p95"),
                what,
            )
        )
    rows += _turn_rows(voice.get("turn_taking"))
    rows += [
        (f"round-trip WER, {tts}", f"{wer:.1%}", "reply sentences spoken, then heard by Whisper")
        for tts, wer in voice["tts_wer"].items()
    ]
    warm, cold, full, spec = (
        voice["warm_recall_ms"],
        voice["cold_recall_ms"],
        voice["warm_full_ms"],
        voice["speculative_stt"],
    )
    return rows + [
        (
            "warm recall p50 / p95",
            f"{ms(warm, 'p50', 'p95')} ({counted(warm['turns'], 'turn')})",
            voice["recall_includes"]["warm"],
        ),
        (
            "cold recall p50 / p95",
            f"{ms(cold, 'p50', 'p95')} ({counted(cold['turns'], 'turn')})",
            voice["recall_includes"]["cold"],
        ),
        (
            "warm memory's full recalls p50",
            f"{full['p50']} ms ({counted(full['turns'], 'turn')})",
            "a new topic: embed the turn + hybrid recall",
        ),
        ("warm hit rate", f"{voice['warm_hit_rate']}", "turns served from the warm snapshot"),
        (
            "barge-in p50 / max",
            ms(voice["barge_in_ms"], "p50", "max"),
            "someone's first sound over the bot -> its last frame",
        ),
        ("STT real-time factor", f"{voice['stt_rtf']}", "Whisper's time / audio time"),
        (
            "speculative STT used",
            f"{spec['used']} / {spec['started']}",
            "transcripts started in the pause that served the turn",
        ),
    ]


def _turn_rows(taking: Mapping[str, Any] | None) -> list[tuple[str, str, str]]:
    """The turn-taking set: the fixed pause and the turn model on the same turns."""
    ms = lambda f: f"{f['p50']} / {f['p95']} ms"  # noqa: E731
    if not taking:
        return []
    what = f"{taking['paused']} of {taking['turns']} turns ({taking['voice']}) pause 400-900 ms mid-sentence"
    rows = []
    for name, figures in (
        (f"fixed {taking['fixed_pause_ms']} ms pause", taking["fixed_pause"]),
        ("turn model", taking["turn_model"]),
    ):
        if figures:
            value = f"{figures['false_end_pct']}% / {ms(figures['end_delay_ms'])}"
            rows.append((f"false ends / end delay p50 / p95, {name}", value, what))
    return rows


def eval_table(result: Mapping[str, Any]) -> Table:
    """``evaluate_locomo``'s summary: one row per method, recall@k for categories 1-4 and for 5 (adversarial)."""
    from rich.table import Table

    groups = ("cat1-4", "cat5")
    ks = list(next(iter(result["methods"].values()))["cat1-4"]) if result["methods"] else []
    title = "LoCoMo evidence recall (%)" + (
        ", user turns indexed" if result.get("index") == "user" else ""
    )
    table = Table(
        title=title, caption=f"questions per category: {dict(result.get('questions', {}))}"
    )
    table.add_column("method")
    for group in groups:
        for k in ks:
            table.add_column(f"{group} {k}", justify="right")
    for method, scores in result["methods"].items():
        table.add_row(method, *(f"{scores[group][k]:.1f}" for group in groups for k in ks))
    return table


def search_cost_table(result: Mapping[str, Any]) -> Table:
    """What one search of each method cost (ms): the price of a ranking change, beside its recall."""
    from rich.table import Table

    table = Table(title="One search (ms)")
    for name in ("method", "p50", "p95"):
        table.add_column(name, justify="left" if name == "method" else "right")
    for method, scores in result["methods"].items():
        # a ledger written before times were kept
        spent = scores.get("search_ms") or {
            "p50": 0.0,
            "p95": 0.0,
        }
        table.add_row(method, f"{spent['p50']:.1f}", f"{spent['p95']:.1f}")
    return table


def session_table(result: Mapping[str, Any]) -> Table:
    """The field's figure beside ours: share of questions (categories 1-4) with any / all of their gold sessions
    among the top k sessions ranked (``measure.evaluation``)."""
    from rich.table import Table

    keys = (
        list(next(iter(result["methods"].values())).get("sessions cat1-4", {}))
        if result["methods"]
        else []
    )
    table = Table(title="Session recall, categories 1-4 (%)")
    table.add_column("method")
    for key in keys:
        table.add_column(key, justify="right")
    for method, scores in result["methods"].items():
        table.add_row(method, *(f"{scores['sessions cat1-4'][key]:.1f}" for key in keys))
    return table


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _is_live(m: Memory) -> bool:
    expired = m.ttl is not None and m.ttl <= time.time()
    return not (m.forgotten or m.consolidated_into or m.superseded_by or expired)


@contextlib.contextmanager
def progress_bar(description: str) -> Iterator[Callable[[int, int], None]]:
    """A ``progress(done, total)`` callback drawing a bar on stderr (drawn only on a terminal)."""
    from rich.progress import Progress

    console = err()
    with Progress(
        *rate_columns(), console=console, transient=True, disable=not console.is_terminal
    ) as progress:
        task = progress.add_task(description, total=None, rate="")

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)
            progress.update(task, rate=shown_rate(progress.tasks[0].speed))

        yield update


def rate_columns() -> tuple[Any, ...]:
    """A bar's columns: what, how far, how many, the rate and the time left at that rate (``ingest``, ``reembed``)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    rate = TextColumn("{task.fields[rate]}")
    return (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        rate,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )


def shown_rate(speed: float | None) -> str:
    """rich's running estimate of items per second, as a bar shows it (blank until there is one)."""
    return f"{speed:,.1f}/s" if speed else ""


def confirm(action: str, assume_yes: bool) -> None:
    """Ask y/N on a terminal before ``action`` ("delete memory ..."); without a terminal, refuse unless ``--yes``."""
    if assume_yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"not asking on a non-interactive input: pass --yes to {action}")
    sys.stderr.write(f"Really {action}? [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise CommandFailed("aborted")


@contextlib.contextmanager
def measure_installed() -> Iterator[None]:
    """Around the handlers' imports of ``measure``: made there, not at the top, so the bot never loads the
    measuring layer to chat; an install that leaves it out says so in one line instead of a traceback."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "measure":
            raise
        raise CommandFailed(
            f"the measuring tools ({exc.name}) are not part of this install"
        ) from None
