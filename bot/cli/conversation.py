"""The bot's commands: ``companion run`` (Discord and/or Telegram), ``companion chat`` (console),
``companion snapshot`` (the memory slice a reply would get, without calling the LLM; ORCH-5).

The runtime (openai SDK, scheduler, store) is imported inside the handlers, so registering these
commands costs nothing at ``companion --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from memory.models import PLATFORMS

from ..adapters.console import DEFAULT_USER_ID as DEFAULT_CONSOLE_USER
from ..clients import secret
from .memories import nonempty
from .output import CommandFailed, UsageError, counted, note, out, print_json

if TYPE_CHECKING:
    from ..config import Settings
    from ..runtime import Runtime

log = logging.getLogger(__name__)
NO_TOKENS = (
    "No chat platform is configured. Set DISCORD_TOKEN and/or TELEGRAM_TOKEN (in the environment or .env),\n"
    "plus OPENAI_BASE_URL / OPENAI_API_KEY for the model; or try the bot locally with `companion chat`."
)
CHAT_HELP = """\
You are the console account local-user (person id console:local-user; change it with --user), and the
console is your own owner DM unless COMPANION_OWNER_IDS names owners. /link joins this account to your
Discord or Telegram one, so the bot knows you as one person. The bot calls you by --name, else
COMPANION_CONSOLE_NAME, else your login name.
Logs go to a file beside the store (data/companion.db: data/companion.log; --log-file to choose), not over the
chat; --verbose shows them here."""


def register(subparsers: argparse._SubParsersAction) -> None:
    text = "run the bot on Discord and/or Telegram (whichever tokens are set)"
    p = subparsers.add_parser(
        "run",
        help=text,
        description=text[0].upper()
        + text[1:]
        + ", until Ctrl-C or SIGTERM (a graceful stop). A platform that "
        "cannot connect is retried with backoff while the other serves; /healthz and /metrics answer on "
        "COMPANION_HEALTH_HOST:COMPANION_HEALTH_PORT.",
    )
    p.add_argument(
        "--log-file",
        type=Path,
        metavar="PATH",
        help="write the logs to this file instead of the terminal",
    )
    p.set_defaults(
        handler=run_bot, log_destination=lambda args, settings: args.log_file, uses_model=True
    )
    p = subparsers.add_parser(
        "chat",
        help="chat with the bot in this terminal, against the same memory",
        description="Chat with the bot in this terminal, against the same memory.",
        epilog=CHAT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--name",
        type=nonempty,
        help="the name the bot calls you by (default: COMPANION_CONSOLE_NAME, else your login name)",
    )
    p.add_argument(
        "--user",
        type=nonempty,
        default=DEFAULT_CONSOLE_USER,
        help="your user id on the console platform (default: local-user)",
    )
    p.add_argument(
        "--no-stream", action="store_true", help="print replies whole instead of as they stream"
    )
    p.add_argument(
        "--log-file",
        type=Path,
        metavar="PATH",
        help="where the logs go (default: beside the store, with the suffix .log)",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show the logs in the terminal instead of writing them to a file",
    )
    p.add_argument(
        "--new-store",
        action="store_true",
        help="start a new, empty store when there is none (asked on a terminal)",
    )
    p.set_defaults(handler=chat, log_destination=chat_log_file, uses_model=True)
    text = "show the memory slice a reply would get (no LLM call)"
    p = subparsers.add_parser(
        "snapshot",
        help=text,
        description="Show the memories, summaries and history a reply to MESSAGE would be given, resolved exactly as "
        "the bot resolves a turn, without calling the model and without writing anything.",
    )
    p.add_argument("message", help="the incoming message text")
    p.add_argument(
        "--platform",
        choices=PLATFORMS,
        default="console",
        help="discord, telegram or console (default: console)",
    )
    p.add_argument(
        "--user",
        type=nonempty,
        default=None,
        help="the speaker's platform user id (console: local-user, as `companion chat`)",
    )
    p.add_argument("--name", default="", help="the speaker's display name")
    p.add_argument(
        "--channel", type=nonempty, default=None, help="channel/chat id (default: the user's DM)"
    )
    p.add_argument("--guild", type=nonempty, default=None, help="guild/group id (omit for a DM)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=snapshot)


def built_runtime(settings: Settings) -> Runtime:
    from ..composition import build_runtime as build

    return build(settings)


# -- run ---------------------------------------------------------------------------------------------------
def run_bot(args: argparse.Namespace, settings: Settings) -> int:
    from ..adapters.common import AdapterError, LoginRejected
    from .doctor import token_problems

    if not (settings.discord_token or settings.telegram_token):
        sys.stderr.write(f"companion: {NO_TOKENS}\n")
        return 2
    if not settings.discord_token and settings.telegram == "off":
        raise UsageError(
            "COMPANION_TELEGRAM=off and no DISCORD_TOKEN: this process would serve nothing"
        )
    # A pasted token with a stray prefix or a missing part fails here, by name, instead of deep in a platform library.
    problems = token_problems(secret(settings.discord_token), secret(settings.telegram_token))
    if problems:
        raise UsageError("; ".join(problems))
    say_where(args, settings)
    try:
        return asyncio.run(_serve(settings))
    except LoginRejected as exc:
        raise UsageError(f"{exc}: check the token in your environment or .env") from None
    except AdapterError as exc:
        raise CommandFailed(str(exc)) from None


async def _serve(settings: Settings) -> int:
    from ..composition import build_channels, build_health
    from ..launch import serve

    runtime = built_runtime(settings)
    adapters, voice = build_channels(settings, runtime)
    health = build_health(settings, runtime)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await runtime.start()
    try:
        await _start_health(health)
        log.info("starting %s; Ctrl-C stops", ", ".join(a.platform for a in adapters))
        # each platform retries on its own; the others keep serving (bot.launch)
        await serve(adapters, stop)
    finally:
        if health is not None:
            await health.stop()
        if (
            voice is not None
        ):  # first: leaving persists each session's summary while the store is still open
            await _close_voice(voice)
        for adapter in adapters:
            try:
                await adapter.stop()
            except (
                Exception
            ):  # shutdown edge: one adapter failing to close must not keep the store from closing
                log.exception("could not stop %s cleanly", type(adapter).__name__)
        await runtime.stop()
    return 0


async def _start_health(health) -> None:
    """A port already taken costs the operator /healthz, not the bot."""
    if health is None:
        return
    try:
        await health.start()
    except OSError as exc:
        log.warning(
            "no /healthz: cannot listen on %s:%d (%s); set COMPANION_HEALTH_PORT",
            health.host,
            health.port,
            exc.strerror,
        )


async def _close_voice(voice) -> None:
    try:
        await voice.close()
    except Exception:  # shutdown edge: the text adapters and the store still close
        log.exception("could not leave the voice channels cleanly")


# -- chat --------------------------------------------------------------------------------------------------
def chat_log_file(args: argparse.Namespace, settings: Settings) -> Path | None:
    """The chat keeps the terminal for the conversation: logs go to a file beside the store unless --verbose."""
    if args.verbose:
        return None
    if args.log_file:
        return args.log_file
    store = Path(settings.db_path)
    beside = store.with_suffix(".log")
    return beside if beside != store else store.with_name(store.name + ".log")


def say_where(args: argparse.Namespace, settings: Settings) -> None:
    """One line: which config and which store, so a surprising answer can be traced to the wrong home (bot/home.py)."""
    home = getattr(args, "home", None)
    config = home.describe_config() if home else "the environment"
    note(f"config: {config}; store: {_store_named(settings)}")


def _store_named(settings: Settings) -> str:
    """The store a command opens: the PostgreSQL URL without its password, else the SQLite file."""
    from memory import is_postgres, redact

    if settings.database_url and is_postgres(settings.database_url):
        return redact(settings.database_url)
    return str(Path(settings.db_path).absolute())


def confirm_new_store(args: argparse.Namespace, settings: Settings) -> None:
    """A missing store is said out loud before one is made: an empty store reads like total memory loss."""
    store = Path(settings.db_path)
    if store.exists():
        return
    text = f"there is no store at {store.absolute()}"
    if args.new_store:
        note(f"{text}: starting a new, empty one (nothing remembered yet)")
        return
    hint = "pass --new-store to start an empty one, or point at yours with --db, COMPANION_HOME or --env-file"
    if not sys.stdin.isatty():
        raise UsageError(f"{text}: {hint}")
    sys.stderr.write(f"companion: {text} (nothing remembered yet). Start a new, empty one? [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise UsageError(f"no store created: {hint}")


def chat(args: argparse.Namespace, settings: Settings) -> int:
    from .doctor import startup_warnings

    say_where(args, settings)
    confirm_new_store(args, settings)
    for warning in startup_warnings(settings.llm_base_url, secret(settings.llm_api_key)):
        note(f"warning: {warning}")
    return asyncio.run(_chat(settings, args))


async def _chat(settings: Settings, args: argparse.Namespace) -> int:
    from ..adapters.console import ConsoleChat, local_user_name
    from ..composition import budgeted

    # The console is the operator's own terminal, an owner-private context unless owners are configured
    # (``OwnerPolicy``: the same rule for chat, snapshot and the dashboard).
    runtime = built_runtime(settings)
    log_file = chat_log_file(args, settings)
    # The name the person chose (--name, the setting, or /name in an earlier chat, kept with the account), else
    # the login name, which the chat offers to replace when the person says theirs ("I'm Sam").
    default = local_user_name()
    known = await runtime.runner.run(runtime.orchestrator.people.known, "console", [args.user])
    said_before = known.get(args.user, ("", ""))[1]
    name = args.name or settings.console_name or said_before or default
    chosen = name != default
    typed_before = await runtime.runner.run(_typed_before, runtime, args.user, name)

    async def kept() -> list[
        str
    ]:  # after a forget: the lines the store still holds (the up arrow's)
        return await runtime.runner.run(_typed_before, runtime, args.user, name)

    async def diagnose(failure: Exception | None) -> str:
        return await asyncio.to_thread(explain_failure, settings, log_file, failure)

    console = ConsoleChat(
        budgeted(
            runtime
        ),  # ORCH-14: the console's turns are charged to its person (the owner is never held back)
        user_id=args.user,
        user_name=name,
        bot_name=runtime.orchestrator.assembler.bot_name,
        name_chosen=chosen,
        history=typed_before,
        stream=not args.no_stream,
        diagnose=diagnose,
        kept=kept,
    )
    if (
        runtime.checkins is not None
    ):  # ORCH-8: the console's person gets their check-ins here while the chat is open
        runtime.checkins.deliveries["console"] = console.send_direct
    if (
        runtime.reminders is not None
    ):  # ORCH-13: the console's reminders are printed while the chat is open
        runtime.reminders.posts["console"] = console
    await runtime.start()
    try:
        await console.run()
    finally:
        await _leave(runtime, console)
    return 0


# /quit's extraction budget: a CPU model takes minutes for it, and what is not learned now is
# learned after the next start (the buffer is in the store); /quit took 10-15 s, silent (issue 45)
QUIT_FLUSH_S = 1.5


async def _leave(runtime: Runtime, console) -> None:
    """/quit says what it finishes, and waits for the model at most ``QUIT_FLUSH_S``."""
    console.say("Saving what you said…")
    budget = QUIT_FLUSH_S if runtime.flush_s is None else min(QUIT_FLUSH_S, runtime.flush_s)
    left = await runtime.stop(flush_s=budget)
    if left:
        console.say(f"Saved. {counted(left, 'message')} will be learned from at the next start.")


def _typed_before(runtime: Runtime, user_id: str, name: str) -> list[str]:
    """The person's own lines of earlier chats, oldest first, for the up arrow: read from the store's messages
    (no history file of its own), so what they had forgotten is not there to recall."""
    from ..types import IncomingMessage

    probe = IncomingMessage(
        platform="console",
        channel_id="console",
        author_id=user_id,
        author_name=name,
        text="history",
    )
    turn = runtime.orchestrator.peek(probe)  # resolution that writes nothing
    rows = runtime.engine.messages.own(turn.ctx, [turn.person_id], HISTORY_LINES)
    return [" ".join(content.split()) for _, _, content, _ in reversed(rows)]


HISTORY_LINES = 200


def explain_failure(
    settings: Settings, log_file: Path | None, failure: Exception | None = None
) -> str:
    """One line after a failed reply: did it time out, is the server down, is the key refused, or did it refuse
    the request itself?"""
    from ..model.client import ModelTimeout, TurnTimeout
    from .doctor import reach

    details = f" (details in {log_file})" if log_file else ""
    if isinstance(failure, ModelTimeout | TurnTimeout):
        return (
            f"timed out: {failure}, at {settings.llm_base_url}; the server may be overloaded or still loading "
            f"{settings.chat_model} (COMPANION_LLM_TIMEOUT_S, COMPANION_TURN_DEADLINE_S){details}"
        )
    problem = reach(settings.llm_base_url, secret(settings.llm_api_key))
    if problem:
        return problem.message + details
    return (
        f"the model server at {settings.llm_base_url} answers, but not to this request: check COMPANION_CHAT_MODEL "
        f"({settings.chat_model}) and OPENAI_API_KEY, or run `companion doctor`{details}"
    )


# -- snapshot ----------------------------------------------------------------------------------------------
def platform_id(platform: str, value: str | None, what: str) -> str | None:
    """One id form everywhere: ``discord:999`` and ``999`` with --platform discord name the same guild (the bot
    adds the platform itself; "discord:discord:999" would find nothing). Another platform's prefix is refused."""
    if value is None:
        return None
    prefix, _, rest = value.partition(":")
    if prefix == platform and rest:
        return rest
    if prefix in PLATFORMS and rest:
        raise UsageError(f"{what} {value} is a {prefix} id, but --platform is {platform}")
    return value


def snapshot(args: argparse.Namespace, settings: Settings) -> int:
    from ..types import IncomingMessage

    if args.user is None and args.platform != "console":
        raise UsageError(
            f"--user is needed for {args.platform}: whose turn to show (their {args.platform} user id)"
        )
    args.user = args.user or DEFAULT_CONSOLE_USER
    user, channel, guild = (
        platform_id(args.platform, value, what)
        for value, what in (
            (args.user, "--user"),
            (args.channel, "--channel"),
            (args.guild, "--guild"),
        )
    )
    args = argparse.Namespace(**{**vars(args), "user": user, "channel": channel, "guild": guild})
    runtime = built_runtime(settings)
    try:
        dm = None if args.guild else runtime.orchestrator.dm_channel(args.platform, args.user)
        message = IncomingMessage(
            platform=args.platform,
            channel_id=args.channel or dm or args.user,
            author_id=args.user,
            author_name=args.name,
            text=args.message,
            guild_id=args.guild,
        )
        # chat's own resolution, writing nothing (ORCH-5)
        turn, snap = runtime.orchestrator.preview(message)
        if args.json:
            print_json(
                {
                    "context": {
                        "person": turn.person_id,
                        "partitions": list(turn.ctx.memory_partitions()),
                    },
                    **snap.as_dict(),
                }
            )
        else:
            out().print(
                f"{turn.person_id} in {'a DM' if turn.ctx.is_dm else turn.ctx.guild_id} sees {counted(len(snap.memory_ids), 'memory')} "
                f"({snap.took_ms:.1f} ms)",
                markup=False,
                style="bold",
            )
            out().print(snap.render() or "(no memories)", markup=False)
            for item in snap.history:
                out().print(f"{item['role']}: {item['content']}", markup=False)
    finally:
        runtime.engine.close()
        runtime.runner.shutdown()
    return 0
