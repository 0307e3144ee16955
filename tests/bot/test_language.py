"""LANG-3: the language a person writes in, named at the end of their turn so a small model
answers in it (``bot.model.language``); English, a name or two words get no note."""

from __future__ import annotations

import pytest

from bot.model.language import ANSWER_IN, written_in
from bot.model.reply_checks import Echoes, without_clock
from memory.clock import FakeClock
from tests.pipeline_support import dm


@pytest.mark.parametrize(
    ("said", "language"),
    [
        ("Ich habe einen Hund, er heißt Bello und ist sehr lieb", "German"),
        ("Mein Bruder wohnt jetzt in Danzig", "German"),
        ("J'ai un chat qui s'appelle Minou et je suis infirmière", "French"),
        ("Tengo un perro y mi hermana vive en Madrid", "Spanish"),
        ("Io sono di Milano e ho una sorella", "Italian"),
        ("Eu tenho um gato e a minha irmã mora em Lisboa", "Portuguese"),
        ("Ik heb een hond en mijn zus woont in Utrecht", "Dutch"),
        ("Benim bir kedim var ve çok tatlı", "Turkish"),
        ("Mam psa i moja siostra jest lekarzem", "Polish"),
        ("我养了一只猫，叫小花", "Chinese"),
        ("私は猫を飼っています", "Japanese"),
        ("저는 고양이를 키워요", "Korean"),
        ("У меня есть собака, её зовут Бобик", "Russian"),
        ("Я живу в Києві і маю кота", "Ukrainian"),
        ("Έχω μια γάτα", "Greek"),
    ],
)
def test_the_language_is_named(said, language):
    assert written_in(said) == language and language in ANSWER_IN


@pytest.mark.parametrize(
    "said",
    [
        "I have a dog called Bello and my sister lives in Madrid",
        "What's my cat called?",
        "Grzegorz",
        "Danke",  # one word: not enough to tell
        "ok 👍",
        "",
        "My cat is called 小花 and she is lovely",  # English with a name in Han characters
        "Je suis désolé, I mean, I am sorry about the mess",  # more English than French
        # read as Polish ("i", "to") by a list that counted English's own little words as
        # Polish's: the real 1.5B then answered "Dzień dobry, Maya! Jak mogę Ci pomóc?"
        "I just moved from Bristol to Glasgow last week.",
        "Where do I live now?",
        "Can you remind me tomorrow at 6pm to call my grandfather?",
    ],
)
def test_english_or_too_little_gets_no_note(said):
    assert written_in(said) is None


def test_the_note_copied_into_a_reply_is_taken_off():
    assert (
        without_clock("Mach ich! (sent 14:05 Europe/Berlin; antworte auf Deutsch)") == "Mach ich!"
    )
    assert without_clock("好的 (sent 14:05 Asia/Shanghai; 请用中文回答)") == "好的"


async def test_a_german_turn_ends_with_the_ask_to_answer_in_german_and_an_english_one_not(rt, srv):
    srv.script("Schön!", "Nice!")
    said = "Ich habe einen Hund, er heißt Bello"
    await rt.orchestrator.reply(dm("telegram", "7", said, mid="1"))
    german = srv.chat_requests[-1]["messages"][-1]["content"]
    await rt.orchestrator.reply(dm("telegram", "7", "I have a cat called Miso", mid="2"))
    english = srv.chat_requests[-1]["messages"][-1]["content"]
    assert german.endswith("; antworte auf Deutsch)") and german.startswith("Ich habe einen Hund")
    assert english.endswith(")") and ";" not in english.rsplit("(sent", 1)[1]


@pytest.fixture
def clock():
    return FakeClock()


def test_a_reply_that_takes_the_persons_name_in_german_is_an_echo():
    """The real 1.5B answered "Hallo! Ich bin Jonas." to Jonas four times."""
    echoes = Echoes(
        [{"role": "user", "content": "Hallo! Ich bin Jonas. Schön, dich kennenzulernen."}], []
    )
    assert echoes.parroted("Hallo! Ich bin Jonas. Wie kann ich helfen?")
    assert not echoes.parroted("Hallo Jonas! Ich bin Lehrer, und du?")


def test_the_persons_own_german_line_said_back_as_the_bots_is_an_echo():
    """The real 1.5B answered "Ich habe einen grauen Kater namens Krümel." with "Ich habe ein grauen
    Kater namens Krümel." (the person's line as its own)."""
    said = "Ich habe einen grauen Kater namens Krümel."
    echoes = Echoes([{"role": "user", "content": said}], [])
    assert echoes.parroted("Ich habe ein grauen Kater namens Krümel.")
    assert not echoes.parroted("Dein grauer Kater Krümel klingt süß!")


def test_the_persons_own_line_is_told_back_in_the_second_person():
    said = "I'm a nurse and my cat Biscuit sleeps on my bed."
    echoes = Echoes([{"role": "user", "content": said}], [])
    assert echoes.told_back(said) == "You're a nurse and your cat Biscuit sleeps on your bed."
    assert echoes.told_back("Yes, I know that I'm a nurse and my cat Biscuit sleeps") is not None
    assert echoes.told_back("I'm a dentist and my dog Rex sleeps on my sofa.") is None
    assert echoes.told_back("You're a nurse and my cat Biscuit sleeps on my bed.") is None


@pytest.mark.parametrize(
    "question,reply,told",
    [
        ("Where do I live now?", "I live now in Glasgow.", "You live now in Glasgow."),
        ("What subject do I teach?", "I teach chemistry.", "You teach chemistry."),
        ("What am I allergic to?", "I am allergic to shellfish.", "You are allergic to shellfish."),
        ("What am I allergic to?", "I'm allergic to my cat.", "You're allergic to your cat."),
        # not the person's question answered as the bot's
        ("Where do I live now?", "I think Glasgow, from what you said.", None),
        ("Do I know you?", "I know you well.", None),
        ("What do I teach?", "You teach chemistry.", None),
        ("Where do I live now?", "I love Glasgow!", None),
    ],
)
def test_a_question_about_the_person_answered_as_the_bots_own_is_told_as_theirs(
    question, reply, told
):
    """The real 1.5B answered "Where do I live now?" with "I live now in Glasgow."."""
    echoes = Echoes([{"role": "user", "content": question}], [])
    assert echoes.as_theirs(reply) == (told or reply)
