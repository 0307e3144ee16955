"""``companion``: the command line (OPS-2). Parse, read Settings once, run one command, map errors to exit codes.

Exit codes: 0 done; 2 bad input or configuration (a one-line message, never a traceback); 1 a runtime
failure (the store, the model server or the file system failed); 130 interrupted.
Each command group registers itself with ``register(subparsers)``; add new groups to ``COMMAND_GROUPS``.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

import apsw
from rich.logging import RichHandler

from memory.errors import DimensionMismatch, InvalidInput, MemoryStoreError, NotFound, Rejected

from . import cli_bot, cli_memory, cli_upkeep
from .cli_output import CliError, err
from .config import ConfigError, Settings, load_settings

COMMAND_GROUPS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    cli_memory.register,
    cli_upkeep.register,
    cli_bot.register,
)


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """One line and exit 2, instead of argparse's usage block."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> Parser:
    parser = Parser(prog="companion", description="A companion chat bot with a long-term memory in one SQLite file.")
    add_global_options(parser, None)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in COMMAND_GROUPS:
        register(subparsers)
    _globals_anywhere(parser)
    return parser


def add_global_options(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument("--db", metavar="PATH", default=default, help="the database file (overrides COMPANION_DB_PATH)")
    parser.add_argument("--embeddings", choices=("local", "openai", "none"), default=default,
                        help="embedding provider (overrides COMPANION_EMBEDDINGS)")
    parser.add_argument("--log-level", type=str.upper, choices=("DEBUG", "INFO", "WARNING", "ERROR"), default=default,
                        help="overrides COMPANION_LOG_LEVEL")


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
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else 0
    overrides = {"db_path": args.db, "embeddings": args.embeddings, "log_level": args.log_level}
    try:
        settings = load_settings(**{k: v for k, v in overrides.items() if v is not None})
    except ConfigError as exc:
        sys.stderr.write(f"companion: {exc}\n")
        return 2
    _setup_logging(settings.log_level)
    return run(args.handler, args, settings)


def run(handler: Callable[..., Any], args: argparse.Namespace, settings: Settings) -> int:
    try:
        return int(handler(args, settings) or 0)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except CliError as exc:
        return _fail(str(exc), exc.exit_code)
    except Rejected as exc:
        return _fail(f"rejected: {exc}", 2)
    except (InvalidInput, NotFound, DimensionMismatch) as exc:
        return _fail(str(exc), 2)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
        return _fail(f"{exc.strerror}: {exc.filename}", 2)
    except json.JSONDecodeError as exc:
        return _fail(f"invalid JSON: {exc}", 2)
    except (MemoryStoreError, apsw.Error, OSError) as exc:
        return _fail(f"{type(exc).__name__}: {exc}", 1)


def _fail(message: str, code: int) -> int:
    first, *rest = str(message).strip().splitlines() or [""]
    sys.stderr.write(f"companion: error: {first}{' ...' if rest else ''}\n")
    return code


def _setup_logging(level: str) -> None:
    """Log to stderr through rich; called once per ``main`` (tests call ``main`` many times in one process)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "companion_cli", False)]:
        root.removeHandler(handler)
    handler = RichHandler(console=err(), show_path=False, rich_tracebacks=False)
    handler.companion_cli = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
