"""The bot's commands: ``companion run`` (Discord and/or Telegram), ``companion chat`` (console),
``companion snapshot`` (the memory slice a reply would get, without calling the LLM; ORCH-5)."""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys

from .app import _secret
from .assembly import Turn
from .cli_output import CommandFailed, UsageError, out, print_json
from .config import Settings
from .runtime import Runtime
from .types import IncomingMessage

log = logging.getLogger(__name__)
NO_TOKENS = ("No chat platform is configured. Set DISCORD_TOKEN and/or TELEGRAM_TOKEN (in the environment or .env),\n"
             "plus OPENAI_BASE_URL / OPENAI_API_KEY for the model; or try the bot locally with `companion chat`.")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("run", help="run the bot on Discord and/or Telegram (whichever tokens are set)")
    p.set_defaults(handler=run_bot)
    p = subparsers.add_parser("chat", help="chat with the bot in this terminal, against the same memory")
    p.add_argument("--name", default="you", help="your display name")
    p.add_argument("--user", default="local-user", help="your user id on the console platform")
    p.add_argument("--no-stream", action="store_true", help="print replies whole instead of as they stream")
    p.set_defaults(handler=chat)
    p = subparsers.add_parser("snapshot", help="show the memory slice a reply would get (no LLM call)")
    p.add_argument("message", help="the incoming message text")
    p.add_argument("--platform", default="console", help="discord, telegram or console")
    p.add_argument("--user", required=True, help="the speaker's platform user id")
    p.add_argument("--name", default="", help="the speaker's display name")
    p.add_argument("--channel", default=None, help="channel/chat id (default: the user's DM)")
    p.add_argument("--guild", default=None, help="guild/group id (omit for a DM)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=snapshot)


def run_bot(args: argparse.Namespace, settings: Settings) -> int:
    from .adapters.common import AdapterError, LoginRejected

    if not (settings.discord_token or settings.telegram_token):
        sys.stderr.write(f"companion: {NO_TOKENS}\n")
        return 2
    try:
        return asyncio.run(_serve(settings))
    except LoginRejected as exc:
        raise UsageError(f"{exc}: check the token in your environment or .env") from None
    except AdapterError as exc:
        raise CommandFailed(str(exc)) from None


async def _serve(settings: Settings) -> int:
    runtime = Runtime.build(settings)
    adapters = []
    if settings.telegram_token:
        from .adapters.telegram_adapter import TelegramAdapter

        adapters.append(TelegramAdapter(runtime.orchestrator, _secret(settings.telegram_token)))
    if settings.discord_token:
        from .adapters.discord_adapter import DiscordAdapter

        adapters.append(DiscordAdapter(runtime.orchestrator, _secret(settings.discord_token), channels=settings.discord_channels))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await runtime.start()
    try:
        for adapter in adapters:
            await adapter.start()
        log.info("running on %s; Ctrl-C stops", ", ".join(type(a).__name__ for a in adapters))
        await stop.wait()
    finally:
        for adapter in adapters:
            with contextlib.suppress(Exception):
                await adapter.stop()
        await runtime.stop()
    return 0


def chat(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_chat(settings, args))


async def _chat(settings: Settings, args: argparse.Namespace) -> int:
    from .adapters.console import ConsoleChat

    # The console is the operator's own terminal: it is an owner-private context unless owners are configured.
    owners = settings.owner_ids or [f"console:{args.user}"]
    runtime = Runtime.build(settings.model_copy(update={"owner_ids": owners}))
    await runtime.start()
    try:
        await ConsoleChat(runtime.orchestrator, user_id=args.user, user_name=args.name, stream=not args.no_stream).run()
    finally:
        await runtime.stop()
    return 0


def snapshot(args: argparse.Namespace, settings: Settings) -> int:
    runtime = Runtime.build(settings)
    try:
        message = IncomingMessage(platform=args.platform, channel_id=args.channel or args.user, author_id=args.user,
                                  author_name=args.name, text=args.message, guild_id=args.guild)
        turn: Turn = runtime.orchestrator.resolve(message)
        snap = runtime.orchestrator.assembler.snapshot(turn)
        if args.json:
            print_json({"context": {"person": turn.person_id, "partitions": list(turn.ctx.memory_partitions())}, **snap.as_dict()})
        else:
            out().print(f"{turn.person_id} in {'a DM' if turn.ctx.is_dm else turn.ctx.guild_id} sees {len(snap.memory_ids)} memories "
                        f"({snap.took_ms:.1f} ms)", markup=False, style="bold")
            out().print(snap.render() or "(no memories)", markup=False)
            for item in snap.history:
                out().print(f"{item['role']}: {item['content']}", markup=False)
    finally:
        runtime.engine.close()
        runtime.runner.shutdown()
    return 0
