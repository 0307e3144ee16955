"""LANG-1: text in scripts without spaces between words is found by its words, on the way in and
out.

Before, FTS5's unicode61 read a whole Chinese sentence as one word: a question found nothing. These
go through the store's own recall (the words channel alone: no embeddings) and the index itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest
from conftest import dm_ctx, fts_rids, older_store, remember

from memory.engine import MemoryEngine
from memory.storage.db import Database
from memory.storage.fts import FtsQueryBuilder
from memory.unspaced import grams, spaced
from memory.write.traces import Tracer
from memory.write.wording import content_words

FACTS = {
    "zh": ("爱丽丝养了一只叫饼干的灰猫", "饼干是什么颜色的猫？", "灰猫"),
    "ja": ("アリスは毎朝ジョギングをしています", "アリスはいつジョギングしますか", "ジョギング"),
    "th": ("อลิซชอบกินทุเรียนมาก", "อลิซชอบกินอะไร", "ทุเรียน"),
    "ko": ("앨리스는 서울에서 간호사로 일해요", "앨리스는 어디에서 일해요?", "서울"),
}


@pytest.mark.parametrize("language", sorted(FACTS))
def test_a_question_in_an_unspaced_script_finds_the_fact_by_its_words(bm25_engine, language):
    fact, question, word = FACTS[language]
    remember(bm25_engine, fact, scope_id="alice")
    remember(bm25_engine, "Alice plays the cello on Sundays", scope_id="alice")

    hits = bm25_engine.recall.recall(dm_ctx("alice"), question, threshold=0)
    assert hits[0].item.content == fact
    # found by the words channel (the recall's own query), not only as something recent
    expr = FtsQueryBuilder(bm25_engine.db, "memory_fts").match(question)
    assert (
        bm25_engine.db.scalar("SELECT COUNT(*) FROM memory_fts WHERE memory_fts MATCH ?", (expr,))
        == 1
    )
    assert fts_rids(bm25_engine, word)  # a word inside the sentence, as its own query


def test_a_lone_character_and_a_word_written_against_latin_letters_are_found(bm25_engine):
    remember(bm25_engine, "我的猫很胖", scope_id="alice")
    remember(bm25_engine, "她买了新的iPhone手机", scope_id="alice")

    assert len(fts_rids(bm25_engine, "猫")) == 1
    assert len(fts_rids(bm25_engine, "iphone")) == 1
    assert fts_rids(bm25_engine, "手机") == fts_rids(bm25_engine, "iphone")


def test_a_pair_that_spans_two_words_of_the_query_is_no_phrase_of_them(bm25_engine):
    """The stored text holds each character and its pair: "喜欢" does not match 喜 ... 欢 apart."""
    remember(bm25_engine, "喜爱音乐和欢乐", scope_id="alice")
    assert not fts_rids(bm25_engine, '"喜欢"')


def test_latin_cyrillic_and_greek_words_are_indexed_as_before(tmp_path):
    db = Database(tmp_path / "w.db")
    words = FtsQueryBuilder(db, "memory_fts").terms(
        "Alice was running with her dogs; Привет, καλημέρα"
    )
    assert words == [
        ("alice", "alic"),
        ("running", "run"),
        ("dogs", "dog"),
        ("привет", "привет"),
        ("καλημέρα", "καλημέρα"),
    ]


def test_every_reader_of_words_sees_the_same_pairs_as_the_index(tmp_path):
    db = Database(tmp_path / "w.db")
    text = "爱丽丝的治疗师是王医生"
    builder = FtsQueryBuilder(db, "memory_fts")
    assert [raw for raw, _ in builder.words(text, 1_000)] == grams(text)  # the leak check's words
    # recall searches Han characters one by one, the little ones left out
    assert [raw for raw, _ in builder.terms(text)] == list("爱丽丝治疗师王医生")
    assert spaced(text).split() == grams(text)
    assert spaced("plain English") == "plain English"


def test_content_words_and_tombstone_marks_read_the_same_pairs():
    """LANG-1: the said-again check and a fact's match with its line (``content_words``) and the
    tombstones' marks see a Chinese sentence as its pairs, not as one word."""
    assert content_words("爱丽丝的治疗师是王医生") >= {"治疗", "疗师", "医生"}
    assert "他的" not in content_words("他的猫")  # two grammar characters: a stop word
    assert content_words("猫的名字是年糕") & content_words("年糕是她的猫") >= {"年糕"}
    tracer = Tracer(b"k" * 32)
    first, again = (tracer.trace("person|1", t, None) for t in ("爱丽丝怕蛇", "爱丽丝怕蛇。"))
    other = tracer.trace("person|1", "爱丽丝每天写日记", None)
    assert len(first.marks) == len(grams("爱丽丝怕蛇")) and first.matches(again)
    assert not first.matches(other)


def test_an_existing_store_is_reindexed_on_upgrade_resumably_after_a_kill(tmp_path, clock):
    path = tmp_path / "old.db"
    older_store(path)  # one migration behind: the word index of unicode61 alone
    texts = ["爱丽丝养了一只灰猫", "Bob sails wooden boats", "アリスはジョギングが好き"] * 2_000
    _old_rows(path, texts)

    # the upgrade, ten rows a step, killed half-way
    child = subprocess.Popen(
        [sys.executable, "-c", UPGRADE, str(path)], cwd=Path(__file__).parents[2]
    )
    done = _wait_for_progress(path)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert 0 < done < len(texts), "the upgrade finished before it could be killed"

    with MemoryEngine(path, None, clock) as engine:  # the next open goes on from where it stopped
        assert engine.db.get_setting("words.reindex.memory_fts") is None
        engine.db.execute("INSERT INTO memory_fts (memory_fts, rank) VALUES ('integrity-check', 1)")
        assert len(fts_rids(engine, "灰猫")) == 2_000
        assert len(fts_rids(engine, "ジョギング")) == 2_000
        assert len(fts_rids(engine, "wooden")) == 2_000
        assert engine.db.scalar("SELECT COUNT(*) FROM memories") == len(texts)


UPGRADE = """
import sys
from memory.storage import db
db.REINDEX_STEP = 10
db.Database(sys.argv[1])
"""


def _old_rows(path: Path, texts: list[str]) -> None:
    old = apsw.Connection(str(path))
    with old:
        for i, text in enumerate(texts):
            old.execute(
                "INSERT INTO memories (id, type, subject, content, scope, scope_id, partition_key, ptoken, "
                "content_hash, created_at, updated_at) VALUES (?, 'semantic', '', ?, 'user', 'alice', "
                "'user|alice|public', 'p', ?, 0, 0)",
                (f"m{i}", text, f"h{i}"),
            )
            old.execute(
                "INSERT INTO memory_fts (rowid, content) VALUES (last_insert_rowid(), ?)", (text,)
            )
    old.close()


def _wait_for_progress(path: Path) -> int:
    """The row the re-index has reached once it is past its first steps (polled through a reader)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            con = apsw.Connection(
                f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_URI | apsw.SQLITE_OPEN_READONLY
            )
            found = con.execute(
                "SELECT value FROM settings WHERE key = 'words.reindex.memory_fts'"
            ).fetchall()
            con.close()
        except apsw.Error:
            found = []
        if found and int(found[0][0]) >= 100:
            return int(found[0][0])
        time.sleep(0.005)
    raise AssertionError("the upgrade never started re-indexing")
