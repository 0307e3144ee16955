"""Who the bot is (ORCH-7): the operator's persona file, and the name the bot answers to.

The persona file (``COMPANION_PERSONA_FILE``; the default ``prompts/persona.md`` ships with the package
and an upgrade may overwrite it, so an operator keeps their own file elsewhere) is Markdown::

    name: Juniper            <- the first non-blank line; leave it empty ("name:") to use the Discord
                                bot's own name when it is known, else "Companion"
    ## Who you are          <- then free Markdown: who it is, how it talks, what it never does
    ...

The body is rendered as the operator's instruction at the top of the system prompt, apart from the
memory sections (which stay quoted data). A server's or group's own persona text (``memory.storage.persona``)
is added below it and never replaces it.

The name is the one the bot answers to (``turn_mode.names``: addressing, ``[SKIP]``, the spoken name in
voice) and the one it uses for itself (its history rows, the prompt's "You are ...").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import prompts

DEFAULT_NAME = "Companion"
DEFAULT_FILE = prompts.PROMPT_DIR / "persona.md"
MAX_NAME = 40
MAX_PERSONA_CHARS = 6_000  # about 1,500 tokens: the persona is sent with every reply
_NAME_LINE = re.compile(r"name:[ \t]*(?P<name>[^\n]*)", re.IGNORECASE)


class PersonaFileError(ValueError):
    """The persona file is missing or not in the documented format (the message says which and how to fix it)."""


@dataclass(frozen=True, slots=True)
class OperatorPersona:
    name: str  # "" when the file leaves the name to the platform
    text: str  # the Markdown body after the name line


def read_persona(path: Path | None) -> OperatorPersona:
    """The operator's persona from ``path`` (None: the shipped default)."""
    path = path or DEFAULT_FILE
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PersonaFileError(f"cannot read the persona file {path}: {exc}") from None
    return parse_persona(raw, str(path))


def parse_persona(raw: str, where: str = "the persona file") -> OperatorPersona:
    head, _, body = raw.strip().partition("\n")
    match = _NAME_LINE.fullmatch(head.strip())
    if match is None:
        raise PersonaFileError(
            f"{where} must start with a 'name:' line, e.g. 'name: Juniper' "
            "(or 'name:' alone to use the Discord bot's own name); then the persona in Markdown"
        )
    name, body = " ".join(match["name"].split()), body.strip()
    if len(name) > MAX_NAME:
        raise PersonaFileError(f"the name in {where} is longer than {MAX_NAME} characters")
    if not body:
        raise PersonaFileError(
            f"{where} says nothing after its name line: describe who the bot is, how it talks, what it never does"
        )
    if len(body) > MAX_PERSONA_CHARS:
        raise PersonaFileError(
            f"{where} is {len(body)} characters long; at most {MAX_PERSONA_CHARS} (it is sent with every reply)"
        )
    return OperatorPersona(name, body)


class Persona:
    """The operator's persona and the bot's name; the platform's own name is learned once the bot logs in."""

    def __init__(self, operator: OperatorPersona | None = None) -> None:
        self.operator = operator or read_persona(None)
        self.platform_name = ""

    @property
    def name(self) -> str:
        return self.operator.name or self.platform_name or DEFAULT_NAME

    def learn_platform_name(self, name: str) -> None:
        """The Discord bot's own user name (called by the adapter at login): the name when the file sets none."""
        self.platform_name = " ".join(name.split())[:MAX_NAME]
