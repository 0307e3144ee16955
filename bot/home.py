"""Where the config file and the store live (OPS-5): one home, whichever folder a command is started from.

The config file is the first of these that applies:

    1. ``--env-file PATH``                 (must exist)
    2. ``$COMPANION_HOME/.env``            (COMPANION_HOME set: that folder is the home, file or not)
    3. ``./.env``                          (a project folder: the current folder holds .env or data/companion.db)
    4. ``$XDG_CONFIG_HOME/companion/.env`` (default ~/.config/companion/.env; used when it exists)

The store, unless COMPANION_DB_PATH or ``--db`` names one, is ``data/companion.db`` beside the config
file for 1-3, and ``$XDG_DATA_HOME/companion/companion.db`` (default ~/.local/share/companion/) otherwise.
A relative COMPANION_DB_PATH written in a config file is read from that file's folder, not from wherever
the command happens to start; one given on the command line or in the environment is relative to the
current folder, like any path typed there. Environment variables win over the file, as before.

The tombstones' key file (``bot.secret_key``), unless COMPANION_KEY_FILE names one, is ``companion.key`` beside
the config file, or in the home folder (2, 3) when there is no file, or ``$XDG_CONFIG_HOME/companion/`` (4).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

STORE_NAME = "companion.db"


class HomeError(Exception):
    """An explicitly named config file does not exist."""


@dataclass(frozen=True, slots=True)
class Home:
    env_file: Path | None  # the config file read; None when there is none
    source: str  # how it was chosen: "--env-file", "COMPANION_HOME", "project folder", "user config", "none"
    data_dir: Path  # the default store's folder, and what a relative COMPANION_DB_PATH in the file is read from

    @property
    def default_store(self) -> Path:
        return self.data_dir / STORE_NAME

    def describe_config(self) -> str:
        return (
            f"{self.env_file} ({self.source})"
            if self.env_file
            else "no config file (environment only)"
        )


def find_home(
    env_file: str | Path | None, environ: Mapping[str, str] | None = None, cwd: Path | None = None
) -> Home:
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    if env_file:
        path = Path(env_file).expanduser().absolute()
        if not path.is_file():
            raise HomeError(f"--env-file {env_file}: no such file")
        return Home(path, "--env-file", path.parent / "data")
    if environ.get("COMPANION_HOME"):
        home = Path(environ["COMPANION_HOME"]).expanduser().absolute()
        found = home / ".env"
        return Home(found if found.is_file() else None, "COMPANION_HOME", home / "data")
    if (cwd / ".env").is_file() or (cwd / "data" / STORE_NAME).is_file():
        found = cwd / ".env"
        return Home(found if found.is_file() else None, "project folder", cwd / "data")
    user = _xdg(environ, "XDG_CONFIG_HOME", ".config") / "companion" / ".env"
    data = _xdg(environ, "XDG_DATA_HOME", ".local/share") / "companion"
    return Home(user if user.is_file() else None, "user config" if user.is_file() else "none", data)


def key_file(home: Home, environ: Mapping[str, str] | None = None) -> Path:
    """Where the tombstones' key file goes by default (``bot.secret_key``): beside the config file, in the home
    folder when there is none, or in the user's config folder."""
    if home.env_file is not None:
        return home.env_file.parent / "companion.key"
    if home.source in ("COMPANION_HOME", "project folder"):
        return home.data_dir.parent / "companion.key"
    return (
        _xdg(os.environ if environ is None else environ, "XDG_CONFIG_HOME", ".config")
        / "companion"
        / "companion.key"
    )


def store_path(home: Home, db_path: Path, set_anywhere: bool, from_environment: bool) -> Path:
    """The store to open: the default beside the home, or the configured one read from the right folder."""
    if not set_anywhere:
        return home.default_store
    if db_path.is_absolute() or from_environment or home.env_file is None:
        return db_path
    return home.env_file.parent / db_path


def _xdg(environ: Mapping[str, str], name: str, fallback: str) -> Path:
    value = environ.get(name, "")
    # The XDG spec: a relative value is invalid and is ignored.
    return Path(value) if value and Path(value).is_absolute() else Path.home() / fallback
