"""RET-1 / SEC-2: user text never reaches FTS5 syntax raw, never breaks a query and never changes data.

The retriever catches FTS errors on purpose (RET-4), so "recall did not raise" alone would hide a broken
sanitiser: these tests also run the sanitised MATCH expression against the index directly (no catch),
and check that hostile queries containing a real word still find it through the FTS channel.
"""

from __future__ import annotations

import json

import apsw
import pytest
from conftest import (
    HashEmbedder,
    ScriptedCompleter,
    contents,
    count,
    dm_ctx,
    fts_rids,
    guild_ctx,
    remember,
    say,
    snapshot,
)

from memory.engine import MemoryEngine
from memory.models import NewMemory, Scope
from memory.scopes import partition_token
from memory.storage.migrations import MIGRATIONS
from memory.tools import MemoryTools
from memory.upkeep.maintenance import consolidate

HOSTILE = {
    "double-quote": '"kites"',
    "unbalanced-quote": '"kites',
    "lone-quote": '"',
    "single-quotes": "'kites' 'n'",
    "near": "kites NEAR lanterns",
    "near-group": "NEAR(kites lanterns)",
    "near-distance": "NEAR(kites lanterns, 2)",
    "star": "kit*",
    "lone-star": "*",
    "caret": "^kites",
    "minus": "-kites",
    "boolean-words": "kites AND OR NOT",
    "only-operators": "AND OR NOT",
    "parentheses": "((kites)",
    "column-filter": "subject:kites",
    "column-braces": "{content subject}: kites",
    "plus-and-colon": "+kites: :",
    "empty": "",
    "blank": "   \t\n ",
    "stop-words": "the and of is it to",
    "emoji": "🪁🎉🔥",
    "emoji-and-word": "🎉kites🔥",
    "sql-injection": "'; DROP TABLE memories; --",
    "sql-injection-2": '" OR 1=1; DELETE FROM memories; --',
    "nul-and-control": "kites\x00\x07\x1b[31m",
    "lone-surrogate": "kites \ud800",
    "huge": "kites lanterns " * 700 + "x" * 1000,
    "many-distinct-words": " ".join(f"word{i}" for i in range(3000)),
    "ptoken-lookalike": "ptoken : k0123456789abcde",
}
MUST_FIND = {
    "double-quote",
    "unbalanced-quote",
    "single-quotes",
    "near",
    "near-group",
    "near-distance",
    "caret",
    "minus",
    "boolean-words",
    "parentheses",
    "column-filter",
    "column-braces",
    "plus-and-colon",
    "emoji-and-word",
    "nul-and-control",
    "lone-surrogate",
    "huge",
}


@pytest.fixture
def seeded(engine):
    remember(engine, "Xena flies paper kites with lanterns at dusk", scope_id="xena", guild_id="g1")
    remember(engine, "Yuri restores antique clocks", scope_id="yuri", guild_id="g1")
    remember(engine, "The guild keeps a shared calendar", scope=Scope.GUILD, scope_id="g1")
    say(engine, "we flew kites with lanterns on the beach", author="xena", guild="g1")
    say(engine, "kites in my DM", author="xena", dm_person="xena")
    return engine


query_params = pytest.mark.parametrize("name", list(HOSTILE))


@query_params
def test_the_match_expression_built_from_any_user_text_is_valid_fts(seeded, name):
    """The sanitised MATCH expression runs against the real index (an FTS syntax error would raise here)."""
    query = HOSTILE[name]
    ptokens = (
        partition_token("user|xena|public|g1"),
        partition_token("guild|g1|public"),
        partition_token("guild|g1"),
    )
    for corpus in (seeded.memory_rows.corpus, seeded.messages.corpus):
        for scoped in ((), ptokens):
            expr = corpus.fts.match(query, scoped)
            if expr is None:
                assert name not in MUST_FIND
                continue
            sql = f"SELECT rowid FROM {corpus.fts_table} WHERE {corpus.fts_table} MATCH ?"
            found = list(seeded.db.execute(sql, (expr,)))
            if name in MUST_FIND:
                assert found, f"{name}: the word 'kites' in {query!r} should still be searched"


@query_params
def test_recall_and_message_search_survive_and_change_nothing(seeded, name):
    query = HOSTILE[name]
    before = snapshot(seeded)
    ctx = guild_ctx("g1", "xena")
    hits = seeded.recall.recall(ctx, query, threshold=0, reinforce=False)
    messages = seeded.messages.search(ctx, query)
    assert snapshot(seeded) == before
    if name in MUST_FIND:
        kite_hit = next(h for h in hits if "kites" in h.item.content)
        assert "fts" in kite_hit.channels and kite_hit.text_score == 1.0
        assert "we flew kites with lanterns on the beach" in contents(messages)
    # hostile text does not widen the partition filter
    assert "kites in my DM" not in contents(messages)


@query_params
def test_tools_answer_hostile_queries_without_error(seeded, name):
    query = HOSTILE[name]
    before = snapshot(seeded)
    tools = MemoryTools(seeded, guild_ctx("g1", "xena"))
    for tool in ("memory_search", "conversation_search", "memory_graph"):
        key = "entity" if tool == "memory_graph" else "query"
        out = tools.call(tool, json.dumps({key: query[:120]}))
        if query and "\ud800" not in query:
            assert not out.startswith("Error"), (tool, out)
        else:  # empty / unencodable text is a validation error for the model, never a crash
            assert out.startswith("Error:") and "failed unexpectedly" not in out, (tool, out)
    seeded.recall.flush_access()  # the reads' reinforcement is the only write allowed
    after = snapshot(seeded)
    for row in after["memories"]:
        row.pop("access_count"), row.pop("last_accessed_at")
    for row in before["memories"]:
        row.pop("access_count"), row.pop("last_accessed_at")
    assert after == before


@query_params
def test_bm25_only_engine_survives_hostile_queries(bm25_engine, name):
    remember(bm25_engine, "Xena flies paper kites with lanterns at dusk", scope_id="xena")
    hits = bm25_engine.recall.recall(dm_ctx("xena"), HOSTILE[name], threshold=0)
    if name in MUST_FIND:
        assert hits[0].item.content.startswith("Xena flies") and hits[0].relevance == 1.0


STORED_HOSTILE = [
    'Xena wrote "NEAR(a b)" on the whiteboard',
    "Xena's regex was ^foo* -bar (AND OR NOT) subject:foo",
    "Xena's nickname is '; DROP TABLE memories; --",
    'Xena quoted "unbalanced and kept going',
    "Xena celebrates with 🎉 confetti emoji",
]


@pytest.mark.parametrize(
    "content, plain_words",
    list(
        zip(
            STORED_HOSTILE,
            ["whiteboard", "regex", "nickname", "unbalanced", "confetti"],
            strict=True,
        )
    ),
)
def test_a_memory_full_of_fts_syntax_is_found_by_its_plain_words(engine, content, plain_words):
    remember(engine, "Yuri bakes sourdough every weekend", scope_id="xena")
    stored = remember(engine, content, scope_id="xena")
    assert stored.content == content  # stored verbatim, never "escaped" into something else
    hits = engine.recall.recall(dm_ctx("xena"), plain_words, threshold=0)
    assert hits[0].item.id == stored.id and "fts" in hits[0].channels
    # and searching with the hostile text itself works too
    assert stored.id in {
        h.item.id for h in engine.recall.recall(dm_ctx("xena"), content, threshold=0)
    }
    assert count(engine, "memories") == 2


def test_sql_injection_text_is_data_everywhere(engine):
    payload = "Robert'); DROP TABLE memories; -- says hi"
    stored = remember(
        engine,
        payload,
        subject=payload,
        scope_id="bobby",
        tags=("x'); DROP TABLE memory_tags; --",),
    )
    say(engine, payload, author="bobby", dm_person="bobby", author_name=payload)
    assert engine.memory_rows.get(stored.id).subject == payload
    assert engine.db.scalar("SELECT content FROM messages") == payload
    assert count(engine, "memories") == 1 and count(engine, "memory_tags") == 1
    assert contents(engine.messages.search(dm_ctx("bobby"), "Robert says hi")) == {payload}


def test_stop_word_only_query_uses_no_fts_but_still_recalls_by_vector(seeded):
    corpus = seeded.memory_rows.corpus
    assert corpus.fts.match("the and of is it to") is None
    hits = seeded.recall.recall(guild_ctx("g1", "xena"), "the and of is it to", threshold=0)
    assert hits and all("fts" not in h.channels for h in hits)


def test_every_term_reaches_fts_quoted(seeded):
    expr = seeded.memory_rows.corpus.fts.match('kites NEAR(x y) AND "lanterns', ("kabc",))
    assert expr == '("kites" OR "near" OR "lanterns") AND ptoken : (kabc)'


def _index_matches_rows(engine) -> None:
    """FTS5's own check that each index holds exactly what its content table says (raises otherwise)."""
    for table in ("memory_fts", "message_fts"):
        engine.db.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")


def test_every_write_path_keeps_the_text_indexes_in_step_with_their_rows(engine, embedder):
    stem = "Zelda adopted a small pet from the shelter near her flat in town"
    pets = [
        remember(engine, f"{stem} {animal}", subject=f"pet {animal}", scope_id="zelda")
        for animal in ("tabby cat", "brown dog")
    ]
    engine.memories.insert_batch(
        [
            (
                NewMemory(
                    content=f"Zelda collects {thing}",
                    subject=thing,
                    scope=Scope.USER,
                    scope_id="zelda",
                ),
                None,
            )
            for thing in ("stamps", "kites", "maps")
        ]
    )
    consolidate(
        engine,
        ScriptedCompleter(
            json.dumps({"subject": "Zelda's pets", "content": "Zelda adopted a cat and a dog"})
        ),
    )
    kites = next(m for m in engine.memory_rows.listing(None) if m.subject == "kites")
    engine.memories.update(kites.id, content="Zelda collects paper kites")
    engine.memories.delete(pets[0].id)
    say(engine, "Yuki waves hello", author="yuki", dm_person="zelda")
    say(engine, "Zelda asks about lanterns", author="zelda", dm_person="zelda")
    engine.messages.delete_rids(
        [r for (r,) in engine.db.execute("SELECT rid FROM messages WHERE author_id = 'yuki'")]
    )

    _index_matches_rows(engine)
    assert contents(engine.recall.recall(dm_ctx("zelda"), "paper kites", threshold=0))
    assert fts_rids(engine, "lanterns", "message_fts")


def test_a_file_written_by_the_per_row_trigger_schema_upgrades_and_stays_searchable(
    tmp_path, clock
):
    path = tmp_path / "old.db"
    old = apsw.Connection(str(path))
    for version, migration in enumerate(MIGRATIONS[:2], start=1):
        old.execute(migration.sql)
        old.execute(
            "INSERT INTO schema_version VALUES (?, ?, 'x')"
            if version > 1
            else "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT); "
            "INSERT INTO schema_version VALUES (?, ?, 'x')",
            (version, migration.name),
        )
    old.execute(
        "INSERT INTO memories (id, type, subject, content, scope, scope_id, partition_key, ptoken, content_hash, "
        "created_at, updated_at) VALUES ('m-old', 'semantic', 'boats', 'Yuri sails old wooden boats', 'user', 'yuri', ?, ?, "
        "'h', 0, 0)",
        ("user|yuri|public", partition_token("user|yuri|public")),
    )
    old.close()

    with MemoryEngine(path, HashEmbedder(), clock) as engine:
        remember(engine, "Yuri restores wooden canoes", scope_id="yuri")
        assert contents(engine.recall.recall(dm_ctx("yuri"), "wooden", threshold=0)) == {
            "Yuri sails old wooden boats",
            "Yuri restores wooden canoes",
        }
        _index_matches_rows(engine)


def test_a_word_no_row_held_is_counted_again_once_a_row_says_it(engine):
    """The document frequencies are cached for minutes; a term looked up before the row saying it
    was written (a new name or number) is read again, not taken for one nothing holds: "/forget
    bib 4417" right after "my bib number is 4417" found the fact only some of the time."""
    fts = engine.memory_rows.corpus.fts
    stem = fts.stem("4417")
    assert fts.doc_freq(stem)[0] == 0
    engine.memories.add(
        NewMemory(
            content="Bob's race bib number is 4417", subject="bob", scope=Scope.USER, scope_id="bob"
        )
    )
    assert fts.doc_freq(stem)[0] == 1
