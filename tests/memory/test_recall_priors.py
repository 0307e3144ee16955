"""Nudges of history recall after the graph step (RET-3): a first-person question favours the asker's own
turns (``asker_boost``), a question naming a time favours turns from that span (``date_boost``), and a short
question ranks below the turns that tell (``question_penalty``); a person's answer takes a share of the question
it answers (``answer_share``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from conftest import guild_ctx, say

from memory.clock import DAY
from memory.recall.retrieval import Channel
from memory.recall.when import asks_when, spans, tells_time
from memory.storage.knobs import MESSAGE_DEFAULTS

NOW = datetime(2023, 11, 1, 12, tzinfo=UTC).timestamp()
TEXT_ONLY = frozenset({Channel.FTS})


def _days(found: list[tuple[float, float]]) -> list[tuple[str, str]]:
    return [
        (
            datetime.fromtimestamp(a, UTC).date().isoformat(),
            datetime.fromtimestamp(b, UTC).date().isoformat(),
        )
        for a, b in found
    ]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What did Mel show Caroline on October 13, 2023?", [("2023-10-13", "2023-10-14")]),
        ("what did gina find on 1 February, 2023", [("2023-02-01", "2023-02-02")]),
        ("What setback did Mel face in October 2023?", [("2023-10-01", "2023-11-01")]),
        (
            "When did Mel go camping in June?",
            [("2023-06-01", "2023-07-01"), ("2022-06-01", "2022-07-01")],
        ),
        ("How many times did she go to the beach in 2022?", [("2022-01-01", "2023-01-01")]),
        ("What appliance did I buy 10 days ago?", [("2023-10-20", "2023-10-25")]),
        ("who gave me jewelry last Saturday", [("2023-10-27", "2023-10-29")]),
        ("what did we cook yesterday", [("2023-10-30", "2023-11-01")]),
        ("plans from last week?", [("2023-10-18", "2023-11-01")]),
    ],
)
def test_dates_in_a_question_are_grounded_against_the_time_it_is_asked(question, expected):
    assert _days(spans(question, NOW)) == expected


@pytest.mark.parametrize(
    "question",
    [
        "may I ask what you think",
        "on February 30, 2023",
        "in 12345",
        "",
        "\u200b",
        "what is my favourite colour",
        "x" * 1_000_000,
    ],
)
def test_no_date_or_an_impossible_one_names_no_span(question):
    assert spans(question, NOW) == []


def test_a_huge_count_of_years_ago_is_a_span_not_a_crash():
    ((start, end),) = spans("99999999999999 years ago", NOW)
    assert start < end < NOW


def _turn(engine, clock, content: str, author: str, at: float) -> None:
    clock.t = at
    say(engine, content, author=author, guild="g1", channel="c1", author_name=author.title())


@pytest.fixture
def history(engine, clock):
    engine.knobs.update("messages", {"graph_seeds": 0, "context_weight": 0.0, "speaker_boost": 0.0})
    _turn(engine, clock, "the concert tickets were sold out", "bob", NOW - 40 * DAY)
    _turn(engine, clock, "my concert tickets arrived today", "ann", NOW - 30 * DAY)
    _turn(engine, clock, "the concert tickets cost too much", "cy", NOW - 3 * DAY)
    clock.t = NOW
    return engine


def _first(engine, question: str, asker: str | None) -> str:
    ctx = guild_ctx("g1", asker or "dan", channel="c1")
    hits = (
        engine.messages.search(ctx, question, channels=TEXT_ONLY)
        if asker
        else engine.messages.search_partitions(
            ctx.message_partitions(), question, channels=TEXT_ONLY
        )
    )
    return hits[0].item.content


def test_the_defaults_nudge_history_and_leave_memories_alone(engine):
    defaults = MESSAGE_DEFAULTS
    assert (
        defaults.asker_boost,
        defaults.date_boost,
        defaults.question_penalty,
        defaults.answer_share,
    ) == (0.15, 0.3, 0.1, 0.1)
    memories = engine.knobs.get("memories")
    assert (
        memories.asker_boost
        == memories.when_boost
        == memories.date_boost
        == memories.question_penalty
        == memories.answer_share
        == 0
    )


def test_a_first_person_question_favours_the_askers_own_turns(history):
    assert (
        _first(history, "what did I say about concert tickets", "ann")
        == "my concert tickets arrived today"
    )
    assert (
        _first(history, "what did I say about concert tickets", "cy")
        == "the concert tickets cost too much"
    )


def test_a_third_person_question_is_not_swayed_by_who_asks(history):
    ann = [
        h.item.id
        for h in history.messages.search(
            guild_ctx("g1", "ann", channel="c1"), "concert tickets sold out", channels=TEXT_ONLY
        )
    ]
    cy = [
        h.item.id
        for h in history.messages.search(
            guild_ctx("g1", "cy", channel="c1"), "concert tickets sold out", channels=TEXT_ONLY
        )
    ]
    assert ann == cy


def test_a_named_time_favours_turns_from_that_span(history):
    assert (
        _first(history, "concert tickets 40 days ago", None) == "the concert tickets were sold out"
    )
    assert _first(history, "concert tickets yesterday", None) == "the concert tickets cost too much"


def test_today_named_in_a_question_lifts_no_turn(history, clock):
    """ "Can you recommend a show to watch tonight?" put the last chat above the recommendation
    asked for weeks before (LongMemEval dev): today's turns are the talk at hand."""
    _turn(history, clock, "tickets", "dan", NOW - 3600)
    clock.t = NOW
    plain = _first(history, "concert tickets", None)
    assert plain != "tickets"
    for today in (
        "concert tickets tonight",
        "concert tickets this morning",
        "今晚 concert tickets",
    ):
        assert _first(history, today, None) == plain


def test_the_nudges_are_knobs_and_off_means_off(history):
    history.knobs.update("messages", {"asker_boost": 0.0, "date_boost": 0.0})
    plain = _first(history, "concert tickets", None)
    assert _first(history, "what did I say about concert tickets", "ann") == plain
    assert _first(history, "concert tickets 40 days ago", None) == _first(
        history, "concert tickets", None
    )


def test_a_short_question_ranks_below_the_turn_that_tells(engine, clock):
    knobs = {
        "graph_seeds": 0,
        "context_weight": 0.0,
        "speaker_boost": 0.0,
        "date_boost": 0.0,
        "question_penalty": 0.3,
    }
    engine.knobs.update("messages", knobs)
    _turn(engine, clock, "hiking with the dog?", "bob", NOW - 2 * DAY)
    _turn(engine, clock, "hiking with the dog up the ridge", "ann", NOW - DAY)
    clock.t = NOW
    assert _first(engine, "hiking dog", None) == "hiking with the dog up the ridge"
    engine.knobs.update("messages", {"question_penalty": 0.0})
    # the shorter turn, by BM25, without the penalty
    assert _first(engine, "hiking dog", None) == "hiking with the dog?"


def test_a_question_is_demoted_but_never_dropped(engine, clock):
    engine.knobs.update("messages", {"question_penalty": 1.0})
    _turn(engine, clock, "anyone seen my umbrella?", "bob", NOW - DAY)
    clock.t = NOW
    # at most half its relevance goes
    assert _first(engine, "umbrella", None) == "anyone seen my umbrella?"


def test_the_askers_nudge_never_reaches_past_what_the_context_may_see(engine, clock):
    """Alice's private DM turn stays out of a guild search, however hard the question points at her own words."""
    clock.t = NOW - DAY
    say(engine, "my secret locker code is in the blue notebook", author="alice", dm_person="alice")
    say(engine, "the blue notebook is on the shelf", author="bob", guild="g1", channel="c1")
    clock.t = NOW
    found = engine.messages.search(
        guild_ctx("g1", "alice", channel="c1"), "what did I say yesterday about my blue notebook"
    )
    assert [h.item.content for h in found] == ["the blue notebook is on the shelf"]


def _relevance(engine, question: str) -> dict[str, float]:
    hits = engine.messages.search_partitions(
        guild_ctx("g1", "dan", channel="c1").message_partitions(), question, channels=TEXT_ONLY
    )
    return {h.item.content: h.relevance for h in hits}


@pytest.fixture
def asked(engine, clock):
    """A question, a person's answer (found through the question it answers), and the bot's reply to it."""
    off = {
        "graph_seeds": 0,
        "speaker_boost": 0.0,
        "date_boost": 0.0,
        "question_penalty": 0.0,
        "answer_share": 0.0,
    }
    engine.knobs.update("messages", off)
    _turn(engine, clock, "where did you go for the holidays?", "bob", NOW - 3 * DAY)
    _turn(engine, clock, "Lisbon, with my sister", "ann", NOW - 3 * DAY + 60)
    clock.t = NOW - 3 * DAY + 120
    say(
        engine,
        "where did you stay in Lisbon?",
        author="bot",
        guild="g1",
        channel="c1",
        role="assistant",
    )
    say(engine, "a flat by the river, we walked everywhere", author="ann", guild="g1", channel="c1")
    clock.t = NOW
    return engine


def test_an_answer_takes_a_share_of_the_question_it_answers(asked):
    plain = _relevance(asked, "holidays Lisbon")
    asked.knobs.update("messages", {"answer_share": 0.5})
    shared = _relevance(asked, "holidays Lisbon")
    question = plain["where did you go for the holidays?"]
    assert shared["Lisbon, with my sister"] == pytest.approx(
        plain["Lisbon, with my sister"] + 0.5 * question
    )
    # the question itself keeps its own
    assert shared["where did you go for the holidays?"] == pytest.approx(question)


def test_a_persons_answer_to_the_bots_question_takes_a_share(asked):
    asked.knobs.update("messages", {"answer_share": 0.5})
    shared = _relevance(asked, "stay Lisbon")
    asked.knobs.update("messages", {"answer_share": 0.0})
    plain = _relevance(asked, "stay Lisbon")
    assert shared["a flat by the river, we walked everywhere"] > plain.get(
        "a flat by the river, we walked everywhere", 0.0
    )


def test_the_bots_own_reply_to_a_question_takes_no_share(engine, clock):
    """The bot's replies tell nothing of a person: what it said back to a question keeps its own relevance."""
    engine.knobs.update(
        "messages",
        {"graph_seeds": 0, "speaker_boost": 0.0, "question_penalty": 0.0, "answer_share": 1.0},
    )
    _turn(engine, clock, "is Porto worth a visit?", "bob", NOW - DAY)
    clock.t = NOW - DAY + 60
    say(
        engine,
        "Porto is lovely in spring",
        author="bot",
        guild="g1",
        channel="c1",
        role="assistant",
    )
    clock.t = NOW
    shared = _relevance(engine, "Porto visit")
    engine.knobs.update("messages", {"answer_share": 0.0})
    assert _relevance(engine, "Porto visit") == pytest.approx(shared)


def test_a_turn_after_a_statement_takes_nothing(engine, clock):
    engine.knobs.update(
        "messages",
        {"graph_seeds": 0, "speaker_boost": 0.0, "question_penalty": 0.0, "answer_share": 1.0},
    )
    _turn(engine, clock, "we went to Lisbon for the holidays", "bob", NOW - DAY)
    _turn(engine, clock, "nice, I love that city", "ann", NOW - DAY + 60)
    clock.t = NOW
    shared = _relevance(engine, "Lisbon holidays")
    engine.knobs.update("messages", {"answer_share": 0.0})
    assert _relevance(engine, "Lisbon holidays") == pytest.approx(shared)


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("When did Caroline go to the LGBTQ conference?", True),
        ("Caroline什么时候去参加LGBTQ大会的？", True),
        ("Wann hat Jon sein Tanzstudio eröffnet?", True),
        ("いつ東京に引っ越したの？", True),
        ("Когда Джон был в Париже?", True),
        ("What did Caroline research?", False),
        ("Where does my brother live now?", False),
        ("我哥哥住在哪里？", False),
    ],
)
def test_a_question_asking_when_is_known_in_several_languages(question, asks):
    assert asks_when(question) is asks


@pytest.mark.parametrize(
    ("turn", "tells"),
    [
        ("I went to a LGBTQ conference two days ago, so special.", True),
        ("两天前我去了一个 LGBTQ 会议，真的很特别。", True),
        ("Gestern war ich in Paris!", True),
        ("The official opening night is tomorrow.", True),
        ("We had a blast at the Pride fest in 2022.", True),
        ("I may go there with my sister.", False),  # "may" the verb, not the month
        ("I love my cat, she is so fluffy.", False),
        ("我喜欢我的猫。", False),
    ],
)
def test_a_turn_saying_a_time_is_known_in_several_languages(turn, tells):
    assert tells_time(turn) is tells


def test_a_when_question_favours_the_turn_that_says_a_time(engine, clock):
    """Two turns about Ann's pottery class: the shorter matches the words better, the other says
    when; asked when, the one that says it comes first (``when_boost``), and with the knob off
    the words decide."""
    engine.knobs.update(
        "messages",
        {"graph_seeds": 0, "context_weight": 0.0, "speaker_boost": 0.0, "date_boost": 0.0},
    )
    _turn(engine, clock, "Ann's pottery class rocks", "bo", NOW - 9 * DAY)
    _turn(engine, clock, "Ann's pottery class was yesterday, what fun", "cy", NOW - 8 * DAY)
    for n, filler in enumerate(("pottery is messy", "the class was full", "Ann likes clay")):
        _turn(engine, clock, filler, "di", NOW - (7 - n) * DAY)
    clock.t = NOW
    question = "When did Ann go to the pottery class?"
    assert MESSAGE_DEFAULTS.when_boost > 0
    assert _first(engine, question, None) == "Ann's pottery class was yesterday, what fun"
    engine.knobs.update("messages", {"when_boost": 0.0})
    assert _first(engine, question, None) == "Ann's pottery class rocks"
