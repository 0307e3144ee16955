"""``companion audit forget`` (SEC-7): does anything of a person, or of a word, remain anywhere in the store?

It looks on every surface (``StoreTools.leftovers``: tables, full-text indexes and their own
tables, vectors, the journals, exports and backups folders, the database file and each side file
SQLite keeps (WAL, shared memory, a rollback journal), every other file in the store's folder (the
chat's log); on PostgreSQL the data directory when this user may read it) and prints a count per
surface, never the words looked for nor what was found. Exit 0 when nothing remains, 1 when
something does (or a surface could not be read and ``--strict`` was given). The store is opened
read-only, so the audit itself writes nothing; a stray rollback journal beside it is read as a file,
never rolled into the store (``memory.storage.db.read_only``).

A word that memories or messages hold now and that no tombstone holds was never forgotten (or was
said again since): the audit says it is present, counts where, and does not call it a leftover (exit
0 for it). Only what remains of a forgotten word, or of a person, is a finding.

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
    from memory import FileHit, Folders, Presence

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
    words, people = tuple(args.word or ()), tuple(args.person or ())
    with engine_for(settings, readonly=True) as engine:
        tools = StoreTools(engine)
        found = tools.leftovers(words, people, folders)
        present = tools.presence(words) if any(f.remaining for f in found) else []
    # a word never forgotten is present, not left behind: only the rest (and people) are findings
    never = [p.never_forgotten for p in present]
    left = sum(f.remaining or 0 for f in found)
    if never and all(never) and not people:
        left = 0
    elif any(never):
        with engine_for(settings, readonly=True) as engine:
            rest = tuple(w for w, n in zip(words, never, strict=True) if not n)
            left = sum(
                f.remaining or 0 for f in StoreTools(engine).leftovers(rest, people, folders)
            )
    unread = [f for f in found if f.remaining is None]
    if args.json:
        print_json(
            {
                "remaining": left,
                "unreadable": len(unread),
                "present": [_presence(i, p) for i, p in enumerate(present, 1) if p.rows],
                "surfaces": [_as_dict(f) for f in found],
            }
        )
    else:
        _print(found, left, present)
    return 1 if left or (args.strict and unread) else 0


def _folders(args: argparse.Namespace, journals: Path | None, beside: Path) -> Folders:
    from memory import Folders

    return Folders(
        args.journals or journals,
        args.exports or beside / "exports",
        args.backups or beside / "backups",
        beside,
    )


def _as_dict(f: FileHit) -> dict[str, object]:
    return {"surface": f.surface, "remaining": f.remaining, "where": dict(f.where), "note": f.note}


def _presence(n: int, p: Presence) -> dict[str, object]:
    return {"word": n, "rows": p.rows, "forgotten": p.buried, "never_forgotten": p.never_forgotten}


def _print(found: list[FileHit], left: int, present: list[Presence]) -> None:
    for f in found:
        count = "unreadable" if f.remaining is None else str(f.remaining)
        where = ", ".join(f"{name} {n}" for name, n in f.where)
        say(
            f"{f.surface:<18} {count:>10}"
            + (f"  ({where})" if where else "")
            + (f"  {f.note}" if f.note else "")
        )
    for n, p in enumerate(present, 1):  # by position: the report never prints a word
        if p.never_forgotten:
            say(
                f"word {n}: present in {p.rows} memories or messages, and no tombstone holds it: "
                "it was never forgotten (or was said again since), so it is not a leftover"
            )
        elif p.rows:
            say(f"word {n}: still in {p.rows} memories or messages, and a tombstone holds it")
    if left:
        say(f"{left} remain: forgetting left something behind")
    elif any(f.remaining for f in found):
        say("nothing was left behind by forgetting (what is there was never forgotten)")
    else:
        say("nothing remains")
