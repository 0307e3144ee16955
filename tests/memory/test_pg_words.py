"""Words on PostgreSQL rank as FTS5's BM25 does (SCALE-1): a rare word the question shares with the answer
outweighs a name said everywhere (``memory.storage.pgsearch.PgWords``; ``ts_rank_cd`` ranked the other way and
lost 7 points R@5 on the LoCoMo dev set)."""

from __future__ import annotations

from conftest import HashEmbedder, dm_ctx, remember

from memory.engine import MemoryEngine

FILLER = (
    "bakes sourdough on Sundays",
    "runs along the river",
    "repairs old radios",
    "grows tomatoes on the balcony",
    "reads Russian novels",
    "sails a small dinghy",
    "collects vinyl jazz records",
    "teaches chess at the library",
    "paints watercolour birds",
    "brews cider in autumn",
    "climbs at the indoor wall",
    "knits winter scarves",
    "studies Japanese grammar",
    "volunteers at the food bank",
    "photographs old churches",
    "plays darts at the pub",
)


def _ranked(engine: MemoryEngine, text: str) -> list[str]:
    corpus = engine.memory_rows.corpus
    rids = [rid for rid, _ in corpus.text_search(text, dm_ctx("alice").memory_partitions(), 10)]
    return [engine.db.scalar("SELECT content FROM memories WHERE rid = ?", (rid,)) for rid in rids]


def test_a_rare_word_outranks_a_name_said_in_every_row_on_both_engines(store_url, clock):
    engine = MemoryEngine(store_url, HashEmbedder(), clock)
    try:
        for thing in FILLER:
            remember(engine, f"Alice {thing}")
        # the name four times: ts_rank_cd put this first
        remember(engine, "Alice Alice Alice, said Alice")
        remember(engine, "The cello lesson moved to Thursday")
        ranked = _ranked(engine, "Alice cello")
        assert ranked[0] == "The cello lesson moved to Thursday"
        assert len(ranked) >= 10  # rows with only the common word still fill the list
    finally:
        engine.close()


def test_a_question_of_stop_words_and_symbols_finds_nothing_and_breaks_nothing(store_url, clock):
    engine = MemoryEngine(store_url, HashEmbedder(), clock)
    try:
        remember(engine, "Alice keeps bees")
        assert _ranked(engine, "the of & | ! ( ' :*") == []
        # user text is only ever a parameter
        assert _ranked(engine, "bees') OR 1=1 --") == ["Alice keeps bees"]
    finally:
        engine.close()


def test_a_question_in_an_unspaced_script_finds_its_fact_by_words_on_both_engines(store_url, clock):
    """LANG-1: PostgreSQL's generated words column takes Chinese and Japanese text apart as the SQLite
    index's tokenizer does (each character and the pair it starts)."""
    engine = MemoryEngine(store_url, HashEmbedder(), clock)
    try:
        for thing in FILLER[:6]:
            remember(engine, f"Alice {thing}")
        remember(engine, "爱丽丝养了一只叫饼干的灰猫")
        remember(engine, "アリスは毎朝ジョギングをしています")
        assert _ranked(engine, "饼干是什么颜色的猫？")[0] == "爱丽丝养了一只叫饼干的灰猫"
        assert (
            _ranked(engine, "アリスはいつジョギングしますか")[0]
            == "アリスは毎朝ジョギングをしています"
        )
        assert _ranked(engine, "Alice sourdough")[0] == "Alice bakes sourdough on Sundays"
    finally:
        engine.close()
