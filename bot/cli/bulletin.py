"""``companion bulletin show|refresh`` (MAINT-5): the briefing each scope's conversations start with.

``show`` reads the stored bulletins (the store opened read-only); ``refresh`` asks the extraction model for the
bulletins that are due, as the running bot does every quarter hour, or for one scope now (``--scope`` with
``--scope-id``), due or not. The store's modules and the model client are imported inside the handlers
(``companion --help`` stays cheap).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .. import composition
from .memories import command, engine_for, nonempty
from .output import CommandFailed, UsageError, counted, print_json, say, when

if TYPE_CHECKING:
    from memory import Bulletin

    from ..config import Settings

SCOPES = ("guild", "dm", "owner")


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser(
        "bulletin",
        help="the briefing each scope's conversations start with",
        description="The briefing each scope's prompts start with.",
    )
    sub = group.add_subparsers(dest="bulletin_command", metavar="COMMAND", required=True)
    p = command(
        sub,
        "show",
        show_bulletins,
        "print the stored bulletins (all, or one scope's)",
        json_flag=True,
    )
    _scope_options(p)
    p = command(
        sub,
        "refresh",
        refresh_bulletins,
        "write the bulletins that are due now, or one scope's (needs the model)",
        json_flag=True,
    )
    p.set_defaults(uses_model=True)
    _scope_options(p)


def _scope_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scope", choices=SCOPES, help="guild, dm (a person's DMs) or owner")
    parser.add_argument(
        "--scope-id", type=nonempty, help="the guild id (e.g. discord:123), person id or owner id"
    )


def show_bulletins(args: argparse.Namespace, settings: Settings) -> None:
    from memory import Bulletins

    with engine_for(settings, readonly=True) as engine:
        found = Bulletins(engine).stored(args.scope, args.scope_id)
    if args.json:
        return print_json([_as_dict(b) for b in found])
    if not found:
        return say("no bulletin yet" + (" for that scope" if args.scope or args.scope_id else ""))
    for b in found:
        say(
            f"== {b.scope} {b.scope_id} (written {when(b.built_at)}, from {counted(b.memory_count, 'memory')})\n{b.text}\n"
        )


def refresh_bulletins(args: argparse.Namespace, settings: Settings) -> None:
    from memory import StoreTools

    if (args.scope is None) != (args.scope_id is None):
        raise UsageError(
            "give --scope and --scope-id together (or neither, for every bulletin that is due)"
        )
    with engine_for(settings) as engine:
        tools = StoreTools(engine)
        plans = tools.bulletins_due(
            min_changes=settings.bulletin_min_changes,
            scope=(args.scope, args.scope_id) if args.scope else None,
        )
        written = (
            tools.write_bulletins(plans, composition.build_completer(settings, engine, "bulletin"))
            if plans
            else []
        )
    if args.json:
        print_json({"planned": len(plans), "written": [_as_dict(b) for b in written]})
    else:
        say(
            f"{len(written)} of {counted(len(plans), 'bulletin')} written"
            if plans
            else "no bulletin is due (nothing new to summarise)"
        )
    if len(written) < len(plans):
        raise CommandFailed(
            f"{counted(len(plans) - len(written), 'bulletin')} could not be written (see the log above)"
        )


def _as_dict(b: Bulletin) -> dict[str, object]:
    return {
        "scope": b.scope,
        "scope_id": b.scope_id,
        "built_at": b.built_at,
        "memory_count": b.memory_count,
        "text": b.text,
    }
