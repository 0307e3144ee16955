"""TOOLS-1/2: the nine tools refuse every malformed call with an ``Error:`` string and an untouched store."""

from __future__ import annotations

import json

import pytest
from conftest import count, dm_ctx, guild_ctx, remember, say, snapshot

from memory.models import EntityRef
from memory.tools import MemoryTools, RateLimiter

CTX = guild_ctx("g1", "alice")
TOOLS = (
    "memory_store",
    "memory_search",
    "memory_recall",
    "memory_update",
    "memory_delete",
    "memory_reflect",
    "memory_graph",
    "conversation_search",
    "channel_recall",
)
ID = "<id>"  # replaced by the id of the existing memory, so a wrongly accepted write would really change it

GOOD = {
    "memory_store": {
        "type": "fact",
        "subject": "Alice",
        "content": "Alice adopted a greyhound",
        "tags": ["pets"],
        "importance": 6,
        "entities": [
            {
                "name": "Alice",
                "type": "person",
                "relations": [{"relation": "owns", "target": "greyhound"}],
            }
        ],
    },
    "memory_search": {"query": "kayak", "topK": 5, "type": "semantic", "tags": ["boats"]},
    "memory_recall": {"id": ID},
    "memory_update": {"id": ID, "content": "Alice owns a blue kayak", "importance": 7},
    "memory_delete": {"id": ID},
    "memory_reflect": {"force": True},
    "memory_graph": {"entity": "Alice", "depth": 1},
    "conversation_search": {"query": "kayak trip", "topK": 3},
    "channel_recall": {"channel_id": "g1-general", "limit": 5},
}

# tool -> {case: arguments}; every one must be refused
BAD = {
    "memory_store": {
        "missing-content": {"type": "fact", "subject": "Alice"},
        "missing-type": {"subject": "Alice", "content": "Alice likes tea"},
        "unknown-type": {"type": "gossip", "subject": "Alice", "content": "Alice likes tea"},
        "tags-not-a-list": {
            "type": "fact",
            "subject": "Alice",
            "content": "Alice likes tea",
            "tags": "tea",
        },
        "importance-word": {
            "type": "fact",
            "subject": "Alice",
            "content": "Alice likes tea",
            "importance": "high",
        },
        "importance-11": {
            "type": "fact",
            "subject": "Alice",
            "content": "Alice likes tea",
            "importance": 11,
        },
        "importance-0": {
            "type": "fact",
            "subject": "Alice",
            "content": "Alice likes tea",
            "importance": 0,
        },
        "too-many-tags": {
            "type": "fact",
            "subject": "Alice",
            "content": "Alice likes tea",
            "tags": ["t"] * 13,
        },
        "content-too-long": {"type": "fact", "subject": "Alice", "content": "a" * 2001},
        "ttl-words": {
            "type": "fact",
            "subject": "Alice",
            "content": "Alice likes tea",
            "ttl": "7 days",
        },
        "source-not-allowed": {
            "type": "fact",
            "subject": "Alice",
            "content": "Alice likes tea",
            "source": "consolidation",
        },
        "extra-scope": {
            "type": "fact",
            "subject": "Alice",
            "content": "Alice likes tea",
            "scope": "owner",
        },
        "bad-entity-type": {
            "type": "fact",
            "subject": "Alice",
            "content": "Alice likes tea",
            "entities": [{"name": "A", "type": "alien"}],
        },
        "entity-extra": {
            "type": "fact",
            "subject": "Alice",
            "content": "Alice likes tea",
            "entities": [{"name": "A", "weight": 3}],
        },
    },
    "memory_search": {
        "missing-query": {"topK": 3},
        "empty-query": {"query": ""},
        "query-list": {"query": ["kayak"]},
        "topK-0": {"query": "kayak", "topK": 0},
        "topK-51": {"query": "kayak", "topK": 51},
        "topK-word": {"query": "kayak", "topK": "ten"},
        "legacy-type": {"query": "kayak", "type": "fact"},
        "weights-out-of-range": {"query": "kayak", "weights": {"semantic": 2}},
        "weights-extra": {"query": "kayak", "weights": {"semantic": 0.5, "magic": 1}},
        "extra-user": {"query": "kayak", "user_id": "bob"},
    },
    "memory_recall": {
        "id-too-long": {"id": "x" * 65},
        "id-number": {"id": 42},
        "tags-string": {"tags": "boats"},
        "include-maybe": {"includeConsolidated": "perhaps"},
        "extra-scope": {"scope_id": "bob"},
    },
    "memory_update": {
        "missing-id": {"content": "Alice owns a red kayak"},
        "importance-0": {"id": ID, "importance": 0},
        "importance-word": {"id": ID, "importance": "very"},
        "content-too-short": {"id": ID, "content": "ab"},
        "empty-subject": {"id": ID, "subject": ""},
        "extra-kind": {"id": ID, "content": "Alice owns a red kayak", "scope": "guild"},
        "unknown-id": {"id": "no-such-id", "content": "Alice owns a red kayak"},
        "secret": {"id": ID, "content": "Alice's password is hunter2"},
    },
    "memory_delete": {
        "missing-id": {},
        "empty-id": {"id": ""},
        "id-number": {"id": 12345},
        "id-too-long": {"id": "x" * 65},
        "extra-cascade": {"id": ID, "cascade": True},
        "unknown-id": {"id": "no-such-id"},
    },
    "memory_reflect": {
        "force-maybe": {"force": "perhaps"},
        "force-list": {"force": [True]},
        "extra": {"force": True, "scope": "owner"},
    },
    "memory_graph": {
        "missing-entity": {"depth": 2},
        "depth-0": {"entity": "Alice", "depth": 0},
        "depth-6": {"entity": "Alice", "depth": 6},
        "depth-word": {"entity": "Alice", "depth": "deep"},
        "entity-too-long": {"entity": "A" * 121},
        "extra": {"entity": "Alice", "partitions": ["owner|olga|private"]},
    },
    "conversation_search": {
        "missing-query": {},
        "topK-31": {"query": "kayak", "topK": 31},
        "topK-0": {"query": "kayak", "topK": 0},
        "query-number": {"query": 7},
        "extra-guild": {"query": "kayak", "guild_id": "other"},
    },
    "channel_recall": {
        "missing-channel": {"limit": 5},
        "limit-0": {"channel_id": "g1-general", "limit": 0},
        "limit-101": {"channel_id": "g1-general", "limit": 101},
        "channel-number": {"channel_id": 5},
        "extra-guild": {"channel_id": "g1-general", "guild_id": "g2"},
        "other-guild-channel": {"channel_id": "g2-general"},
    },
}
RAW_BAD = {
    "broken-json": '{"query": "kayak", ',
    "json-list": "[1, 2]",
    "json-string": '"kayak"',
    "json-number": "42",
    "json-null": "null",
    "trailing-garbage": '{"query": "kayak"} extra',
    "not-json": "query=kayak",
}


@pytest.fixture
def store(engine):
    memory = remember(
        engine,
        "Alice owns a red kayak",
        subject="Alice",
        scope_id="alice",
        tags=("boats",),
        guild_id="g1",
        entities=(EntityRef("Alice", "person", (("owns", "kayak"),)),),
    )
    say(engine, "who wants to join the kayak trip", author="alice", guild="g1")
    say(engine, "a kayak trip in another server", author="bob", guild="g2")
    return engine, memory


def _tools(engine, **kw):
    return MemoryTools(engine, CTX, reflect=lambda force: {"clusters": 0, "force": force}, **kw)


def _fill(args, memory_id):
    return {k: (memory_id if v == ID else v) for k, v in args.items()}


@pytest.mark.parametrize("tool, case", [(t, c) for t, cases in BAD.items() for c in cases])
def test_bad_arguments_are_an_error_and_change_nothing(store, tool, case):
    engine, memory = store
    tools = _tools(engine)
    before = snapshot(engine)
    out = tools.call(tool, json.dumps(_fill(BAD[tool][case], memory.id)))
    assert out.startswith("Error:"), out
    assert "failed unexpectedly" not in out  # a clear reason, not a crash report
    engine.recall.flush_access()
    assert snapshot(engine) == before


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("case", list(RAW_BAD))
def test_arguments_that_are_not_a_json_object_are_an_error(store, tool, case):
    engine, _ = store
    before = snapshot(engine)
    out = _tools(engine).call(tool, RAW_BAD[case])
    assert out.startswith("Error:"), out
    assert snapshot(engine) == before


def test_invalid_json_says_so(store):
    out = _tools(store[0]).call("memory_search", '{"query": "kayak", ')
    assert out.startswith("Error: the arguments are not valid JSON")


def test_validation_errors_name_the_field(store):
    out = _tools(store[0]).call(
        "memory_store",
        json.dumps({"type": "fact", "subject": "Alice", "content": "x" * 3, "importance": 11}),
    )
    assert out.startswith("Error: invalid arguments for memory_store: importance:")


@pytest.mark.parametrize(
    "name", ["memory_forget", "", "MEMORY_STORE", "memory_store ", "__init__", "call"]
)
def test_an_unknown_tool_is_an_error_listing_the_real_ones(store, name):
    engine, _ = store
    before = snapshot(engine)
    out = _tools(engine).call(name, "{}")
    assert out.startswith("Error: there is no tool named") and "memory_store" in out
    assert snapshot(engine) == before


@pytest.mark.parametrize("tool", TOOLS)
def test_good_calls_work(store, tool):
    engine, memory = store
    tools = _tools(engine)
    if tool == "memory_delete":  # a delete acts only on a strong match of this turn's search
        tools.call("memory_search", {"query": "Alice owns a red kayak"})
    out = tools.call(tool, json.dumps(_fill(GOOD[tool], memory.id)))
    assert not out.startswith("Error"), out
    data = json.loads(out)
    if tool == "memory_store":
        stored = engine.memory_rows.get(data["id"])
        assert data["status"] == "stored" and stored.tags == ("pets",) and stored.importance == 6
        edges = engine.graph.traverse("Alice", 1, CTX.memory_partitions())["edges"]
        assert {(e["relation"], e["target"]) for e in edges} == {
            ("owns", "kayak"),
            ("owns", "greyhound"),
        }
    elif tool == "memory_search":
        assert [r["id"] for r in data["results"]] == [memory.id]
    elif tool == "memory_recall":
        assert data["results"][0]["content"] == "Alice owns a red kayak" and data["results"][0][
            "tags"
        ] == ["boats"]
    elif tool == "memory_update":
        assert (
            engine.memory_rows.get(memory.id).content == "Alice owns a blue kayak"
            and data["memory"]["importance"] == 7
        )
    elif tool == "memory_delete":
        assert data["status"] == "deleted" and count(engine, "memories") == 0
    elif tool == "memory_reflect":
        assert data == {"clusters": 0, "force": True}
    elif tool == "memory_graph":
        assert data["found"] and [e["target"] for e in data["edges"]] == ["kayak"]
    elif tool == "conversation_search":
        assert [r["content"] for r in data["results"]] == ["who wants to join the kayak trip"]
    elif tool == "channel_recall":
        assert [m["content"] for m in data["messages"]] == ["who wants to join the kayak trip"]


def test_a_delete_by_tool_acts_only_on_a_strong_match_of_this_turns_search(engine):
    kayak = remember(engine, "Alice owns a red kayak", scope_id="alice", guild_id="g1")
    peanuts = remember(engine, "Alice is allergic to peanuts", scope_id="alice", guild_id="g1")
    tools = _tools(engine)
    unsearched = tools.call("memory_delete", {"id": kayak.id})
    # an id from nowhere: no search vouched for it
    assert unsearched.startswith("Error:") and "strong match" in unsearched
    found = {
        r["id"]: r["match"]
        for r in json.loads(tools.call("memory_search", {"query": "forget my kayak"}))["results"]
    }
    # the weak hit is returned, as a told model would see it
    assert found == {
        kayak.id: "strong",
        peanuts.id: "weak",
    }
    refused = tools.call("memory_delete", {"id": peanuts.id})
    assert refused.startswith("Error:") and "weak match is a different memory" in refused
    assert json.loads(tools.call("memory_delete", {"id": kayak.id}))["status"] == "deleted"
    assert [m.content for m in engine.memory_rows.listing(None)] == ["Alice is allergic to peanuts"]
    # a new turn vouches for nothing
    assert _tools(engine).call("memory_delete", {"id": peanuts.id}).startswith("Error:")


def test_memory_reflect_without_consolidation_is_an_error(store):
    out = MemoryTools(store[0], CTX).call("memory_reflect", "{}")
    assert out.startswith("Error:") and "not available" in out


def test_an_exception_inside_a_tool_becomes_an_error_string(store):
    engine, memory = store

    def broken(force):
        raise RuntimeError("boom")

    before = snapshot(engine)
    out = MemoryTools(engine, CTX, reflect=broken).call("memory_reflect", "{}")
    assert out == "Error: memory_reflect failed unexpectedly (RuntimeError); nothing was changed."
    assert snapshot(engine) == before


def test_arguments_may_be_given_as_a_dict(store):
    out = json.loads(_tools(store[0]).call("memory_search", {"query": "kayak"}))
    assert out["results"][0]["content"] == "Alice owns a red kayak"


# -- schemas ----------------------------------------------------------------------------------------------
def test_schemas_are_nine_valid_function_definitions(store):
    schemas = _tools(store[0]).schemas()
    json.dumps(schemas)
    assert [s["function"]["name"] for s in schemas] == list(TOOLS)
    required = {
        "memory_store": {"type", "subject", "content"},
        "memory_search": {"query"},
        "memory_recall": set(),
        "memory_update": {"id"},
        "memory_delete": {"id"},
        "memory_reflect": set(),
        "memory_graph": {"entity"},
        "conversation_search": {"query"},
        "channel_recall": {"channel_id"},
    }
    for s in schemas:
        fn = s["function"]
        params = fn["parameters"]
        assert s["type"] == "function" and fn["description"] and len(fn["description"]) < 200
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert set(params.get("required", [])) == required[fn["name"]]
        assert set(params.get("required", [])) <= set(params["properties"])
        assert set(GOOD[fn["name"]]) <= set(params["properties"])
    store_props = schemas[0]["function"]["parameters"]["properties"]
    assert store_props["importance"]["minimum"] == 1 and store_props["importance"]["maximum"] == 10
    assert "fact" in store_props["type"]["enum"] and "procedural" in store_props["type"]["enum"]


# -- rate limit (TOOLS-2) -----------------------------------------------------------------------------------
def test_rate_limiter_blocks_the_sixth_write_in_a_minute(store, clock):
    engine, memory = store
    tools = _tools(engine, rate_limit=RateLimiter(clock))
    topics = [
        "sailing",
        "quantum physics",
        "sourdough",
        "jazz piano",
        "birdwatching",
        "origami",
        "astronomy",
    ]
    for topic in topics[:5]:
        out = json.loads(
            tools.call(
                "memory_store",
                json.dumps({"type": "fact", "subject": topic, "content": f"Alice enjoys {topic}"}),
            )
        )
        assert out["status"] == "stored"
        clock.advance(5)
    blocked = tools.call(
        "memory_store",
        json.dumps({"type": "fact", "subject": "x", "content": "Alice enjoys origami"}),
    )
    assert blocked.startswith("Error:") and "too many memory writes" in blocked
    assert tools.call("memory_delete", json.dumps({"id": memory.id})).startswith("Error: too many")
    assert count(engine, "memories") == 6
    # reads are not limited
    assert not tools.call("memory_search", json.dumps({"query": "origami"})).startswith("Error")
    clock.advance(60 - 25)  # the first write is now 60 s old
    out = json.loads(
        tools.call(
            "memory_store",
            json.dumps({"type": "fact", "subject": "x", "content": "Alice enjoys astronomy"}),
        )
    )
    assert out["status"] == "stored" and count(engine, "memories") == 7


def test_invalid_writes_do_not_use_up_the_rate_limit(store, clock):
    engine, _ = store
    tools = _tools(engine, rate_limit=RateLimiter(clock, limit=1))
    for _ in range(3):
        assert tools.call("memory_store", json.dumps({"type": "fact"})).startswith(
            "Error: invalid arguments"
        )
    assert (
        json.loads(
            tools.call(
                "memory_store",
                json.dumps({"type": "fact", "subject": "Alice", "content": "Alice enjoys sailing"}),
            )
        )["status"]
        == "stored"
    )


def test_rate_limiter_window(clock):
    limiter = RateLimiter(clock, limit=5, window=60)
    assert [limiter.allow() for _ in range(6)] == [True] * 5 + [False]
    clock.advance(59.9)
    assert not limiter.allow()
    clock.advance(0.1)
    assert [limiter.allow() for _ in range(6)] == [True] * 5 + [False]


def test_dm_tools_store_private_facts_that_the_dm_can_find_again(engine):
    tools = MemoryTools(engine, dm_ctx("alice"))
    stored = json.loads(
        tools.call(
            "memory_store",
            json.dumps(
                {"type": "preference", "subject": "Alice", "content": "Alice hates cilantro"}
            ),
        )
    )
    found = json.loads(tools.call("memory_recall", json.dumps({"id": stored["id"]})))
    assert found["results"][0]["kind"] == "preference"
    assert (
        MemoryTools(engine, guild_ctx("g1", "alice"))
        .call("memory_recall", json.dumps({"id": stored["id"]}))
        .startswith("Error:")
    )


def test_search_and_recall_say_whose_each_fact_is_in_the_third_person(engine):
    # the real 1.5B: a tool result "I work as a nurse" was said back as the bot's own life
    priya = engine.people.resolve("discord", "7001", "Priya")
    nurse = remember(engine, "I work as a nurse at the children's hospital", scope_id=priya)
    remember(engine, "Mein Bruder wohnt in Danzig", scope_id=priya)
    tools = MemoryTools(engine, dm_ctx(priya))
    found = json.loads(tools.call("memory_search", {"query": "what work does Priya do"}))
    shown = {r["id"]: (r["whose"], r["content"]) for r in found["results"]}
    assert shown[nurse.id] == (
        'about "Priya"',
        "Priya works as a nurse at the children's hospital",
    )
    listed = json.loads(tools.call("memory_recall", {}))["results"]
    assert {(r["whose"], r["content"]) for r in listed} == {
        ('about "Priya"', "Priya works as a nurse at the children's hospital"),
        ('about "Priya"', "Priyas Bruder wohnt in Danzig"),
    }
    # nothing stored changed
    assert nurse.content == "I work as a nurse at the children's hospital"
    assert [m.content for m in engine.memory_rows.listing(None) if m.id == nurse.id] == [
        nurse.content
    ]
