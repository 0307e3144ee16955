"""What real models send for "a JSON array of facts": every form gives its complete items, what is dropped is
counted by reason, and an answer without JSON is still a BadAnswer (retried once, then logged: WRITE-1)."""

from __future__ import annotations

import json

import pytest

from memory.write.answers import BadAnswer, json_items
from memory.write.extraction import parse_list

A = {"speaker": "P1", "content": "Alice works at Acme"}
B = {"speaker": "P1", "content": "Alice lives in Oslo"}


@pytest.mark.parametrize(
    "answer",
    [
        json.dumps([A, B]),
        f"Sure! Here are the facts:\n```json\n{json.dumps([A, B])}\n```\nLet me know.",
        json.dumps({"facts": [A, B]}),  # what a response_format schema makes the model send
        json.dumps({"memories": [A, B]}),
        f"{json.dumps(A)}\n{json.dumps(B)}",  # one object a line
        '[{"speaker": "P1", "content": "Alice works at Acme",}, {"speaker": "P1", "content": "Alice lives in Oslo"},]',
    ],
)
def test_each_form_real_models_send_gives_the_facts(answer):
    parsed = json_items(answer)
    assert parsed.items == [A, B] and not parsed.dropped


def test_a_single_object_is_a_list_of_one():
    assert json_items(json.dumps(A)).items == [A]


def test_an_array_cut_short_keeps_its_complete_items_and_counts_the_rest():
    parsed = json_items(json.dumps([A, B])[:-25])
    assert parsed.items == [A] and parsed.dropped == {"incomplete or invalid JSON": 1}


@pytest.mark.parametrize("wrapper", ["facts", "memories"])
def test_a_wrapped_array_cut_short_keeps_its_complete_items(wrapper):
    # the real 0.5B's extraction under a response_format schema, cut by max_tokens: all was lost
    parsed = json_items(json.dumps({wrapper: [A, B]}, indent=2)[:-40])
    assert parsed.items == [A] and parsed.dropped == {"incomplete or invalid JSON": 1}


def test_items_that_are_not_objects_are_dropped_and_counted():
    parsed = json_items(json.dumps([A, "Alice likes tea", 3, B]))
    assert parsed.items == [A, B] and parsed.dropped == {"not an object": 2}
    assert parsed.describe() == "2 not an object"


@pytest.mark.parametrize("empty", ["[]", '{"facts": []}', "```json\n[]\n```"])
def test_nothing_to_remember_is_an_answer_not_an_error(empty):
    assert parse_list(empty) == []


@pytest.mark.parametrize(
    "answer", ["not json at all", "{broken", "[oops", "", '["just", "strings"]']
)
def test_an_answer_without_usable_json_is_a_bad_answer(answer):
    with pytest.raises(BadAnswer):
        parse_list(answer)


@pytest.mark.parametrize("answer", ["{}", '{"status": "ok"}'])
def test_an_object_that_is_neither_a_fact_nor_a_list_of_them_is_a_bad_answer(answer):
    with pytest.raises(BadAnswer):
        parse_list(answer)
