"""The reminder_set tool (ORCH-13, TOOLS-1/2): its place and person come from the conversation, never from the
model; a malformed or unreadable call is an ``Error:`` for the model and stores nothing; /privacy off withholds it."""

from __future__ import annotations

import json

import pytest
from conftest import count, dm_ctx

from memory.storage.reminders import ReminderPlace
from memory.tools import MemoryTools

HERE = ReminderPlace("telegram", "55", "55")


def tools(engine, **kw) -> MemoryTools:
    return MemoryTools(engine, dm_ctx("telegram:55"), place=HERE, **kw)


def test_the_tool_stores_the_reminder_for_the_speaker_here_and_answers_its_id_and_time(engine):
    t = tools(engine)
    answer = json.loads(t.call("reminder_set", {"when": "in 2 hours", "text": "call mum"}))
    (row,) = engine.reminders.mine("telegram:55")
    assert answer["status"] == "set" and answer["id"] == row.id and t.reminders_set == [row.id]
    assert (row.platform, row.channel_id, row.text, row.due_at) == (
        "telegram",
        "55",
        "call mum",
        engine.clock.now() + 7200,
    )


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (
            {"when": "in 2 hours", "text": "x", "person_id": "telegram:99"},
            "Extra inputs are not permitted",
        ),
        ({"when": "in 2 hours"}, "text: Field required"),
        ('{"when": "in 2 hours", "text": ', "not valid JSON"),
        ({"when": "at 3", "text": "call mum"}, "3am or 3pm"),
        ({"when": "someday", "text": "call mum"}, "couldn't read"),
        ({"when": "in 2 hours", "text": "x" * 501}, "at most 500 characters"),
    ],
)
def test_a_malformed_or_unreadable_call_is_an_error_and_stores_nothing(engine, arguments, error):
    t = tools(engine)
    answer = t.call("reminder_set", arguments)
    assert answer.startswith("Error:") and error in answer
    assert count(engine, "reminders") == 0 and t.reminders_set == []


def test_privacy_off_withholds_the_tool_and_refuses_a_call(engine):
    t = tools(engine, remembering=False)
    assert "reminder_set" not in [s["function"]["name"] for s in t.schemas()]
    assert "remembering off" in t.call("reminder_set", {"when": "in 2 hours", "text": "call mum"})
    assert count(engine, "reminders") == 0


def test_without_a_place_there_is_no_reminder_tool(engine):
    t = MemoryTools(engine, dm_ctx("telegram:55"))
    assert "reminder_set" not in [s["function"]["name"] for s in t.schemas()]
    assert t.call("reminder_set", {"when": "in 2 hours", "text": "x"}).startswith(
        "Error: there is no tool named"
    )
