"""Slash commands that need no LLM: /start /remember /forget /memories /link /export (CHAN-1/2, ORCH-3, SEC-3),
/checkins and /timezone (ORCH-8), /persona (ORCH-7), /privacy /about (SEC-5, in ``bot.consent``) and /usage (ORCH-14,
in ``bot.spending.commands``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

from memory import (
    MAX_PLACE_PERSONA,
    AsyncRunner,
    Destination,
    MemoryEngine,
    MemoryStoreError,
    OwnMemory,
    People,
    RecallFilters,
    Timezones,
    write_export,
)
from memory.models import SELF_SUBJECT

from .consent import Consent
from .counts import counted
from .manners import manners_command
from .persona import Persona
from .reminders.commands import ReminderCommands
from .spending.budgets import Limits
from .spending.commands import UsageCommands
from .types import IncomingMessage

HELP = (
    "Hi! I'm a companion with a memory. Just talk to me.\n"
    "/remember <fact> — I'll remember it\n/forget <what> — I'll forget the closest memory (/forget everything: all about you)\n"
    "/memories — what I remember about you here\n/link — connect your accounts on other platforms (in a private chat)\n"
    "/share on|off — whether what you say in one server may come up in your other servers (off by default)\n"
    "/export — everything I store about you\n"
    "/checkins on|off — whether I may message you first, in our private chat, to follow up on your plans (off by default)\n"
    "/privacy — what I keep, and how to stop it; /about me — what I keep about you\n"
    "/persona show|set <text>|reset — this server's or group's own persona (its admins)\n"
    "/timezone <zone> — where you are in time, like /timezone Europe/Lisbon (alone: shows it)\n"
    "/remind <when> <what> — a reminder here, like /remind Friday at 9 call mum; /reminders lists and cancels them\n"
    "/manners addressed|chime-in|all — when I speak in this channel or group (its admins)\n"
    "/usage — what my model calls cost today: yours (/usage me), this server's (admins), everyone's (my owner)"
)
NOT_FOUND = "I couldn't find a memory like that, or a message of yours that says it."
CONFIRM_WINDOW_S = 120.0


@dataclass(frozen=True, slots=True)
class Forgot:
    """What one forget did: its answer to the person, the words it removed (memories and messages), and
    whether a reminder went too."""

    answer: str
    contents: tuple[str, ...]
    reminders: bool = False

    @property
    def anything(self) -> bool:
        return bool(self.contents) or self.reminders


class Commands:
    def __init__(
        self,
        engine: MemoryEngine,
        people: People,
        resolve: Callable[[IncomingMessage], Any],
        persona: Persona | None = None,
        zones: Timezones | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.engine, self.people, self.resolve = engine, people, resolve
        self.checkins = engine.checkins
        self.persona = persona or Persona()
        self.zones = zones or engine.zones
        self._confirming: dict[
            str, float
        ] = {}  # person id -> when their "/forget everything" question lapses
        self.own = OwnMemory(engine)
        self.consent = Consent(engine)
        self.reminding = ReminderCommands(engine, self.zones)  # ORCH-13
        self.usage = UsageCommands(engine, people, limits or Limits())  # ORCH-14

    def run(self, name: str, argument: str, message: IncomingMessage) -> str:
        handler = getattr(self, f"do_{name.lower().lstrip('/')}", None)
        if handler is None:
            return f"I don't know /{name}. " + HELP
        try:
            return handler(argument.strip(), self.resolve(message))
        except MemoryStoreError as exc:
            return f"Sorry, that didn't work: {exc}"

    def do_start(self, arg: str, turn) -> str:
        return HELP

    do_help = do_start

    def do_remember(self, arg: str, turn) -> str:
        if not arg:
            return "Tell me what to remember, like: /remember I'm vegetarian"
        if not self.consent.remembers(turn):
            return "Remembering is off (/privacy), so I didn't keep that. /privacy on turns it back on."
        m = turn.message
        subject = short_subject(arg, m.author_name)
        new = self.own.remember(turn.ctx, arg, subject, said_in=(m.platform, m.channel_id))
        return "Got it, I'll remember that." if new else "I already knew that."

    def do_forget(self, arg: str, turn) -> str:
        if not arg:
            return "Tell me what to forget, like: /forget my old job — or /forget everything"
        words = arg.lower().split()
        if words and words[0] in ("everything", "all"):
            return self._forget_everything(turn, confirmed=words[-1] == "confirm")
        return self.forget_words(arg, turn).answer

    def forget_words(self, arg: str, turn, *, skip: tuple[str, ...] = ()) -> Forgot:
        """The one forget of what ``arg`` names: the closest own memory, the person's messages that say it (all
        but ``skip``, stored ids), a reminder holding the words. Also run for a forget asked in words (ORCH-9)."""
        # ORCH-13: a reminder holding the words goes too
        reminders = self.reminding.forgotten(turn, arg)
        m = turn.message
        erased = self.own.forget_words(
            turn.ctx, turn.person_id, arg, asked_in=(m.platform, m.channel_id), skip=skip
        )
        done, said, gone = erased.memory, erased.said, erased.contents
        if done is None:
            answer = (
                "I had not kept that as a memory; "
                f"I deleted {counted(said, 'message')} of yours that said it."
                if said
                else ""
            )
            return Forgot(
                "\n".join(part for part in (answer, reminders) if part) or NOT_FOUND,
                gone,
                bool(reminders),
            )
        older = counted(len(done.memories) - 1, "older version")
        extra = [older] if len(done.memories) > 1 else []
        extra += [f"{counted(done.messages, 'message')} it came from"] if done.messages else []
        extra += [f"{counted(said, 'more message')} of yours that said it"] if said else []
        answer = f"Forgotten: {done.contents[0]}" + (
            f" (with {' and '.join(extra)})" if extra else ""
        )
        return Forgot(f"{answer}\n{reminders}" if reminders else answer, gone, bool(reminders))

    def _forget_everything(self, turn, *, confirmed: bool) -> str:
        """SEC-3: asked first; "/forget everything confirm" (or "yes" to the question) does it, with no undo copy."""
        if not confirmed:
            self._confirming[turn.person_id] = self.engine.clock.now() + CONFIRM_WINDOW_S
            return (
                "This deletes everything I store about you, on every linked account: memories, messages, summaries. "
                "It cannot be undone. Answer yes within two minutes (or send /forget everything confirm) to go ahead."
            )
        self._confirming.pop(turn.person_id, None)
        # SEC-5: a /privacy off outlives it
        counts = self.own.forget_all([turn.person_id])  # the console's /export files too
        memories = counted(counts["memories"], "memory")
        messages = counted(counts["messages"], "message")
        return f"Done. I forgot everything about you: {memories} and {messages}."

    def answer_to_question(self, message: IncomingMessage) -> str | None:
        """A "yes" to a pending "/forget everything" question carries it out; anything else cancels the question."""
        if not self._confirming:
            return None
        turn = self.resolve(message)
        lapses = self._confirming.pop(turn.person_id, None)
        if lapses is None:
            return None
        if lapses >= self.engine.clock.now() and message.text.strip().lower().rstrip(".!") in (
            "yes",
            "y",
            "yes please",
        ):
            return self._forget_everything(turn, confirmed=True)
        return (
            None
            if lapses < self.engine.clock.now()
            else "OK, I won't forget everything. Nothing was deleted."
        )

    def do_memories(self, arg: str, turn) -> str:
        found = self.engine.memory_rows.listing(
            turn.ctx.memory_partitions(), _own(turn), order="recent", limit=20
        )
        # what the bot said about itself in this DM is not about you
        found = [m for m in found if m.subject != SELF_SUBJECT]
        if not found:
            return "I don't remember anything about you here yet."
        return "What I remember about you here:\n" + "\n".join(f"• {m.content}" for m in found)

    def do_link(self, arg: str, turn) -> str:
        if not turn.ctx.is_dm:
            # A code read in public is a key anyone could use: codes live only in private chats.
            return "Send /link in a private chat with me: a link code is a key to your memories, so it never goes in a group."
        if not arg:
            code = self.people.issue_code(turn.person_id)
            return f"Your link code is {code} (valid 10 minutes, once). Send /link {code} to me in a private chat from your other account."
        person = self.people.redeem(arg, turn.message.platform, turn.message.author_id)
        return f"Linked. I know you as one person now ({self.people.name(person)})."

    def do_share(self, arg: str, turn) -> str:
        """SEC-1 opt-in: what someone says in one server may come up in their other servers only if they say so."""
        choice = arg.lower()
        if choice not in ("on", "off"):
            state = "on" if self.people.shares(turn.person_id) else "off"
            return (
                f"Sharing across servers is {state}. With /share on, what you tell me in one server may come up in your "
                "other servers; with /share off (the default) it stays in the server where you said it (and in our DMs)."
            )
        self.people.set_sharing(turn.person_id, choice == "on")
        return (
            "OK: what you tell me in one server may now come up in your other servers."
            if choice == "on"
            else "OK: what you tell me in a server stays in that server (and in our DMs)."
        )

    def do_checkins(self, arg: str, turn) -> str:
        """ORCH-8 opt-in, only in the person's DM: the DM it is turned on in is where check-ins go."""
        if not turn.ctx.is_dm:
            return "Check-ins happen only in our private chat: send /checkins there."
        choice = arg.lower()
        if choice == "on":
            m = turn.message
            self.checkins.opt_in(turn.person_id, Destination(m.platform, m.channel_id, m.author_id))
            return (
                "OK: now and then (at most a couple of times a week, never at night) I'll message you here to ask how "
                "your plans, todos and events went. /checkins off stops it."
            )
        if choice == "off":
            dropped = self.checkins.opt_out(turn.person_id)
            return "OK: I won't message you first." + (
                f" ({counted(dropped, 'planned check-in')} dropped.)" if dropped else ""
            )
        return self._checkins_state(turn.person_id)

    def _checkins_state(self, person_id: str) -> str:
        if self.checkins.destination(person_id) is None:
            return "Check-ins are off. With /checkins on, I may message you here now and then to follow up on your plans."
        pending = self.checkins.listing(person_id, ("pending",))
        lines = [f"• {c.kind} “{c.subject}”, from {_day(c.due_at)}" for c in pending[:10]]
        return "Check-ins are on (/checkins off stops them). " + (
            "Planned:\n" + "\n".join(lines)
            if lines
            else "Nothing is planned yet: tell me about a plan with a date."
        )

    def do_remind(self, arg: str, turn) -> str:
        return self.reminding.do_remind(arg, turn, self.consent.remembers(turn))

    def do_reminders(self, arg: str, turn) -> str:
        return self.reminding.do_reminders(arg, turn)

    def do_manners(self, arg: str, turn) -> str:
        return manners_command(self.engine, arg, turn)  # ORCH-10

    def do_usage(self, arg: str, turn) -> str:
        return self.usage.do_usage(arg, turn)

    def do_privacy(self, arg: str, turn) -> str:
        return self.consent.do_privacy(arg, turn)

    def do_about(self, arg: str, turn) -> str:
        return self.consent.do_about(arg, turn)

    def do_timezone(self, arg: str, turn) -> str:
        """ORCH-8: where the person is in time (their "yesterday", daily reflection's day); an unknown zone is
        refused by ``Timezones.set`` (``InvalidInput``, answered as "Sorry, that didn't work: unknown time zone ...")."""
        default = self.zones.default.key
        if not arg:
            own = self.zones.own(turn.person_id)
            if own is None:
                return (
                    f"You haven't set a time zone, so I use {default}. "
                    "Set yours with /timezone Europe/Lisbon (any tz name)."
                )
            now = _clock(self.engine.clock.now(), own)
            return f"Your time zone is {own.key} (it's {now} there). /timezone reset goes back to {default}."
        if arg.lower() in ("reset", "default", "off"):
            self.zones.clear(turn.person_id)
            return f"OK, I'll use the default time zone, {default}."
        zone = self.zones.set(turn.person_id, arg)
        return f"OK, I'll use {zone.key} for you: it's {_clock(self.engine.clock.now(), zone)} there now."

    def do_export(self, arg: str, turn) -> str:
        if not turn.ctx.is_dm:
            return "Ask me for /export in a DM: it contains private things."
        data = self.own.export([turn.person_id])
        text = json.dumps(data, ensure_ascii=False, indent=1, default=str)
        if turn.message.platform == "console" and self.engine.path != ":memory:":
            # The console's person is the operator at their own machine: the whole file, not a truncated dump.
            where = write_export(
                Path(self.engine.path).parent, turn.person_id, text, self.engine.clock.now()
            )
            kept = counted(len(data["memories"]), "memory")
            return f"Everything I store about you ({kept}) is in {where} (readable only by you)."
        return text  # whole: the chat adapters send it as a .json file (``bot.adapters.common.attachment``)

    def do_persona(self, arg: str, turn) -> str:
        """ORCH-7: a server's or group's own persona, added to the operator's; its admins (or the owner) change it."""
        action, _, text = arg.partition(" ")
        action = action.lower()
        if turn.ctx.is_dm:
            return f"I'm {self.persona.name}. A persona of its own belongs to a server or group: its admins set it there with /persona set."
        if action in ("", "show"):
            return self._persona_shown(turn)
        if action not in ("set", "reset"):
            return f"Use /persona show, /persona set <text> (at most {MAX_PLACE_PERSONA} characters) or /persona reset."
        if not turn.ctx.admin:
            return "Only this place's admins (Manage Server on Discord, group admins on Telegram) can change its persona."
        places, who = self.engine.personas, f"{turn.message.platform}:{turn.message.author_id}"
        if action == "reset":
            gone = places.reset(turn.ctx.guild_id, who=who, person_id=turn.person_id)
            return (
                "Done: here I'm back to my usual self."
                if gone
                else "This place had no persona of its own."
            )
        places.set(turn.ctx.guild_id, text, who=who, person_id=turn.person_id)
        return "Done: that is my persona here from now on (on top of my usual one)."

    def _persona_shown(self, turn) -> str:
        place = self.engine.personas.get(turn.ctx.guild_id)
        if place is None:
            return f"I'm {self.persona.name}. This place has no persona of its own; its admins can add one with /persona set <text>."
        return f"Here I'm {self.persona.name}, with this persona from the admins:\n{place.text}"


def _day(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d")


def _clock(now: float, zone: tzinfo) -> str:
    return datetime.fromtimestamp(now, zone).strftime("%H:%M on %A")


def _own(turn) -> RecallFilters:
    """Memories about the person asking (their own user scope), within what this chat may see."""
    return RecallFilters(scope_ids=(turn.person_id,))


_VERB = re.compile(
    r"\b(?:is|are|was|were|am|has|have|had|likes?|loves?|hates?|lives?|works?|called|named|'s|'re|'m)\b",
    re.IGNORECASE,
)
_OWNERS = frozenset({"my", "our", "the", "a", "an", "your"})
_SELF = frozenset({"i", "i'm", "im", "i've", "i'd", "me", "myself"})


def short_subject(fact: str, speaker: str) -> str:
    """What a /remembered fact is about, in a word or three: "my cat is called Biscuit" -> "cat" (the whole
    sentence as its subject read badly in /memories and the dashboard). A fact about oneself ("I'm vegetarian")
    is about the speaker."""
    head = _VERB.split(fact.replace("\u2019", "'"), maxsplit=1)[0]
    words = [w.strip('.,!?;:"') for w in head.split()]
    words = [w for w in words if w and w.lower() not in _OWNERS]
    if not words or words[0].lower() in _SELF:
        return (speaker or "me")[:60]
    return " ".join(words[:3])[:60]


class CommandDesk:
    """The commands for the event loop (the orchestrator, a turn's asks in words): each call is one
    hop to the memory thread, where the command runs whole before anything else reads the store."""

    def __init__(self, commands: Commands, runner: AsyncRunner) -> None:
        self.commands, self.runner = commands, runner

    async def run(self, name: str, argument: str, message: IncomingMessage) -> str:
        return await self.runner.run(self.commands.run, name, argument, message)

    async def answer_to_question(self, message: IncomingMessage) -> str | None:
        """A "yes" (or "no") to "/forget everything?"; None for any other message."""
        return await self.runner.run(self.commands.answer_to_question, message)

    async def forget_words(self, what: str, turn: Any, *, skip: tuple[str, ...] = ()) -> Forgot:
        return await self.runner.run(self.commands.forget_words, what, turn, skip=skip)

    async def said_it(self, turn: Any, words: str, *, skip: tuple[str, ...] = ()) -> bool:
        """Whether one of the person's own messages (all but ``skip``) holds every word of ``words``."""
        own = self.commands.own
        return await self.runner.run(own.said_it, turn.ctx, turn.person_id, words, skip=skip)
