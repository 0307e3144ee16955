"""``companion store``: the store as a whole (SCALE-1, SEC-3).

``store copy SRC DST`` moves a whole store between SQLite and PostgreSQL; the copy itself is
``memory.copy_store``, imported by the handler (registering commands stays cheap).

``store scrub``: after forgetting, rewrite the store so no deleted word is left in its files.

A forget already deletes the rows, index entries and vectors in one transaction and then scrubs what is cheap
(SQLite: secure_delete and a WAL checkpoint; PostgreSQL: VACUUM of every table). What is not cheap is left to the
operator, who chooses when the tables may be locked: on PostgreSQL, VACUUM FULL of every table and the WAL switched
and checkpointed; on SQLite, VACUUM and the WAL truncated. It then says what no program on this side can reach
(backups, WAL archives, replicas). A ``store`` group, not ``forget --rewrite``: it acts on the whole store, after
any number of forgets (a person's, a guild's, the dashboard's), and it sits beside the other whole-store commands.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .memories import command, engine_for, positive_int
from .output import CommandFailed, counted, note, print_json, progress_bar, say

if TYPE_CHECKING:
    from memory import CopyReport

    from ..config import Settings

COPY_HELP = """\
Copy every table of the store at SRC into DST, ids kept, vectors copied as vectors (nothing is re-embedded),
full-text indexes made again on DST. SRC and DST are each a file path, sqlite:///path or postgresql://...;
SRC is only read. DST must be new or empty (a new file, or a PostgreSQL database with pgvector 0.5 or newer);
stop the bot while copying, and point it at DST (COMPANION_DATABASE_URL / COMPANION_DB_PATH) after.

Each batch is committed with a progress marker in DST: an interrupted copy goes on where it stopped when the
same command is run again. At the end every table is counted on both sides; the exit code is 1 if any differ.
A copy that cannot be made is refused before anything is written, with the reason (exit code 2)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser(
        "store",
        help="the store as a whole (copy, scrub)",
        description="Commands on the store as a whole.",
    )
    actions = group.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    p = command(
        actions,
        "copy",
        run_copy,
        "copy a store into a new one, SQLite <-> PostgreSQL, resumably",
        json_flag=True,
    )
    p.description, p.formatter_class = COPY_HELP, argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "source",
        metavar="SRC",
        help="the store to copy from (path, sqlite:///path or postgresql://...)",
    )
    p.add_argument(
        "target",
        metavar="DST",
        help="where to copy it (a new file or an empty PostgreSQL database)",
    )
    p.add_argument(
        "--batch",
        type=positive_int,
        default=2000,
        help="rows per transaction and progress marker (default: 2000)",
    )
    command(
        actions,
        "scrub",
        run_scrub,
        "rewrite every table so forgotten words leave the files, and say what only you can still remove "
        "(PostgreSQL: VACUUM FULL, locks each table while it runs)",
        json_flag=True,
    )


def run_copy(args: argparse.Namespace, settings: Settings) -> None:
    from memory import copy_store

    with progress_bar("copying") as progress:
        report = copy_store(args.source, args.target, batch=args.batch, progress=progress)
    if args.json:
        print_json(_as_json(report))
    else:
        _show(report)
    if not report.ok:
        differ = ", ".join(c.table for c in report.counts if not c.same)
        raise CommandFailed(
            f"DST's counts differ from SRC's in {differ}: not every row there was copied (see the table)"
        )


def _show(report: CopyReport) -> None:
    from rich.table import Table

    from .output import out

    table = Table(title=f"{report.source} -> {report.target}")
    for heading in ("table", "SRC", "DST", ""):
        table.add_column(heading, justify="left" if heading == "table" else "right")
    for c in sorted(report.counts, key=lambda c: c.table):
        table.add_row(c.table, f"{c.source:,}", f"{c.copied:,}", "ok" if c.same else "DIFFERS")
    out().print(table)
    if report.resumed:
        note("went on from an interrupted copy")
    if report.ok:
        say(
            f"copied {counted(sum(c.source for c in report.counts), 'row')}; every table counts the same on both sides"
        )


def _as_json(report: CopyReport) -> dict[str, object]:
    counts = {c.table: {"source": c.source, "copied": c.copied} for c in report.counts}
    return {
        "source": report.source,
        "target": report.target,
        "ok": report.ok,
        "resumed": report.resumed,
        "counts": counts,
    }


def run_scrub(args: argparse.Namespace, settings: Settings) -> None:
    with engine_for(settings) as engine:
        done, where = engine.rewrite(), engine.path
    if args.json:
        return print_json(
            {
                "store": where,
                "bytes_before": done.bytes_before,
                "bytes_after": done.bytes_after,
                "left": list(done.left),
            }
        )
    say(
        f"rewrote {where}: {done.bytes_before:,} -> {done.bytes_after:,} bytes; no table or index file holds a deleted row"
    )
    say("still yours to do:")
    for line in done.left:
        say(f"  - {line}")
