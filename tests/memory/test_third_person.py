"""Issue 45 on a transcript alone: a person's fact in the third person with its dates resolved
(``memory.write.third_person``, ``memory.write.relative_dates``), and a fact the conversation did
not say held back (``memory.write.grounding``); the pipeline's own test is
tests/test_third_person_facts.py."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from memory.models import Source
from memory.scopes import RecallContext
from memory.write.extraction import Line, Transcript, memories_from
from memory.write.not_facts import not_a_fact, unasked, unlabelled
from memory.write.relative_dates import resolved
from memory.write.third_person import third_person

WRITTEN = datetime(2026, 10, 21, 9, 0, tzinfo=UTC).timestamp()  # a Wednesday


@pytest.mark.parametrize(
    ("said", "told"),
    [
        ("I work as a nurse at the hospital.", "Priya works as a nurse at the hospital."),
        ("I live in Leeds, near the river.", "Priya lives in Leeds, near the river."),
        ("I'm allergic to nuts and my son too", "Priya is allergic to nuts and Priya's son too"),
        ("I've just adopted a kitten.", "Priya has just adopted a kitten."),
        ("I am vegetarian", "Priya is vegetarian"),
        ("I have two kids", "Priya has two kids"),
        ("I don't eat meat", "Priya doesn't eat meat"),
        ("I really love watching films", "Priya really loves watching films"),
        ("I watch films and I study law", "Priya watches films and Priya studies law"),
        ("I went to Paris", "Priya went to Paris"),
        ("I'd like to visit Japan", "Priya would like to visit Japan"),
        ("I'd never been to Rome", "Priya had never been to Rome"),
        ("My sister says I cook well", "Priya's sister says Priya cooks well"),
        ("Me and my husband live in York", "Priya and Priya's husband live in York"),
        ("i work at acme", "Priya works at acme"),
        # the real 1.5B's "Sam muches prefer tea" (issue 45)
        ("I much prefer tea to coffee", "Priya much prefers tea to coffee"),
        ("I especially like green tea", "Priya especially likes green tea"),
        ("The user's dog is called Rex", "Priya's dog is called Rex"),
        # already about the person, or not English: left as written (never translated)
        ("Priya works as a nurse", "Priya works as a nurse"),
        ("User 8 loves sailing", "User 8 loves sailing"),
        # German (issue 45, LANG-3: the real 1.5B's German facts, all in the first person)
        ("Ich arbeite als Krankenschwester", "Priya arbeitet als Krankenschwester"),
        ("Mein Zahnarzttermin ist am 3. Dezember.", "Priyas Zahnarzttermin ist am 3. Dezember."),
        ("Merk dir, dass ich gegen Nüsse allergisch bin.", "Priya ist gegen Nüsse allergisch."),
        ("Seit Mai wohne ich in München.", "Seit Mai wohnt Priya in München."),
        ("Ich habe einen Kater namens Krümel.", "Priya hat einen Kater namens Krümel."),
        ("Ich fahre jeden Tag mit dem Rad.", "Priya fährt jeden Tag mit dem Rad."),
        ("Ich kann gut kochen", "Priya kann gut kochen"),
        ("Die Katze gehört mir", "Die Katze gehört Priya"),
        ("Ich gern Kuchen", "Ich gern Kuchen"),  # no verb beside "ich": as said
        ("me gusta el café", "me gusta el café"),
        ("Me llamo Priya y trabajo como enfermera", "Me llamo Priya y trabajo como enfermera"),
        ("My mieszkamy w Gdańsku", "My mieszkamy w Gdańsku"),
        # Chinese: the name for 我, 的 after it where it was "my" (the real 1.5B's facts, issue 45)
        ("我是护士", "Priya是护士"),
        ("我哥哥林涛在深圳当程序员。", "Priya的哥哥林涛在深圳当程序员。"),
        ("我的猫叫豆豆。", "Priya的猫叫豆豆。"),
        ("我们明天去公园", "我们明天去公园"),
    ],
)  # fmt: skip
def test_a_first_person_fact_is_told_about_its_person(said, told):
    assert third_person(said, "Priya") == told


def test_no_name_leaves_the_words_as_they_are():
    assert third_person("I live in Leeds", "") == "I live in Leeds"
    assert third_person("I live in Leeds", "🌸") == "I live in Leeds"


@pytest.mark.parametrize(
    ("said", "dated"),
    [
        ("I moved to York last month.", "I moved to York in September 2026."),
        ("Yesterday I ran a 10k", "On 20 October 2026 I ran a 10k"),
        ("I have lived here since last year", "I have lived here since 2025"),
        ("I start my new job next week", "I start my new job in the week of 26 October 2026"),
        ("My birthday was last Friday", "My birthday was on Friday 16 October 2026"),
        ("I got a puppy 2 weeks ago", "I got a puppy around 7 October 2026"),
        ("We met three years ago", "We met in 2023"),
        ("I will visit next Monday", "I will visit on Monday 26 October 2026"),
        ("Last night I saw a film", "On the night of 20 October 2026 I saw a film"),
        ("I met her in January 2020", "I met her in January 2020"),
        ("Ich bin letzten Monat umgezogen", "Ich bin letzten Monat umgezogen"),
        # after a preposition the phrase's own "on" goes (the 1.5B's "that's all for on ...")
        ("The cake is for tomorrow", "The cake is for 22 October 2026"),
        (
            "We go on holiday in the morning tomorrow",
            "We go on holiday in the morning on 22 October 2026",
        ),
    ],
)
def test_relative_dates_are_resolved_against_when_the_line_was_written(said, dated):
    assert resolved(said, WRITTEN, UTC) == dated


def test_a_relative_date_is_the_speakers_day_and_none_without_a_time():
    # noon UTC on the 21st is already the 22nd in Auckland: its "yesterday" is the 21st
    noon = WRITTEN + 3 * 3600
    assert resolved("yesterday", noon, ZoneInfo("Pacific/Auckland")) == "on 21 October 2026"
    assert resolved("I moved last month", None, UTC) == "I moved last month"


def _dm(*said: tuple[str | None, str]) -> Transcript:
    priya = RecallContext("telegram", "telegram:7", "dm-7", is_dm=True)
    return Transcript(
        tuple(
            Line(priya if who else None, who or "Juniper", text, f"m{n}", WRITTEN)
            for n, (who, text) in enumerate(said, 1)
        )
    )


def _fact(content: str, lines: list[int]) -> dict[str, object]:
    return {"speaker": "P1", "lines": lines, "subject": "me", "content": content}


def test_the_beagle_citing_the_cat_question_is_not_filed():
    """The real 1.5B's fact, in its exact words, filed about the person after a restart: "called" is
    the cited line, so the old check (no word of it said) let it through."""
    transcript = _dm(("Priya", "What's my cat called?"), (None, "You haven't told me yet!"))
    beagle = _fact("I've adopted a beagle called Rex.", [1])
    assert memories_from([beagle], transcript, Source.AUTO_EXTRACTION) == []


def test_a_word_only_the_prompts_example_holds_is_not_filed_even_beside_a_said_one():
    transcript = _dm(("Priya", "I moved to Zagreb in May"), (None, "Lovely city!"))
    copied = _fact("Priya restores harpsichords in Zagreb", [1])  # the prompt's example, half of it
    said = _fact("Priya moved to Zagreb in May", [1])
    found = memories_from([copied, said], transcript, Source.AUTO_EXTRACTION)
    assert [m.content for m in found] == ["Priya moved to Zagreb in May"]


def test_facts_the_conversation_said_are_filed_however_the_model_cited_them():
    transcript = _dm(
        ("Priya", "I have a dog"), (None, "Is it a beagle?"), ("Priya", "Yes! His name is Rex"),
        (None, "Cute!"), ("Priya", "我养了一只小猎犬"), ("Priya", "I moved to Gdańsk last month, lol"),
    )  # fmt: skip
    sent = [
        _fact("Priya's dog Rex is a beagle", [3]),  # "beagle" is in the question it answers
        _fact("Priya has a dog called Rex", [1]),  # cited beside the line with "Rex"
        _fact("Priya 养了一只小猎犬", [5]),
        _fact("I moved to Gdansk last month", [6]),  # the accent left out
    ]
    found = memories_from(sent, transcript, Source.AUTO_EXTRACTION)
    assert [m.content for m in found] == [
        "Priya's dog Rex is a beagle",
        "Priya has a dog called Rex",
        "Priya 养了一只小猎犬",
        "Priya moved to Gdansk in September 2026",
    ]


@pytest.mark.parametrize(
    ("filed", "why"),
    [
        ("remind me tomorrow at 9am to call the vet", "a request, not a fact"),
        ("Thanks, that's all for today.", "a greeting or a thanks, not a fact"),
        ("Hello again!", "a greeting or a thanks, not a fact"),
        ("Hilary is Priya's aunt", None),
        ("Priya thanks her mum every Sunday", None),
        # the 1.5B filed the person's greetings with their label (modelcheck --second)
        ("Maya: Morning!", "a greeting or a thanks, not a fact"),
        ("Maya: Thanks, bye!", "a greeting or a thanks, not a fact"),
        ("Morning runs are Maya's favourite.", None),
        ("Maya works the evening shift", None),
    ],
)
def test_what_a_real_model_filed_that_is_no_fact(filed, why):
    assert not_a_fact(filed) == why


def test_the_tellers_label_at_a_facts_head_is_taken_off_and_another_label_kept():
    assert unlabelled("Maya: I teach chemistry.", "Maya") == "I teach chemistry."
    assert unlabelled("林晓：我住在成都", "林晓") == "我住在成都"
    assert unlabelled("Allergies: shellfish", "Maya") == "Allergies: shellfish"
    assert unlabelled("Maya: I teach chemistry.", "") == "Maya: I teach chemistry."


def test_a_request_to_remember_at_a_facts_head_is_taken_off():
    said = "Remember that my sister Priya's birthday is on 12 May."
    assert unasked(said) == "My sister Priya's birthday is on 12 May."
    assert unasked("Please note: I hate olives") == "I hate olives"
    assert unasked("Remembering names is hard for me") == "Remembering names is hard for me"


def test_what_only_the_bot_said_is_not_filed_as_the_persons():
    """The real 1.5B (modelcheck --language de) answered a question about the person with a guess,
    and the guess was filed as theirs, whichever line the model cited."""
    transcript = _dm(
        ("Jonas", "In welcher Stadt wohne ich?"), (None, "Ich wohne in der Stadt Berlin."),
        ("Jonas", "Wie heißt mein Kater?"), (None, "Ich weiß, dass dein Kater heißt Felix."),
        ("Jonas", "Where do I work?"), (None, "You work at Greenfield Bakery."),
    )  # fmt: skip
    guesses = [
        _fact(content, lines)
        for content in (
            "Jonas wohnt in der Stadt Berlin.",
            "Ich wohne in der Stadt Berlin.",
            "Jonas' Kater heißt Felix.",
            "Jonas works at Greenfield Bakery",
        )
        for lines in ([1], [2], [3], [5], [6], [])
    ]
    assert memories_from(guesses, transcript, Source.AUTO_EXTRACTION) == []


def test_what_the_bot_stated_before_a_question_of_its_own_is_not_the_persons_either():
    """The last real German run: "Ich habe angefangen, am Wochenende Geige zu lernen." answered
    "Okay, Jonas. Du hast geendet zu lernen, am Wochenende Geige zu lernen. Wie kann ich Ihnen
    helfen?", and the bot's garble was filed as Jonas's; a line that ends in a question states
    things before it all the same."""
    transcript = _dm(
        ("Jonas", "Ich habe angefangen, am Wochenende Geige zu lernen."),
        (None, "Okay, Jonas. Du hast geendet zu lernen, am Wochenende Geige zu lernen. "
         "Wie kann ich Ihnen helfen?"),
    )  # fmt: skip
    garbled = _fact("Jonas hat geendet zu lernen, am Wochenende Geige zu lernen.", [1])
    said = _fact("Jonas hat angefangen, am Wochenende Geige zu lernen.", [1])
    found = memories_from([garbled, said], transcript, Source.AUTO_EXTRACTION)
    assert [m.content for m in found] == ["Jonas hat angefangen, am Wochenende Geige zu lernen."]


def test_a_word_the_bot_said_that_the_person_said_too_is_filed():
    """The rule asks only for words nobody but the bot said: a bot's question's words ground
    a person's answer ("Is it a beagle?" "Yes!", in the test above) and a place both named is
    theirs."""
    transcript = _dm(
        (None, "Berlin is lovely in spring."), ("Jonas", "I moved to Berlin in May"),
        (None, "Do you still have the grey cat?"), ("Jonas", "Yes, Krümel!"),
    )  # fmt: skip
    sent = [_fact("Jonas moved to Berlin in May", [2]), _fact("Jonas has a grey cat, Krümel", [4])]
    found = memories_from(sent, transcript, Source.AUTO_EXTRACTION)
    assert [m.content for m in found] == [
        "Jonas moved to Berlin in May",
        "Jonas has a grey cat, Krümel",
    ]
