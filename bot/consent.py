"""/privacy and /about (SEC-5): stop or resume remembering a person or a whole server, and see and veto
what is kept about oneself, what others told the bot included. The rules live in ``memory.storage.privacy``."""

from __future__ import annotations

from memory import Kept, MemoryEngine, OwnMemory

from .counts import counted

SHOWN = 30  # lines of /about me; a longer list says how many more there are
PRIVACY_HELP = (
    "What I keep: what you say to me and my replies (history), facts I learn from them, and short summaries of "
    "our chats, in one database on my operator's machine. What you say in a server stays in that server and our DMs.\n"
    "/privacy off — stop remembering you: from then on nothing you say is stored (no history, no facts, no summaries, "
    "not my replies to you), anywhere, on every linked account. I still answer, from your message alone.\n"
    "/privacy on — remember you again.\n"
    "/about me — what I keep about you, what others told me about you included; /about veto <id> forgets one.\n"
    "/forget everything — delete what is already kept (/privacy off does not delete the past).\n"
    "Admins, in a server or group: /privacy server off|on does the same for everything said there."
)
OFF_ANSWER = (
    "OK: from now on I won't keep anything you say, anywhere, on any of your linked accounts: "
    "no history, no facts, no summaries, and not my replies to you. I'll still answer each "
    "message on its own. What I kept before stays until you delete it: see it with /about me, "
    "delete it with /forget everything. /privacy on undoes this."
)
PRIVACY_USAGE = (
    "I understand /privacy, /privacy off and /privacy on (for yourself), and /privacy server off|on (admins, in the "
    "server). Nobody can switch it for someone else. Nothing was changed."
)


class Consent:
    def __init__(self, engine: MemoryEngine) -> None:
        self.privacy, self.own, self.reminders = engine.privacy, OwnMemory(engine), engine.reminders

    def remembers(self, turn) -> bool:
        return self.privacy.remembers(turn.ctx)

    # -- /privacy ------------------------------------------------------------------------------------
    def do_privacy(self, arg: str, turn) -> str:
        words = arg.lower().split()
        if not words:
            return self._state(turn) + "\n" + PRIVACY_HELP
        if words in (["off"], ["on"]):
            return self._person(turn, words[0] == "on")
        if len(words) == 2 and words[0] in ("server", "group") and words[1] in ("off", "on"):
            return self._place(turn, words[1] == "on")
        # "/privacy off @bob" and the like: a choice is only ever the speaker's own, so anything else changes nothing.
        return PRIVACY_USAGE

    def _state(self, turn) -> str:
        mine = "on" if self.privacy.people.remembered(turn.person_id) else "off"
        line = f"Remembering you is {mine}."
        if turn.ctx.guild_id:
            line += f" Remembering in this server is {'off' if self.privacy.place_off(turn.ctx.guild_id) else 'on'}."
        return line

    def _person(self, turn, on: bool) -> str:
        self.privacy.set_person(turn.person_id, on)
        if on:
            return "OK: I'll remember what you say again, from now on (nothing you said while it was off was kept)."
        # "forget me" from now on: a pending reminder keeps the person's words and posts them later
        cancelled = self.reminders.cancel_all(turn.person_id)
        plural = "s" if cancelled != 1 else ""
        gone = f" {cancelled} reminder{plural} cancelled: a reminder keeps your words."
        return OFF_ANSWER + (gone if cancelled else "")

    def _place(self, turn, on: bool) -> str:
        if turn.ctx.guild_id is None:
            return "Send /privacy server off|on in the server or group itself (admins only)."
        if not turn.ctx.admin:
            return (
                "Only this server's admins (Manage Server on Discord, group admins on Telegram) or my owner can switch "
                "remembering for the whole server. Nothing was changed; /privacy off works for yourself."
            )
        self.privacy.set_place(turn.ctx.guild_id, on)
        if on:
            return "OK: I'll remember what is said here again, from now on."
        return (
            "OK: from now on I won't keep anything said here, by anyone, nor my replies here. I'll still answer. "
            "What I kept before stays; people can delete theirs with /forget everything."
        )

    # -- /about --------------------------------------------------------------------------------------
    def do_about(self, arg: str, turn) -> str:
        if not turn.ctx.is_dm:
            return "Ask me /about me in a private chat: the list is for you alone."
        words = arg.split()
        if len(words) == 2 and words[0].lower() == "veto":
            return self._veto(turn, words[1])
        if arg.strip().lower() in ("", "me"):
            # the console owner's words are filed in owner memory (``write_scope``): theirs to see here too
            return self._list(self.privacy.kept_about(turn.person_id, owner=turn.ctx.owner_private))
        return "Try /about me (what I keep about you) or /about veto <id> (forget one of them)."

    def _list(self, kept: list[Kept]) -> str:
        if not kept:
            return (
                "I keep nothing about you: no facts of yours, and nothing others told me about you."
            )
        lines = [_line(k) for k in kept[:SHOWN]]
        more = (
            [f"… and {len(kept) - SHOWN} more (delete all with /forget everything)."]
            if len(kept) > SHOWN
            else []
        )
        return "\n".join(["What I keep about you (/about veto <id> forgets one):", *lines, *more])

    def _veto(self, turn, short_id: str) -> str:
        asked_in = (turn.message.platform, turn.message.channel_id)
        done = self.own.veto(
            turn.person_id, short_id, asked_in=asked_in, owner=turn.ctx.owner_private
        )
        if done is None:
            # Another person's memory, lore, an unknown or ambiguous id: refused alike, so nothing is learned.
            return "That id is not in your /about me list, so nothing was changed."
        came = counted(done.messages, "message")
        extra = f" (with {came} it came from)" if done.messages else ""
        return f"Forgotten: {done.contents[0]}{extra}"


def _line(k: Kept) -> str:
    text = k.memory.content if len(k.memory.content) <= 200 else k.memory.content[:199] + "…"
    return f"• [{k.short_id}] {text}" + (
        " — told to me by someone in a server you are in" if k.told else ""
    )
