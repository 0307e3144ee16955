"""A name alone never makes two facts one (issue 44 item 2b, SEC-5), through the real extraction
path: messages observed by the orchestrator, the extraction job answered by a scripted model over
the openai SDK, /forget by command, the tombstones on the bundled default meaning model. Greg shows
the name "Greg", so "Grzegorz" is not one of his own names and weighs as a name. After he forgets
one fact, his unrelated facts, and other facts about the same relative or place, are still learned;
the forgotten fact, learned back in other words from a line that does not say it, is not.

The tombstones' key is fixed here, as in the rewording suites: a name shared with a close meaning
still holds a fact (the keyed sign bits agree on 85% or more), and "Marta's brother Tomasz is a
pilot" against "... lives in Gdansk" (centred cosine 0.75) agrees that much under about one key in
75 drawn (measured: 1.3%; one fresh-clone run met such a key)."""

from __future__ import annotations

import pytest

from memory.clock import FakeClock
from memory.storage.multilingual import MultilingualE5
from tests.pipeline_support import build_runtime, dm, facts

pytestmark = pytest.mark.asyncio
GREG = "7"
BIB = "Grzegorz's race bib number is 4417"
TOMASZ = "Marta's brother Tomasz lives in Gdansk"
KEY = "a fixed key: an outcome must not hang on a key drawn"


@pytest.fixture(scope="module")
def e5():
    return MultilingualE5()


@pytest.fixture
async def greg(tmp_path, srv, e5):
    runtime = build_runtime(tmp_path / "bot.db", srv, FakeClock(), embedder=e5, secret_key=KEY)
    await runtime.start(background_loop=False)
    yield runtime
    srv.default = lambda body: "[]"
    await runtime.stop()


async def learn(rt, srv, said: str, content: str) -> bool:
    """Greg says ``said`` in his DM; the model extracts ``content``. Whether it is stored."""
    rt.engine.clock.advance(3600)
    await rt.orchestrator.observe(dm("telegram", GREG, said, name="Greg"))
    rt.engine.clock.advance(31)
    srv.script(facts({"speaker": "P1", "subject": "Grzegorz", "content": content, "lines": [1]}))
    await rt.background.tick()
    return content in live(rt)


def live(rt) -> list[str]:
    return [m.content for m in rt.engine.memory_rows.listing(None, limit=100)]


async def forget(rt, words: str, fact: str) -> None:
    asked = dm("telegram", GREG, f"/forget {words}", name="Greg")
    assert fact in await rt.orchestrator.command("forget", words, asked)
    assert fact not in live(rt) and rt.engine.memories.tombstones.count() >= 1


async def test_after_a_forget_his_other_facts_and_others_about_the_same_people_are_learned(
    greg, srv
):
    assert await learn(greg, srv, "my race bib number is 4417", BIB)
    assert await learn(greg, srv, "my friend Marta's brother Tomasz lives in Gdansk", TOMASZ)
    await forget(greg, "bib 4417", BIB)
    await forget(greg, "Tomasz Gdansk", TOMASZ)
    later = {
        "I have a grey cat called Biscuit": "Grzegorz has a grey cat called Biscuit",
        "Tomasz is a pilot, by the way": "Marta's brother Tomasz is a pilot",
        "Marta was in Gdansk in May": "Marta visited Gdansk in May",
    }
    for said, content in later.items():
        assert await learn(greg, srv, said, content), content


async def test_the_forgotten_facts_learned_back_in_other_words_are_not(greg, srv):
    assert await learn(greg, srv, "my race bib number is 4417", BIB)
    assert await learn(greg, srv, "my friend Marta's brother Tomasz lives in Gdansk", TOMASZ)
    await forget(greg, "bib 4417", BIB)
    await forget(greg, "Tomasz Gdansk", TOMASZ)
    # lines that do not say it again: the model learns the forgotten facts back from what remains.
    # "Marta says hi" shares one name of three with the second: it is not Greg saying it again
    assert not await learn(greg, srv, "the race was such fun", "Grzegorz wore bib 4417 in the race")
    assert not await learn(greg, srv, "Marta says hi", "Tomasz, Marta's brother, lives in Gdansk")
    assert live(greg) == []
