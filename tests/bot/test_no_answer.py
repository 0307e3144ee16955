"""Issue 45, "never '…'": an answer with no words (empty, or a tool call max_tokens cut off and
hidden) and an answer made only of words the model was given (a prompt's sentence, a tool's
description, its own last reply) are asked for once more, without tools and with a short budget;
when that answer has no words of its own either, the person is told so in a plain sentence. The
real openai SDK against the fake server."""

from __future__ import annotations

import json

import pytest

from bot.model.client import AGAIN_TOKENS
from bot.model.reply_checks import Echoes
from bot.types import NO_ANSWER
from memory.clock import FakeClock
from tests.fakes import ToolCall
from tests.fakes.openai_server import CutShort
from tests.pipeline_support import build_runtime, dm, group

pytestmark = pytest.mark.asyncio
# what the real 0.5B wrote until its 1,024 tokens ran out
CUT_CALL = (
    '<tool_call>\n{"name": "memory_store", "arguments": {"content": "I am Sam and I am Sam and'
)


@pytest.fixture
async def rt(tmp_path, srv):
    runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock())
    await runtime.start(background_loop=False)
    yield runtime
    srv.default = lambda body: "[]"
    await runtime.stop()


async def answered(rt, srv, text: str, *answers: str) -> str:
    """What the bot replies to ``text`` in the DM when the model answers ``answers`` in turn."""
    srv.script(*answers)
    return (await rt.orchestrator.reply(dm("telegram", "7", text, mid=text))).text


class Sink:
    def __init__(self) -> None:
        self.parts: list[str] = []

    async def __call__(self, text: str) -> None:
        self.parts.append(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def kept(rt) -> list[str]:
    return [r["content"] for r in rt.engine.db.rows("SELECT content FROM messages ORDER BY rowid")]


def memories(rt) -> list[str]:
    return [r["content"] for r in rt.engine.db.rows("SELECT content FROM memories")]


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(
    "cut",
    [CutShort(CUT_CALL), CutShort(call=ToolCall("memory_store", '{"content": "Sam is a nur'))],
    ids=["written", "structured"],
)
async def test_a_call_cut_off_then_an_empty_answer_tells_the_person_plainly(rt, srv, cut, streamed):
    srv.script(cut, "")
    sink = Sink() if streamed else None
    reply = await rt.orchestrator.reply(dm("telegram", "7", "I'm Sam", mid="1"), sink)

    assert reply.text == NO_ANSWER and "…" not in reply.text
    first, again = srv.chat_requests[:2]
    assert "tools" in first and "tools" not in again
    assert again["max_tokens"] == AGAIN_TOKENS < first["max_tokens"]
    assert "no tool call" in again["messages"][-1]["content"]
    assert memories(rt) == []  # the half call was never run
    # the person's words are kept; "no answer" is not kept as the bot's words (a small model would
    # say it again)
    assert kept(rt) == ["I'm Sam"]
    assert sink is None or "memory_store" not in sink.text


async def test_a_call_cut_off_then_an_answer_gives_the_answer(rt, srv):
    srv.script(CutShort(CUT_CALL), "Nice to meet you, Sam!")
    sink = Sink()
    reply = await rt.orchestrator.reply(dm("telegram", "7", "I'm Sam", mid="1"), sink)
    assert reply.text == sink.text == "Nice to meet you, Sam!"
    assert len(srv.chat_requests) == 2


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_call_that_stops_mid_name_is_never_shown_and_is_asked_again(rt, srv, streamed):
    """The real 1.5B's whole answer was '{{{"name": "conversation_search' (stopped, not cut by
    max_tokens): the person read it."""
    srv.script('{{{"name": "conversation_search', "Forty years of carpentry, impressive!")
    sink = Sink() if streamed else None
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "He was a carpenter for forty years.", mid="1"), sink
    )
    assert reply.text == "Forty years of carpentry, impressive!"
    assert sink is None or sink.text == reply.text


async def test_a_long_text_answer_cut_by_max_tokens_is_kept_not_asked_again(rt, srv):
    srv.script(CutShort("Here is a long story about a fox who"))
    reply = await rt.orchestrator.reply(dm("telegram", "7", "tell me a story", mid="1"))
    assert reply.text == "Here is a long story about a fox who" and len(srv.chat_requests) == 1


# -- parrots --------------------------------------------------------------------------------
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_tools_description_given_back_as_the_reply_is_asked_again_and_never_shown(
    rt, srv, streamed
):
    described = next(
        s["function"]["description"]
        for s in rt.orchestrator.replying.parts.tools(
            await rt.orchestrator.replying.resolve(dm("telegram", "7", "x")), None
        ).schemas()
        if s["function"]["name"] == "reminder_set"
    )
    parrot = described.split(" (")[0] + "."  # "Reminder for this chat: text and due time."
    srv.script(parrot, "Hello Sam, nice to meet you.")
    sink = Sink() if streamed else None
    reply = await rt.orchestrator.reply(dm("telegram", "7", "hi, I'm Sam", mid="1"), sink)
    assert reply.text == "Hello Sam, nice to meet you."
    assert sink is None or sink.text == "Hello Sam, nice to meet you."
    assert "tools" not in srv.chat_requests[1]


async def test_the_same_reply_to_new_words_is_caught_and_a_repeated_answer_to_a_question_is_not(
    rt, srv
):
    said = "I saved, updated, and forgot something."  # the real 0.5B's answer to all 17 turns
    srv.script(said, said)
    await rt.orchestrator.reply(dm("telegram", "7", "I'm Sam", mid="1"))
    second = await rt.orchestrator.reply(dm("telegram", "7", "I'm a nurse", mid="2"))
    srv.script(said, said)
    third = await rt.orchestrator.reply(dm("telegram", "7", "I live in Leeds", mid="3"))
    assert second.text == said and third.text == NO_ANSWER
    # a question asked again may get the same answer again: it shares the question's words
    srv.script(*["Your dog is called Rex."] * 3)
    for mid, asked in enumerate(("what's my dog called?", "my dog's name?", "is my dog Rex?")):
        again = await rt.orchestrator.reply(dm("telegram", "7", asked, mid=f"d{mid}"))
        assert again.text == "Your dog is called Rex."
    assert len(srv.chat_requests) == 7  # 1 + 1 + 2 + 3: only the parrot was asked again


async def test_no_reply_prompt_or_tool_description_holds_the_sentences_small_models_gave_back(rt):
    import prompts

    turn = await rt.orchestrator.replying.resolve(dm("telegram", "7", "x"))
    descriptions = json.dumps(rt.orchestrator.replying.parts.tools(turn, None).schemas())
    shown = prompts.render("tool_results", results="memory_store({}) returned: {}")
    assert "fires at the asked time" not in descriptions
    assert "Only say you saved" not in shown and "saved, updated or forgot" not in shown


# -- the canned note ----------------------------------------------------------------------
async def test_a_done_forget_whose_reply_says_done_gets_no_second_done(rt, srv):
    srv.script("Noted!")
    await rt.orchestrator.reply(dm("telegram", "7", "my locker code is 5521", mid="1"))
    srv.script("Done. I'm well, thanks!")
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "forget my locker code. How are you?", mid="2")
    )
    assert reply.text == "Done. I'm well, thanks!" and reply.forgotten
    assert rt.engine.db.scalar("SELECT COUNT(*) FROM messages WHERE content LIKE '%5521%'") == 0


async def test_a_refusal_of_what_the_bot_did_anyway_gives_way_to_what_was_done(rt, srv):
    """The real 1.5B answered "forget my locker code" and "remind me tomorrow at 6pm to call my
    grandfather" with "I'm sorry, but I can't help you with that.", then the bot's own note said
    it was done; now the note alone says so. A refusal of something not done stands."""
    srv.script("Noted!")
    await rt.orchestrator.reply(dm("telegram", "7", "my locker code is 5821", mid="1"))
    srv.script("I'm sorry, but I can't help you with that.")
    reply = await rt.orchestrator.reply(
        dm(
            "telegram",
            "7",
            "Oh, and can you delete my locker code? I shouldn't have shared it.",
            mid="2",
        )
    )
    assert reply.forgotten and reply.text == "(Done: what you asked me to forget is forgotten.)"
    srv.script("I'm sorry, but I can't help you with that.")
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "Can you remind me tomorrow at 6pm to call my grandfather?", mid="3")
    )
    assert reply.text.startswith("Reminder set for") and "sorry" not in reply.text
    srv.script("I'm sorry, but I can't help you with that.")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "Can you hack my ex's email?", mid="4"))
    assert reply.text == "I'm sorry, but I can't help you with that."


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_persons_own_line_said_back_in_the_first_person_is_asked_again(rt, srv, streamed):
    """The real 1.5B answered "I have a grey cat called Biscuit." to that line, and later "I live in
    Leeds, near the river. (sent 05:58 UTC)" to "Which city do I live in?": the bot speaking as the
    person, with the clock note of the person's turns copied."""
    sink = Sink() if streamed else None
    srv.script("I have a grey cat called Biscuit.", "A grey cat! What's Biscuit like?")
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "I have a grey cat called Biscuit.", mid="1"), sink
    )
    assert reply.text == "A grey cat! What's Biscuit like?"
    assert sink is None or sink.text == reply.text
    srv.script("Nice.")
    await rt.orchestrator.reply(dm("telegram", "7", "I live in Leeds, near the river.", mid="2"))
    # the person's question about themself answered as the bot's own: told as theirs, no second ask
    srv.script("I live in Leeds, near the river. (sent 05:58 UTC)")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "Which city do I live in?", mid="3"))
    assert reply.text == "You live in Leeds, near the river."
    # a reply that restates the person's line about them is an answer, not a parrot
    srv.script("Your cat is called Biscuit. (sent 06:14 UTC)")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "What's my cat called?", mid="4"))
    assert reply.text == "Your cat is called Biscuit."


async def test_a_chinese_persons_own_line_said_back_as_the_bots_is_asked_again(rt, srv):
    """The real 1.5B answered "我住在哪个城市？" with "林晓：我住在成都，离锦江不远。"."""
    srv.script("好的。")
    await rt.orchestrator.reply(dm("telegram", "7", "我住在成都，离锦江不远。", mid="1"))
    srv.script("林晓：我住在成都，离锦江不远。", "你住在成都。")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "我住在哪个城市？", mid="2"))
    assert reply.text == "你住在成都。"


async def test_a_fact_about_the_person_said_back_as_the_bots_own_life_is_asked_again(rt, srv):
    """The real 1.5B, shown 'about "Sam": "Sam works as a nurse at the children's hospital."',
    answered "Do you know what I do for work?" with "I work as a nurse at the children's
    hospital."."""
    srv.script(
        ToolCall(
            "memory_store",
            {
                "content": "Sam works as a nurse at the children's hospital.",
                "subject": "Sam",
                "type": "semantic",
            },
        ),
        "Noted.",
    )
    await rt.orchestrator.reply(dm("telegram", "7", "hello", mid="1", name="Sam"))
    srv.script("I work as a nurse at the children's hospital.", "You work as a nurse there.")
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "Do you know what I do for work?", mid="2", name="Sam")
    )
    assert reply.text == "You work as a nurse there."
    assert "nurse" in srv.chat_requests[-2]["messages"][0]["content"]  # the fact was shown
    # another run: "I know that I work as a nurse at the children's hospital." (its lead-in is no
    # answer of the bot's own); the bot recalling what it knows is a reply
    srv.script("I know that I work as a nurse at the children's hospital.", "You're a nurse.")
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "Do you know what I do for work?", mid="3", name="Sam")
    )
    assert reply.text == "You're a nurse."
    srv.script("I remember that you work as a nurse at the children's hospital.")
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "Do you remember my job?", mid="4", name="Sam")
    )
    assert reply.text == "I remember that you work as a nurse at the children's hospital."


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_bot_taking_the_persons_name_is_asked_again(rt, srv, streamed):
    """The real 1.5B answered "Hi! I'm Sam. Nice to meet you." with "Hello! I'm Sam.", and
    "Hey there, I'm Maya." with "Hey there! I'm Maya. How can I help you today?" (streamed: shown
    before it was checked)."""
    sink = Sink() if streamed else None
    srv.script("Hey there! I'm Sam. How can I help you today?", "Nice to meet you, Sam!")
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "Hi! I'm Sam. Nice to meet you.", mid="1"), sink
    )
    assert reply.text == "Nice to meet you, Sam!" and (sink is None or sink.text == reply.text)
    # the bot saying its own name, or "I'm Sam's ..." is no parrot
    srv.script("I'm Sam's companion, happy to help.")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "Who are you?", mid="2"))
    assert reply.text == "I'm Sam's companion, happy to help."


async def test_the_line_just_said_given_back_word_for_word_is_asked_again(rt, srv):
    """The real 1.5B answered "Biscuit knocked a glass off the table this morning, the rascal."
    with that line; saying it back to the person ("you") is a reply, if a dull one."""
    line = "Biscuit knocked a glass off the table this morning, the rascal."
    srv.script(line, "Oh no, Biscuit! Was anything broken?")
    reply = await rt.orchestrator.reply(dm("telegram", "7", line, mid="1"))
    assert reply.text == "Oh no, Biscuit! Was anything broken?"
    srv.script("You much prefer tea to coffee, green tea especially.")
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "I much prefer tea to coffee, green tea especially.", mid="2")
    )
    assert reply.text == "You much prefer tea to coffee, green tea especially."
    # a short line joined in is a reply too
    srv.script("Happy birthday Sam!")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "Happy birthday Sam!", mid="3"))
    assert reply.text == "Happy birthday Sam!"


async def test_a_note_of_the_bots_copied_from_an_earlier_reply_is_taken_off(rt, srv):
    """The real 1.5B ended a reply with the "(Reminder set for ...)" of three turns before, which
    was then read as a new reminder claimed: "(I didn't set a new reminder just now ...)"."""
    srv.script("OK!")
    first = await rt.orchestrator.reply(
        dm("telegram", "7", "Can you remind me tomorrow at 6pm to call my grandfather?", mid="1")
    )
    note = first.text.split("\n\n", 1)[1]
    assert note.startswith("(Reminder set for")
    srv.script(f"Got it, no prawns for you. {note}")
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "I'm allergic to shellfish, so no prawns for me.", mid="2")
    )
    assert reply.text == "Got it, no prawns for you."


@pytest.mark.parametrize("said", ['"I don\'t know."', '("I don\'t know.")', "\"I don't know."])
async def test_a_reply_wrapped_in_quotation_marks_loses_them(rt, srv, said):
    """The real 0.5B wrapped its replies in quotes; a quote inside a reply stays."""
    srv.script(said, 'She said "hi" to me.')
    reply = await rt.orchestrator.reply(dm("telegram", "7", "What's my cat called?", mid="1"))
    assert reply.text == "I don't know."
    reply = await rt.orchestrator.reply(dm("telegram", "7", "What did she say?", mid="2"))
    assert reply.text == 'She said "hi" to me.'


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_copied_note_alone_is_no_answer_and_never_shown(rt, srv, streamed):
    """The real 0.5B answered with the bot's reminder note of an earlier turn alone, and ended
    replies with a piece of it: "Morning! (Reminders lists them; /reminders cancel <n> cancels
    one))"."""
    srv.script("OK!")
    first = await rt.orchestrator.reply(
        dm("telegram", "7", "Can you remind me tomorrow at 6pm to call my grandfather?", mid="1")
    )
    note = first.text.split("\n\n", 1)[1]
    sink = Sink() if streamed else None
    srv.script(note, "Noted: your locker code stays with you.")
    reply = await rt.orchestrator.reply(
        dm("telegram", "7", "My locker is the blue one by the door.", mid="2"), sink
    )
    assert reply.text == "Noted: your locker code stays with you."
    assert sink is None or sink.text == reply.text
    srv.script("Morning! (Reminders lists them; /reminders cancel <n> cancels one))")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "Morning!", mid="3"))
    assert reply.text == "Morning!"


def test_every_note_the_bot_adds_is_taken_off_when_a_model_copies_it():
    """``bot.model.reply_checks`` finds the notes by their words: a note reworded where it is made
    must still be found."""
    from bot.model.honesty import FORGOTTEN, NOTES
    from bot.model.reply_checks import without_clock
    from bot.reminders.claims import NOT_NEW, NOT_SET
    from bot.reminders.commands import SET

    made = f"({SET} Tuesday 8 December 2026, 18:00 (UTC): call mum. (/reminders lists them))"
    for note in (NOT_SET, NOT_NEW, FORGOTTEN, *NOTES.values(), made):
        assert without_clock(f"Fine. {note}") == "Fine."


@pytest.mark.parametrize(
    "said",
    [
        '"Quinn": Melanie went on Friday.',
        "Quinn: Melanie went on Friday.",
        "Companion: Melanie went on Friday.",
    ],
)
async def test_a_speakers_label_copied_from_the_transcript_is_taken_off(rt, srv, said):
    """The real 1.5B opened 9 of 30 answers in a group with the asker's label ('"Quinn": ...')."""
    srv.script(said)
    asked = "Companion, when did Melanie go to the pottery workshop?"
    reply = await rt.orchestrator.reply(group("telegram", "-100", "7", asked, name="Quinn"))
    assert reply.text == "Melanie went on Friday."


async def test_a_label_that_is_nobodys_name_stays():
    echoes = Echoes([{"role": "user", "content": '"Quinn": when?'}], [])
    assert echoes.unlabelled("Note: it was Friday.") == "Note: it was Friday."
    assert echoes.unlabelled("Quinn: it was Friday.") == "it was Friday."


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_start_of_a_call_given_up_on_is_no_reply_and_no_part_of_one(rt, srv, streamed):
    """The real 1.5B answered German turns with "{{{" and '{"' alone, and English ones with
    "{Hey there! How can I help you today?" and "{I've set a reminder for you ..."."""
    sink = Sink() if streamed else None
    srv.script("{{{", "Hallo Jonas! Schön, dich kennenzulernen.")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "Hallo! Ich bin Jonas.", mid="1"), sink)
    assert reply.text == "Hallo Jonas! Schön, dich kennenzulernen."
    srv.script('{"')
    srv.script("{Hey there! How can I help you today?")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "Hey there, I'm Maya.", mid="2"), sink)
    assert reply.text == "Hey there! How can I help you today?"
    assert sink is None or "{" not in sink.text
    # braces that close are the model's own writing
    srv.script("{curly} braces are fine when they close")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "show me braces", mid="3"))
    assert reply.text == "{curly} braces are fine when they close"


async def test_the_persons_own_thing_called_the_bots_own_is_asked_again(rt, srv):
    """The real 1.5B answered "What's my grandfather's name?" with "My grandfather's name is
    Tomasz."; "Your grandfather is Tomas." is the answer."""
    answers = ("My grandfather's name is Tomas.", "Your grandfather is called Tomas.")
    said = await answered(rt, srv, "What's my grandfather's name?", *answers)
    assert said == "Your grandfather is called Tomas."
    # the bot's own things are its own to mention
    answer = "My favourite season is autumn, and yours?"
    assert await answered(rt, srv, "I love spring!", answer) == answer


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_tools_result_said_back_as_the_reply_is_never_shown(rt, srv, streamed):
    """The real 0.5B, after one reminder_set, answered every later turn with that tool's result
    shape: '{"status": "set", "id": 2, "text": "I work as a nurse ...", "when": ...}'."""
    sink = Sink() if streamed else None
    result = (
        '{"status": "set", "id": 2, "text": "I work as a nurse.", "when": "20:31 UTC", , "every":'
    )
    srv.script(result, "A nurse! That must keep you busy.")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "I work as a nurse.", mid="1"), sink)
    assert reply.text == "A nurse! That must keep you busy."
    assert sink is None or sink.text == reply.text


async def test_a_short_reply_said_a_third_time_in_a_row_is_asked_again(rt, srv):
    """The real 0.5B answered all 20 turns of a modelcheck run with "Saving"; twice may be
    chance."""
    for mid, line in enumerate(["I have a cat.", "I live in Leeds."]):
        srv.script("Saving")
        reply = await rt.orchestrator.reply(dm("telegram", "7", line, mid=str(mid)))
        assert reply.text == "Saving"
    srv.script("Saving", "Tea it is, then!")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "I prefer tea.", mid="3"))
    assert reply.text == "Tea it is, then!"


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_persons_line_said_as_the_bots_twice_is_told_back_as_theirs(rt, srv, streamed):
    """The real 1.5B answered "What subject do I teach?" with "I teach chemistry at a secondary
    school." when asked and when asked again (twice "no answer" in two runs): right, but said as
    its own. Told back in the second person; anything else said twice is still no answer. (A
    question like that one is now told as theirs at once: ``Echoes.as_theirs``.)"""
    sink = Sink() if streamed else None
    srv.script("Nice!")
    await rt.orchestrator.reply(
        dm("telegram", "7", "I teach chemistry at a secondary school.", mid="1")
    )
    echo = "I teach chemistry at a secondary school."
    srv.script(echo, "Tool results, from the system, not from the person, who does not see them.")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "Remind me of my job.", mid="2"))
    assert reply.text == NO_ANSWER  # the second answer, a prompt's words, is no answer
    srv.script(echo, echo)
    reply = await rt.orchestrator.reply(dm("telegram", "7", "Remind me of my job.", mid="3"), sink)
    assert reply.text == "You teach chemistry at a secondary school."
    assert sink is None or sink.text == reply.text


async def test_a_chinese_persons_line_said_back_after_a_greeting_or_their_cat_as_the_bots(rt, srv):
    """The real 1.5B answered four Chinese turns with "你好！" and the person's own line, and "我的猫叫
    什么名字？" with "我的猫叫咪咪。"."""
    said = await answered(
        rt, srv, "我养了一只橘猫，叫豆豆。", "你好！我养了一只橘猫，叫豆豆。", "豆豆真可爱！"
    )
    assert said == "豆豆真可爱！"
    said = await answered(rt, srv, "我的猫叫什么名字？", "我的猫叫咪咪。", "你的猫叫豆豆。")
    assert said == "你的猫叫豆豆。"


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_question_about_the_person_answered_in_the_first_person_is_told_as_theirs(
    rt, srv, streamed
):
    """The real 1.5B answered "Where do I live now?" with "I live now in Glasgow." (scored right,
    said as its own)."""
    sink = Sink() if streamed else None
    srv.script("I live now in Glasgow.")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "Where do I live now?", mid="1"), sink)
    assert reply.text == "You live now in Glasgow."
    assert sink is None or sink.text == reply.text


async def test_a_tool_result_line_or_the_end_of_a_json_object_is_no_reply(rt, srv):
    """The real 0.5B answered 15 turns of a modelcheck run in the form tool results are shown to it
    ('Memory_store({"name": "cat", ...}) returned: Error: invalid arguments ...'), and its first
    turn with the end of a JSON object."""
    echo = 'Memory_store({"name": "cat", "content": "Biscuit."}) returned: Error: invalid arguments'
    said = await answered(rt, srv, "What's my cat called?", echo, "Your cat is Biscuit.")
    assert said == "Your cat is Biscuit."
    tail = ', "tags": ["user-stated", "concern"]}'
    said = await answered(rt, srv, "Hi! I'm Sam.", tail, "Hi Sam, nice to meet you!")
    assert said == "Hi Sam, nice to meet you!"


async def test_a_german_reply_said_again_is_caught_though_the_turn_asks_for_german(rt, srv):
    """The real 1.5B answered seven German turns running with "Hier ist der Antwort auf Deutsch: Ich
    wohne in München, ..."; the note ending each turn ("antworte auf Deutsch") was read as the
    person's words, so the reply shared a word with every new line and was never a repeat. (A
    sentence of its own said again word for word is asked again from its second time now.)"""
    echo = (
        "Hier ist der Antwort auf Deutsch: Ich wohne in München, nicht weit vom Englischen Garten."
    )
    await answered(rt, srv, "Ich wohne in München, nicht weit vom Englischen Garten.", "Schön!")
    assert await answered(rt, srv, "Meine Schwester Lena studiert Medizin.", echo) == echo
    said = await answered(rt, srv, "Wie heißt mein Kater?", echo, "Dein Kater heißt Krümel.")
    assert said == "Dein Kater heißt Krümel."


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_german_answer_about_the_person_said_as_the_bots_own_life_is_not_shown(
    rt, srv, streamed
):
    """The real 1.5B (modelcheck --language de) answered "Weißt du, was ich beruflich mache?" with
    "Ja, ich bin als Krankenpfleger im Kinderkrankenhaus tätig." and "In welcher Stadt wohne
    ich?" with "Ich wohne in der Stadt Berlin.": asked again; said again, the person is told the
    fact the prompt showed about them, as it was stored."""
    sink = Sink() if streamed else None
    fact = "Jonas arbeitet als Krankenpfleger im Kinderkrankenhaus."
    stored = {"content": fact, "subject": "Jonas", "type": "semantic"}
    srv.script(ToolCall("memory_store", stored), "Notiert.")
    await rt.orchestrator.reply(dm("telegram", "7", "Hallo!", mid="1", name="Jonas"))
    echo = "Ja, ich bin als Krankenpfleger im Kinderkrankenhaus tätig."
    srv.script(echo, echo)
    asked = dm("telegram", "7", "Weißt du, was ich beruflich mache?", mid="2", name="Jonas")
    reply = await rt.orchestrator.reply(asked, sink)
    assert reply.text == fact and (sink is None or sink.text == fact)
    srv.script("Ich wohne in der Stadt Berlin.", "Du wohnst in München.")
    asked = dm("telegram", "7", "In welcher Stadt wohne ich?", mid="3", name="Jonas")
    assert (await rt.orchestrator.reply(asked)).text == "Du wohnst in München."


async def test_a_first_person_reply_that_is_the_bots_own_stays(rt, srv):
    said = await answered(
        rt, srv, "I love hiking in the Alps", "I love hiking too! The Alps are beautiful."
    )
    assert said == "I love hiking too! The Alps are beautiful."
    said = await answered(
        rt, srv, "Weißt du, was ich beruflich mache?", "Du bist Krankenpfleger, oder?"
    )
    assert said == "Du bist Krankenpfleger, oder?"
    said = await answered(rt, srv, "Was soll ich kochen?", "Ich würde Pasta kochen.")
    assert said == "Ich würde Pasta kochen."


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_persons_next_line_made_up_at_the_end_of_a_reply_is_taken_off(rt, srv, streamed):
    """The real 1.5B answered "Thanks, bye!" with "You're welcome! Have a great day! (You: bye)"
    in two modelcheck --second runs."""
    sink = Sink() if streamed else None
    srv.script("You're welcome! Have a great day! (You: bye)")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "Thanks, bye!", mid="1"), sink)
    assert reply.text == "You're welcome! Have a great day!"
    assert sink is None or sink.text.strip() == reply.text
    said = await answered(rt, srv, "Hmm", "Meanwhile (me too) I read it.")
    assert said == "Meanwhile (me too) I read it."
    # and a note of a save it never made (the real 1.5B, modelcheck --second, three turns)
    sink = Sink() if streamed else None
    srv.script("You live now in Glasgow. (Added to your location: Glasgow)")
    reply = await rt.orchestrator.reply(dm("telegram", "7", "Where do I live now?", mid="2"), sink)
    assert reply.text == "You live now in Glasgow."
    assert sink is None or sink.text.strip() == reply.text


async def test_a_sentence_of_its_own_said_again_to_new_words_is_asked_again(rt, srv):
    """The real 1.5B (modelcheck --language de) answered two turns running with "Hallo Jonas! Ich
    bin ein kompatibles Kater und habe einen grauen Kater namens Krümel. Wie geht es dir mit dem
    Kater Krümel?"; a short one ("Gern geschehen!") may come twice."""
    same = (
        "Hallo Jonas! Ich bin ein kompatibles Kater und habe einen grauen Kater namens Krümel. "
        "Wie geht es dir mit dem Kater Krümel?"
    )
    said = await answered(rt, srv, "Krümel hat ein Glas vom Tisch geworfen.", same)
    assert said == same
    said = await answered(rt, srv, "Was soll ich heute kochen?", same, "Vielleicht Nudeln?")
    assert said == "Vielleicht Nudeln?"
    for mid in ("Danke!", "Danke dir!"):
        assert await answered(rt, srv, mid, "Gern geschehen!") == "Gern geschehen!"
