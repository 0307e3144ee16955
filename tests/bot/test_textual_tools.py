"""The recognisers of tool calls written as text, the stream hold-back, the honesty check, the refusal
detection and the local-server defaults: pure functions, checked on what real models and servers send."""

from __future__ import annotations

import json

import pytest

from bot.config import llm_timeouts, load_settings
from bot.model.honesty import Ran, claims, honest_note
from bot.model.quirks import is_local
from bot.model.textual_tools import HoldBack, TextCall, find_calls
from tests.fakes.openai_server import written_call

NAMES = frozenset({"memory_store", "memory_delete"})
ARGS = {"content": "Alice has a cat", "tags": ["pets"]}
FORMS = ("bare", "parameters", "fence", "hermes", "llama", "mistral", "function")


@pytest.mark.parametrize("form", FORMS)
def test_each_written_form_is_one_call_with_its_arguments_and_leaves_no_text(form):
    calls, prose = find_calls(written_call("memory_store", ARGS, form), NAMES)
    assert calls == [TextCall("memory_store", json.dumps(ARGS))] and prose == ""


def test_arguments_sent_as_a_json_string_are_the_object_inside():
    text = json.dumps({"name": "memory_store", "arguments": json.dumps(ARGS)})
    assert find_calls(text, NAMES)[0] == [TextCall("memory_store", json.dumps(ARGS))]


def test_a_fenced_call_with_a_comment_line_is_still_a_call():
    text = '```json\n// saving the fact\n{"name": "memory_store", "arguments": {}}\n```'
    assert find_calls(text, NAMES) == ([TextCall("memory_store", "{}")], "")


def test_a_hermes_block_inside_a_fence_leaves_no_empty_fence():
    text = f"Okay.\n```xml\n{written_call('memory_store', ARGS, 'hermes')}\n```"
    assert find_calls(text, NAMES) == ([TextCall("memory_store", json.dumps(ARGS))], "Okay.")


def test_the_openai_shape_written_as_text_and_a_list_of_calls_are_recognised():
    one = {"type": "function", "function": {"name": "memory_delete", "arguments": {"id": "m1"}}}
    assert find_calls(json.dumps(one), NAMES)[0] == [TextCall("memory_delete", '{"id": "m1"}')]
    several = [
        {"name": "memory_store", "arguments": ARGS},
        {"name": "memory_delete", "arguments": {"id": "m1"}},
    ]
    assert [c.name for c in find_calls(json.dumps(several), NAMES)[0]] == [
        "memory_store",
        "memory_delete",
    ]


def test_prose_around_calls_is_kept_and_markup_for_unknown_tools_is_hidden_but_not_run():
    text = f"Sure!\n{written_call('memory_store', ARGS, 'hermes')}\nDone."
    assert find_calls(text, NAMES) == (
        [TextCall("memory_store", json.dumps(ARGS))],
        "Sure!\n\nDone.",
    )
    assert find_calls(written_call("send_email", {}, "hermes"), NAMES) == ([], "")


@pytest.mark.parametrize(
    "text",
    [
        'Your profile as JSON: {"name": "Alice", "age": 30}',
        'Call it like this:\n```json\n{"name": "other_tool", "arguments": {}}\n```\nand it runs.',
        "Braces {like these} and [1] lists, a < b, `code`.",
        "```python\nprint({'name': 1})\n```",
    ],
)
def test_ordinary_text_and_json_are_left_as_written(text):
    assert find_calls(text, NAMES) == ([], text)


async def streamed(text: str, step: int = 1) -> tuple[list[str], str]:
    """What a HoldBack shows of ``text`` arriving ``step`` characters at a time: (shown while streaming, at end)."""
    parts: list[str] = []

    async def sink(part: str) -> None:
        parts.append(part)

    hold = HoldBack(sink)
    for i in range(0, len(text), step):
        await hold(text[i : i + step])
    during = "".join(parts)
    await hold.end(NAMES)
    return [during], "".join(parts)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("step", [1, 3, 1000])
async def test_a_streamed_call_is_never_shown_whatever_the_chunking(form, step):
    text = f"On it. {written_call('memory_store', ARGS, form)} All set."
    (during,), shown = await streamed(text, step)
    assert (
        "memory_store" not in shown and "{" not in shown and "`" not in shown and "<" not in shown
    )
    assert during.startswith("On it.") and shown.endswith("All set.")


@pytest.mark.parametrize("step", [1, 4])
async def test_ordinary_text_is_shown_as_it_arrives_and_braces_only_briefly_held(step):
    (during,), shown = await streamed("Hello there, how are you?", step)
    assert during == shown == "Hello there, how are you?"
    (during,), shown = await streamed("A set {1, 2} and more words here", step)
    assert during == shown == "A set {1, 2} and more words here"  # held two characters, then let go


@pytest.mark.parametrize("step", [1, 5])
async def test_a_fenced_hermes_block_streams_as_nothing(step):
    (during,), shown = await streamed(
        f"Okay. ```xml\n{written_call('memory_store', ARGS, 'hermes')}\n```", step
    )
    assert shown == "Okay. " and during == "Okay. "


async def test_a_reply_that_is_a_json_object_is_held_and_never_shown_but_json_in_prose_is():
    """A JSON object is no reply to a person (the real 0.5B said a tool's result back as every
    reply: the client asks again); JSON inside a sentence is the model's writing."""
    text = '{"type": "object", "properties": {}}'
    (during,), shown = await streamed(text, 2)
    assert during == shown == "" and find_calls(text, NAMES) == ([], "")
    text = 'A schema for it: {"type": "object", "properties": {}}'
    (during,), shown = await streamed(text, 2)
    assert shown == text


HUSKED = [
    ("{}" + written_call("memory_store", ARGS), ""),  # the real 1.5B's: "{}" then the call
    (written_call("memory_store", ARGS) + "{}", ""),
    ("Sure. {}\n" + written_call("memory_store", ARGS), "Sure."),
    (written_call("memory_store", ARGS) + "\n[]", ""),
    (written_call("memory_store", ARGS) + "}I saved it.", "I saved it."),  # a real 0.5B's
    (written_call("memory_store", ARGS) + "\n]} Done.", "Done."),
]


@pytest.mark.parametrize("text, prose", HUSKED)
def test_an_empty_json_value_beside_a_call_is_its_husk_and_never_shown(text, prose):
    calls, left = find_calls(text, NAMES)
    assert [c.name for c in calls] == ["memory_store"] and left == prose


@pytest.mark.parametrize("step", [1, 2, 1000])
async def test_a_streamed_husk_before_a_call_is_never_shown(step):
    (during,), shown = await streamed("{}" + written_call("memory_store", ARGS), step)
    assert during == shown == ""


@pytest.mark.parametrize("step", [1, 3])
async def test_empty_braces_in_prose_or_alone_are_shown_as_written(step):
    for text in ("{} is how you write an empty object", "{}", "Use [] for an empty list."):
        (during,), shown = await streamed(text, step)
        assert shown == text and find_calls(text, NAMES) == ([], text)
    text = "Use {} for an empty dict. " + written_call("memory_store", ARGS)
    assert find_calls(text, NAMES)[1] == "Use {} for an empty dict."


# -- honesty -------------------------------------------------------------------------------------------------
CLAIMS = {
    "I'll remember that!": ["keep"],
    "Noted.": ["keep"],
    "Got it, noted!": ["keep"],
    "I've saved that for you.": ["keep"],
    "I’ve forgotten it.": ["forget"],
    "Consider it forgotten.": ["forget"],
    "I have deleted your bib number.": ["forget"],
}
NOT_CLAIMS = [
    "I remember you said you like tea.",
    "Don't forget your keys!",
    "I can't remember that.",
    "Should I remember that?",
    "I haven't saved anything.",
    "I forgot to ask: how are you?",
    "Did you set a reminder?",
    "I won't forget that I promised.",
    "I noticed that you like cats.",
    "Want me to remember that?",
    "The notes you stored in Notion are safe.",
]


@pytest.mark.parametrize("text,kinds", CLAIMS.items())
def test_first_person_claims_are_recognised(text, kinds):
    assert claims(text) == kinds


@pytest.mark.parametrize("text", NOT_CLAIMS)
def test_ordinary_chat_is_no_claim(text):
    assert claims(text) == []


def test_a_claim_is_backed_by_a_successful_tool_of_its_kind_or_for_keeping_by_extraction():
    stored, refused = (
        Ran("memory_store", "{}", '{"status": "stored"}'),
        Ran("memory_store", "{}", "Error: privacy off"),
    )
    assert honest_note("I'll remember that.", [stored]) == ""
    assert "nothing was saved" in honest_note("I'll remember that.", [refused])
    assert honest_note("I'll remember that.", [], extracted=True) == ""
    assert "nothing was forgotten" in honest_note("I've forgotten it.", [stored], extracted=True)
    assert (
        honest_note("I've forgotten it.", [Ran("memory", '{"action": "delete"}', '{"deleted": 1}')])
        == ""
    )
    # bot.reminders.claims reads rows for that
    assert honest_note("Reminder set!", [stored], extracted=True) == ""


# -- servers -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "url,local",
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://192.168.1.20:1234/v1", True),
        ("http://10.0.0.5/v1", True),
        ("http://gpu-box.local:8080/v1", True),
        ("http://host.docker.internal:11434/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://8.8.8.8/v1", False),
        ("https://openrouter.ai/api/v1", False),
    ],
)
def test_local_servers_are_recognised(url, local):
    assert is_local(url) is local


def test_local_servers_get_timeouts_for_a_cpu_model_and_settings_win():
    assert llm_timeouts(load_settings(), "https://api.openai.com/v1") == (60.0, 120.0)
    assert llm_timeouts(load_settings(), "http://127.0.0.1:8091/v1") == (300.0, 600.0)
    chosen = load_settings(llm_timeout_s=20, turn_deadline_s=45)
    assert llm_timeouts(chosen, "http://127.0.0.1:8091/v1") == (20.0, 45.0)


def test_a_call_with_its_templates_braces_doubled_is_a_call_and_other_doubled_braces_are_prose():
    """The real Qwen2.5-Coder 1.5B answered every turn with ``{{"name": ...}}}}``: shown to the person, 20 of 20."""
    doubled = '{{"name": "memory_store", "arguments": {{"content": "Sam has a cat"}}}}'
    assert find_calls(doubled, NAMES) == (
        [TextCall("memory_store", '{"content": "Sam has a cat"}')],
        "",
    )
    assert find_calls("Write {{name}} in the template.", NAMES) == (
        [],
        "Write {{name}} in the template.",
    )


# -- what the real 1.5B wrote on 30 LoCoMo questions (eval answers, issue 45) --------------------
def test_calls_in_xml_attributes_are_run_and_never_shown():
    said = (
        '<tools>   <function name="memory_search" arguments=\'{"query": "Caroline friends"}\'>'
        "</function></tools>"
    )
    calls, prose = find_calls(said, {"memory_search"})
    assert calls == [TextCall("memory_search", '{"query": "Caroline friends"}')] and prose == ""
    assert find_calls("<tools></tools>", {"memory_search"}) == ([], "")


@pytest.mark.parametrize(
    "said",
    [
        '```json\n{   "name": "reply",   "arguments": {     "text": "Nate likes cake."   } }\n```',
        '{"name": "reply", "arguments": {"text": "Nate likes cake."}}',
        '{"name": "answer", "parameters": {"content": "Nate likes cake."}}',
    ],
)
def test_a_call_of_a_reply_tool_nobody_offered_is_its_text(said):
    assert find_calls(said, {"memory_search"}) == ([], "Nate likes cake.")


def test_a_reply_that_is_only_a_call_of_a_tool_nobody_offered_is_what_it_carries_or_nothing():
    """The real 1.5B answered 17 turns of a German chat with a 'message' call holding the
    person's own line (then asked again as an echo): never shown as JSON."""
    call = {"name": "message", "arguments": {"sender": "Jonas", "text": "Ich bin Jonas."}}
    echo = f"```json\n{json.dumps(call)}\n```"
    assert find_calls(echo, {"memory_search"}) == ([], "Ich bin Jonas.")
    assert find_calls('{"name": "weather", "arguments": {"city": "Paris"}}', set()) == ([], "")
    # JSON inside a sentence is the reply's own
    said = 'Use {"name": "weather", "arguments": {"city": "Paris"}} to ask.'
    assert find_calls(said, {"memory_search"}) == ([], said)
