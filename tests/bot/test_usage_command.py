"""Who sees what of the usage ledger (ORCH-14): ``/usage`` through the bot's command path, the dashboard's
``/api/usage``, and which person and place each kind of model call is filed under (``bot.spending.attribution``)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from bot.commands import HELP
from bot.composition import build_completer
from bot.config import load_settings
from bot.spending.budgets import Level
from bot.spending.commands import NOT_ADMIN, NOT_OWNER, USAGE_HELP
from bot.types import IncomingMessage
from memory import job_charge
from memory.clock import FakeClock
from memory.jobs.base import Judged, WriteFacts
from memory.models import NewMemory, Provenance, Scope
from memory.storage.ledger import Charge, Spend, day_of
from tests.bot.test_checkins import PERSON, Outbox, dated, opt_in
from tests.bot.test_checkins import at as moment
from tests.fakes import FakeOpenAI
from tests.pipeline_support import build_runtime, dm, facts, group

OWNER = "1"


def at(
    user: str, text: str = "", *, guild: str | None = "g1", admin: bool = False
) -> IncomingMessage:
    if guild is None:
        return dm("discord", user, text, name=f"name-{user}")
    message = group("discord", guild, user, text, name=f"name-{user}")
    return IncomingMessage(**{**_fields(message), "author_is_admin": admin})


def _fields(message: IncomingMessage) -> dict:
    return {name: getattr(message, name) for name in message.__dataclass_fields__}


async def seeded(runtime) -> None:
    """Alice and Bob talked in server g1, Carol in her DM; each with their names known (as a turn records them)."""
    ledger, day = runtime.engine.ledger, day_of(runtime.engine.clock.now())
    for user, place, tokens in (
        ("alice", "discord:g1", 7_000),
        ("bob", "discord:g1", 300),
        ("carol", "", 91_919),
    ):
        await runtime.runner.run(
            runtime.orchestrator.resolve, at(user, guild=place.split(":")[-1] or None)
        )
        charge = Charge("reply", f"discord:{user}", "discord", place)
        await runtime.runner.run(
            ledger.add,
            day,
            charge,
            "chat-m",
            Spend(calls=1, prompt_tokens=tokens, completion_tokens=9),
        )


async def usage(runtime, message: IncomingMessage, argument: str = "") -> str:
    return await runtime.orchestrator.command("usage", argument, message)


async def test_a_member_sees_only_their_own_usage_and_cannot_ask_for_anyone_elses(tmp_path):
    async with FakeOpenAI() as llm:
        runtime = build_runtime(
            tmp_path / "bot.db", llm, FakeClock(), owner_ids=[f"discord:{OWNER}"]
        )
        await seeded(runtime)
        own = await usage(runtime, at("bob"))
        attacks = (
            "server",
            "all",
            "discord:alice",
            "alice 7",
            "me 99",
            "\u200b",
            "9" * 5000,
            "me \u00b2",
        )
        answers = [await usage(runtime, at("bob"), arg) for arg in attacks]
        in_dm = await usage(runtime, at("bob", guild=None), "server")
        runtime.engine.close()
    assert own.startswith("Your usage today") and "309 tokens in 1 call (" in own  # not "1 calls"
    assert "7,009" not in own and "name-alice" not in own and "91,9" not in own
    assert answers[:2] == [NOT_ADMIN, NOT_OWNER]
    # another person's id, days out of range (5,000 digits too), a zero-width space, a superscript two: the help, no figures
    assert answers[2:] == [USAGE_HELP] * 6
    assert in_dm.startswith("Send /usage server in the server")


async def test_an_admin_sees_their_server_and_the_owner_everything_but_only_in_their_dm(tmp_path):
    async with FakeOpenAI() as llm:
        runtime = build_runtime(
            tmp_path / "bot.db",
            llm,
            FakeClock(),
            owner_ids=[f"discord:{OWNER}"],
            budget_server_tokens=10_000,
        )
        await seeded(runtime)
        admin = await usage(runtime, at("alice", admin=True))
        other_server = await usage(runtime, at("alice", guild="g2", admin=True), "server")
        owner_in_server = await usage(runtime, at(OWNER), "all")
        owner_dm = await usage(runtime, at(OWNER, guild=None))
        runtime.engine.close()
    assert admin.startswith("This place's usage today") and "7,318 tokens in 2 calls" in admin
    assert (
        "name-alice 7,009" in admin
        and "name-bob 309" in admin
        and "7,318 of its 10,000 tokens" in admin
    )
    assert "91,9" not in admin and "name-carol" not in admin  # a DM is no server's business
    assert "0 tokens" in other_server and "name-alice" not in other_server
    # everyone's usage, DMs included, is not for a server's eyes
    assert owner_in_server == NOT_OWNER
    assert (
        owner_dm.startswith("All usage today")
        and "private chats 91,928" in owner_dm
        and "name-carol 91,928" in owner_dm
    )
    assert "/usage" in HELP


async def test_jobs_are_filed_under_their_person_or_only_their_place_when_several_spoke(tmp_path):
    async with FakeOpenAI() as llm:
        clock = FakeClock()
        runtime = build_runtime(tmp_path / "bot.db", llm, clock)
        llm.script("Hi Alice.", "Hi all.", "Hey Bob.")
        await runtime.orchestrator.reply(dm("discord", "alice", "I grow tomatoes", mid="m1"))
        await runtime.orchestrator.reply(group("discord", "g1", "alice", "hello bot", mid="m2"))
        await runtime.orchestrator.reply(
            group("discord", "g1", "bob", "hello bot", name="Bob", mid="m3")
        )
        clock.advance(31)
        llm.script(
            facts({"about": "Alice", "subject": "garden", "content": "Alice grows tomatoes"}), "[]"
        )
        await runtime.background.tick()
        rows = await runtime.runner.run(
            runtime.engine.db.rows,
            "SELECT person_id, place_id, kind FROM usage_ledger WHERE kind = 'extraction' ORDER BY place_id, person_id",
        )
        budgets = runtime.budgets
        assert budgets is not None
        allowed = await budgets.allows_checkin("discord:alice", owner=False)
        await runtime.stop()
    assert rows == [
        {"person_id": "", "place_id": "", "kind": "extraction"},  # the DM's own row
        {"person_id": "discord:alice", "place_id": "", "kind": "extraction"},  # her DM: hers
        {
            "person_id": "",
            "place_id": "discord:g1",
            "kind": "extraction",
        },  # the server's batch: two spoke, no one's
    ]
    assert allowed  # no budget: check-ins go on


async def test_check_ins_wait_once_a_persons_day_is_quiet_but_not_the_owners(tmp_path):
    async with FakeOpenAI() as llm:
        runtime = build_runtime(tmp_path / "bot.db", llm, FakeClock(), budget_person_tokens=1_000)
        budgets = runtime.budgets
        assert budgets is not None
        charge = Charge("reply", "discord:alice", "discord", "")
        await runtime.runner.run(
            budgets.ledger.add, budgets.day, charge, "m", Spend(calls=1, prompt_tokens=850)
        )
        standing = await runtime.runner.run(budgets.standing, "discord:alice", "")
        answers = (
            await budgets.allows_checkin("discord:alice", owner=False),
            await budgets.allows_checkin("discord:alice", owner=True),
        )
        runtime.engine.close()
    assert standing.level is Level.QUIET and answers == (False, True)


async def test_blocking_clients_file_their_calls_too_on_the_store_thread(tmp_path):
    """The ingest folder and the CLI's maintenance ask through ``SyncCompleter``: their calls are in the ledger."""
    async with FakeOpenAI() as llm:
        runtime = build_runtime(tmp_path / "bot.db", llm, FakeClock())
        settings = load_settings(
            db_path=tmp_path / "bot.db",
            llm_base_url=llm.base_url,
            llm_api_key="k",
            embeddings="none",
        )
        # asked on a worker thread
        queued = build_completer(settings, runtime.engine, "ingest", runtime.runner)
        await asyncio.to_thread(queued, "You extract memories.", "a passage about bees")
        rows = await runtime.runner.run(
            runtime.engine.db.rows,
            "SELECT kind, person_id, place_id, calls, prompt_tokens FROM usage_ledger",
        )
        await runtime.stop()
    assert rows == [
        {
            "kind": "ingest",
            "person_id": "",
            "place_id": "",
            "calls": 1,
            "prompt_tokens": llm.usage_sent[0]["prompt_tokens"],
        }
    ]


async def test_a_check_in_waits_while_its_persons_day_is_quiet_and_goes_out_on_a_new_day(tmp_path):
    async with FakeOpenAI() as srv:
        rt = build_runtime(
            tmp_path / "bot.db",
            srv,
            FakeClock(moment("2026-05-04 12:00")),
            budget_person_tokens=1_000,
        )
        await rt.start(background_loop=False)
        outbox = Outbox()
        rt.checkins.deliveries["telegram"] = outbox
        await opt_in(rt)
        dated(rt, "Alice runs the Lisbon half marathon on 6 May", "2026-05-06")
        rt.engine.clock.t = moment("2026-05-07 10:00")
        quiet = Spend(calls=1, prompt_tokens=850)  # 85 % of her day: no proactive message
        await rt.runner.run(
            rt.budgets.ledger.add, rt.budgets.day, Charge("reply", PERSON, "telegram"), "m", quiet
        )
        held = await rt.checkins.run()
        asked = len(srv.chat_requests)
        rt.engine.clock.t = moment("2026-05-08 10:00")  # a new day: her budget is whole again
        srv.script("How did the half marathon go?")
        sent = await rt.checkins.run()
        srv.default = lambda body: "[]"
        await rt.stop()
    assert (held.sent, held.waiting, asked) == (0, 1, 0)
    assert sent.sent == 1 and outbox.sent == [("dm-7", "How did the half marathon go?")]


def test_the_contradiction_judge_is_filed_under_whom_the_facts_are_about(engine):
    said = Provenance(platform="discord", guild_id="discord:g1")
    alice = NewMemory(
        content="Alice keeps bees",
        subject="bees",
        scope=Scope.USER,
        scope_id="discord:alice",
        provenance=said,
    )
    bob = replace(alice, content="Bob keeps wasps", scope_id="discord:bob")
    assert job_charge(WriteFacts(engine), (Judged(alice),)) == Charge(
        "judge", "discord:alice", "discord", "discord:g1"
    )
    assert job_charge(WriteFacts(engine), (Judged(alice), Judged(bob))) == Charge(
        "judge", "", "discord", "discord:g1"
    )
