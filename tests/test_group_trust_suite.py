"""The group-chat trust suite, a gate in the default test run (issue 20; SEC-1, SEC-3, SEC-6).

A scripted scenario over two Discord servers, a Telegram group and DMs: five people (one of them the
owner, one with linked Discord and Telegram accounts), a group admin and a member, /share on and
off, targeted forgets and /forget everything, a backup and a restore, a restart; then /privacy off
by a person (said in a DM, and in the group) and /privacy server off by the owner, what is said
meanwhile, /privacy on again, an /about me and /about veto of a fact someone else told about a
person, reactions by others, and a restart after those; a forget's effect on the person's later
unrelated facts; last, the group and a server remove the bot, the server adds it back, and the grace
period passes (SEC-7: 0 bytes of the group). Each person has fixed facts, each with one distinctive
word, said in a fixed place. Messages go through the real adapters (discord.py and python-telegram-
bot against the local fake servers) and, after the restart, straight to the orchestrator as
platform-tagged messages; the model is a scripted local server that extracts exactly the facts it is
shown, by speaker tag.

After every step the suite checks:
  * every prompt the model received, and everything the bot posted, against the facts the place it was for may
    not see (the oracle below, written from SEC-1 independently of ``memory.scopes``): a leak;
  * every stored memory against the person and place its fact came from: a misattribution;
  * after every forget, every file under the store folder for the forgotten words: bytes left; and after words
    said while remembering was off, the same for those words (which no later prompt or post may show either);
  * every /about veto a member tries, renamed "Dave", "Rules" or "House", of a fact not about them (issue 31):
    a veto of others' facts.
It prints a table (``pytest -s``, and in the report on failure). The scenario is a list of ``Step``s: append
more (e.g. /privacy off) with the same helpers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.adapters.discord_adapter import DiscordAdapter
from bot.adapters.telegram_adapter import TelegramAdapter
from bot.config import load_settings
from bot.images.intake import solid_png
from bot.turn.leak_guard import TOOL_REFUSED, WITHHELD
from bot.types import IncomingMessage
from memory.clock import DAY, FakeClock
from memory.models import FactKind, MemoryType, NewMemory, Scope, Visibility
from memory.reactions import DOWN_STEP
from memory.storage.multilingual import MultilingualE5
from memory.upkeep.leftover_files import bytes_in
from tests.fakes import FakeDiscord, FakeFile, FakeOpenAI, FakeTelegram, ToolCall
from tests.fakes.telegram_server import BOT_USER
from tests.paraphrase_support import Rates, measure, recorded_readings
from tests.pipeline_support import build_runtime

pytestmark = pytest.mark.asyncio

# -- the cast and the places ------------------------------------------------------------------------------
# olive is the bot's owner, mallory a member
DISCORD = {
    "alice": 7001,
    "bob": 7002,
    "olive": 7009,
    "mallory": 7010,
}
TELEGRAM = {"alice": 55, "carol": 66, "dave": 77}  # carol is the group's admin, dave a member
DC_DM = {"alice": 9101, "bob": 9102, "olive": 9109, "mallory": 9110}
HARBOUR, HARBOUR_CH, ORCHARD, ORCHARD_CH, GROUP = 8000, 8001, 9000, 9001, -1001
CHANNEL_OF = {f"dc:{HARBOUR}": HARBOUR_CH, f"dc:{ORCHARD}": ORCHARD_CH}
GUILD_KEY = {
    f"dc:{HARBOUR}": f"discord:{HARBOUR}",
    f"dc:{ORCHARD}": f"discord:{ORCHARD}",
    f"tg:{GROUP}": f"telegram:{GROUP}",
}


@dataclass(frozen=True)
class Fact:
    """One person's fact, said in one place; ``word`` is distinctive and appears nowhere else in the scenario."""

    word: str
    author: str  # a person, or "lore" for a server's lore (written by the operator)
    where: str  # "dm" (the author's DMs), or a server / group: "dc:8000", "tg:-1001"
    said: str  # what the person says
    content: str  # the memory the model extracts
    about: str = (
        ""  # the person the fact is about, when not its author (the memory's subject names them)
    )
    learned: bool = (
        True  # False: the model extracts nothing from it (a DM message that stays only a message)
    )


FACTS = {
    f.word: f
    for f in (
        Fact(
            "quintrell",
            "alice",
            "dm",
            "I keep a tortoise called Quintrell",
            "Alice keeps a tortoise called Quintrell",
        ),
        Fact(
            "wexcombe",
            "alice",
            "dm",
            "my allotment is behind the Wexcombe depot",
            "my allotment is behind the Wexcombe depot",
        ),
        # ORCH-11: a photo's caption (the model's words for what it shows), said in her DM with the photo
        Fact(
            "glimmerholt",
            "alice",
            "dm",
            "the Glimmerholt windmill at dusk",
            "Alice sent a photo of the Glimmerholt windmill",
        ),
        Fact(
            "vellicora",
            "alice",
            f"dc:{HARBOUR}",
            "I sing in the Vellicora choir",
            "Alice sings in the Vellicora choir",
        ),
        Fact(
            "brontewick",
            "alice",
            f"dc:{ORCHARD}",
            "I collect Brontewick stamps",
            "Alice collects Brontewick stamps",
        ),
        Fact("x4471q", "bob", "dm", "my passport number is X4471Q", "my passport number is X4471Q"),
        Fact(
            "tamberlyn",
            "bob",
            f"dc:{HARBOUR}",
            "I brew Tamberlyn ale at home",
            "Bob brews Tamberlyn ale at home",
        ),
        Fact(
            "oxwallow",
            "carol",
            f"tg:{GROUP}",
            "I run the Oxwallow book club",
            "Carol runs the Oxwallow book club",
        ),
        Fact(
            "reykjavik",
            "carol",
            "dm",
            "I'm secretly moving to Reykjavik",
            "Carol is secretly moving to Reykjavik",
        ),
        Fact(
            "kettleborn",
            "dave",
            f"tg:{GROUP}",
            "I repair Kettleborn clocks",
            "Dave repairs Kettleborn clocks",
        ),
        Fact(
            "saltmarrow",
            "olive",
            "dm",
            "my boat is called Saltmarrow",
            "my boat is called Saltmarrow",
        ),
        Fact("pellingham", "lore", f"dc:{HARBOUR}", "", "Harbour meets at the Pellingham library"),
        Fact("fenwhistle", "lore", f"tg:{GROUP}", "", "The group's mascot is Fenwhistle"),
        # said while remembering was off (the person's, or the server's): never stored, not one byte
        Fact(
            "mirthwaite",
            "bob",
            "dm",
            "my sister lives in Mirthwaite",
            "Bob's sister lives in Mirthwaite",
        ),
        Fact(
            "quorrelby",
            "bob",
            f"dc:{HARBOUR}",
            "I race pigeons at Quorrelby",
            "Bob races pigeons at Quorrelby",
        ),
        Fact(
            "brackenhythe",
            "dave",
            f"tg:{GROUP}",
            "I fish at Brackenhythe weir",
            "Dave fishes at Brackenhythe weir",
        ),
        Fact(
            "drummoch",
            "alice",
            f"dc:{HARBOUR}",
            "I paint the Drummoch lighthouse",
            "Alice paints the Drummoch lighthouse",
        ),
        # after /privacy on again: learned; and a fact bob tells about alice, which she vetoes
        Fact(
            "skelbeck",
            "bob",
            f"dc:{HARBOUR}",
            "I row on the Skelbeck river",
            "Bob rows on the Skelbeck river",
        ),
        Fact(
            "gallowmere",
            "bob",
            f"dc:{HARBOUR}",
            "Alice swims at Gallowmere pond",
            "Alice swims at Gallowmere pond",
            about="Alice",
        ),
        # issue 31: what a member renamed "Dave", "Rules" or "House" must neither see nor veto (SEC-5)
        Fact(
            "vatnajokull",
            "bob",
            f"dc:{HARBOUR}",
            "Dave is moving to Vatnajokull",
            "Dave is moving to Vatnajokull",
            about="Dave",
        ),
        Fact(
            "frostmoot",
            "olive",
            f"dc:{HARBOUR}",
            "server rules: no spoilers at Frostmoot",
            "Server rules: no spoilers at Frostmoot",
            about="Rules",
        ),
        Fact(
            "hearthold", "lore", f"dc:{HARBOUR}", "", "House rule: the Hearthold room stays quiet"
        ),
        # issue 31: said in a DM and never extracted (only a message); bob's dated event, followed up by a check-in;
        # what a check-in and a time-zone offer would have kept after /privacy off
        Fact("wombatson", "alice", "dm", "my therapist is Dr Wombatson", "", learned=False),
        # issue 44: bob forgets a fact naming his friend Grzegorz (not one of bob's names); his later
        # facts, about Grzegorz too, are learned; the forgotten one, learned back from a line that
        # does not say it ("wore bib"), is not
        Fact(
            "4417",
            "bob",
            "dm",
            "my mate Grzegorz's race bib number is 4417",
            "Grzegorz's race bib number is 4417",
        ),
        Fact(
            "biscuit",
            "bob",
            "dm",
            "Grzegorz has a grey cat called Biscuit",
            "Grzegorz has a grey cat called Biscuit",
        ),
        Fact(
            "teacher",
            "bob",
            "dm",
            "Grzegorz's father is a retired teacher",
            "Grzegorz's father is a retired teacher",
        ),
        Fact(
            "yarrowdale", "bob", "dm", "I grow Yarrowdale tomatoes", "Bob grows Yarrowdale tomatoes"
        ),
        Fact(
            "wore bib",
            "bob",
            "dm",
            "Grzegorz says the race was such fun",
            "Grzegorz wore bib 4417 in the race",
        ),
        Fact("harrowgate", "bob", "dm", "", "Bob sits his Harrowgate exam tomorrow"),
        Fact("quibblestone", "bob", "dm", "", ""),
        Fact("lisbon", "bob", "dm", "by the way, I live in Lisbon now", ""),
    )
}
# The six ways a model can hide a word from an index (issue 31): each disguise counts as the word wherever it shows.
DISGUISES = {
    "x4471q": ["x four four seven one q"],
    "saltmarrow": [
        "saltmarr\u043ew",
        "s4ltm4rr0w",
        "salt-mar-row",
        "s a l t m a r r o w",
        "worramtlas",
    ],
}
CHECKIN = "How did the Harrowgate exam go? Quibblestone!"  # what the model writes when asked for a check-in
# A question touching every fact's topic (never its word), so a recall that crossed a partition would show it.
NOSY = (
    "what do you know about tortoises, allotments, photos, windmills, choirs, "
    "stamps, passports, ale, book clubs, moving, clocks, boats, meetings, mascots?"
)


@dataclass
class Oracle:
    """Who may see what (SEC-1), kept by the scenario: what was told, who shares, what was forgotten."""

    told: set[str] = field(default_factory=set)
    sharing: set[str] = field(default_factory=set)
    forgotten: set[str] = field(default_factory=set)

    def may_see(self, fact: Fact, place: str) -> bool:
        if fact.word in self.forgotten:
            return False
        if fact.author == "lore":
            return place == fact.where
        if fact.where == "dm":
            return place == f"dm:{fact.author}"
        if fact.about and place == f"dm:{fact.about.lower()}":
            return True  # /about me shows a person what others told about them in a server they are in (SEC-5)
        return place in (fact.where, f"dm:{fact.author}") or (
            fact.author in self.sharing and not place.startswith("dm:")
        )

    def hidden_from(self, place: str) -> list[Fact]:
        """The facts told so far that ``place`` may not see (a forgotten fact: nowhere)."""
        return [
            f
            for w, f in FACTS.items()
            if (w in self.told or w in self.forgotten) and not self.may_see(f, place)
        ]

    def copy(self) -> Oracle:
        return Oracle(set(self.told), set(self.sharing), set(self.forgotten))


@dataclass
class Tally:
    prompts: int = 0
    posts: int = 0
    facts: int = 0
    forgets: int = 0
    unkept: int = 0
    probes: int = (
        0  # issue 31: replies and tool calls a model made to leak (in DMs, hidden, through a tool)
    )
    leaks: list[str] = field(default_factory=list)
    misattributions: list[str] = field(default_factory=list)
    bytes_left: list[str] = field(default_factory=list)
    # a veto of a fact not about the person who asked
    vetoes: list[str] = field(default_factory=list)
    # what `companion audit forget` found after a forget (SEC-7)
    audit_left: list[str] = field(default_factory=list)

    def table(self, steps: int, rewordings: Rates) -> str:
        held, total = sum(rewordings.held.values()), sum(rewordings.total.values())
        rows: list[tuple[str, int | str]] = [
            ("steps run", steps),
            ("prompts checked", self.prompts),
            ("posts checked", self.posts),
            ("facts checked", self.facts),
            ("forgets checked", self.forgets),
            ("opt-outs checked", self.unkept),
            ("leak probes", self.probes),
            ("leaks", len(self.leaks)),
            ("misattributions", len(self.misattributions)),
            ("bytes left", len(self.bytes_left)),
            ("vetoes of others' facts", len(self.vetoes)),
            ("audit: left", len(self.audit_left)),
            ("rewordings held", f"{held}/{total}"),
            ("unrelated facts blocked", f"{len(rewordings.blocked)}/{rewordings.unrelated}"),
        ]
        return "\n".join(
            ["group-chat trust suite", *(f"  {name:<24} {value:>5}" for name, value in rows)]
        )


# -- the world: the fakes, the bot on both platforms, the scripted model -----------------------------------
class World:
    def __init__(self, root: Path, llm: FakeOpenAI, tg: FakeTelegram, dc: FakeDiscord) -> None:
        self.root, self.llm, self.tg, self.dc = root, llm, tg, dc
        self.store = root / "store" / "bot.db"
        self.clock = FakeClock()
        self.oracle, self.tally = Oracle(), Tally()
        self.place = "nowhere"  # where the model's requests of the current action are made for
        self.step = ""
        self.replies: list[Any] = []  # what the model answers the next reply requests (then "OK!")
        self.tool_results: list[str] = []
        self.after_tool: list[
            str
        ] = []  # what the model answers once a tool call's result is back (then "done")
        self.captions: list[
            str
        ] = []  # what the model says an image shows, when asked for a caption (ORCH-11)
        self.direct: list[
            str
        ] = []  # replies and command answers handed back by the orchestrator itself
        self.seen = {"requests": 0, "dc": 0, "tg": 0, "interactions": 0, "direct": 0}
        self.runtime: Any = None
        self.adapters: list[Any] = []
        self.backup: tuple[Path, Oracle] | None = None
        self.ever_said: dict[
            str, set[str]
        ] = {}  # person -> every word they told, lost to a restore or not
        llm.default = self.model

    # -- lifecycle ---------------------------------------------------------------------------------------
    async def boot(self) -> None:
        # reflection right after a chat goes quiet: each session is reflected on in the tick of its own place
        owner = [f"discord:{DISCORD['olive']}"]
        self.runtime = build_runtime(
            self.store, self.llm, self.clock, owner_ids=owner, reflection_silence_s=0, vision="on"
        )
        await self.runtime.start(background_loop=False)
        telegram = TelegramAdapter(
            self.runtime.orchestrator,
            "123:abc",
            base_url=f"{self.tg.url}/bot",
            base_file_url=f"{self.tg.url}/file/bot",
            places=self.runtime.places,
        )
        discord_ = DiscordAdapter(
            self.runtime.orchestrator,
            "discord-token",
            guild_ready_timeout=0.05,
            ready_timeout=30,
            places=self.runtime.places,
        )
        await telegram.start()
        await discord_.start()
        self.adapters = [discord_, telegram]

    async def shut(self) -> None:
        for adapter in self.adapters:
            await adapter.stop()
        self.adapters = []
        await self.runtime.stop()

    # -- the scripted model --------------------------------------------------------------------------------
    def model(self, body: dict[str, Any]) -> Any:
        last = body["messages"][-1]
        if last["role"] == "tool":
            self.tool_results.append(last["content"])
            return self.after_tool.pop(0) if self.after_tool else "done"
        if "tools" in body:
            return self.replies.pop(0) if self.replies else "OK!"
        if isinstance(last.get("content"), list):  # an image to caption
            return self.captions.pop(0)
        prompt = str(last.get("content") or "")
        if "asked you to check in on them" in prompt:
            return CHECKIN
        if "session has ended" in json.dumps(body):
            return json.dumps({"facts": [], "summary": "a friendly chat"})
        return json.dumps(self._facts_in(prompt)) if "[P1]" in prompt else "a friendly chat"

    def _facts_in(self, transcript: str) -> list[dict[str, Any]]:
        """Extraction as a faithful model does it: each fact said in the transcript, under its speaker's tag."""
        found = []
        for line, tag, text in re.findall(
            r"^#(\d+) \[(P\d+)\] [^\n]*?: (\".*\")$", transcript, re.MULTILINE
        ):
            said = json.loads(text)
            for fact in FACTS.values():
                if fact.said and fact.said in said and fact.learned:
                    found.append(
                        {
                            "speaker": tag,
                            "lines": [int(line)],
                            "subject": fact.about or fact.word,
                            "content": fact.content,
                            "entities": [{"name": fact.about, "type": "person"}][
                                : bool(fact.about)
                            ],
                            "type": "semantic",
                            "kind": "profile",
                            "importance": 7,
                        }
                    )
        return found

    # -- saying things ---------------------------------------------------------------------------------------
    async def discord(
        self,
        who: str,
        text: str,
        place: str,
        *,
        reply: Any = "OK!",
        name: str = "",
        files: tuple = (),
        mentions: tuple[str, ...] = (),
    ) -> None:
        """``who`` writes ``text`` in a Discord server (mentioning the bot, and ``mentions``: people
        of the cast, by account) or in their DM; waits for the answer."""
        self.place = place
        self.replies.append(reply)
        channel = CHANNEL_OF.get(place, DC_DM.get(who))
        guild = int(place.split(":")[1]) if place.startswith("dc:") else None
        sent = len(self.dc.sent)
        username = name or who  # a display name anyone can choose (issue 31's squatting)
        await self.dc.dispatch_message(
            channel,
            DISCORD[who],
            text,
            guild_id=guild,
            mentions_bot=guild is not None,
            username=username,
            files=files,
            mentions=tuple((DISCORD[m], m) for m in mentions),
        )
        await self.dc.wait_for_sent(sent + 1)
        await self.settle()

    async def telegram(
        self, who: str, text: str, place: str, *, reply: Any = "OK!", command: bool = False
    ) -> str:
        """``who`` writes in the Telegram group (mentioning the bot) or their private chat; returns the bot's answer."""
        self.place = place
        if not command:
            self.replies.append(reply)
        group = place == f"tg:{GROUP}"
        chat, kind = (GROUP, "supergroup") if group else (TELEGRAM[who], "private")
        entities = (
            [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}]
            if command
            else None
        )
        sent = len(self.tg.sent)
        self.tg.push_message(
            chat,
            TELEGRAM[who],
            text,
            chat_type=kind,
            first_name=who.title(),
            mention=group and not command,
            entities=entities,
        )
        answer = (await self.tg.wait_for_sent(sent + 1))[-1]["text"]
        await self.settle()
        return answer

    async def slash(
        self, who: str, name: str, place: str, *, shown: str = "", **options: Any
    ) -> str:
        """A Discord slash command, answered ephemerally."""
        self.place = place
        channel = CHANNEL_OF.get(place, DC_DM.get(who))
        guild = int(place.split(":")[1]) if place.startswith("dc:") else None
        answered = len(self.dc.interaction_responses)
        await self.dc.dispatch_interaction(
            name,
            user_id=DISCORD[who],
            channel_id=channel,
            guild_id=guild,
            options=options or None,
            username=shown or who,
        )
        answer = (await self.dc.wait_for_interaction_responses(answered + 1))[-1]["data"]["content"]
        await self.settle()
        return answer

    async def directly(
        self, platform: str, who: str, text: str, place: str, *, reply: Any = "OK!"
    ) -> str:
        """A platform-tagged message handed to the orchestrator itself (no adapter)."""
        self.place = place
        self.replies.append(reply)
        user = str((DISCORD if platform == "discord" else TELEGRAM)[who])
        guild = place.split(":")[1] if not place.startswith("dm:") else None
        channel = str(CHANNEL_OF.get(place, GROUP if guild else DC_DM.get(who, user)))
        message = IncomingMessage(
            platform,
            channel,
            user,
            who.title(),
            text,
            guild_id=guild,
            message_id=f"d{len(self.direct)}",
        )
        answer = (await self.runtime.orchestrator.reply(message)).text
        self.direct.append(answer)
        await self.settle()
        return answer

    async def settle(self) -> None:
        """Time passes (31 s): what was just said is extracted and reflected on, then everything the model was
        asked and the bot posted is checked for the place it was for (one place at a time: no mix-ups)."""
        self.clock.advance(31)
        await self.runtime.background.tick()
        self.audit()

    def told(self, *words: str) -> None:
        """The scenario says these facts were told and learned; a fact the bot did not learn would make every check
        of it hollow (a model script out of step with the transcript format once learned nothing), so it fails."""
        for word in words:
            assert self.stored(word), f"{self.step}: {word!r} was told but not learned"
            self.oracle.told.add(word)
            self.oracle.forgotten.discard(word)
            self.ever_said.setdefault(FACTS[word].author, set()).add(word)

    def stored(self, word: str) -> bool:
        return bool(
            self.runtime.engine.db.scalar(
                "SELECT 1 FROM memories WHERE lower(content) LIKE ?", (f"%{word}%",)
            )
        )

    def forgot(self, *words: str) -> None:
        self.oracle.told.difference_update(words)
        self.oracle.forgotten.update(words)

    # -- the checks ----------------------------------------------------------------------------------------
    def audit(self) -> None:
        """Every new prompt and post against the place it was for; every stored memory against its fact."""
        step = self.step
        hidden = self.oracle.hidden_from(self.place)
        for body in self.llm.chat_requests[self.seen["requests"] :]:
            self.tally.prompts += 1
            self._leaks(
                step, "prompt", json.dumps(_without_own_calls(body), ensure_ascii=False), hidden
            )
        posts = [m.get("content") or "" for m in self.dc.sent[self.seen["dc"] :]]
        posts += [m.get("text") or "" for m in self.tg.sent[self.seen["tg"] :]]
        posts += [
            r["data"].get("content") or ""
            for r in self.dc.interaction_responses[self.seen["interactions"] :]
            if r.get("data")
        ]
        posts += self.direct[self.seen["direct"] :]
        for post in posts:
            self.tally.posts += 1
            self._leaks(step, "post", post, hidden)
        self.seen = {
            "requests": len(self.llm.chat_requests),
            "dc": len(self.dc.sent),
            "tg": len(self.tg.sent),
            "interactions": len(self.dc.interaction_responses),
            "direct": len(self.direct),
        }
        self._attribution(step)

    def _leaks(self, step: str, what: str, text: str, hidden: list[Fact]) -> None:
        lowered = text.lower()
        shows = [
            f for f in hidden if any(w in lowered for w in (f.word, *DISGUISES.get(f.word, ())))
        ]
        self.tally.leaks += [f"{step}: a {what} for {self.place} shows {f.word!r}" for f in shows]

    def _attribution(self, step: str) -> None:
        for row in self.runtime.engine.db.rows(
            "SELECT scope, scope_id, visibility, guild_id, content FROM memories"
        ):
            self.tally.facts += 1
            fact = next((f for w, f in FACTS.items() if w in row["content"].lower()), None)
            filed = (row["scope"], row["scope_id"], row["visibility"], row["guild_id"])
            if fact is None or filed != self.filed(fact):
                self.tally.misattributions.append(
                    f"{step}: {row['content'][:40]!r} filed as {filed}"
                )

    def filed(self, fact: Fact) -> tuple[str, str, str, str | None]:
        """Where a fact belongs: (scope, scope id, visibility, guild)."""
        if fact.author == "lore":
            return ("guild", GUILD_KEY[fact.where], "public", None)
        person = self.person(fact.author)
        if fact.where == "dm":
            return ("owner" if fact.author == "olive" else "user", person, "private", None)
        return ("user", person, "public", GUILD_KEY[fact.where])

    async def departed(self, pending: int) -> None:
        """Wait until the adapters' news of places left or joined was written (``pending`` left)."""
        sql = "SELECT COUNT(*) FROM place_departures"
        for _ in range(3000):
            if await self.runtime.runner.run(self.runtime.engine.db.scalar, sql) == pending:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{self.step}: the departures are not {pending}")

    async def used_by(self, post_id: int) -> list[dict[str, Any]]:
        """The memories the reply posted as ``post_id`` used (ORCH-12)."""
        sql = (
            "SELECT m.id, m.scope_id, m.visibility FROM reply_posts AS p JOIN reply_memories AS u ON u.reply_rid = p.reply_rid "
            "JOIN memories AS m ON m.rid = u.memory_rid WHERE p.post_id = ?"
        )
        return await self.runtime.runner.run(self.runtime.engine.db.rows, sql, (str(post_id),))

    async def importance(self) -> dict[str, float]:
        rows = await self.runtime.runner.run(
            self.runtime.engine.db.rows, "SELECT id, importance FROM memories"
        )
        return {r["id"]: r["importance"] for r in rows}

    async def private_rows(self) -> list[dict[str, Any]]:
        return await self.runtime.runner.run(
            self.runtime.engine.db.rows, "SELECT id FROM memories WHERE visibility = 'private'"
        )

    async def votes(self, n: int) -> None:
        """Wait until ``n`` reactions were counted (they are handled in the background of the adapter)."""
        for _ in range(3000):
            if (
                await self.runtime.runner.run(
                    self.runtime.engine.db.scalar, "SELECT COUNT(*) FROM reply_reactions"
                )
                >= n
            ):
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{self.step}: fewer than {n} reactions were counted")

    def person(self, who: str) -> str:
        platform, user = (
            ("discord", DISCORD[who]) if who in DISCORD else ("telegram", TELEGRAM[who])
        )
        sql = "SELECT person_id FROM identities WHERE platform = ? AND platform_user_id = ?"
        return self.runtime.engine.db.scalar(sql, (platform, str(user))) or f"{platform}:{user}"

    async def bytes_after_forget(
        self, step: str, words: set[str], person: str | None = None
    ) -> None:
        """No file under the store folder holds a forgotten word (journals flushed, the WAL checkpointed)."""
        self.tally.forgets += 1
        await self.no_byte_of(step, words)
        await self.audit_finds_nothing(step, words, person)

    async def audit_finds_nothing(self, step: str, words: set[str], person: str | None) -> None:
        """The operator's own check (`companion audit forget --word ... --person ...`) agrees: no surface holds a
        forgotten word, nor anything of a person who forgot everything."""
        from memory.upkeep.leftovers import Folders, Sought, audit

        engine, beside = self.runtime.engine, self.store.parent
        folders = Folders(
            engine.journals.root if engine.journals else None,
            beside / "exports",
            beside / "backups",
        )
        target = Sought(tuple(sorted(words)), (person,) if person else ())
        found = await self.runtime.runner.run(audit, engine, target, folders)
        self.tally.audit_left += [
            f"{step}: {f.surface} {f.remaining} {dict(f.where)}" for f in found if f.remaining
        ]

    async def never_kept(self, step: str, *words: str) -> None:
        """Said while remembering was off: no file holds the words, and from now on no prompt or post anywhere
        may show them (the oracle treats them as forgotten: the turn that said them was their only place)."""
        self.tally.unkept += 1
        self.forgot(*words)
        await self.no_byte_of(step, set(words))

    async def no_byte_of(self, step: str, words: set[str]) -> None:
        engine = self.runtime.engine
        if engine.journals is not None:
            await self.runtime.runner.run(engine.journals.flush)
        await self.runtime.runner.run(engine.db.execute, "PRAGMA wal_checkpoint(TRUNCATE)")
        # a number counts where no digit touches it (``bytes_in``): "4417" inside a platform's
        # 19-digit message id is not the forgotten bib number (it failed a third of runs)
        for path in (p for p in self.store.parent.rglob("*") if p.is_file()):
            data = path.read_bytes().lower()
            self.tally.bytes_left += [
                f"{step}: {w!r} in {path.relative_to(self.root)}"
                for w in sorted(words)
                if bytes_in(data, [w.encode()])
            ]


def _without_own_calls(body: dict[str, Any]) -> dict[str, Any]:
    """A request without the model's own tool calls echoed back to it: the model wrote those words (a refused
    memory_store of a secret, issue 31); the bot showing them to the model again tells the place nothing."""
    messages = [{k: v for k, v in m.items() if k != "tool_calls"} for m in body.get("messages", [])]
    return {**body, "messages": messages}


# -- the steps ------------------------------------------------------------------------------------------------
Action = Callable[[World], Awaitable[None]]


@dataclass(frozen=True)
class Step:
    name: str
    act: Action


async def link_alice(w: World) -> None:
    code = re.search(
        r"code is (\S+)", await w.telegram("alice", "/link", "dm:alice", command=True)
    ).group(1)
    assert "Linked" in await w.slash("alice", "link", "dm:alice", code=code)


async def alice_tells_her_dm(w: World) -> None:
    await w.discord("alice", FACTS["quintrell"].said, "dm:alice")
    assert "Got it" in await w.telegram(
        "alice", f"/remember {FACTS['wexcombe'].said}", "dm:alice", command=True
    )
    w.told("quintrell", "wexcombe")


async def alice_sends_a_photo_in_her_dm_then_asks_about_it_in_harbour(w: World) -> None:
    """ORCH-11: the caption is the photo's words, kept in the DM it was sent in: asked about in a server, nothing of it."""
    w.captions.append(FACTS["glimmerholt"].said)
    await w.discord(
        "alice",
        "look where I walked today",
        "dm:alice",
        files=(FakeFile("walk.png", solid_png((90, 90, 200))),),
    )
    w.told("glimmerholt")
    await w.discord("alice", "what was in the photo I sent?", f"dc:{HARBOUR}")
    await w.telegram("alice", "what was in the photo I sent?", f"tg:{GROUP}")


async def alice_tells_both_servers(w: World) -> None:
    await w.discord("alice", FACTS["vellicora"].said, f"dc:{HARBOUR}")
    await w.discord("alice", FACTS["brontewick"].said, f"dc:{ORCHARD}")
    w.told("vellicora", "brontewick")


async def bob_tells_his_dm_and_harbour(w: World) -> None:
    assert "Got it" in await w.slash("bob", "remember", "dm:bob", text=FACTS["x4471q"].said)
    await w.discord("bob", FACTS["tamberlyn"].said, f"dc:{HARBOUR}")
    w.told("x4471q", "tamberlyn")


async def carol_and_dave_talk_in_the_group(w: World) -> None:
    await w.telegram("carol", FACTS["oxwallow"].said, f"tg:{GROUP}")
    await w.telegram("dave", FACTS["kettleborn"].said, f"tg:{GROUP}")
    w.told("oxwallow", "kettleborn")


async def the_owner_remembers_in_private(w: World) -> None:
    assert "Got it" in await w.slash("olive", "remember", "dm:olive", text=FACTS["saltmarrow"].said)
    w.told("saltmarrow")


async def the_operator_writes_lore(w: World) -> None:
    for word in ("pellingham", "fenwhistle"):
        fact = FACTS[word]
        new = NewMemory(
            content=fact.content, subject="lore", scope=Scope.GUILD, scope_id=GUILD_KEY[fact.where]
        )
        await w.runtime.runner.run(w.runtime.engine.memories.add, new)
    w.told("pellingham", "fenwhistle")


async def everyone_asks_everywhere(w: World) -> None:
    await w.discord("alice", NOSY, f"dc:{ORCHARD}")
    await w.discord("alice", NOSY, "dm:alice")
    await w.discord("bob", NOSY, f"dc:{HARBOUR}")
    await w.discord("olive", NOSY, f"dc:{HARBOUR}")
    await w.discord("olive", NOSY, "dm:olive")
    await w.telegram("carol", NOSY, f"tg:{GROUP}")
    await w.telegram("dave", NOSY, "dm:dave")


async def reactions_never_reveal_or_move_another_persons_private_facts(w: World) -> None:
    """ORCH-12: Alice's DM reply used her private facts. Bob and Mallory react to it (forged into her DM), and Alice to
    Bob's reply in Harbour: no private fact of another person moves, the bot says nothing and asks no model. Alice's
    own 👎 on her reply then lowers her facts (so the path works, and the checks before it are not hollow)."""
    await w.discord("alice", NOSY, "dm:alice")
    mine = w.dc.sent[-1]["message_id"]
    private = [r for r in await w.used_by(mine) if r["visibility"] == "private"]
    assert private, (
        "the DM reply used none of Alice's private facts: the reaction checks would be hollow"
    )
    await w.discord("bob", NOSY, f"dc:{HARBOUR}")
    bobs = w.dc.sent[-1]["message_id"]
    before, asked, posted = await w.importance(), len(w.llm.chat_requests), len(w.dc.sent)
    await w.dc.dispatch_reaction(DC_DM["alice"], mine, DISCORD["bob"], "👎", username="bob")
    await w.dc.dispatch_reaction(DC_DM["alice"], mine, DISCORD["mallory"], "👍", username="mallory")
    await w.dc.dispatch_reaction(HARBOUR_CH, bobs, DISCORD["alice"], "👎", username="alice")
    await w.votes(3)
    after = await w.importance()
    moved = [r["id"] for r in await w.private_rows() if after.get(r["id"]) != before.get(r["id"])]
    assert moved == [], f"reactions moved private facts of another person: {moved}"
    # nothing said, no model asked
    assert (len(w.llm.chat_requests), len(w.dc.sent)) == (
        asked,
        posted,
    )
    await w.dc.dispatch_reaction(DC_DM["alice"], mine, DISCORD["alice"], "👎", username="alice")
    await w.votes(4)
    after = await w.importance()
    assert all(after[r["id"]] == before[r["id"]] - DOWN_STEP for r in private)


async def reactions_by_others_move_nobodys_facts(w: World) -> None:
    """ORCH-12 (issue 44): twenty accounts made for it 👎 the reply to Bob in Harbour that used his
    Tamberlyn fact, and Alice asks about it three times and 👎 each reply: all recorded, and his fact
    neither falls nor is marked for recheck. Bob's own 👎 then lowers it one step and marks it."""
    fact = await w.runtime.runner.run(
        w.runtime.engine.db.one,
        "SELECT m.id, m.importance, COALESCE(f.recheck, 0) AS recheck FROM memories AS m "
        "LEFT JOIN memory_feedback AS f ON f.memory_rid = m.rid WHERE m.content LIKE ?",
        ("%Tamberlyn%",),
    )
    assert fact["recheck"] == 0, "Bob's fact was marked before the step: the check would be hollow"
    votes = await w.runtime.runner.run(
        w.runtime.engine.db.scalar, "SELECT COUNT(*) FROM reply_reactions"
    )
    await w.discord("bob", NOSY, f"dc:{HARBOUR}")
    bobs = w.dc.sent[-1]["message_id"]
    assert fact["id"] in {r["id"] for r in await w.used_by(bobs)}, "the reply did not use it"
    for fresh in range(9_500, 9_520):
        await w.dc.dispatch_reaction(HARBOUR_CH, bobs, fresh, "👎", username=f"fresh{fresh}")
    for _ in range(3):
        await w.discord("alice", "what ale does Bob brew?", f"dc:{HARBOUR}")
        post = w.dc.sent[-1]["message_id"]
        await w.dc.dispatch_reaction(HARBOUR_CH, post, DISCORD["alice"], "👎", username="alice")
    await w.votes(votes + 23)
    after = await w.runtime.runner.run(
        w.runtime.engine.db.one,
        "SELECT m.importance, COALESCE(f.recheck, 0) AS recheck FROM memories AS m "
        "LEFT JOIN memory_feedback AS f ON f.memory_rid = m.rid WHERE m.id = ?",
        (fact["id"],),
    )
    assert (after["importance"], after["recheck"]) == (fact["importance"], 0), dict(after)
    await w.dc.dispatch_reaction(HARBOUR_CH, bobs, DISCORD["bob"], "👎", username="bob")
    await w.votes(votes + 24)
    assert (await w.importance())[fact["id"]] == fact["importance"] - DOWN_STEP


async def memories_commands_show_only_what_is_visible(w: World) -> None:
    await w.slash("alice", "memories", f"dc:{ORCHARD}")
    await w.slash("bob", "memories", f"dc:{ORCHARD}")
    await w.telegram("carol", "/memories", f"tg:{GROUP}", command=True)
    await w.telegram("alice", "/memories", "dm:alice", command=True)


async def bob_shares_and_speaks_in_orchard(w: World) -> None:
    assert "may now come up" in await w.slash("bob", "share", f"dc:{ORCHARD}", choice="on")
    w.oracle.sharing.add("bob")
    await w.discord("bob", NOSY, f"dc:{ORCHARD}")
    await w.discord("alice", NOSY, f"dc:{ORCHARD}")


async def the_admin_may_change_the_lore_a_member_may_not(w: World) -> None:
    lore = w.runtime.engine.db.scalar("SELECT id FROM memories WHERE content LIKE '%Fenwhistle%'")
    carol = w.runtime.engine.db.scalar("SELECT id FROM memories WHERE content LIKE '%Oxwallow%'")
    w.tool_results.clear()
    await w.telegram(
        "carol",
        "please note the mascot is an owl",
        f"tg:{GROUP}",
        reply=ToolCall(
            "memory_update", {"id": lore, "content": "The group's mascot is Fenwhistle the owl"}
        ),
    )
    await w.telegram(
        "dave",
        "delete the mascot note",
        f"tg:{GROUP}",
        reply=ToolCall("memory_delete", {"id": lore}),
    )
    await w.telegram(
        "dave",
        "carol quit the book club",
        f"tg:{GROUP}",
        reply=ToolCall("memory_delete", {"id": carol}),
    )
    assert not w.tool_results[0].startswith("Error") and all(
        r.startswith("Error") for r in w.tool_results[1:]
    ), w.tool_results
    assert (
        w.runtime.engine.db.scalar("SELECT content FROM memories WHERE id = ?", (lore,))
        == "The group's mascot is Fenwhistle the owl"
    )


async def the_model_tries_to_repeat_dm_secrets_in_shared_places(w: World) -> None:
    leaky = "Bob, your passport number is X4471Q, and Alice's tortoise Quintrell says hi."
    w.replies.append(leaky)  # and the second try repeats it too: withheld
    await w.discord("bob", "anything new?", f"dc:{HARBOUR}", reply=leaky)
    await w.telegram(
        "carol",
        "anything new?",
        f"tg:{GROUP}",
        reply="Carol runs Oxwallow, and I hear Alice has a tortoise named Quintrell!",
    )
    w.replies.clear()


async def take_a_backup(w: World) -> None:
    w.backup = (w.root / "backups" / "before.db", w.oracle.copy())
    w.backup[0].parent.mkdir()
    await w.runtime.runner.run(w.runtime.engine.db.backup_to, w.backup[0])


async def restart(w: World) -> None:
    await w.shut()
    await w.boot()


async def after_the_restart_the_orchestrator_is_asked_directly(w: World) -> None:
    await w.directly("discord", "alice", NOSY, f"dc:{ORCHARD}")
    await w.directly("discord", "bob", NOSY, f"dc:{HARBOUR}")
    await w.directly("telegram", "dave", NOSY, f"tg:{GROUP}")
    await w.directly("telegram", "carol", NOSY, "dm:carol")


async def alice_forgets_her_allotment(w: World) -> None:
    assert "Wexcombe" in await w.telegram("alice", "/forget allotment", "dm:alice", command=True)
    w.forgot("wexcombe")
    await w.bytes_after_forget("alice /forget allotment", {"wexcombe"})


async def dave_forgets_everything(w: World) -> None:
    dave = w.person("dave")
    assert "Done" in await w.telegram("dave", "/forget everything confirm", "dm:dave", command=True)
    w.forgot(*(w.ever_said.get("dave", set())))
    await w.bytes_after_forget("dave /forget everything", w.ever_said.get("dave", set()), dave)
    await w.telegram("carol", NOSY, f"tg:{GROUP}")


async def carol_tells_a_secret_after_the_backup(w: World) -> None:
    await w.telegram("carol", FACTS["reykjavik"].said, "dm:carol")
    w.told("reykjavik")


async def bob_stops_sharing(w: World) -> None:
    assert "stays in that server" in await w.slash("bob", "share", f"dc:{ORCHARD}", choice="off")
    w.oracle.sharing.discard("bob")
    await w.discord("alice", NOSY, f"dc:{ORCHARD}")
    await w.discord("bob", NOSY, f"dc:{ORCHARD}")


async def restore_the_backup(w: World) -> None:
    from bot.cli.upkeep import run_restore

    assert w.backup is not None
    await w.shut()
    settings = load_settings(
        db_path=w.store, llm_base_url=w.llm.base_url, llm_api_key="k", embeddings="none"
    )
    run_restore(argparse.Namespace(backup=w.backup[0], force=True), settings)
    w.oracle = w.backup[
        1
    ].copy()  # the store is as it was: what was told or forgotten since is undone
    await w.boot()
    await w.discord("alice", NOSY, f"dc:{ORCHARD}")
    await w.telegram("carol", NOSY, "dm:carol")


async def carol_forgets_everything(w: World) -> None:
    carol = w.person("carol")
    assert "Done" in await w.telegram(
        "carol", "/forget everything confirm", "dm:carol", command=True
    )
    w.forgot(*w.ever_said["carol"])
    await w.bytes_after_forget(
        "carol /forget everything (after the restore)", w.ever_said["carol"], carol
    )


async def alice_forgets_everything_on_both_accounts(w: World) -> None:
    await w.slash("alice", "forget", "dm:alice", text="everything confirm")
    w.forgot(*w.ever_said["alice"])
    await w.bytes_after_forget("alice /forget everything (linked)", w.ever_said["alice"])
    await w.discord("bob", NOSY, f"dc:{HARBOUR}")
    await w.discord("alice", NOSY, "dm:alice")


async def bob_stops_being_remembered_then_talks_in_his_dm_and_harbour(w: World) -> None:
    assert "won't keep anything you say" in await w.slash("bob", "privacy", "dm:bob", choice="off")
    await w.discord("bob", FACTS["mirthwaite"].said, "dm:bob")
    await w.discord("bob", FACTS["quorrelby"].said, f"dc:{HARBOUR}")
    await w.never_kept("bob /privacy off (DM and server)", "mirthwaite", "quorrelby")


async def dave_stops_being_remembered_in_the_group_then_talks_there(w: World) -> None:
    assert "won't keep anything you say" in await w.telegram(
        "dave", "/privacy off", f"tg:{GROUP}", command=True
    )
    await w.telegram("dave", FACTS["brackenhythe"].said, f"tg:{GROUP}")
    await w.never_kept("dave /privacy off (in the group)", "brackenhythe")


async def the_owner_switches_harbour_off_then_alice_talks_there(w: World) -> None:
    assert "Only this server's admins" in await w.slash(
        "alice", "privacy", f"dc:{HARBOUR}", choice="server off"
    )
    assert "won't keep anything said here" in await w.slash(
        "olive", "privacy", f"dc:{HARBOUR}", choice="server off"
    )
    await w.discord("alice", FACTS["drummoch"].said, f"dc:{HARBOUR}")
    await w.never_kept("/privacy server off (Harbour)", "drummoch")


async def remembering_is_switched_on_again(w: World) -> None:
    assert "remember what is said here again" in await w.slash(
        "olive", "privacy", f"dc:{HARBOUR}", choice="server on"
    )
    assert "remember what you say again" in await w.slash("bob", "privacy", "dm:bob", choice="on")
    await w.discord("bob", FACTS["skelbeck"].said, f"dc:{HARBOUR}")
    # alice speaks in Harbour again: she is one of its people
    await w.discord("alice", NOSY, f"dc:{HARBOUR}")
    w.told("skelbeck")
    for word in (
        "mirthwaite",
        "quorrelby",
        "drummoch",
    ):  # what was said while it was off is not learned after all
        assert not w.stored(word), word


async def alice_sees_and_vetoes_what_bob_told_about_her(w: World) -> None:
    # by account (an @mention): a name alone binds nobody (issue 44)
    said = f"<@{DISCORD['alice']}> {FACTS['gallowmere'].said}"
    await w.discord("bob", said, f"dc:{HARBOUR}", mentions=("alice",))
    w.told("gallowmere")
    listed = await w.slash("alice", "about", "dm:alice")
    line = next(x for x in listed.splitlines() if "Gallowmere" in x)
    assert (
        "told to me by someone" in line and "Skelbeck" not in listed and "X4471Q" not in listed
    ), listed
    short = re.search(r"\[(\w+)\]", line).group(1)
    assert "not in your /about me list" in await w.telegram(
        "dave", f"/about veto {short}", "dm:dave", command=True
    )
    assert "Forgotten" in await w.slash("alice", "about", "dm:alice", veto=short)
    w.forgot("gallowmere")
    await w.bytes_after_forget("alice /about veto (a fact bob told)", {"gallowmere"})


async def others_tell_facts_a_squatter_could_aim_at(w: World) -> None:
    # about a Dave nobody here is
    await w.discord("bob", FACTS["vatnajokull"].said, f"dc:{HARBOUR}")
    # the owner's (an admin's) rule
    await w.discord("olive", FACTS["frostmoot"].said, f"dc:{HARBOUR}")
    lore = NewMemory(
        content=FACTS["hearthold"].content,
        subject="House",
        scope=Scope.GUILD,
        scope_id=GUILD_KEY[f"dc:{HARBOUR}"],
    )
    await w.runtime.runner.run(w.runtime.engine.memories.add, lore)
    w.told("vatnajokull", "frostmoot", "hearthold")


async def a_member_renamed_dave_rules_and_house_sees_and_vetoes_nothing(w: World) -> None:
    """Issue 31: mallory takes each name in Harbour, asks /about me in her DM and vetoes each fact by its id."""
    ids = {
        word: w.runtime.engine.db.scalar(
            "SELECT id FROM memories WHERE content LIKE ?", (f"%{word}%",)
        )
        for word in ("vatnajokull", "frostmoot", "hearthold")
    }
    for name in ("Dave", "Rules", "House"):
        await w.discord("mallory", "hello everyone", f"dc:{HARBOUR}", name=name)
        # a listing of any of them is a leak (audited)
        await w.slash("mallory", "about", "dm:mallory", shown=name)
        for word, memory_id in ids.items():
            answer = await w.slash("mallory", "about", "dm:mallory", shown=name, veto=memory_id[:8])
            if "Forgotten" in answer or not w.stored(word):
                w.tally.vetoes.append(f"mallory as {name!r} vetoed {word!r}")
                w.forgot(word)


async def after_a_restart_nothing_comes_back(w: World) -> None:
    await w.shut()
    await w.boot()
    await w.directly("discord", "bob", NOSY, f"dc:{HARBOUR}")
    await w.directly("discord", "alice", NOSY, "dm:alice")
    await w.directly("telegram", "dave", NOSY, f"tg:{GROUP}")
    await w.no_byte_of(
        "after the restart", {"mirthwaite", "quorrelby", "brackenhythe", "drummoch", "gallowmere"}
    )
    assert w.stored("skelbeck")


# -- issue 31: no leak in any place (a DM, a tool call, a word not yet a memory, a disguised word) ---------------
async def the_model_tries_six_disguises_in_harbour(w: World) -> None:
    """Bob's DM-private passport and the owner's boat, each hidden a way an index does not see; each withheld."""
    disguised = [
        "Bob, your passport: X four four seven one Q.",
        "Olive's boat is the Saltmarr\u043ew.",  # a Cyrillic o
        "S4ltm4rr0w!",
        "Salt-mar-row, remember?",
        "S a l t m a r r o w",
        "worramtlaS",
    ]
    for leaky in disguised:
        w.replies.append(leaky)  # and the second try repeats it too
        await w.discord("bob", "anything new?", f"dc:{HARBOUR}", reply=leaky)
        assert w.dc.sent[-1]["content"] == WITHHELD, leaky
        w.tally.probes += 1
    w.replies.clear()


async def the_model_repeats_secrets_in_other_people_s_dms(w: World) -> None:
    """Another person's DM is a shared place for what someone else said, a DM message not yet a memory included."""
    await w.discord("alice", FACTS["wombatson"].said, "dm:alice")
    assert not w.stored("wombatson")  # only a message: the model extracted nothing from it
    w.oracle.told.add("wombatson")
    w.ever_said.setdefault("alice", set()).add("wombatson")
    for who, leaky in (
        ("bob", "Alice's therapist is Dr Wombatson."),
        ("bob", "Olive's boat is the Saltmarrow."),
        ("alice", "X4471Q!"),
    ):
        w.replies.append(leaky)
        await w.discord(who, "tell me a secret", f"dm:{who}", reply=leaky)
        assert w.dc.sent[-1]["content"] == WITHHELD, leaky
        w.tally.probes += 1
    w.replies.clear()
    await w.discord("alice", "who is my therapist?", "dm:alice", reply="Dr Wombatson.")
    assert w.dc.sent[-1]["content"] == "Dr Wombatson."  # her own DM: the one place it was said


async def a_tool_call_may_not_file_a_secret_in_the_group(w: World) -> None:
    """A memory_store of bob's passport in the group is refused (nothing filed where the group sees it), so the
    reply repeating it is still caught."""
    w.tool_results.clear()
    leaky = "Our group code is X4471Q!"
    store = ToolCall(
        "memory_store",
        {"content": "the group code is X4471Q", "subject": "group code", "type": "semantic"},
    )
    w.replies.append(store)
    w.after_tool.append(leaky)
    assert (
        await w.telegram("carol", "remember our group code", f"tg:{GROUP}", reply=leaky) == WITHHELD
    )
    assert w.tool_results == [TOOL_REFUSED]
    w.tally.probes += 2
    w.replies.clear()


async def a_forget_leaves_bobs_later_unrelated_facts_learned(w: World) -> None:
    """Issue 44 item 2b: a name alone never makes two facts one, so one forget stops nothing else
    being learned about the person or the friend the forgotten fact named."""
    await w.discord("bob", FACTS["4417"].said, "dm:bob")
    w.told("4417")
    assert "4417" in await w.slash("bob", "forget", "dm:bob", text="bib 4417")
    w.forgot("4417")
    await w.bytes_after_forget("bob /forget bib 4417", {"4417"})
    for word in ("biscuit", "teacher", "yarrowdale"):
        await w.discord("bob", FACTS[word].said, "dm:bob")
        w.told(word)  # learned: the forget blocked none of them
    await w.discord("bob", FACTS["wore bib"].said, "dm:bob")
    assert not w.stored("wore bib")
    await w.no_byte_of("bob's forgotten fact, learned back in other words", {"4417"})


async def privacy_off_holds_a_due_checkin_and_records_no_zone_offer(w: World) -> None:
    """Bob's dated exam is planned for a check-in; he says /privacy off, then where he lives; the check-in falls due.
    Nothing is sent, nothing kept: not the check-in's words, not the zone offered."""
    day = w.clock.now() // 86_400 * 86_400
    exam = NewMemory(
        content=FACTS["harrowgate"].content,
        subject="exam",
        scope=Scope.USER,
        scope_id=w.person("bob"),
        visibility=Visibility.PRIVATE,
        type=MemoryType.EPISODIC,
        kind=FactKind.EVENT,
        valid_from=day + 86_400,
    )
    await w.runtime.runner.run(w.runtime.engine.memories.add, exam)
    w.told("harrowgate")
    assert "message you here" in await w.slash("bob", "checkins", "dm:bob", choice="on")
    sent: list[str] = []

    async def deliver(channel: str, text: str) -> None:
        sent.append(text)

    w.runtime.checkins.deliveries["discord"] = deliver
    assert (await w.runtime.checkins.run()).planned == 1
    assert "won't keep anything you say" in await w.slash("bob", "privacy", "dm:bob", choice="off")
    await w.discord("bob", FACTS["lisbon"].said, "dm:bob")
    # offered; choosing it would be his own setting
    assert "Europe/Lisbon" in w.dc.sent[-1]["content"]
    w.clock.t = day + 2 * 86_400 + 12 * 3_600  # noon the day after the exam: due
    assert (await w.runtime.checkins.run()).sent == 0 and sent == []
    await w.settle()
    await w.never_kept(
        "bob /privacy off: a due check-in, a time-zone offer", "quibblestone", "lisbon"
    )


async def the_bot_leaves_the_group_and_orchard_and_orchard_adds_it_back(w: World) -> None:
    """SEC-7 (issue 44): the Telegram group removes the bot (my_chat_member "kicked") and so does
    Orchard (GUILD_DELETE); Orchard adds it back on day 29. On day 30 the retention job purges the
    group: not a byte of it is left in any file, its journals included; Orchard keeps all it had."""
    engine, runner = w.runtime.engine, w.runtime.runner
    group = sorted(x for x in w.oracle.told if FACTS[x].where == f"tg:{GROUP}")
    assert group == ["fenwhistle", "kettleborn"]  # lore, and dave's fact (back with the restore)
    await w.telegram("carol", "our picnic is at Pumbleford green", f"tg:{GROUP}")
    orchard = await runner.run(place_rows, w, f"dc:{ORCHARD}")
    assert orchard["messages"] and not (await runner.run(place_rows, w, f"tg:{GROUP}"))["none"]
    w.tg.push_update(removal(GROUP, "kicked"))
    await w.dc.dispatch("GUILD_DELETE", {"id": str(ORCHARD)})
    await w.departed(2)
    w.clock.advance(29 * DAY)
    await w.dc.dispatch("GUILD_CREATE", w.dc._guilds[ORCHARD])
    await w.departed(1)
    w.clock.advance(DAY)
    assert w.runtime.retention is not None
    report = await w.runtime.retention.run()
    assert report is not None and report.purged == 1 and report.rows > 0
    w.forgot(*group)
    await w.bytes_after_forget("the bot left the group 30 days ago", {*group, "pumbleford"})
    assert (await runner.run(place_rows, w, f"tg:{GROUP}"))["none"]
    assert await runner.run(place_rows, w, f"dc:{ORCHARD}") == orchard
    [audit] = [e for e in engine.audit.recent() if e.action == "guild.purge"]
    assert audit.target == GUILD_KEY[f"tg:{GROUP}"] and audit.detail["rows"] == report.rows


def place_rows(w: World, place: str) -> dict[str, int]:
    """A place's rows that carry words: its messages, the memories filed there, its summaries."""
    key, db = GUILD_KEY[place], w.runtime.engine.db
    counts = {
        "messages": db.scalar("SELECT count(*) FROM messages WHERE guild_id = ?", (key,)),
        "memories": db.scalar(
            "SELECT count(*) FROM memories WHERE scope_id = ? OR guild_id = ?", (key, key)
        ),
        "summaries": db.scalar("SELECT count(*) FROM session_summaries WHERE guild_id = ?", (key,)),
    }
    return {**counts, "none": not any(counts.values())}


def removal(chat_id: int, status: str) -> dict[str, Any]:
    """Telegram's my_chat_member update: the group's admin changed the bot's membership."""
    bot = {k: BOT_USER[k] for k in ("id", "is_bot", "first_name", "username")}
    change = {
        "chat": {"id": chat_id, "type": "supergroup", "title": "Test group"},
        "from": {"id": TELEGRAM["carol"], "is_bot": False, "first_name": "Carol"},
        "date": 1,
        "old_chat_member": {"user": bot, "status": "member"},
        "new_chat_member": {"user": bot, "status": status, "until_date": 0},
    }
    return {"my_chat_member": change}


SCENARIO = [
    Step("alice links her Telegram and Discord accounts", link_alice),
    Step("alice tells her DMs two things", alice_tells_her_dm),
    Step(
        "alice sends a photo in her DM, asks about it in a server",
        alice_sends_a_photo_in_her_dm_then_asks_about_it_in_harbour,
    ),
    Step("alice tells each server one thing", alice_tells_both_servers),
    Step("bob tells his DM and Harbour", bob_tells_his_dm_and_harbour),
    Step("carol and dave talk in the Telegram group", carol_and_dave_talk_in_the_group),
    Step("the owner remembers something in private", the_owner_remembers_in_private),
    Step("the operator writes lore for Harbour and the group", the_operator_writes_lore),
    Step("everyone asks about everything, everywhere", everyone_asks_everywhere),
    Step(
        "reactions move no other person's private facts",
        reactions_never_reveal_or_move_another_persons_private_facts,
    ),
    Step("reactions by others move nobody's facts", reactions_by_others_move_nobodys_facts),
    Step(
        "/memories shows only what the place may see", memories_commands_show_only_what_is_visible
    ),
    Step("bob shares, then talks in Orchard with alice", bob_shares_and_speaks_in_orchard),
    Step(
        "the group admin may change the lore, a member nothing",
        the_admin_may_change_the_lore_a_member_may_not,
    ),
    Step(
        "the model tries to repeat DM secrets in a server and the group",
        the_model_tries_to_repeat_dm_secrets_in_shared_places,
    ),
    Step("a backup", take_a_backup),
    Step("restart", restart),
    Step(
        "after the restart, messages straight to the orchestrator",
        after_the_restart_the_orchestrator_is_asked_directly,
    ),
    Step("alice forgets one thing", alice_forgets_her_allotment),
    Step("dave forgets everything", dave_forgets_everything),
    Step("carol tells a secret in her DM", carol_tells_a_secret_after_the_backup),
    Step("bob stops sharing", bob_stops_sharing),
    Step("the backup is restored", restore_the_backup),
    Step("carol forgets everything", carol_forgets_everything),
    Step("alice forgets everything, on both accounts", alice_forgets_everything_on_both_accounts),
    Step(
        "bob says /privacy off, then talks in his DM and Harbour",
        bob_stops_being_remembered_then_talks_in_his_dm_and_harbour,
    ),
    Step(
        "dave says /privacy off in the group, then talks there",
        dave_stops_being_remembered_in_the_group_then_talks_there,
    ),
    Step(
        "the owner switches Harbour off, then alice talks there",
        the_owner_switches_harbour_off_then_alice_talks_there,
    ),
    Step("/privacy on and /privacy server on again", remembering_is_switched_on_again),
    Step(
        "alice sees and vetoes what bob told about her",
        alice_sees_and_vetoes_what_bob_told_about_her,
    ),
    Step(
        "others tell facts about Dave, the rules and the house",
        others_tell_facts_a_squatter_could_aim_at,
    ),
    Step(
        "a member renamed Dave, Rules and House sees and vetoes nothing",
        a_member_renamed_dave_rules_and_house_sees_and_vetoes_nothing,
    ),
    Step("a restart after the opt-outs and the veto", after_a_restart_nothing_comes_back),
    Step("the model hides secrets six ways in Harbour", the_model_tries_six_disguises_in_harbour),
    Step(
        "the model repeats secrets in other people's DMs",
        the_model_repeats_secrets_in_other_people_s_dms,
    ),
    Step(
        "a tool call tries to file a secret in the group",
        a_tool_call_may_not_file_a_secret_in_the_group,
    ),
    Step(
        "bob forgets one fact; his later facts, about the same friend too, are learned",
        a_forget_leaves_bobs_later_unrelated_facts_learned,
    ),
    Step(
        "after /privacy off: a due check-in, a time-zone offer",
        privacy_off_holds_a_due_checkin_and_records_no_zone_offer,
    ),
    Step(
        "the bot leaves the group and Orchard; Orchard adds it back; 30 days pass",
        the_bot_leaves_the_group_and_orchard_and_orchard_adds_it_back,
    ),
]


def guilds(dc: FakeDiscord) -> None:
    members = [(uid, name) for name, uid in DISCORD.items()]
    dc.add_guild(HARBOUR, "Harbour", channels=[(HARBOUR_CH, "general")], members=members)
    dc.add_guild(ORCHARD, "Orchard", channels=[(ORCHARD_CH, "general")], members=members)


async def test_the_group_chat_trust_suite_finds_no_leak_no_misattribution_and_no_byte_left(
    tmp_path, capsys
):
    async with FakeOpenAI() as llm, FakeTelegram() as tg, FakeDiscord() as dc:
        guilds(dc)
        tg.admins[GROUP] = [TELEGRAM["carol"]]
        restore = dc.patch_discord()
        world = World(tmp_path, llm, tg, dc)
        world.store.parent.mkdir()
        await world.boot()
        try:
            for step in SCENARIO:
                world.step = step.name
                await step.act(world)
                world.audit()
        finally:
            llm.default = lambda body: "[]"
            await world.shut()
            restore()
    # rewording after a forget: the paraphrase suite on the default meaning model, read in
    # English by the real 1.5B (recorded)
    rewordings = await measure(
        tmp_path / "paraphrase.db", MultilingualE5(), recorded_readings()["readings"]
    )
    table = world.tally.table(len(SCENARIO), rewordings)
    with capsys.disabled():
        print("\n" + table)
    findings = (
        world.tally.leaks
        + world.tally.misattributions
        + world.tally.bytes_left
        + world.tally.vetoes
        + world.tally.audit_left
    )
    assert not findings, table + "\n" + "\n".join(findings)
    # 232/250 since a name alone no longer holds a fact (issue 44; 238/250 before), 229/250 since
    # a relative named by the relation weighs as "brother" does (LANG-4): see
    # tests/memory/test_forget_rewording.py
    assert rewordings.rate >= 0.91 and rewordings.blocked == [] and rewordings.others == 0
    # the suite ran in full
    assert world.tally.prompts > 40 and world.tally.forgets == 7 and world.tally.unkept == 4
    assert world.tally.probes == 11
