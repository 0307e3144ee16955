"""Splitting a streaming reply into sentences to speak, and what a voice should not read out."""

from __future__ import annotations

from voice.sentences import SentenceSplitter, says_nothing, speakable


def split(*deltas: str) -> list[str]:
    splitter = SentenceSplitter()
    return [s for d in deltas for s in splitter.feed(d)] + splitter.flush()


def test_sentences_come_out_as_soon_as_they_are_complete():
    splitter = SentenceSplitter()
    assert splitter.feed("Hello there") == []
    assert splitter.feed("! How are") == ["Hello there!"]
    assert splitter.feed(" you? I") == ["How are you?"]
    assert splitter.flush() == ["I"]


def test_abbreviations_and_decimals_do_not_end_a_sentence():
    assert split("Dr. Smith paid 3.5 dollars, e.g. for tea. Then he left.") == [
        "Dr. Smith paid 3.5 dollars, e.g. for tea.",
        "Then he left.",
    ]


def test_a_line_break_ends_a_sentence():
    assert split("First item\nSecond item") == ["First item", "Second item"]


def test_markdown_and_links_are_not_read_out():
    assert speakable("**Bold** and `code`, see [the docs](https://x.y/z) or https://a.b/c") == (
        "Bold and code, see the docs or"
    )


def test_the_skip_token_is_never_spoken():
    assert split("[SKIP]") == [] and says_nothing("  [SKIP] ") and says_nothing("**")
    assert not says_nothing("Sure, I can skip that.")
