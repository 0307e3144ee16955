"""The head of a history search (RET-3): a strong hit's neighbours in its channel inherit most of its relevance
(``graph_decay``), which is what brings in the turns around it; in the first ``graph_head`` places they inherit
only ``graph_head_decay``, so they do not push a turn that matches the question itself out of them."""

from __future__ import annotations

import pytest
from conftest import guild_ctx, say

from memory.recall.retrieval import Channel
from memory.storage.knobs import MESSAGE_DEFAULTS

WORDS_AND_GRAPH = frozenset({Channel.FTS, Channel.GRAPH})
STRONG = "the lighthouse keeper painted the lighthouse red and the lighthouse boat blue"
DIRECT = "we walked past a lighthouse on the coast path"


@pytest.fixture
def chats(engine):
    """One channel with a strong hit between two turns that say nothing of it; another with a weaker direct match."""
    engine.knobs.update(
        "messages", {"speaker_boost": 0.0, "question_penalty": 0.0, "answer_share": 0.0}
    )
    say(engine, "good morning, how was your weekend", author="bob", guild="g1", channel="c1")
    say(engine, STRONG, author="ann", guild="g1", channel="c1")
    say(engine, "ok, nice", author="bob", guild="g1", channel="c1")
    say(engine, DIRECT, author="cy", guild="g1", channel="c2")
    return engine


def _ranked(engine, question: str, **knobs) -> list[tuple[str, tuple[str, ...]]]:
    if knobs:
        engine.knobs.update("messages", knobs)
    partitions = guild_ctx("g1", "dan", channel="c1").message_partitions()
    hits = engine.messages.search_partitions(
        partitions, question, channels=WORDS_AND_GRAPH, top_k=4
    )
    return [(h.item.content, h.channels) for h in hits]


def test_the_defaults_keep_the_first_five_places_for_direct_matches_and_leave_memories_alone(
    engine,
):
    assert (
        MESSAGE_DEFAULTS.graph_head,
        MESSAGE_DEFAULTS.graph_head_decay,
        MESSAGE_DEFAULTS.graph_decay,
    ) == (5, 0.65, 0.8)
    assert engine.knobs.get("memories").graph_head == 0


def test_a_direct_match_is_not_pushed_out_of_the_head_by_a_strong_hits_neighbours(chats):
    before = _ranked(chats, "lighthouse", graph_head=0)
    assert [c for c, _ in before][0] == STRONG and [c for c, _ in before][
        -1
    ] == DIRECT  # the neighbours came first
    ahead = _ranked(chats, "lighthouse", graph_head=2)
    assert [c for c, _ in ahead][:2] == [STRONG, DIRECT]


def test_below_the_head_the_neighbours_still_come_in_as_context(chats):
    ahead = _ranked(chats, "lighthouse", graph_head=2)
    assert len(ahead) == 4
    assert {c for c, channels in ahead[2:]} == {"good morning, how was your weekend", "ok, nice"}
    assert all("graph" in channels for _, channels in ahead[2:])


def test_the_head_never_lengthens_the_list_or_repeats_a_turn(chats):
    for head in (0, 1, 2, 4, 10):
        found = [c for c, _ in _ranked(chats, "lighthouse", graph_head=head)]
        assert len(found) == len(set(found)) == 4
