"""``companion init``: the settings file, written once from the template, where every later command finds it.

The template is the project's ``.env.example`` (every setting with its default). The file goes where
``bot.home`` looks first for a person without a checkout: ``--env-file PATH``, else ``$COMPANION_HOME/.env``,
else ``~/.config/companion/.env``. It is created readable by its owner only (it will hold the model key and the
bot tokens) and never replaces a file that is there (``--force`` does). The steps in the README then work from
any folder, not only inside the checkout (``cp .env.example`` needed the checkout's own folder).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .output import CommandFailed, UsageError, note

if TYPE_CHECKING:
    from ..config import Settings

TEMPLATE = Path(__file__).resolve().parents[2] / ".env.example"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "init",
        help="write the settings file from the template (then edit it)",
        description="Write the settings file from the template: --env-file PATH, else $COMPANION_HOME/.env, "
        "else ~/.config/companion/.env. Edit it afterwards: the model server, its key, the bot tokens.",
    )
    p.add_argument(
        "--force", action="store_true", help="replace a settings file that is already there"
    )
    p.set_defaults(handler=init)


def init(args: argparse.Namespace, settings: Settings) -> int:
    target = settings_file(args.env_file)
    if target.exists() and not args.force:
        raise UsageError(
            f"{target} is already there: edit it, or pass --force to start again from the template"
        )
    if not TEMPLATE.is_file():
        raise CommandFailed(f"the settings template {TEMPLATE} is missing from this install")
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(TEMPLATE.read_text(encoding="utf-8"))
    os.chmod(target, 0o600)  # --force over a file that was readable by others
    note(
        f"wrote {target}: set OPENAI_BASE_URL, OPENAI_API_KEY and COMPANION_CHAT_MODEL there, then `companion doctor`"
    )
    return 0


def settings_file(env_file: str | None) -> Path:
    """Where the settings file goes: the first place ``bot.home.find_home`` would read it from."""
    if env_file:
        return Path(env_file).expanduser().absolute()
    if os.environ.get("COMPANION_HOME"):
        return Path(os.environ["COMPANION_HOME"]).expanduser().absolute() / ".env"
    config = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(config) if config and Path(config).is_absolute() else Path.home() / ".config"
    return base / "companion" / ".env"
