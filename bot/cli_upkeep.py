"""Upkeep and measurement commands (OPS-2): ``consolidate``, ``decay``, ``prune``, ``reembed``, ``backup``,
``stats``, ``eval locomo``, ``bench``."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from memory.maintenance import consolidate, decay, prune, prune_entities
from memory.reembed import reembed

from . import app
from .cli_memory import command, engine_for, positive_int
from .cli_output import CommandFailed, UsageError, eval_table, mapping_table, note, out, print_json, progress_bar, records_table, say
from .config import Settings

# -- upkeep and operations: consolidate, decay, prune, reembed, backup, stats, eval, bench ------------
def register(subparsers: argparse._SubParsersAction) -> None:
    command(subparsers, "consolidate", run_consolidate, "merge clusters of near-identical memories with the LLM", json_flag=True)
    p = command(subparsers, "decay", run_decay, "lower the importance of memories unused for a while (run once a day)", json_flag=True)
    p.add_argument("--unaccessed-days", type=float, default=7.0, help="only memories unused this long (default: 7)")
    p.add_argument("--factor", type=float, default=0.95, help="multiply importance by this (default: 0.95)")
    p = command(subparsers, "prune", run_prune, "soft-forget faded, never-used memories and drop stale entities", json_flag=True)
    p.add_argument("--below", type=float, default=1.0, help="importance under this (default: 1)")
    p.add_argument("--older-than-days", type=float, default=30.0, help="created longer ago than this (default: 30)")
    p.add_argument("--entity-days", type=float, default=90.0, help="entities unseen this long (default: 90)")
    p = command(subparsers, "reembed", run_reembed, "rebuild every vector with the configured embedding model", json_flag=True)
    p.add_argument("--allow-dimension-change", action="store_true", help="allow a model of another dimension (drops all vectors)")
    p = command(subparsers, "backup", run_backup, "copy the database with SQLite's online backup (safe while the bot runs)")
    p.add_argument("dest", type=Path)
    p.add_argument("--force", action="store_true", help="overwrite DEST if it exists")
    command(subparsers, "stats", run_stats, "counts of memories and messages, and the embedding model of the store", json_flag=True)
    _register_eval(subparsers)
    p = command(subparsers, "bench", run_bench, "latency benchmark on synthetic stores (progress on stderr)", json_flag=True)
    p.add_argument("--sizes", type=int_list, default=[10_000, 100_000], help="comma-separated store sizes (default: 10000,100000)")
    p.add_argument("--queries", type=positive_int, help="queries per size (default: the benchmark's own)")


def _register_eval(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser("eval", help="measure recall on benchmark data", description="Measure recall on benchmark data.")
    sub = group.add_subparsers(dest="eval_command", metavar="BENCHMARK", required=True)
    p = command(sub, "locomo", run_eval_locomo, "evidence recall@k on LoCoMo-format conversations", json_flag=True)
    p.add_argument("path", type=Path, help="a LoCoMo-format JSON file")
    p.add_argument("--limit", type=positive_int, help="only the first N conversations")


def int_list(text: str) -> list[int]:
    return [positive_int(part.strip()) for part in text.split(",") if part.strip()] or [positive_int(text)]


def _emit(args: argparse.Namespace, data: dict[str, Any], title: str) -> None:
    if args.json:
        return print_json(data)
    out().print(mapping_table(data, title=title))


def run_consolidate(args: argparse.Namespace, settings: Settings) -> None:
    with engine_for(settings, embed=True) as engine, progress_bar("consolidating") as progress:
        report = consolidate(engine, app.build_completer(settings), progress=progress)
    _emit(args, {"clusters": report.clusters, "merged_rows": report.merged_rows, "new_ids": list(report.new_ids),
                 "failures": report.failures}, "consolidation")
    # consolidate() logs each failed cluster and carries on; the exit code is where a script learns of it.
    if report.failures:
        raise CommandFailed(f"{report.failures} of {report.clusters} clusters could not be merged (see the log above)")


def run_decay(args: argparse.Namespace, settings: Settings) -> None:
    with engine_for(settings) as engine:
        changed = decay(engine, unaccessed_days=args.unaccessed_days, factor=args.factor)
    _emit(args, {"decayed": changed}, "decay")


def run_prune(args: argparse.Namespace, settings: Settings) -> None:
    with engine_for(settings) as engine:
        counts = {"forgotten": prune(engine, below=args.below, older_than_days=args.older_than_days),
                  "entities_removed": prune_entities(engine, unseen_days=args.entity_days)}
    _emit(args, counts, "prune")


def run_reembed(args: argparse.Namespace, settings: Settings) -> None:
    embedder = app.build_embedder(settings)
    if embedder is None:
        raise UsageError("reembed needs an embedding model, but COMPANION_EMBEDDINGS is 'none'")
    # Opened without a model on purpose: a dimension change is made by reembed, not refused at open.
    with app.open_engine(settings, None) as engine, progress_bar("re-embedding") as progress:
        counts = reembed(engine, embedder, allow_dimension_change=args.allow_dimension_change, progress=progress)
    _emit(args, {**counts, "model": embedder.fingerprint, "dimension": embedder.dim}, "reembed")


def run_backup(args: argparse.Namespace, settings: Settings) -> None:
    dest: Path = args.dest
    if dest.is_dir():
        raise UsageError(f"{dest} is a directory; give the backup's file name")
    if dest.exists() and not args.force:
        raise UsageError(f"{dest} already exists; pass --force to overwrite it")
    if not dest.parent.is_dir():
        raise UsageError(f"directory {dest.parent} does not exist")
    if dest.resolve() == Path(settings.db_path).resolve():
        raise UsageError("the backup cannot overwrite the database itself")
    partial = dest.with_name(dest.name + ".partial")
    with engine_for(settings) as engine:
        engine.db.backup_to(partial)
    partial.replace(dest)  # an interrupted backup never leaves a half-written DEST behind
    say(f"backed up {settings.db_path} to {dest} ({dest.stat().st_size:,} bytes)")


def run_stats(args: argparse.Namespace, settings: Settings) -> None:
    with engine_for(settings) as engine:
        stats = engine.memories.stats()
        data = {"db": str(settings.db_path), "memories": stats["memories"], "active": stats["active"],
                "messages": engine.db.scalar("SELECT COUNT(*) FROM messages"),
                "embedding": engine.embeddings.stored_fingerprint(), "dimension": stats["dimension"],
                "configured_embeddings": settings.embeddings}
    _emit(args, data, "stats")


def run_eval_locomo(args: argparse.Namespace, settings: Settings) -> None:
    from memory.evaluation import evaluate_locomo

    embedder = app.build_embedder(settings)
    with progress_bar("evaluating") as progress:
        try:
            result = evaluate_locomo(args.path, embedder, limit=args.limit, progress=progress)
        except (KeyError, ValueError) as exc:  # the data, not the program: a missing field or a bad date
            raise UsageError(f"{args.path} is not usable LoCoMo data: {exc!s}") from None
    if args.json:
        return print_json(result)
    out().print(eval_table(result))


def run_bench(args: argparse.Namespace, settings: Settings) -> None:
    try:
        from memory.bench import run_bench as bench
    except ModuleNotFoundError as exc:
        if exc.name != "memory.bench":
            raise
        raise CommandFailed("the benchmark (memory/bench.py) is not part of this install") from None
    options = {"queries": args.queries} if args.queries else {}
    result = bench(sizes=args.sizes, progress=_bench_progress, turn_factory="bot.benchturn:make_turn", **options)
    if args.json:
        return print_json(result)
    out().print(records_table(result.get("results", [])))
    say(", ".join(f"{k}: {v}" for k, v in result.items() if k != "results"))


def _bench_progress(*update: Any) -> None:
    """The benchmark reports a status line per stage; a (done, total) pair works as well."""
    note(" ".join(str(part) for part in update) if not isinstance(update[0], int) else f"{update[0]}/{update[-1]}")
