"""Prompt files and a strict renderer.

Prompts are Markdown files beside this module, rendered with ``string.Template``: a missing variable
is an error, never a silent blank. Variables such as the current time are passed at render time.
"""

from __future__ import annotations

import string
from functools import cache
from pathlib import Path

PROMPT_DIR = Path(__file__).parent


class PromptError(Exception):
    """A prompt file is missing or a variable it uses was not given."""


@cache
def load(name: str) -> string.Template:
    path = PROMPT_DIR / f"{name}.md"
    if not path.is_file():
        raise PromptError(f"no prompt named {name!r} in {PROMPT_DIR}")
    return string.Template(path.read_text(encoding="utf-8"))


def render(name: str, **variables: object) -> str:
    try:
        return load(name).substitute({k: str(v) for k, v in variables.items()})
    except KeyError as exc:
        raise PromptError(f"prompt {name!r} needs variable {exc.args[0]!r}") from None
    except ValueError as exc:
        raise PromptError(f"prompt {name!r} is malformed: {exc}") from None
