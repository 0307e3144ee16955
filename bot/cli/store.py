"""``companion store scrub`` (SEC-3, SCALE-1): after forgetting, rewrite the store so no deleted word is left in its files.

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

from .memories import command, engine_for
from .output import print_json, say

if TYPE_CHECKING:
    from ..config import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser("store", help="the store as a whole", description="Commands on the store as a whole.")
    sub = group.add_subparsers(dest="store_command", metavar="COMMAND", required=True)
    command(
        sub,
        "scrub",
        run_scrub,
        "rewrite every table so forgotten words leave the files, and say what only you can still remove "
        "(PostgreSQL: VACUUM FULL, locks each table while it runs)",
        json_flag=True,
    )


def run_scrub(args: argparse.Namespace, settings: Settings) -> None:
    with engine_for(settings) as engine:
        done, where = engine.rewrite(), engine.path
    if args.json:
        return print_json({"store": where, "bytes_before": done.bytes_before, "bytes_after": done.bytes_after, "left": list(done.left)})
    say(f"rewrote {where}: {done.bytes_before:,} -> {done.bytes_after:,} bytes; no table or index file holds a deleted row")
    say("still yours to do:")
    for line in done.left:
        say(f"  - {line}")
