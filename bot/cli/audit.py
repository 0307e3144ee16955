"""``companion audit forget`` (SEC-7): does anything of a person, or of a word, remain anywhere in the store?

It looks on every surface (``StoreTools.leftovers``: tables, full-text indexes and their own
tables, vectors, the journals, exports and backups folders, the database file and its WAL; on
PostgreSQL the data directory when this user may read it) and prints a count per surface, never the
words looked for nor what was found. Exit 0 when nothing remains, 1 when something does (or a
surface could not be read and ``--strict`` was given). The store is opened read-only, so the audit
itself writes nothing.

    companion audit forget --person telegram:123
    companion audit forget --word Quintrell --word "Elm Street" --exports ./exports --json
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from .memories import command, engine_for, nonempty
from .output import print_json, say

if TYPE_CHECKING:
    from memory import Folders, Found

    from ..config import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser(
        "audit",
        help="check that forgetting left nothing behind",
        description="Audits of the store (counts only, never words).",
    )
    sub = group.add_subparsers(dest="audit_command", metavar="COMMAND", required=True)
    p = command(
        sub,
        "forget",
        audit_forget,
        "count what remains of a person or a word on every surface of the store",
        json_flag=True,
    )
    p.add_argument(
        "--person",
        action="append",
        type=nonempty,
        metavar="ID",
        help="a person id or an account (telegram:123); repeatable",
    )
    p.add_argument(
        "--word",
        action="append",
        type=nonempty,
        metavar="TEXT",
        help="words to look for, as typed; repeatable",
    )
    p.add_argument(
        "--journals",
        type=Path,
        metavar="DIR",
        help="the journals folder (default: the configured one)",
    )
    p.add_argument(
        "--exports",
        type=Path,
        metavar="DIR",
        help="where exports were written (default: <store dir>/exports)",
    )
    p.add_argument(
        "--backups",
        type=Path,
        metavar="DIR",
        help="where backups are kept (default: <store dir>/backups)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="a surface that could not be read also fails the audit",
    )


def audit_forget(args: argparse.Namespace, settings: Settings) -> int:
    from memory import StoreTools

    from ..config import journal_dir
    from .output import UsageError

    if not args.person and not args.word:
        raise UsageError("name a person (--person) or a word (--word) to look for")
    beside = Path(settings.db_path).parent
    folders = _folders(args, journal_dir(settings), beside)
    with engine_for(settings, readonly=True) as engine:
        found = StoreTools(engine).leftovers(
            tuple(args.word or ()), tuple(args.person or ()), folders
        )
    left = sum(f.remaining or 0 for f in found)
    unread = [f for f in found if f.remaining is None]
    if args.json:
        print_json(
            {"remaining": left, "unreadable": len(unread), "surfaces": [_as_dict(f) for f in found]}
        )
    else:
        _print(found, left)
    return 1 if left or (args.strict and unread) else 0


def _folders(args: argparse.Namespace, journals: Path | None, beside: Path) -> Folders:
    from memory import Folders

    return Folders(
        args.journals or journals,
        args.exports or beside / "exports",
        args.backups or beside / "backups",
    )


def _as_dict(f: Found) -> dict[str, object]:
    return {"surface": f.surface, "remaining": f.remaining, "where": dict(f.where), "note": f.note}


def _print(found: list[Found], left: int) -> None:
    for f in found:
        count = "unreadable" if f.remaining is None else str(f.remaining)
        where = ", ".join(f"{name} {n}" for name, n in f.where)
        say(
            f"{f.surface:<18} {count:>10}"
            + (f"  ({where})" if where else "")
            + (f"  {f.note}" if f.note else "")
        )
    say("nothing remains" if not left else f"{left} remain: forgetting left something behind")
