"""``companion``: the command line (OPS-2). Parse, read Settings once, run one command, map errors to exit codes.

Exit codes: 0 done; 2 bad input or configuration (a one-line message, never a traceback); 1 a runtime
failure (the store, the model server or the file system failed); 130 interrupted.
Each command group registers itself with ``register(subparsers)``; add new groups to ``COMMAND_GROUPS``.

Start-up is kept cheap: this module and the ``register`` functions import only argparse and small
modules of ours; each handler imports what it needs (the openai SDK, numpy, sqlite-vec, apsw, rich,
pydantic) when it runs, so ``companion --help`` answers in a fraction of a second.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memory import (
    DimensionMismatch,
    InvalidInput,
    MemoryStoreError,
    ModelMismatch,
    NotFound,
    Rejected,
    owner_only,
)

from . import (
    audit,
    bulletin,
    checkins,
    conversation,
    dashboard,
    doctor,
    ingest,
    init,
    memories,
    modelcheck,
    reflect,
    store,
    upkeep,
)
from .output import CliError, note, print_error

COMMAND_GROUPS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    init.register,
    memories.register,
    upkeep.register,
    conversation.register,
    doctor.register,
    ingest.register,
    dashboard.register,
    bulletin.register,
    checkins.register,
    reflect.register,
    store.register,
    audit.register,
    modelcheck.register,
)
EPILOG = """\
exit codes: 0 done; 1 a runtime failure (the store, the model server, the file system); 2 bad input or
configuration; 130 interrupted.
--json: the result is one JSON document on stdout; an error is one JSON object on stderr,
{"error": "...", "exit_code": N}. Commands that write a file refuse to replace one without --force.
Settings come from the environment and a config file: --env-file, else $COMPANION_HOME/.env, else ./.env in a
project folder, else ~/.config/companion/.env (see .env.example); `companion doctor` shows which, and checks them."""


class ArgumentsRejected(Exception):
    """argparse found the command line unusable; ``main`` reports it like any other error (JSON with --json)."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """One line and exit 2, instead of argparse's usage block."""
        raise ArgumentsRejected(self.prog, message)


class ShowVersion(argparse.Action):
    """``--version`` from the installed package's metadata, read only when asked (importlib.metadata is not free)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version("companion")
        except PackageNotFoundError:  # run from a source tree that was never pip-installed
            from ..installs import pip_install

            text = f"(not installed: {pip_install()})"
        sys.stdout.write(f"companion {text}\n")
        parser.exit(0)


def build_parser() -> Parser:
    parser = Parser(
        prog="companion",
        description="A companion chat bot with a long-term memory in one SQLite file.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=ShowVersion)
    add_global_options(parser, None)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in COMMAND_GROUPS:
        register(subparsers)
    _globals_anywhere(parser)
    return parser


def add_global_options(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument(
        "--db",
        metavar="PATH",
        default=default,
        help="the database file (overrides COMPANION_DB_PATH)",
    )
    parser.add_argument(
        "--env-file",
        metavar="PATH",
        default=default,
        help="the config file (`companion doctor` names the one read)",
    )
    parser.add_argument(
        "--embeddings",
        choices=("local", "openai", "none"),
        default=default,
        help="embedding provider (overrides COMPANION_EMBEDDINGS)",
    )
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        default=default,
        help="overrides COMPANION_LOG_LEVEL",
    )
    parser.add_argument(
        "--log-format",
        choices=("auto", "text", "json"),
        default=default,
        help="auto: rich at a terminal, one line a record elsewhere; json: one object a line (overrides COMPANION_LOG_FORMAT)",
    )


def _globals_anywhere(parser: argparse.ArgumentParser) -> None:
    """Let ``companion memory list --db x.db`` work like ``companion --db x.db memory list``.

    Subcommands get the same options with SUPPRESS defaults, so an option given before the command is
    not reset to None by the subcommand's parser.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                add_global_options(sub, argparse.SUPPRESS)
                _globals_anywhere(sub)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # known before parsing, so even a usage error can be reported as JSON
    as_json = "--json" in argv
    if not argv:  # a bare `companion`: what it can do, not only "arguments are required"
        sys.stderr.write(build_parser().format_help())
        return 2
    try:
        args = build_parser().parse_args(argv)
    except ArgumentsRejected as exc:
        return _fail(f"{exc} (see {exc.prog} --help)", 2, as_json, prefix=exc.prog)
    except SystemExit as exc:  # --help or --version
        return exc.code if isinstance(exc.code, int) else 0
    from ..config import ConfigError, load_settings  # pydantic: only once a command runs
    from ..home import HomeError, find_home

    try:
        args.home = find_home(args.env_file)
    except HomeError as exc:
        return _fail(str(exc), 2, as_json)
    overrides = {
        "db_path": args.db,
        "embeddings": args.embeddings,
        "log_level": args.log_level,
        "log_format": args.log_format,
    }
    try:
        settings = _settle_store(
            load_settings(
                _env_file=args.home.env_file,
                **{k: v for k, v in overrides.items() if v is not None},
            ),
            args,
        )
    except ConfigError as exc:
        # doctor reports a bad configuration as one of its findings
        on_error = getattr(args, "on_config_error", None)
        return run(on_error, args, exc) if on_error else _fail(str(exc), 2, as_json)
    with (
        owner_only()
    ):  # issue 31: whatever a command creates is its owner's alone (0600 files, 0700 folders)
        _private_home(args.home)
        # A command may send its logs elsewhere than stderr (``chat`` keeps the terminal for the conversation).
        log_destination = getattr(args, "log_destination", None)
        _setup_logging(
            _terminal_level(args, settings),
            log_destination(args, settings) if log_destination else None,
            settings.log_format,
        )
        try:
            return _with_model(args, settings, as_json)
        finally:
            _remove_handlers()  # the command's handlers end with it (tests, and embedders, call ``main`` many times)


def _with_model(args: argparse.Namespace, settings: Any, as_json: bool) -> int:
    """The command; one that talks to the model (``uses_model``) gets COMPANION_LOCAL_MODEL loaded in this process
    first (bot.model.local), pointed at, and stopped after it."""
    uses_model = getattr(args, "uses_model", False)
    if settings.local_model is None or not (
        uses_model(args) if callable(uses_model) else uses_model
    ):
        return run(args.handler, args, settings)
    from ..config import ConfigError
    from ..model.local import LocalModel, ignored_settings

    ignored = ignored_settings(settings)
    if ignored:
        note(
            f"warning: COMPANION_LOCAL_MODEL is set, so {', '.join(ignored)} {'is' if len(ignored) == 1 else 'are'} ignored"
        )
    if not as_json:
        note(f"loading {settings.local_model.name} with llama.cpp ...")
    try:
        model = LocalModel.start(settings)
    except ConfigError as exc:
        on_error = getattr(args, "on_config_error", None)  # the doctor reports it as a finding
        return run(on_error, args, exc) if on_error else _fail(str(exc), 2, as_json)
    except (
        KeyboardInterrupt
    ):  # Ctrl-C during the load is felt when llama.cpp returns; the half-made server is freed
        return _fail("interrupted", 130, as_json)
    args.local_model = model.loaded  # the doctor says what was loaded
    try:
        return run(args.handler, args, model.serve(settings))
    finally:
        model.stop()


def _private_home(home: Any) -> None:
    """The home's data folder and config file are the bot's own: made owner-only when a command starts (a data
    folder left 0755, or an .env with the tokens left 0644, by an earlier version or a plain ``cp``)."""
    from memory import PRIVATE_FOLDER, private_file

    if home.data_dir.is_dir():
        with contextlib.suppress(PermissionError):
            home.data_dir.chmod(PRIVATE_FOLDER)
    if home.env_file is not None:
        private_file(Path(home.env_file))


def _settle_store(settings: Any, args: argparse.Namespace) -> Any:
    """The store read from the home (bot/home.py), not from wherever the command was started."""
    from ..home import store_path

    if settings.key_file is None and args.home.env_file is not None:
        # the tombstones' key beside the config file (bot.secret_key); with no config file, beside the store, where
        # every process that opens it (the bot, this command, a dashboard) finds the same one
        from ..home import key_file

        settings = settings.model_copy(update={"key_file": key_file(args.home)})
    if args.db is not None:
        return settings
    from_environment = any(name.upper() == "COMPANION_DB_PATH" for name in os.environ)
    path = store_path(
        args.home, Path(settings.db_path), "db_path" in settings.model_fields_set, from_environment
    )
    return settings.model_copy(update={"db_path": path})


def run(handler: Callable[..., Any], args: argparse.Namespace, settings: Any) -> int:
    try:
        return int(handler(args, settings) or 0)
    except KeyboardInterrupt:
        return _fail("interrupted", 130, bool(getattr(args, "json", False)))
    except Exception as exc:
        described = _describe(exc, settings)
        if described is None:
            raise
        return _fail(*described, bool(getattr(args, "json", False)))


def _describe(exc: Exception, settings: Any) -> tuple[str, int] | None:
    """(message, exit code) for an expected failure; None for a bug, which keeps its traceback."""
    if isinstance(exc, CliError):
        return str(exc), exc.exit_code
    if isinstance(exc, Rejected):
        return f"rejected: {exc}", 2
    if isinstance(
        exc,
        (InvalidInput, NotFound, DimensionMismatch, ModelMismatch),
    ):
        return str(exc), 2
    if isinstance(exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError)):
        return f"{exc.strerror}: {exc.filename}", 2
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON: {exc}", 2
    if isinstance(
        exc, _loaded("apsw", "ReadOnlyError")
    ):  # a write command on a store that cannot be written
        where = getattr(settings, "db_path", "the store")
        return (
            f"{where} is read-only: this command writes; read commands (memory list, stats, backup) still work",
            1,
        )
    if isinstance(
        exc, MemoryStoreError
    ):  # our own messages are written for people and name what they concern
        return str(exc), 1
    if isinstance(exc, (OSError, *_loaded("apsw", "Error"))):
        return f"{type(exc).__name__}: {exc}", 1
    return None


def _loaded(module: str, name: str) -> tuple[type, ...]:
    """``module.name`` if that module was imported: an exception of it can only exist then, and an error
    path should not import numpy or apsw just to find out."""
    found = sys.modules.get(module)
    return (getattr(found, name),) if found is not None else ()


def _fail(message: str, code: int, as_json: bool, *, prefix: str = "companion") -> int:
    print_error(message, code, as_json=as_json, prefix=prefix)
    return code


def _terminal_level(args: argparse.Namespace, settings: Any) -> str:
    """The log level of the command. A report (``doctor``) is its findings and nothing else:
    unless a level was asked for, only warnings join it (issue 45: the local model's load and
    stop lines showed among the findings; what was loaded is a finding of its own)."""
    if getattr(args, "report_only", False) and "log_level" not in settings.model_fields_set:
        return "WARNING"
    return str(settings.log_level)


def _setup_logging(level: str, log_file: Path | None = None, log_format: str = "auto") -> None:
    """Log to stderr (``bot.cli.logformat``), or to ``log_file``, for the length of one command."""
    from ..logsafety import install_redaction
    from .logformat import stderr_handler

    _remove_handlers()
    handler = (_file_handler(log_file) if log_file else None) or stderr_handler(log_format)
    if not isinstance(handler, logging.FileHandler):
        handler.addFilter(TerminalNoise(debug=level == "DEBUG"))
    # a token in an HTTP error's URL must not reach the terminal or the log file (SEC-4)
    install_redaction(handler)
    handler.companion_cli = True  # type: ignore[attr-defined]
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    for name in (
        CHATTY_LIBRARIES
    ):  # at DEBUG they log every update's text and every request body: people's words
        logging.getLogger(name).setLevel(max(logging.INFO, logging.getLevelName(level)))


# Libraries whose DEBUG lines carry message texts; they stay at INFO even when --log-level DEBUG is asked for.
CHATTY_LIBRARIES = (
    "telegram",
    "httpx",
    "httpcore",
    "openai",
    "discord.gateway",
    "discord.http",
    "aiohttp.access",
)


class TerminalNoise(logging.Filter):
    """Library lines a person at a terminal cannot act on: httpx's "HTTP Request" per call (kept at DEBUG and in
    log files), APScheduler's "Adding job tentatively" before it starts, pypdf's complaints about a file's
    internals (the text is still read)."""

    def __init__(self, debug: bool) -> None:
        super().__init__()
        self.debug = debug

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("httpx"):
            return self.debug or record.levelno > logging.INFO
        if record.name.startswith("apscheduler") and "tentatively" in str(record.msg):
            return False
        return not (record.name.startswith("pypdf") and record.levelno < logging.ERROR)


def _remove_handlers() -> None:
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "companion_cli", False)]:
        root.removeHandler(old)
        old.close()


def _file_handler(path: Path) -> logging.Handler | None:
    """A log file, or None (logs then go to the terminal) when it cannot be opened: logging must not stop the chat."""
    from memory import create_private, private_folder

    try:
        private_folder(path.parent)
        create_private(path)  # the log names people and places: 0600, as the store (issue 31)
        handler = logging.FileHandler(path, encoding="utf-8")
    except OSError as exc:
        sys.stderr.write(
            f"companion: cannot write the log file {path} ({exc.strerror}); logging here instead\n"
        )
        return None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    return handler
