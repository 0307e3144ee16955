"""The store's commands (OPS-2): ``companion memory list|search|add|show|edit|delete|export|import|forget-person``.
Upkeep and measurement commands live in ``bot.cli.upkeep``.

The operator sees every partition; ``search --as/--dm/--owner`` instead shows what the bot would recall
in that conversation (memory.scopes.RecallContext). Lookups made here never count as recalls
(no access reinforcement), so inspecting the store does not change its ranking. Commands that only
read open the store read-only: a read-only file still serves them, and a mistyped ``--db`` is reported
instead of being created empty.

The store's modules (numpy, sqlite-vec, apsw) are imported inside the handlers, not here: registering
the commands must stay cheap for ``companion --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import re
import sys
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memory import NotFound
from memory.models import (
    PLATFORMS,
    FactKind,
    Memory,
    MemoryType,
    NewMemory,
    Scope,
    Visibility,
    normalise_tags,
)

from .. import composition
from .output import (
    CommandFailed,
    UsageError,
    confirm,
    counted,
    hits_table,
    memory_detail,
    memory_table,
    new_file,
    out,
    print_json,
    replacing,
    say,
)

if TYPE_CHECKING:
    from memory import Forgetting, Hit, MemoryEngine, RecallContext, RecallFilters

    from ..config import Settings

T = TypeVar("T")

MODES = ("hybrid", "bm25", "vector")
TYPES = [t.value for t in MemoryType]
KINDS = [k.value for k in FactKind]
SCOPES = [s.value for s in Scope]
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


# -- argument types ----------------------------------------------------------------------------------
def nonempty(text: str) -> str:
    """An id or a name: an empty one would match nothing, or everything, without saying so."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text.strip()


def query_text(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("the query is empty: give words to search for")
    return text


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number above 0, not {text!r}")
    return int(text)


def importance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 1 to 10, not {text!r}") from None
    if not 1 <= value <= 10:
        raise argparse.ArgumentTypeError(f"importance must be from 1 to 10, not {text}")
    return value


def duration(text: str) -> float:
    """'90s', '30m', '12h', '7d', '2w' -> seconds."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhdw])", text.strip().lower())
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"expected a duration like 12h, 7d or 2w, not {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


# -- registration ------------------------------------------------------------------------------------
def command(
    sub: argparse._SubParsersAction, name: str, handler: Any, text: str, *, json_flag: bool = False
) -> argparse.ArgumentParser:
    """One subcommand: its help line, its handler, and ``--json`` where it prints data."""
    parser = sub.add_parser(name, help=text, description=text)
    parser.set_defaults(handler=handler)
    if json_flag:
        parser.add_argument(
            "--json", action="store_true", help="print JSON on stdout instead of a table"
        )
    return parser


def _add_filters(parser: argparse.ArgumentParser) -> None:
    # One value per flag, repeated for more (--tag a --tag b): a flag taking "one or more"
    # swallowed the positional text that followed it (`memory search --tag a "query"`).
    parser.add_argument(
        "--type",
        action="append",
        choices=TYPES,
        metavar="TYPE",
        help=f"only this type (repeat for more): {', '.join(TYPES)}",
    )
    parser.add_argument(
        "--kind",
        action="append",
        choices=KINDS,
        metavar="KIND",
        help=f"only this kind (repeat for more): {', '.join(KINDS)}",
    )
    parser.add_argument(
        "--tag",
        action="append",
        metavar="T",
        help="only memories carrying this tag (repeat: every one of them)",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    group = subparsers.add_parser(
        "memory",
        help="inspect and edit long-term memory",
        description="Inspect and edit long-term memory.",
    )
    sub = group.add_subparsers(dest="memory_command", metavar="COMMAND", required=True)
    _register_reads(sub)
    _register_writes(sub)
    _register_people(sub)


def _register_reads(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "list",
        list_memories,
        "list memories (every partition unless filtered)",
        json_flag=True,
    )
    p.add_argument("--scope", choices=SCOPES, help="only this scope")
    p.add_argument("--scope-id", type=nonempty, help="only this person, guild or owner id")
    _add_filters(p)
    p.add_argument(
        "--order",
        choices=("recent", "important", "accessed"),
        default="recent",
        help="sort order (default: recent)",
    )
    p.add_argument("--limit", type=positive_int, default=20, help="at most N rows (default: 20)")
    p.add_argument(
        "--all",
        action="store_true",
        help="include superseded, consolidated, forgotten and expired memories",
    )

    p = command(
        sub,
        "search",
        search_memories,
        "hybrid search; as the operator over everything, or as a conversation would see it",
        json_flag=True,
    )
    p.add_argument("query", type=query_text)
    who = p.add_mutually_exclusive_group()
    who.add_argument(
        "--as",
        dest="as_person",
        type=nonempty,
        metavar="PERSON",
        help="recall as PERSON speaking in --guild G",
    )
    who.add_argument("--dm", type=nonempty, metavar="PERSON", help="recall as in a DM with PERSON")
    who.add_argument(
        "--owner", type=nonempty, metavar="OWNER_ID", help="recall as the owner's private console"
    )
    p.add_argument("--guild", type=nonempty, metavar="G", help="the guild of --as")
    p.add_argument("--top-k", type=positive_int, default=10, help="number of results (default: 10)")
    _add_filters(p)
    p.add_argument(
        "--mode", choices=MODES, default="hybrid", help="candidate channels (default: hybrid)"
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=0.0,
        help="minimum score (default 0; the bot uses the recall knob, 0.5)",
    )

    p = command(sub, "show", show_memory, "show one memory in full", json_flag=True)
    p.add_argument("id")


def _register_writes(sub: argparse._SubParsersAction) -> None:
    p = command(
        sub,
        "add",
        add_memory,
        "store a memory through the normal write rules (safety, dedup, supersession)",
        json_flag=True,
    )
    p.add_argument("content", help="the memory's text; - reads it from stdin")
    p.add_argument(
        "--subject", required=True, type=nonempty, help="who or what the memory is about"
    )
    p.add_argument("--scope", required=True, choices=SCOPES)
    p.add_argument("--scope-id", required=True, type=nonempty, help="the person, guild or owner id")
    p.add_argument(
        "--type",
        choices=TYPES,
        default="semantic",
        metavar="TYPE",
        help=f"{', '.join(TYPES)} (default: semantic)",
    )
    p.add_argument(
        "--kind",
        choices=KINDS,
        default="other",
        metavar="KIND",
        help=f"{', '.join(KINDS)} (default: other)",
    )
    p.add_argument(
        "--private",
        action="store_true",
        help="a user memory learned in a DM: recalled only in DMs with that person",
    )
    p.add_argument(
        "--tag", action="append", metavar="T", default=[], help="a tag (repeat for more)"
    )
    p.add_argument("--importance", type=importance, default=5.0, help="1-10 (default: 5)")
    p.add_argument("--ttl", type=duration, help="expire after this long, e.g. 7d")

    p = command(
        sub,
        "edit",
        edit_memory,
        "change a memory's subject, content, tags, importance or kind",
        json_flag=True,
    )
    p.add_argument("id")
    p.add_argument("--subject")
    p.add_argument("--content")
    p.add_argument(
        "--tag", action="append", metavar="T", help="replace the tags with these (repeat for more)"
    )
    p.add_argument("--importance", type=importance)
    p.add_argument("--kind", choices=KINDS, metavar="KIND", help=", ".join(KINDS))

    p = command(
        sub,
        "delete",
        delete_memory,
        "forget a memory and everything derived from it",
        json_flag=True,
    )
    p.add_argument("id")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def _register_people(sub: argparse._SubParsersAction) -> None:
    p = command(sub, "export", export_memories, "export everything stored about a person as JSON")
    p.add_argument(
        "--person",
        action="append",
        required=True,
        type=nonempty,
        metavar="ID",
        help="a person id (repeat for linked ids)",
    )
    p.add_argument(
        "-o", "--output", type=Path, metavar="FILE", help="write to FILE instead of stdout"
    )
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")

    p = command(
        sub, "import", import_file, "import memories from an export or a JSON list", json_flag=True
    )
    p.add_argument("file", type=Path)

    p = command(
        sub,
        "forget-person",
        forget_people,
        "delete every memory, message and summary about a person",
        json_flag=True,
    )
    p.add_argument(
        "--person",
        action="append",
        required=True,
        type=nonempty,
        metavar="ID",
        help="a person id (repeat for linked ids)",
    )
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")


# -- helpers ------------------------------------------------------------------------------------------
def engine_for(settings: Settings, *, embed: bool = False, readonly: bool = False) -> MemoryEngine:
    """Commands that never embed open without a model: faster, and they work whatever the model is.

    ``readonly``: the command only reads, so a missing store is a mistyped path, not a store to create.
    """
    if readonly and not Path(settings.db_path).exists():
        raise UsageError(
            f"no store exists at {settings.db_path}: check --db or COMPANION_DB_PATH "
            "(a store is created by the commands that write, such as chat, run or memory add)"
        )
    return composition.open_engine(
        settings, composition.build_embedder(settings) if embed else None, readonly=readonly
    )


def forgotten(engine: MemoryEngine, ask: Callable[[Forgetting], Coroutine[Any, Any, T]]) -> T:
    """One call of the forgetting service (``memory.Forgetting``, the one the bot and the dashboard
    use), on a memory thread of its own, its loop on a thread of its own too: ``main`` may be called
    where a loop already runs (a test, a program that embeds the command line)."""
    from memory import AsyncRunner, Forgetting

    runner = AsyncRunner()
    try:
        with ThreadPoolExecutor(1, thread_name_prefix="cli-loop") as loop:
            return loop.submit(asyncio.run, ask(Forgetting(engine, runner))).result()
    finally:
        runner.shutdown()


def filters_from(args: argparse.Namespace) -> RecallFilters:
    from memory import RecallFilters

    return RecallFilters(
        types=tuple(MemoryType(t) for t in args.type or ()),
        kinds=tuple(FactKind(k) for k in args.kind or ()),
        tags=normalise_tags(args.tag or ()),
    )


def all_partitions(engine: MemoryEngine) -> tuple[str, ...]:
    return engine.memory_rows.partitions()


def partitions_for(
    engine: MemoryEngine, scope: str | None, scope_id: str | None
) -> tuple[str, ...] | None:
    """Partition keys ('scope|id|visibility') matching the filters; None means every partition."""
    if scope is None and scope_id is None:
        return None
    keys = []
    for key in all_partitions(engine):
        key_scope, rest = key.split("|", 1)
        if scope in (None, key_scope) and scope_id in (None, rest.rsplit("|", 1)[0]):
            keys.append(key)
    return tuple(keys)


def recall_context(args: argparse.Namespace) -> RecallContext | None:
    from memory import RecallContext

    if args.guild and not args.as_person:
        raise UsageError("--guild goes with --as PERSON")
    if args.as_person:
        if not args.guild:
            raise UsageError("--as PERSON needs --guild G (use --dm PERSON for a direct message)")
        return RecallContext(
            platform="cli", speaker_id=args.as_person, channel_id="cli", guild_id=args.guild
        )
    if args.dm:
        return RecallContext(platform="cli", speaker_id=args.dm, channel_id="cli", is_dm=True)
    if args.owner:
        return RecallContext(
            platform="cli",
            speaker_id=args.owner,
            channel_id="cli",
            is_dm=True,
            owner_private=True,
            owner_id=args.owner,
        )
    return None


def channels_for(mode: str) -> frozenset:
    from memory import ALL_CHANNELS, Channel

    return {
        "hybrid": ALL_CHANNELS,
        "bm25": frozenset({Channel.FTS}),
        "vector": frozenset({Channel.VECTOR}),
    }[mode]


def search(engine: MemoryEngine, args: argparse.Namespace) -> list[Hit[Memory]]:
    ctx, filters, channels = recall_context(args), filters_from(args), channels_for(args.mode)
    if ctx is not None:
        return engine.recall.recall(
            ctx,
            args.query,
            filters=filters,
            top_k=args.top_k,
            channels=channels,
            threshold=args.threshold,
            reinforce=False,
        )
    # The operator's own view: every partition in the file, no conversation to scope it.
    return engine.recall.recall_in(
        all_partitions(engine),
        args.query,
        filters=filters,
        top_k=args.top_k,
        channels=channels,
        threshold=args.threshold,
    )


def resolve_id(engine: MemoryEngine, text: str) -> str:
    """A full id, or the one id a prefix of at least 4 characters names (tables print 8)."""
    prefix = text.strip().lower()
    if len(prefix) < 4 or not re.fullmatch(r"[0-9a-f-]+", prefix):
        return text
    ids = engine.memory_rows.ids_starting(prefix)
    if len(ids) > 1:
        raise UsageError(f"{text!r} names more than one memory; give more of the id")
    return ids[0] if ids else text


def check_scope_id(engine: MemoryEngine, scope: str, scope_id: str) -> None:
    """The bot files memories under platform-qualified ids (``discord:999``, ``console:local-user``); a bare
    ``333`` or ``local-user`` would make a partition no conversation ever reads. A person id the store already
    knows (a linked person) is accepted as it is."""
    platform, _, rest = scope_id.partition(":")
    if platform in PLATFORMS and rest.strip():
        return

    if scope != "guild" and scope_id in engine.people.person_ids():
        return
    what = (
        "guild ids look like discord:1234 or telegram:-100123"
        if scope == "guild"
        else "person ids look like discord:1234, telegram:5678 or console:local-user"
    )
    raise UsageError(f"--scope-id {scope_id!r} is not an id the bot reads memories under: {what}")


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from None


# -- handlers -----------------------------------------------------------------------------------------
def list_memories(args: argparse.Namespace, settings: Settings) -> None:
    with engine_for(settings, readonly=True) as engine:
        partitions = partitions_for(engine, args.scope, args.scope_id)
        memories = engine.memory_rows.listing(
            partitions,
            filters_from(args),
            order=args.order,
            limit=args.limit,
            include_inactive=args.all,
        )
    if args.json:
        return print_json([m.as_dict() for m in memories])
    out().print(memory_table(memories) if memories else "no memories match")


def search_memories(args: argparse.Namespace, settings: Settings) -> None:
    if args.mode == "vector" and settings.embeddings == "none":
        raise UsageError("--mode vector needs embeddings, but COMPANION_EMBEDDINGS is 'none'")
    with engine_for(settings, embed=args.mode != "bm25", readonly=True) as engine:
        hits = search(engine, args)
    if args.json:
        return print_json(
            [
                {
                    "score": h.score,
                    "relevance": h.relevance,
                    "channels": list(h.channels),
                    "memory": h.item.as_dict(),
                }
                for h in hits
            ]
        )
    out().print(hits_table(hits) if hits else "nothing found")


def show_memory(args: argparse.Namespace, settings: Settings) -> None:
    with engine_for(settings, readonly=True) as engine:
        memory = engine.memory_rows.get(resolve_id(engine, args.id))
    if args.json:
        return print_json(memory.as_dict())
    out().print(memory_detail(memory))


def add_memory(args: argparse.Namespace, settings: Settings) -> None:
    if args.private and args.scope == "guild":
        raise UsageError(
            "--private applies to user memories; guild memories are always public within their guild"
        )
    content = content_from(args.content)
    with engine_for(settings, embed=True) as engine:
        check_scope_id(engine, args.scope, args.scope_id)
        ttl = engine.clock.now() + args.ttl if args.ttl else None
        result = engine.memories.add(
            NewMemory(
                content=content,
                subject=args.subject,
                scope=Scope(args.scope),
                scope_id=args.scope_id,
                type=MemoryType(args.type),
                kind=FactKind(args.kind),
                visibility=Visibility.PRIVATE if args.private else Visibility.PUBLIC,
                tags=tuple(args.tag),
                importance=args.importance,
                ttl=ttl,
            )
        )
    links = {
        "superseded": list(result.superseded),
        "related": list(result.related),
        "contradicted": list(result.contradicted),
    }
    if args.json:
        return print_json(
            {
                "status": result.status,
                "id": result.memory.id,
                **links,
                "memory": result.memory.as_dict(),
            }
        )
    say(f"{result.status} {result.memory.id}")
    for name, ids in links.items():
        if ids:
            say(f"  {name}: {', '.join(ids)}")


def content_from(text: str) -> str:
    """The text itself, or with ``-`` the whole of stdin (a long note, or one piped from another program)."""
    if text != "-":
        return text
    if sys.stdin.isatty():
        sys.stderr.write("Type the memory, then Ctrl-D:\n")
    if isinstance(sys.stdin, io.TextIOWrapper) and sys.stdin.errors == "strict":
        # bytes that are not UTF-8 become U+FFFD, not a traceback
        sys.stdin.reconfigure(errors="replace")
    piped = sys.stdin.read().strip()
    if not piped:
        raise UsageError("no text on stdin: pipe the memory's text in, or give it as an argument")
    return piped


def edit_memory(args: argparse.Namespace, settings: Settings) -> None:
    changes = {
        "subject": args.subject,
        "content": args.content,
        "tags": args.tag,
        "importance": args.importance,
        "kind": FactKind(args.kind) if args.kind else None,
    }
    changes = {k: v for k, v in changes.items() if v is not None}
    if not changes:
        raise UsageError(
            "nothing to change: give --subject, --content, --tag, --importance or --kind"
        )
    # A new content needs a new vector, so only then is the embedding model loaded.
    with engine_for(settings, embed="content" in changes) as engine:
        memory = engine.memories.update(resolve_id(engine, args.id), **changes)
    if args.json:
        return print_json(memory.as_dict())
    say(f"updated {memory.id}")


def delete_memory(args: argparse.Namespace, settings: Settings) -> None:
    """SEC-3: the one forget every delete is (``forget_memory``): its history, the messages it came from, a
    tombstone so reflection or a re-ingest does not learn it back, the journals' lines, the bytes scrubbed."""
    with engine_for(settings) as engine:
        memory = engine.memory_rows.get(resolve_id(engine, args.id))
        confirm(
            f"delete memory {memory.id[:8]} ({memory.subject}: {memory.content[:40]})", args.yes
        )
        done = forgotten(engine, lambda forgetting: forgetting.memory(memory.id))
    if args.json:
        return print_json({"deleted": done.memories, "messages": done.messages})
    extra = f" and {counted(done.messages, 'message')} it came from" if done.messages else ""
    say(f"deleted {counted(len(done.memories), 'row')}{extra}: {', '.join(done.memories)}")


def export_memories(args: argparse.Namespace, settings: Settings) -> None:
    if args.output is not None:
        new_file(args.output, args.force)  # checked before the work, not after it
    with engine_for(settings, readonly=True) as engine:
        data = forgotten(engine, lambda forgetting: forgetting.export(args.person))
    if not any(data[key] for key in data if isinstance(data[key], list) and key != "person_ids"):
        # an empty document with exit 0 reads as "they have nothing stored", when it is usually a mistyped id
        raise NotFound(
            f"nothing is stored about {', '.join(args.person)}: person ids look like discord:1234 or console:local-user"
        )
    if args.output is None:
        return print_json(data)
    with replacing(args.output) as partial:
        partial.write_text(
            json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n", encoding="utf-8"
        )
    say(
        f"exported {counted(len(data['memories']), 'memory')}, "
        f"{counted(len(data['messages']), 'message')} and "
        f"{counted(len(data['session_summaries']), 'session summary', 'session summaries')} "
        f"to {args.output}"
    )


def import_file(args: argparse.Namespace, settings: Settings) -> None:
    from memory import StoreTools

    data = read_json(args.file)
    items = data.get("memories") if isinstance(data, dict) else data
    if isinstance(items, list) and not all(isinstance(item, dict) for item in items):
        raise UsageError(f"{args.file}: every memory must be a JSON object")
    with engine_for(settings, embed=True) as engine:
        counts = StoreTools(engine).import_memories(data)
    if args.json:
        print_json(counts)
    else:
        say(
            ", ".join(
                f"{counts[k]} {k.replace('_', ' ')}"
                for k in ("stored", "duplicate", "rejected", "messages", "session_summaries")
            )
        )
        for reason in counts["reasons"]:  # every rejected row says why
            say(f"  {reason}")
    if counts["rejected"] and not (
        counts["stored"] or counts["duplicate"]
    ):  # a script must not read "all refused" as done
        raise CommandFailed(f"{args.file}: every memory was rejected; nothing was imported")


def forget_people(args: argparse.Namespace, settings: Settings) -> None:
    with engine_for(settings) as engine:
        confirm(f"forget everything stored about {', '.join(args.person)}", args.yes)
        # a /privacy off outlives it (SEC-5)
        # the console's /export files too
        counts = forgotten(engine, lambda forgetting: forgetting.person(args.person))
    if args.json:
        return print_json(counts)
    say("forgot " + ", ".join(f"{n} {what.replace('_', ' ')}" for what, n in counts.items()))
