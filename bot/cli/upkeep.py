"""Upkeep and measurement commands (OPS-2): ``consolidate``, ``decay``, ``prune``, ``reembed``, ``backup``,
``restore`` (which rebuilds the journals), ``journals rebuild``, ``stats``, ``eval locomo``, ``bench``
(``eval answers`` is ``bot.cli.eval_answers``).

The store's modules are imported inside the handlers: registering commands must stay cheap (``--help``)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import composition
from .memories import command, engine_for, positive_int
from .output import (
    CommandFailed,
    UsageError,
    counted,
    eval_table,
    mapping_table,
    measure_installed,
    new_file,
    note,
    out,
    print_json,
    progress_bar,
    records_table,
    replacing,
    say,
    search_cost_table,
    session_table,
    voice_bench_table,
)

if TYPE_CHECKING:
    from ..config import Settings


# -- upkeep and operations: consolidate, decay, prune, reembed, backup, stats, eval, bench ------------
def register(subparsers: argparse._SubParsersAction) -> None:
    p = command(
        subparsers,
        "consolidate",
        run_consolidate,
        "merge clusters of near-identical memories with the LLM",
        json_flag=True,
    )
    p.set_defaults(uses_model=True)
    p = command(
        subparsers,
        "decay",
        run_decay,
        "lower the importance of memories unused for a while (run once a day)",
        json_flag=True,
    )
    p.add_argument(
        "--unaccessed-days",
        type=float,
        default=7.0,
        help="only memories unused this long (default: 7)",
    )
    p.add_argument(
        "--factor",
        type=fraction,
        default=0.95,
        help="multiply importance by this, above 0 and below 1 (default: 0.95)",
    )
    p = command(
        subparsers,
        "prune",
        run_prune,
        "soft-forget faded, never-used memories and drop stale entities",
        json_flag=True,
    )
    p.add_argument("--below", type=float, default=1.0, help="importance under this (default: 1)")
    p.add_argument(
        "--older-than-days",
        type=float,
        default=30.0,
        help="created longer ago than this (default: 30)",
    )
    p.add_argument(
        "--entity-days", type=float, default=90.0, help="entities unseen this long (default: 90)"
    )
    p = command(
        subparsers,
        "reembed",
        run_reembed,
        "rebuild every vector with the configured embedding model",
        json_flag=True,
    )
    p.add_argument(
        "--allow-dimension-change",
        action="store_true",
        help="allow a model of another dimension (drops all vectors)",
    )
    p = command(
        subparsers,
        "backup",
        run_backup,
        "copy the database with SQLite's online backup (safe while the bot runs; PostgreSQL: says the pg_dump command)",
    )
    p.add_argument("dest", type=Path)
    p.add_argument("--force", action="store_true", help="overwrite DEST if it exists")
    p = command(
        subparsers,
        "restore",
        run_restore,
        "replace the store with a copy made by `companion backup` (stop the bot first)",
    )
    p.add_argument("backup", type=Path, help="the backup file")
    p.add_argument(
        "--force", action="store_true", help="replace the store if one exists (back it up first)"
    )
    journals = subparsers.add_parser(
        "journals",
        help="the Markdown journals beside the store",
        description="The Markdown journals.",
    )
    actions = journals.add_subparsers(dest="journals_command", metavar="ACTION", required=True)
    command(
        actions,
        "rebuild",
        run_journals_rebuild,
        "wipe the journals and make them again from the store",
        json_flag=True,
    )
    command(
        subparsers,
        "stats",
        run_stats,
        "counts of memories and messages, and the embedding model of the store",
        json_flag=True,
    )
    command(
        subparsers,
        "retry-failed",
        run_retry_failed,
        "queue again the extraction batches that kept failing (see stats)",
        json_flag=True,
    )
    _register_eval(subparsers)
    help = "latency benchmark on synthetic stores (progress on stderr); --db postgresql://... measures that server"
    p = command(subparsers, "bench", bench_command, help, json_flag=True)
    p.add_argument(
        "what",
        nargs="?",
        choices=["memory", "voice", "manners"],
        default="memory",
        help="memory: recall on synthetic stores (default); voice: a scripted offline voice session; "
        "manners: the group-manners decision per message (ORCH-10)",
    )
    p.add_argument(
        "--sizes",
        type=int_list,
        default=[10_000, 100_000],
        help="comma-separated store sizes (default: 10000,100000)",
    )
    p.add_argument(
        "--queries", type=positive_int, help="queries per size (default: the benchmark's own)"
    )
    p.add_argument(
        "--placement",
        choices=["spread", "one"],
        default="spread",
        help="memory: spread rows over guilds of 100k (default), or put them all in one guild",
    )
    p.add_argument(
        "--utterances",
        type=positive_int,
        default=32,
        help="voice: utterances in the session (default: 32)",
    )
    p.add_argument(
        "--end-pause-ms",
        type=positive_int,
        help="voice: the end-of-speech pause (default: the VAD's, 700)",
    )
    p.add_argument(
        "--natural", action="store_true", help="voice: the script as people talk (fewer warm hits)"
    )
    p.add_argument(
        "--store-size",
        type=int,
        default=10_000,
        help="voice: synthetic memories in the server's store (default: 10000)",
    )


def _register_eval(subparsers: argparse._SubParsersAction) -> None:
    from . import eval_answers

    group = subparsers.add_parser(
        "eval",
        help="measure recall and answers on benchmark data",
        description="Measure recall (locomo) and answers from memory (answers) on benchmark data.",
    )
    sub = group.add_subparsers(dest="eval_command", metavar="BENCHMARK", required=True)
    help = "evidence recall@k on LoCoMo-format conversations; --db postgresql://... stores them on that server"
    p = command(sub, "locomo", run_eval_locomo, help, json_flag=True)
    p.add_argument("path", type=Path, help="a LoCoMo-format JSON file (.json, or gzipped .json.gz)")
    p.add_argument("--limit", type=positive_int, help="only the first N conversations")
    p.add_argument(
        "--index",
        choices=("all", "user"),
        default="all",
        help="which turns are stored: all (default), or user: all but the chat assistant's (LongMemEval's protocol)",
    )
    p.add_argument(
        "--resume",
        type=Path,
        metavar="PATH",
        help="append each finished conversation to PATH (JSON lines); "
        "a rerun with the same PATH measures only the rest and reports them all",
    )
    eval_answers.register(sub)


def fraction(text: str) -> float:
    """0 < f < 1: 1 would change nothing, 0 or less would wipe or invert every importance."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number between 0 and 1, not {text!r}"
        ) from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be above 0 and below 1, not {text}")
    return value


def int_list(text: str) -> list[int]:
    return [positive_int(part.strip()) for part in text.split(",") if part.strip()] or [
        positive_int(text)
    ]


def _emit(args: argparse.Namespace, data: dict[str, Any], title: str) -> None:
    if args.json:
        return print_json(data)
    out().print(mapping_table(data, title=title))


def run_consolidate(args: argparse.Namespace, settings: Settings) -> None:
    from memory import StoreTools

    with engine_for(settings, embed=True) as engine, progress_bar("consolidating") as progress:
        report = StoreTools(engine).consolidate(
            composition.build_completer(settings, engine, "consolidation"),
            progress=progress,
        )
    _emit(
        args,
        {
            "clusters": report.clusters,
            "merged_rows": report.merged_rows,
            "new_ids": list(report.new_ids),
            "failures": report.failures,
        },
        "consolidation",
    )
    # consolidate() logs each failed cluster and carries on; the exit code is where a script learns of it.
    if report.failures:
        raise CommandFailed(
            f"{report.failures} of {report.clusters} clusters could not be merged (see the log above)"
        )


def run_decay(args: argparse.Namespace, settings: Settings) -> None:
    from memory import StoreTools

    with engine_for(settings) as engine:
        changed = StoreTools(engine).decay(unaccessed_days=args.unaccessed_days, factor=args.factor)
    _emit(args, {"decayed": changed}, "decay")


def run_prune(args: argparse.Namespace, settings: Settings) -> None:
    from memory import StoreTools

    with engine_for(settings) as engine:
        tools = StoreTools(engine)
        counts = {
            "forgotten": tools.prune(below=args.below, older_than_days=args.older_than_days),
            "entities_removed": tools.prune_entities(unseen_days=args.entity_days),
        }
    _emit(args, counts, "prune")


def run_reembed(args: argparse.Namespace, settings: Settings) -> None:
    from memory import StoreTools

    embedder = composition.build_embedder(settings)
    if embedder is None:
        raise UsageError("reembed needs an embedding model, but COMPANION_EMBEDDINGS is 'none'")
    # Opened without a model on purpose: a dimension change is made by reembed, not refused at open.
    with (
        composition.open_engine(settings, None) as engine,
        progress_bar("re-embedding") as progress,
    ):
        counts = StoreTools(engine).reembed(
            embedder, allow_dimension_change=args.allow_dimension_change, progress=progress
        )
    _emit(args, {**counts, "model": embedder.fingerprint, "dimension": embedder.dim}, "reembed")


def run_backup(args: argparse.Namespace, settings: Settings) -> None:
    _refuse_on_postgres(settings, str(args.dest))
    dest = new_file(args.dest, args.force)
    if dest.resolve() == Path(settings.db_path).resolve():
        raise UsageError("the backup cannot overwrite the database itself")
    with engine_for(settings, readonly=True) as engine, replacing(dest) as partial:
        engine.backup_to(partial)
    say(f"backed up {settings.db_path} to {dest} ({dest.stat().st_size:,} bytes)")


def run_restore(args: argparse.Namespace, settings: Settings) -> None:
    """Check the backup is a store (opening it read-only refuses anything else), then copy it over the store
    with SQLite's backup API, which writes the live file and its WAL consistently, in one transaction."""
    from memory import SchemaError, StoreFile

    _refuse_on_postgres(settings, str(args.backup))
    source, target = args.backup, Path(settings.db_path)
    _check_restore(source, target, args.force)
    try:
        reader = StoreFile(source)
    except (
        SchemaError
    ) as exc:  # the file given is the problem (not SQLite, another program's, newer): bad input
        raise UsageError(f"{exc}; nothing was restored") from None
    try:
        if (verdict := reader.quick_check()) != "ok":
            raise CommandFailed(f"{source} is damaged ({verdict}); the store was left as it was")
        target.parent.mkdir(parents=True, exist_ok=True)
        reader.backup_to(target)
    finally:
        reader.close()
    with engine_for(settings) as engine:  # a backup from an older version is migrated here, once
        counts = engine.memories.stats()
        # The old store's journals name its memories, not the restored ones: left beside the restored store,
        # a forget would never find their lines (issue 20, finding 3). They are made again from the restore.
        lines = engine.rebuild_journals()
    rebuilt = "" if lines is None else f"; journals rebuilt ({lines} lines)"
    say(f"restored {target} from {source}: {counted(counts.memories, 'memory')}{rebuilt}")


def _refuse_on_postgres(settings: Settings, file: str) -> None:
    """SQLite's backup API has no PostgreSQL form: the server's own tools do it, consistent while the bot runs."""
    from memory import dump_commands, is_postgres

    from ..config import store_location

    if is_postgres(store_location(settings)):
        dump, restore = dump_commands(str(store_location(settings)), file)
        raise UsageError(
            "the store is on PostgreSQL: back it up with the server's tools (the password comes from PGPASSWORD or ~/.pgpass)\n"
            f"back up:  {dump}\nrestore (stop the bot first):  {restore}"
        )


def run_journals_rebuild(args: argparse.Namespace, settings: Settings) -> None:
    from ..config import journal_dir

    if journal_dir(settings) is None:
        raise UsageError(
            "the journals are switched off (COMPANION_JOURNALS=false): there is nothing to rebuild"
        )
    with engine_for(settings) as engine:
        lines = engine.rebuild_journals()
    _emit(args, {"folder": str(journal_dir(settings)), "lines": lines}, "journals rebuilt")


def _check_restore(source: Path, target: Path, force: bool) -> None:
    if not source.is_file():
        raise UsageError(f"no backup file at {source}")
    if target.exists() and source.resolve() == target.resolve():
        raise UsageError(f"{source} is the store itself")
    if target.exists() and not force:
        raise UsageError(
            f"a store already exists at {target}; pass --force to replace it with {source} (make a backup of it first)"
        )


def run_stats(args: argparse.Namespace, settings: Settings) -> None:

    with engine_for(settings, readonly=True) as engine:
        stats = engine.memories.stats()
        buffer = engine.buffer
        data = {
            "db": str(settings.db_path),
            "memories": stats.memories,
            "active": stats.active,
            "messages": engine.messages.count(),
            "embedding": engine.embeddings.stored_fingerprint(),
            "dimension": stats.dimension,
            "configured_embeddings": settings.embeddings,
            "waiting_for_extraction": buffer.pending(),
            "dead_letters": buffer.dead_count(),
        }
    _emit(args, data, "stats")
    if data["dead_letters"] and not args.json:
        note(
            f"{data['dead_letters']} extraction batches kept failing; `companion retry-failed` queues them again"
        )


def run_retry_failed(args: argparse.Namespace, settings: Settings) -> None:
    """Operator's retry: batches parked in dead_letters go back to the extraction queue, due now."""

    with engine_for(settings) as engine:
        moved = engine.buffer.retry_dead()
    _emit(args, {"requeued": moved}, "retry-failed")


def run_eval_locomo(args: argparse.Namespace, settings: Settings) -> None:
    with measure_installed():
        from measure.evaluation import evaluate_locomo
        from measure.ledger import LedgerError
        from measure.stores import MeasureStoreError

    embedder = composition.build_embedder(settings)
    try:
        progress = _EvalProgress()
        options = {
            "limit": args.limit,
            "resume": args.resume,
            "index": args.index,
            "db": _measured_server(args),
        }
        result = evaluate_locomo(args.path, embedder, progress=progress, **options)
    except (
        LedgerError,
        MeasureStoreError,
    ) as exc:  # the resume file or the --db server, not the data
        raise UsageError(str(exc)) from None
    except (
        KeyError,
        ValueError,
    ) as exc:  # the data, not the program: a missing field or a bad date
        raise UsageError(f"{args.path} is not usable LoCoMo data: {exc!s}") from None
    if args.json:
        return print_json(result)
    out().print(eval_table(result))
    out().print(session_table(result))
    out().print(search_cost_table(result))
    if result["skipped_turns"]:
        note(
            f"turns with no text, not stored (the store refuses empty messages): {result['skipped_turns']}"
        )


class _EvalProgress:
    """One line per conversation (a ``measure.evaluation.SampleDone``), with the rate so far and the time left at
    that rate: a long run shows where it is and when it ends, in a log too (a bar would vanish from one)."""

    def __init__(self) -> None:
        self.measured = 0
        self.seconds = 0.0

    def __call__(self, done: Any) -> None:
        skipped = f", empty turns skipped: {done.skipped_turns}" if done.skipped_turns else ""
        how = "from the resume file" if done.resumed else f"{done.seconds:.0f} s"
        if not done.resumed:
            self.measured += 1
            self.seconds += done.seconds
        note(
            f"[{done.index}/{done.total}] {done.sample_id}: "
            f"{counted(done.questions, 'question')}{skipped} ({how}){self._estimate(done)}"
        )

    def _estimate(self, done: Any) -> str:
        if not self.measured or done.index == done.total:
            return ""
        each = self.seconds / self.measured
        return f"; {60 / each:.1f} conversations/min, about {_duration(each * (done.total - done.index))} left"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def bench_command(args: argparse.Namespace, settings: Settings) -> None:
    if args.what == "voice":
        return run_bench_voice(args)
    if args.what == "manners":
        return run_bench_manners(args)
    with measure_installed():
        from measure.bench import run_bench as bench
        from measure.stores import MeasureStoreError
    options = {"queries": args.queries} if args.queries else {}
    try:
        result = bench(
            sizes=args.sizes,
            progress=_bench_progress,
            placement=args.placement,
            db=_measured_server(args),
            **options,
        )
    except MeasureStoreError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        return print_json(result)
    out().print(records_table(result.get("results", [])))
    say(", ".join(f"{k}: {v}" for k, v in result.items() if k != "results"))


def _measured_server(args: argparse.Namespace) -> str | None:
    """``bench`` and ``eval`` never touch the store: the global ``--db``, when a postgresql:// URL, names the server on
    which they make (and drop) databases of their own; otherwise (a store file, or nothing) they measure SQLite in
    temporary files, as they always did."""
    from memory import is_postgres

    db = getattr(args, "db", None)
    return db if db is not None and is_postgres(db) else None


def run_bench_manners(args: argparse.Namespace) -> None:
    """ORCH-10: the decision's cost per message, beside the machine reference the other benches print."""
    with measure_installed():
        from measure.bench import reference
        from measure.manners import bench_manners
    _bench_progress("measuring the machine reference")
    result = {**bench_manners(), "cpu_count": os.cpu_count(), "machine": reference()}
    if args.json:
        return print_json(result)
    say(", ".join(f"{k}: {v}" for k, v in result.items()))


def run_bench_voice(args: argparse.Namespace) -> None:
    with measure_installed():
        from measure.bench_voice import run_voice_bench
    options = {"end_pause_ms": args.end_pause_ms} if args.end_pause_ms else {}
    script = "natural" if args.natural else "topical"
    result = run_voice_bench(
        args.utterances,
        script=script,
        progress=_bench_progress,
        store_size=args.store_size,
        **options,
    )
    if args.json:
        return print_json(result)
    out().print(voice_bench_table(result["voice"]))


def _bench_progress(*update: Any) -> None:
    """The benchmark reports a status line per stage; a (done, total) pair works as well."""
    note(
        " ".join(str(part) for part in update)
        if not isinstance(update[0], int)
        else f"{update[0]}/{update[-1]}"
    )
