"""How to add an optional part (an extra of pyproject.toml) to the environment that runs the bot.

Advice that said ``pip install -e ".[piper]"`` used whatever ``pip`` came first on the PATH (often
not the project's ``.venv``) and worked only from inside the checkout (issue 45). The command is
computed where it is given: the pip of the environment running this code, by absolute path, and
the checkout's folder.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


def venv_pip() -> str:
    """The pip of the environment running this code (``<project>/.venv/bin/pip``, as installed)."""
    pip = Path(sys.prefix) / "bin" / "pip"
    return shlex.quote(str(pip)) if pip.is_file() else f"{shlex.quote(sys.executable)} -m pip"


def pip_install(extra: str = "") -> str:
    """The command installing the checkout (with ``extra``) into that environment, from anywhere."""
    wanted = f"[{extra}]" if extra else ""
    if (CHECKOUT / "pyproject.toml").is_file():
        return f"{venv_pip()} install -e {shlex.quote(f'{CHECKOUT}{wanted}')}"
    return f"{venv_pip()} install {shlex.quote(f'companion{wanted}')}"  # installed from a wheel
