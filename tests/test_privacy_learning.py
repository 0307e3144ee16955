"""SEC-5, the jobs that learn from history: after /privacy off (a person's, or a server's by its admin), the
micro-reflection at a session's end, text compaction and the daily reflection read nothing of what was stored
before the opt-out, so no summary or fact is made of it. The real orchestrator and background jobs, the openai
SDK against the scripted local model; what the jobs read is what the model was shown."""

from __future__ import annotations

import json
from dataclasses import replace

from pipeline_support import dm, facts, group

from memory.clock import DAY

WORD = "Zyqxolotl"  # Alice's distinctive word: her turns hold it, and the bot's replies to her repeat it
BOB_SAYS = "Bob plans a trip to the Lofoten islands"
DAY0 = 1_700_006_400.0  # 2023-11-15 00:00 UTC


def model(srv, summary: str = "a friendly chat") -> None:
    """Replies repeat what was said (so the bot's own turns carry Alice's word); every job learns nothing."""

    def respond(body):
        system, last = str(body["messages"][0]["content"]), str(body["messages"][-1]["content"])
        if "session has ended" in last:
            return json.dumps({"facts": [], "summary": summary})
        if "JSON" in system or "one day of a conversation" in last:
            return "[]"
        return "You said: " + last[-80:] if "tools" in body else "a summary"

    srv.default = respond


def job_prompts(srv, since: int) -> list[str]:
    """What the background jobs (reflection, compaction, extraction, daily) were shown after request ``since``."""
    bodies = srv.chat_requests[since:]
    return [json.dumps(b["messages"], ensure_ascii=False) for b in bodies if "tools" not in b]


async def alice_and_bob_talk_in_a_group(rt, n: int = 1) -> None:
    for i in range(n):
        await rt.orchestrator.reply(
            group("telegram", "-100", "7", f"my axolotl is called {WORD} ({i})", name="Alice")
        )
        await rt.orchestrator.reply(group("telegram", "-100", "8", f"{BOB_SAYS} ({i})", name="Bob"))


async def privacy(rt, arg: str, message) -> str:
    return await rt.orchestrator.command("privacy", arg, message)


async def test_micro_reflection_after_privacy_off_reads_nothing_the_person_said_before_nor_the_replies_to_them(
    rt, srv
):
    model(srv)
    await alice_and_bob_talk_in_a_group(rt)
    assert "OK" in await privacy(rt, "off", dm("telegram", "7", "/privacy off"))
    since = len(srv.chat_requests)
    rt.engine.clock.advance(31)
    await rt.background.tick()  # extraction: Alice's waiting words were dropped at /privacy off
    rt.engine.clock.advance(600)
    await rt.background.tick()  # the group's session ended: reflected on
    shown = job_prompts(srv, since)
    # Bob's words are still learned from
    assert any("session has ended" in p and "Lofoten" in p for p in shown)
    assert not [p for p in shown if WORD in p]
    assert rt.engine.db.scalar("SELECT COUNT(*) FROM session_summaries") == 1


async def test_compaction_after_privacy_off_summarises_none_of_the_persons_earlier_words(rt, srv):
    model(srv)
    for i in range(35):
        await rt.orchestrator.observe(
            group("telegram", "-100", "7", f"my axolotl {WORD} did thing {i}", name="Alice")
        )
        await rt.orchestrator.observe(
            group("telegram", "-100", "8", f"{BOB_SAYS}, day {i}", name="Bob")
        )
        rt.engine.clock.advance(1)
    assert "OK" in await privacy(rt, "off", dm("telegram", "7", "/privacy off"))
    since = len(srv.chat_requests)
    rt.engine.clock.advance(5)
    await rt.background.tick()
    # Bob's 35 turns alone do not crowd the context (over 60): none to compact
    rt.engine.clock.advance(5)
    assert (await rt.background.tick())["compacted"] == 0
    for i in range(30):
        await rt.orchestrator.observe(
            group("telegram", "-100", "8", f"{BOB_SAYS}, again {i}", name="Bob")
        )
    assert (await rt.background.tick())["compacted"] == 1
    shown = job_prompts(srv, since)
    assert any("Lofoten" in p for p in shown) and not [p for p in shown if WORD in p]


async def test_the_daily_reflection_reads_none_of_a_day_said_before_privacy_off_in_a_group_or_a_dm(
    rt, srv
):
    rt.engine.clock.t = DAY0 + 10 * 3600
    model(srv)
    await alice_and_bob_talk_in_a_group(rt)
    await rt.orchestrator.reply(dm("telegram", "7", f"in private: {WORD} is ill", mid="d1"))
    assert "OK" in await privacy(rt, "off", dm("telegram", "7", "/privacy off"))
    rt.engine.clock.t = DAY0 + DAY + 4 * 3600
    since = len(srv.chat_requests)
    report = await rt.daily.run()
    shown = [p for p in job_prompts(srv, since) if "one day of a conversation" in p]
    # the group, Bob's side of it only
    assert len(shown) == 1 and "Lofoten" in shown[0] and WORD not in shown[0]
    # Alice's DM is not even due: nothing in it may be learned
    assert (report.chats, report.failed) == (
        1,
        0,
    )


async def test_privacy_on_again_lets_the_jobs_read_what_is_said_from_then_on(rt, srv):
    model(srv)
    assert "OK" in await privacy(rt, "off", dm("telegram", "7", "/privacy off"))
    assert "OK" in await privacy(rt, "on", dm("telegram", "7", "/privacy on"))
    await alice_and_bob_talk_in_a_group(rt)
    since = len(srv.chat_requests)
    rt.engine.clock.advance(631)
    await rt.background.tick()
    rt.engine.clock.advance(631)
    await rt.background.tick()
    assert any(WORD in p for p in job_prompts(srv, since))


async def test_after_an_admin_switches_a_group_off_no_job_reads_what_anyone_said_there_before(
    rt, srv
):
    model(srv)
    rt.engine.clock.t = DAY0 + 10 * 3600
    await alice_and_bob_talk_in_a_group(rt, 35)
    admin = replace(
        group("telegram", "-100", "9", "/privacy server off", name="Carol"), author_is_admin=True
    )
    assert "OK" in await privacy(rt, "server off", admin)
    since = len(srv.chat_requests)
    rt.engine.clock.advance(631)
    done = await rt.background.tick()
    rt.engine.clock.t = DAY0 + DAY + 4 * 3600
    await rt.background.tick()
    report = await rt.daily.run()
    shown = job_prompts(srv, since)
    assert not [p for p in shown if WORD in p or "Lofoten" in p], shown
    assert done["compacted"] == 0 and report.chats == 0
    assert rt.engine.db.scalar("SELECT COUNT(*) FROM session_summaries") == 0


async def test_a_fact_is_not_learned_back_from_a_reply_the_bot_made_to_an_opted_out_person(rt, srv):
    """The bot's reply to Alice repeats her word; after her /privacy off it must not feed Bob's extraction either."""
    model(srv)
    await alice_and_bob_talk_in_a_group(rt)
    assert "OK" in await privacy(rt, "off", dm("telegram", "7", "/privacy off"))
    # filed under whoever the model names: either tag
    fact = {
        "subject": "pet",
        "content": f"the axolotl is {WORD}",
    }
    srv.default = lambda body: (
        facts({**fact, "speaker": "P1"}, {**fact, "speaker": "P2"}) if WORD in str(body) else "[]"
    )
    rt.engine.clock.advance(631)
    await rt.background.tick()
    rt.engine.clock.advance(631)
    await rt.background.tick()
    assert not rt.engine.db.scalar(
        "SELECT COUNT(*) FROM memories WHERE content LIKE ?", (f"%{WORD}%",)
    )
