"""What ``companion modelcheck`` measures (``bot.modelcheck`` runs the conversation): each turn as
the console showed it, and the figures of the run, the must-be-0 ones among them (``failures``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .counts import counted
from .model.reply_checks import echoes_prompt, plain_words, word_prefixes
from .modelcheck_scripts import ENGLISH, Script
from .spending.usage import Usage
from .types import APOLOGY, NO_ANSWER

TOOL_NAMES = (
    "memory_store|memory_search|memory_recall|memory_update|memory_delete|memory_reflect|memory_graph"
    "|conversation_search|channel_recall"
)
# A tool call written out as text: bare or fenced JSON with a name and arguments, Hermes/Qwen <tool_call>,
# Llama 3.1 <|python_tag|>, Mistral [TOOL_CALLS], or a tool's name called like a function.
TOOL_TEXT = re.compile(
    rf"<tool_call>|<\|python_tag\|>|\[TOOL_CALLS\]|\"(arguments|parameters)\"\s*:|\{{\s*\"name\"\s*:|```json|\b({TOOL_NAMES})\s*\("
    # or a reply that is a JSON object: a tool's result said back ('{"status": "set", "id": 1, ...')
    r"|^(?:\S+> )?\{\s*\"\w+\"\s*:",
    re.IGNORECASE | re.MULTILINE,
)


def reply_of(shown: str) -> str:
    """The bot's reply in what the console showed ("(bot is thinking…)" and "bot> " off)."""
    lines = [line for line in shown.splitlines() if not line.startswith("(") or "bot>" in line]
    return re.sub(r"^\s*\S+> ", "", "\n".join(lines)).strip()


def _same(a: str, b: str) -> bool:
    """The same sentence of three telling words or more ("Got it, I'll remember that." may come
    every time a fact is told)."""
    return len(word_prefixes(a)) >= 3 and plain_words(a) == plain_words(b)


@dataclass(slots=True)
class TurnRecord:
    said: str
    shown: str = ""
    seconds: float = 0.0
    tool_calls: list[str] = field(default_factory=list)  # "name" or "name!" (refused)
    usage: list[Usage] = field(default_factory=list)

    @property
    def cached_share(self) -> float | None:
        """Cached prompt tokens over prompt tokens, summed over the turn's requests that say."""
        known = [u for u in self.usage if u.cached is not None and u.prompt > 0]
        if not known:
            return None
        return sum(u.cached or 0 for u in known) / sum(u.prompt for u in known)


@dataclass(slots=True)
class Report:
    model: str
    base_url: str
    turns: list[TurnRecord] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)  # the person's live facts at the end
    self_facts: list[str] = field(default_factory=list)
    json_stored: int = 0
    words_left: list[str] = field(default_factory=list)  # "word in file"
    reminders: int = 0  # the person's reminders pending at the end
    script: Script = ENGLISH

    # -- figures ----------------------------------------------------------------------------
    @property
    def tool_calls(self) -> int:
        return sum(len(t.tool_calls) for t in self.turns)

    @property
    def tool_calls_honoured(self) -> int:
        return sum(1 for t in self.turns for c in t.tool_calls if not c.endswith("!"))

    @property
    def json_shown(self) -> int:
        return sum(1 for t in self.turns if TOOL_TEXT.search(t.shown))

    @property
    def gold_found(self) -> list[str]:
        return [g.label for g in self.script.gold if any(g.matches(f) for f in self.facts)]

    @property
    def precision(self) -> float | None:
        hits = [f for f in self.facts if any(g.matches(f) for g in self.script.gold)]
        return len(hits) / len(self.facts) if self.facts else None

    @property
    def recall(self) -> float:
        return len(self.gold_found) / len(self.script.gold)

    @property
    def in_language(self) -> list[str]:
        """The person's facts written in the conversation's language (LANG-3)."""
        return [f for f in self.facts if self.script.in_language(f)]

    @property
    def first_person(self) -> list[str]:
        """The person's facts in their own first person ("I have a cat"): a name belongs there
        (ORCH-15)."""
        return [f for f in self.facts if self.script.first_person(f)]

    @property
    def invented(self) -> list[str]:
        """The person's facts that hold nothing they said."""
        return [f for f in self.facts if self.script.invented(f)]

    @property
    def answers(self) -> list[tuple[str, bool]]:
        """Each recall question the script scores, and whether its reply was right."""
        scored = ((t.said, self.script.answered(t.said, t.shown)) for t in self.turns)
        return [(said, right) for said, right in scored if right is not None]

    @property
    def parroted(self) -> list[str]:
        """Replies that are only the prompts' words, the reply before said again to a new line, or
        any reply a third time in a row ("Saving", every turn of a real 0.5B): must be 0 (issue
        45)."""
        replies = [reply_of(t.shown) for t in self.turns]
        return [
            text
            for i, text in enumerate(replies)
            if text not in (NO_ANSWER, APOLOGY)  # the bot's own words when the model gave none
            and (
                echoes_prompt(text)
                or (i > 0 and _same(text, replies[i - 1]))
                or (
                    i > 1
                    and plain_words(text)
                    == plain_words(replies[i - 1])
                    == plain_words(replies[i - 2])
                )
            )
        ]

    @property
    def wrong_self_facts(self) -> list[str]:
        return [f for f in self.self_facts if self.script.persons(f)]

    @property
    def cached_from_turn_2(self) -> float | None:
        usage = [
            u for t in self.turns[1:] for u in t.usage if u.cached is not None and u.prompt > 0
        ]
        return sum(u.cached or 0 for u in usage) / sum(u.prompt for u in usage) if usage else None

    @property
    def failures(self) -> list[str]:
        """The must-be-0 figures that are not."""
        out = []
        if self.json_shown or self.json_stored:
            out.append(
                f"tool-call text shown in {counted(self.json_shown, 'turn')}, "
                f"stored in {counted(self.json_stored, 'message')}"
            )
        if self.wrong_self_facts:
            out.append(f"{len(self.wrong_self_facts)} of the person's facts filed as the bot's own")
        if self.words_left:
            out.append(f"forgotten words left: {', '.join(self.words_left)}")
        if self.parroted:
            out.append(f"{counted(len(self.parroted), 'reply', 'replies')} parroted or repeated")
        if self.reminders < self.script.reminders:
            out.append(f"{self.reminders} of {self.script.reminders} reminders asked for stored")
        return out

    def as_dict(self) -> dict[str, Any]:
        seconds = [t.seconds for t in self.turns]
        return {
            "model": self.model,
            "base_url": self.base_url,
            "language": self.script.language,
            "turns": len(self.turns),
            "tool_calls": self.tool_calls,
            "tool_calls_honoured": self.tool_calls_honoured,
            "json_shown": self.json_shown,
            "json_stored": self.json_stored,
            "facts_stored": len(self.facts),
            "gold_facts": len(self.script.gold),
            "gold_found": self.gold_found,
            "facts_in_language": len(self.in_language),
            "facts_not_in_language": [f for f in self.facts if f not in self.in_language],
            "facts_in_first_person": self.first_person,
            "precision": _round(self.precision),
            "recall": _round(self.recall),
            "wrong_self_facts": self.wrong_self_facts,
            "invented_facts": self.invented,
            "replies_parroted": self.parroted,
            "answers_right": sum(right for _, right in self.answers),
            "answers": [{"question": q, "right": right} for q, right in self.answers],
            "reminders_stored": self.reminders,
            "forgotten_words_left": self.words_left,
            "cached_share_from_turn_2": _round(self.cached_from_turn_2),
            "seconds_total": round(sum(seconds), 1),
            "seconds_per_turn": round(sum(seconds) / len(seconds), 1) if seconds else None,
            "failures": self.failures,
            "per_turn": [
                {
                    "said": t.said,
                    "seconds": round(t.seconds, 1),
                    "tool_calls": t.tool_calls,
                    "cached_share": _round(t.cached_share),
                    "prompt_tokens": [u.prompt for u in t.usage],
                    "json_shown": bool(TOOL_TEXT.search(t.shown)),
                    "shown": t.shown,
                }
                for t in self.turns
            ],
            "facts": self.facts,
            "self_facts": self.self_facts,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
