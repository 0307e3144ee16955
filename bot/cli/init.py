"""``companion init``: the settings file, written once from the template, where every later command finds it.

The template is the project's ``.env.example`` (every setting with its default). The file goes where
``bot.home`` looks first for a person without a checkout: ``--env-file PATH``, else ``$COMPANION_HOME/.env``,
else ``~/.config/companion/.env``. It is created readable by its owner only (it will hold the model key and the
bot tokens), in folders made for the owner only, and never replaces a file that is there
(``--force`` does, by moving a new file over it). A symbolic link, a FIFO or anything else that
is not a regular file is refused with one line and never opened (issue 44). The steps in the
README then work from any folder, not only inside the checkout (``cp .env.example`` needed the
checkout's own folder).
"""

from __future__ import annotations

import argparse
import os
import stat
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
    there = _what_is_there(target)
    if there and not args.force:
        raise UsageError(
            f"{target} is already there: edit it, or pass --force to start again from the template"
        )
    if not TEMPLATE.is_file():
        raise CommandFailed(f"the settings template {TEMPLATE} is missing from this install")
    _folder_for(target.parent)
    _write_private(target, TEMPLATE.read_text(encoding="utf-8"))
    note(
        f"wrote {target}: set OPENAI_BASE_URL, OPENAI_API_KEY and COMPANION_CHAT_MODEL there, then `companion doctor`"
    )
    return 0


def _what_is_there(target: Path) -> bool:
    """Whether a settings file is there; anything but a regular file is refused, never opened
    (a FIFO would block the open until someone reads it, a link would send the keys elsewhere)."""
    try:
        found = target.lstat()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise CommandFailed(f"cannot look at {target}: {exc.strerror}") from None
    if stat.S_ISLNK(found.st_mode):
        raise CommandFailed(
            f"{target} is a symbolic link: init does not write through one (the file it points to "
            f"would get the keys); remove the link, or pass --env-file with a real path"
        )
    if not stat.S_ISREG(found.st_mode):
        raise CommandFailed(
            f"{target} is not a regular file ({_kind(found.st_mode)}): "
            "remove it, or pass --env-file"
        )
    return True


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "a device")


def _folder_for(folder: Path) -> None:
    """The folder and any missing parent made for the owner only (0700 whatever the umask); a
    folder that is there is kept, with a warning when others may write in it (they could swap the
    settings file)."""
    from memory import private_folder

    try:
        private_folder(folder)
    except OSError as exc:
        raise CommandFailed(f"cannot make the folder {folder}: {exc.strerror}") from None
    if not folder.is_dir():
        raise CommandFailed(f"{folder} is not a folder")
    mode = stat.S_IMODE(folder.stat().st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        note(
            f"warning: {folder} can be written by other users ({mode:o}): they could replace the "
            f"settings file; `chmod 700 {folder}`"
        )


def _write_private(target: Path, text: str) -> None:
    """Written to a new file (0600, never following a link, never blocking) then moved over the
    target, so a file that was there is replaced whole, and a link that appears meanwhile is
    replaced rather than followed."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.new")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        descriptor = os.open(temporary, flags, 0o600)
    except OSError as exc:
        raise CommandFailed(f"cannot write {temporary}: {exc.strerror}") from None
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            os.fchmod(file.fileno(), 0o600)
            file.write(text)
        os.replace(temporary, target)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise CommandFailed(f"cannot write {target}: {exc.strerror}") from None


def settings_file(env_file: str | None) -> Path:
    """Where the settings file goes: the first place ``bot.home.find_home`` would read it from."""
    if env_file:
        return Path(env_file).expanduser().absolute()
    if os.environ.get("COMPANION_HOME"):
        return Path(os.environ["COMPANION_HOME"]).expanduser().absolute() / ".env"
    config = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(config) if config and Path(config).is_absolute() else Path.home() / ".config"
    return base / "companion" / ".env"
