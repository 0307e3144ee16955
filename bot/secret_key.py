"""The operator's secret, kept outside the store (issue 31, item 3): the key of the tombstones.

A tombstone (``memory.write.tombstones``) is a set of keyed hashes of a forgotten fact. Were the key in the store,
anyone holding the file, or a backup or copy of it, could test guesses against it (10,000 guesses recovered a
forgotten sentence). So the key is the operator's, and ``memory/`` is given it as a value:

    COMPANION_SECRET_KEY   set (in the environment, the config file or the operator's secret store): the key is
                           derived from it (HMAC-SHA256), so every process and every host given it agrees
    otherwise a key file   COMPANION_KEY_FILE, else ``companion.key`` beside the config file, found as the config
                           file is (``bot.home``: --env-file's folder, $COMPANION_HOME, the project folder, or
                           ~/.config/companion/); made on first use, 64 hex digits, mode 0600, in a 0700 folder

Lose the key and the tombstones no longer match anything (what was forgotten may be learned again from what is
left): keep the key file with your config, not with your backups.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import Settings

log = logging.getLogger(__name__)
KEY_FILE_NAME = "companion.key"
_HEX_KEY = re.compile(r"[0-9a-f]{64}")


class KeyFileError(OSError):
    """The key file is not a key (edited by hand, truncated, a folder) or cannot be made; the CLI names it."""


def tombstone_key(settings: Settings) -> bytes:
    """The tombstones' key: derived from COMPANION_SECRET_KEY, else read from (or made in) the key file."""
    secret = settings.secret_key.get_secret_value() if settings.secret_key is not None else ""
    if secret:
        return hmac.new(secret.encode("utf-8"), b"companion tombstones v1", hashlib.sha256).digest()
    path = settings.key_file or Path(settings.db_path).parent / KEY_FILE_NAME
    if _within(path, Path(settings.db_path).parent):
        log.warning(
            "the tombstones' key %s is in the store's folder: a copy of that folder carries the key with "
            "the store, and with both a guessed forgotten fact can be confirmed; set COMPANION_SECRET_KEY "
            "or a COMPANION_KEY_FILE kept elsewhere",
            path,
        )
    return read_or_make(path)


def _within(path: Path, folder: Path) -> bool:
    return path.absolute().parent.resolve().is_relative_to(folder.absolute().resolve())


def read_or_make(path: Path) -> bytes:
    """The key in ``path``, made there first (0600, folder 0700) when there is none. Written whole to a private
    temporary file and linked into place, so another process starting at the same moment reads the one key."""
    if path.is_file():
        return _read(path)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".companion-key-", dir=path.parent)  # 0600
    except OSError as exc:
        raise _unmakeable(path, exc) from exc
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_hex(32) + "\n")
        os.link(temporary, path)
    except FileExistsError:  # another process linked its key first: theirs is the key
        pass
    except OSError as exc:
        raise _unmakeable(path, exc) from exc
    finally:
        os.unlink(temporary)
    return _read(path)


def _unmakeable(path: Path, exc: OSError) -> KeyFileError:
    return KeyFileError(
        f"cannot make the key file {path} ({exc.strerror}): set COMPANION_KEY_FILE or COMPANION_SECRET_KEY"
    )


def _read(path: Path) -> bytes:
    if path.exists() and not path.is_file():
        raise KeyFileError(
            f"{path} is not a file (COMPANION_KEY_FILE names the tombstones' key file)"
        )
    text = path.read_text(encoding="ascii", errors="replace").strip().lower()
    if not _HEX_KEY.fullmatch(text):
        raise KeyFileError(
            f"{path} does not hold a key (64 hex digits); restore it from where you keep your config"
        )
    return bytes.fromhex(text)
