"""SEC-1 as a matrix: for every kind of conversation, exactly which memories and messages it may see.

One world is built per module (a real SQLite file): a memory in every partition for several people,
each mentioning its own entity plus a shared one, and messages in two guilds and three DMs. Every
context is then checked through every read path: hybrid recall, plain listing, the tools, the entity
graph and the message search. A row outside the expected set reaching any path is a privacy leak.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import HashEmbedder, contents, count, dm_ctx, guild_ctx, remember, say, snapshot

from memory.clock import FakeClock
from memory.engine import MemoryEngine
from memory.errors import InvalidInput
from memory.models import EntityRef, Scope, Visibility
from memory.scopes import RecallContext
from memory.tools import MemoryTools

X, Y, Z, W, OWNER = "xena", "yuri", "zed", "wren", "olga"  # wren opted in to sharing across servers
GA, GB = "guildA", "guildB"

# label -> (scope, scope_id, visibility, server it was said in). Every content holds the word "kites".
PARTITIONS = {
    "here_x_A": (Scope.USER, X, Visibility.PUBLIC, GA),
    "here_x_B": (Scope.USER, X, Visibility.PUBLIC, GB),
    "here_y_A": (Scope.USER, Y, Visibility.PUBLIC, GA),
    "here_z_B": (Scope.USER, Z, Visibility.PUBLIC, GB),
    "here_w_A": (Scope.USER, W, Visibility.PUBLIC, GA),
    "here_w_B": (Scope.USER, W, Visibility.PUBLIC, GB),
    "here_o_A": (Scope.USER, OWNER, Visibility.PUBLIC, GA),
    "port_x": (Scope.USER, X, Visibility.PUBLIC, None),
    "port_w": (Scope.USER, W, Visibility.PUBLIC, None),
    "priv_x": (Scope.USER, X, Visibility.PRIVATE, None),
    "priv_y": (Scope.USER, Y, Visibility.PRIVATE, None),
    "priv_w": (Scope.USER, W, Visibility.PRIVATE, None),
    "priv_o": (Scope.USER, OWNER, Visibility.PRIVATE, None),
    "guild_a": (Scope.GUILD, GA, Visibility.PUBLIC, None),
    "guild_b": (Scope.GUILD, GB, Visibility.PUBLIC, None),
    "owner": (Scope.OWNER, OWNER, Visibility.PRIVATE, None),
}

STAFF = f"{GA}-staff"  # a channel of guild A that only some members can read
CONTEXTS = {
    "guildA_x_with_y": (guild_ctx(GA, X, Y), {"here_x_A", "here_y_A", "guild_a"}),
    "guildB_x": (guild_ctx(GB, X), {"here_x_B", "guild_b"}),
    "guildB_z": (guild_ctx(GB, Z), {"here_z_B", "guild_b"}),
    "guildB_z_with_w": (
        guild_ctx(GB, Z, W),
        {"here_z_B", "here_w_B", "here_w_A", "port_w", "guild_b"},
    ),
    "guildA_admin_y": (guild_ctx(GA, Y, admin=True, readable=(STAFF,)), {"here_y_A", "guild_a"}),
    "dm_x": (dm_ctx(X), {"port_x", "priv_x", "here_x_A", "here_x_B"}),
    "dm_y": (dm_ctx(Y), {"priv_y", "here_y_A"}),
    "owner_dm": (dm_ctx(OWNER, owner=True), {"here_o_A", "priv_o", "owner"}),
    "owner_in_guildA": (guild_ctx(GA, OWNER, owner_id=OWNER, admin=True), {"here_o_A", "guild_a"}),
}

# message label -> where it was said; and which contexts may read it
MESSAGES = {
    "msg_guild_a": dict(author=X, guild=GA),
    "msg_staff_a": dict(author=Y, guild=GA, channel=STAFF),
    "msg_guild_b": dict(author=Z, guild=GB),
    "msg_dm_x": dict(author=X, dm_person=X),
    "msg_dm_y": dict(author=Y, dm_person=Y),
    "msg_dm_o": dict(author=OWNER, dm_person=OWNER),
}
VISIBLE_MESSAGES = {
    "guildA_x_with_y": {"msg_guild_a"},
    "guildB_x": {"msg_guild_b"},
    "guildB_z": {"msg_guild_b"},
    "guildB_z_with_w": {"msg_guild_b"},
    "guildA_admin_y": {"msg_guild_a", "msg_staff_a"},
    "dm_x": {"msg_dm_x"},
    "dm_y": {"msg_dm_y"},
    "owner_dm": {"msg_dm_o"},
    "owner_in_guildA": {"msg_guild_a"},
}
CHANNEL_OF = {
    label: m.get("channel")
    or (f"{m['guild']}-general" if m.get("guild") else f"dm-{m['dm_person']}")
    for label, m in MESSAGES.items()
}


@pytest.fixture
def engine(any_engine):
    """Every test here runs on SQLite and on PostgreSQL (SCALE-1)."""
    return any_engine


def text(label: str) -> str:
    return f"{label} knows a secret about flying kites"


def entity(label: str) -> str:
    return f"Entity {label}"


def store_world(engine: MemoryEngine, with_entities: bool = True) -> dict[str, str]:
    ids = {}
    for label, (scope, scope_id, visibility, guild) in PARTITIONS.items():
        entities = (
            EntityRef("Kites", "concept", (("loved_by", entity(label)),)),
            EntityRef(entity(label), "person"),
        )
        ids[label] = remember(
            engine,
            text(label),
            subject=label,
            scope=scope,
            scope_id=scope_id,
            visibility=visibility,
            guild_id=guild,
            entities=entities if with_entities else (),
        ).id
    engine.people.set_sharing(W, True)
    return ids


def context(engine: MemoryEngine, name: str) -> RecallContext:
    """The named context as the orchestrator builds it: with the reach the store gives its people."""
    ctx = CONTEXTS[name][0]
    return replace(ctx, reach=engine.people.reach(ctx.speaker_id, ctx.people, is_dm=ctx.is_dm))


def owns(ctx: RecallContext, label: str) -> bool:
    """Who may change what (SEC-1): your own memories; lore if you administer the server; owner memory in the owner's DM."""
    scope, scope_id, _, _ = PARTITIONS[label]
    if scope is Scope.USER:
        return scope_id == ctx.speaker_id
    if scope is Scope.GUILD:
        return ctx.admin and scope_id == ctx.guild_id
    return ctx.owner_private


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(engine, {label: memory id}) with one memory per partition and one message per place."""
    engine = MemoryEngine(tmp_path_factory.mktemp("scopes") / "m.db", HashEmbedder(), FakeClock())
    ids = store_world(engine)
    for label, where in MESSAGES.items():
        say(engine, text(label), **where)
    yield engine, ids
    engine.close()


def labels_of(found: set[str]) -> set[str]:
    return {c.split(" ", 1)[0] for c in found}


ctx_params = pytest.mark.parametrize("ctx_name", list(CONTEXTS))


@ctx_params
@pytest.mark.parametrize("mirror", [True, False], ids=["numpy-mirror", "vec0-knn"])
def test_recall_returns_exactly_the_visible_partitions(world, ctx_name, mirror):
    # the same file, read through the in-process numpy mirror or through vec0 KNN queries
    with MemoryEngine(
        world[0].db.path, HashEmbedder(), FakeClock(), vector_mirror=mirror
    ) as engine:
        ctx, expected = context(engine, ctx_name), CONTEXTS[ctx_name][1]
        hits = engine.recall.recall(ctx, "kites", threshold=0, top_k=50, reinforce=False)
        assert labels_of(contents(hits)) == expected
        assert all("vector" in h.channels for h in hits)


@ctx_params
def test_bm25_only_recall_is_scoped_too(world, ctx_name):
    with MemoryEngine(world[0].db.path, None, FakeClock()) as engine:
        ctx, expected = context(engine, ctx_name), CONTEXTS[ctx_name][1]
        hits = engine.recall.recall(ctx, "kites", threshold=0, top_k=50, reinforce=False)
        assert labels_of(contents(hits)) == expected
        assert all(h.cosine is None and "fts" in h.channels for h in hits)


@ctx_params
def test_list_shows_exactly_the_visible_partitions(world, ctx_name):
    engine, _ = world
    ctx, expected = context(engine, ctx_name), CONTEXTS[ctx_name][1]
    assert (
        labels_of(contents(engine.memory_rows.listing(ctx.memory_partitions(), limit=100)))
        == expected
    )


@ctx_params
@pytest.mark.parametrize("tool", ["memory_search", "memory_recall"])
def test_search_tools_show_exactly_the_visible_partitions(world, ctx_name, tool):
    engine, _ = world
    ctx, expected = context(engine, ctx_name), CONTEXTS[ctx_name][1]
    args = {"query": "kites", "topK": 50} if tool == "memory_search" else {}
    out = MemoryTools(engine, ctx).call(tool, json.dumps(args))
    assert not out.startswith("Error"), out
    assert labels_of({r["content"] for r in json.loads(out)["results"]}) == expected


@ctx_params
def test_recall_tool_by_id_finds_only_visible_ids(world, ctx_name):
    engine, ids = world
    ctx, expected = context(engine, ctx_name), CONTEXTS[ctx_name][1]
    tools = MemoryTools(engine, ctx)
    for label, memory_id in ids.items():
        out = tools.call("memory_recall", json.dumps({"id": memory_id}))
        if label in expected:
            assert json.loads(out)["results"][0]["content"] == text(label)
        else:
            assert out.startswith("Error:") and "no memory" in out, (label, out)
            assert label not in out  # not even the content leaks into the error


@ctx_params
@pytest.mark.parametrize("tool", ["memory_delete", "memory_update"])
def test_writes_by_id_outside_the_scope_are_not_found_and_change_nothing(world, ctx_name, tool):
    engine, ids = world
    ctx, expected = context(engine, ctx_name), CONTEXTS[ctx_name][1]
    tools = MemoryTools(engine, ctx)
    before = snapshot(engine)
    for label, memory_id in ids.items():
        if label in expected:
            continue
        args = (
            {"id": memory_id}
            if tool == "memory_delete"
            else {"id": memory_id, "content": "Overwritten by a stranger"}
        )
        out = tools.call(tool, json.dumps(args))
        assert out.startswith("Error:") and "no memory" in out, (label, out)
    assert snapshot(engine) == before
    assert tools.deleted == []


@ctx_params
@pytest.mark.parametrize("tool", ["memory_delete", "memory_update"])
def test_visible_memories_change_only_for_their_owner(tmp_path, ctx_name, tool):
    """SEC-1 ownership x action: within what a context sees, the speaker changes only their own memories,
    lore only as an admin or the owner; every refusal changes nothing (on a fresh file, since this writes)."""
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(), FakeClock()) as engine:
        ids = store_world(engine, with_entities=False)
        ctx, expected = context(engine, ctx_name), CONTEXTS[ctx_name][1]
        tools = MemoryTools(engine, ctx)
        for label in sorted(
            expected, key=lambda lb: owns(ctx, lb)
        ):  # refusals first, on an untouched store
            before = snapshot(engine)
            args = {"id": ids[label]} | (
                {} if tool == "memory_delete" else {"content": f"{label} was edited here"}
            )
            if (
                tool == "memory_delete"
            ):  # a delete acts only on a strong match of this turn's search
                tools.call("memory_search", {"query": engine.memory_rows.get(ids[label]).content})
            out = tools.call(tool, json.dumps(args))
            if owns(ctx, label):
                assert not out.startswith("Error"), (label, out)
                assert (
                    (count(engine, "memories", "id = ?", (ids[label],)) == 0)
                    if tool == "memory_delete"
                    else engine.memory_rows.get(ids[label]).content == f"{label} was edited here"
                )
            else:
                assert out.startswith("Error:") and "not yours" in out, (label, out)
                assert snapshot(engine) == before, label


def test_every_context_owns_something_and_is_refused_something():
    """The matrix above is not vacuous: each context has memories it may change and, in servers, ones it may not."""
    for name, (ctx, expected) in CONTEXTS.items():
        assert any(owns(ctx, lb) for lb in expected), name
        if not ctx.is_dm and not ctx.admin:
            assert not all(owns(ctx, lb) for lb in expected), name


@ctx_params
def test_top_entities_count_only_visible_memories(world, ctx_name):
    engine, _ = world
    ctx, expected = context(engine, ctx_name), CONTEXTS[ctx_name][1]
    top = engine.graph.top_entities(ctx.memory_partitions(), n=50)
    by_name = {row.name: row.mentions for row in top}
    assert by_name == {"Kites": len(expected), **{entity(label): 1 for label in expected}}


@ctx_params
def test_graph_traversal_only_walks_visible_relations(world, ctx_name):
    engine, _ = world
    ctx, expected = context(engine, ctx_name), CONTEXTS[ctx_name][1]
    walk = engine.graph.traverse("Kites", 2, ctx.memory_partitions())
    assert {(e["source"], e["relation"], e["target"]) for e in walk["edges"]} == {
        ("Kites", "loved_by", entity(label)) for label in expected
    }
    for label in PARTITIONS:
        assert engine.graph.traverse(entity(label), 1, ctx.memory_partitions())["found"] is (
            label in expected
        )
    via_tool = json.loads(
        MemoryTools(engine, ctx).call("memory_graph", json.dumps({"entity": "kites"}))
    )
    assert len(via_tool["edges"]) == len(expected)


@ctx_params
def test_message_search_is_partitioned_by_guild_and_dm(world, ctx_name):
    engine, _ = world
    ctx = context(engine, ctx_name)
    expected = VISIBLE_MESSAGES[ctx_name]
    assert labels_of(contents(engine.messages.search(ctx, "kites", top_k=30))) == expected
    out = json.loads(
        MemoryTools(engine, ctx).call("conversation_search", json.dumps({"query": "secret kites"}))
    )
    assert labels_of({r["content"] for r in out["results"]}) == expected


@ctx_params
def test_channel_recall_reads_only_channels_of_this_guild_or_dm(world, ctx_name):
    engine, _ = world
    ctx = context(engine, ctx_name)
    tools = MemoryTools(engine, ctx)
    for label, channel in CHANNEL_OF.items():
        out = tools.call("channel_recall", json.dumps({"channel_id": channel}))
        if label in VISIBLE_MESSAGES[ctx_name]:
            assert [m["content"] for m in json.loads(out)["messages"]] == [text(label)]
        else:
            assert out.startswith("Error:") and text(label) not in out


def test_a_participant_s_private_memories_stay_out_of_a_guild(world):
    """Y takes part in X's guild conversation: what Y said in this guild surfaces there, never Y's DM facts."""
    engine, _ = world
    ctx = context(engine, "guildA_x_with_y")
    assert "user|yuri|private" not in ctx.memory_partitions()
    assert f"user|yuri|public|{GA}" in ctx.memory_partitions()


def test_what_a_person_says_in_one_server_does_not_follow_them_into_another(world):
    """Finding 4: 'keep this inside this support group' must not surface in X's other server."""
    engine, ids = world
    hits = engine.recall.recall(
        context(engine, "guildB_x"), "kites", threshold=0, top_k=50, reinforce=False
    )
    assert "here_x_A" not in labels_of(contents(hits)) and "here_x_B" in labels_of(contents(hits))


def test_sharing_across_servers_is_each_person_s_own_choice(tmp_path):
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(), FakeClock()) as engine:
        store_world(engine, with_entities=False)
        people = engine.people
        ctx = context(engine, "guildB_x")
        assert f"user|{X}|public|{GA}" not in ctx.memory_partitions()
        people.set_sharing(X, True)
        assert f"user|{X}|public|{GA}" in context(engine, "guildB_x").memory_partitions()
        # DM facts never, shared or not
        assert f"user|{X}|private" not in context(engine, "guildB_x").memory_partitions()
        people.set_sharing(X, False)
        assert f"user|{X}|public|{GA}" not in context(engine, "guildB_x").memory_partitions()


# -- where a tool writes (TOOLS-2: the caller binds the scope) -------------------------------------------
@pytest.mark.parametrize(
    "ctx, scope, scope_id, visibility, guild",
    [
        (dm_ctx(X), Scope.USER, X, Visibility.PRIVATE, None),
        (guild_ctx(GA, X, Y), Scope.USER, X, Visibility.PUBLIC, GA),
        (dm_ctx(OWNER, owner=True), Scope.OWNER, OWNER, Visibility.PRIVATE, None),
    ],
    ids=["dm", "guild", "owner-dm"],
)
def test_memory_store_binds_the_conversation_scope(engine, ctx, scope, scope_id, visibility, guild):
    out = MemoryTools(engine, ctx).call(
        "memory_store",
        json.dumps({"type": "fact", "subject": "Xena", "content": "Xena keeps bees on her roof"}),
    )
    stored = engine.memory_rows.get(json.loads(out)["id"])
    assert (stored.scope, stored.scope_id, stored.visibility, stored.guild_id) == (
        scope,
        scope_id,
        visibility,
        guild,
    )


def test_a_fact_told_in_a_dm_never_reaches_a_guild(engine):
    MemoryTools(engine, dm_ctx(X)).call(
        "memory_store",
        json.dumps(
            {"type": "fact", "subject": "Xena", "content": "Xena is recovering from surgery"}
        ),
    )
    assert contents(engine.recall.recall(dm_ctx(X), "surgery", threshold=0)) == {
        "Xena is recovering from surgery"
    }
    for ctx in (guild_ctx(GA, X), guild_ctx(GA, Y, X), dm_ctx(Y), dm_ctx(OWNER, owner=True)):
        assert engine.recall.recall(ctx, "surgery", threshold=0) == []


def test_the_model_cannot_choose_the_scope(engine):
    out = MemoryTools(engine, guild_ctx(GA, X)).call(
        "memory_store",
        json.dumps(
            {
                "type": "fact",
                "subject": "Olga",
                "content": "Olga owes money",
                "scope": "owner",
                "scope_id": OWNER,
            }
        ),
    )
    assert out.startswith("Error:")
    assert count(engine, "memories") == 0


# -- RecallContext validation ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(guild_id=GA, is_dm=True), "either a DM"),
        (dict(guild_id=None, is_dm=False), "either a DM"),
        (dict(is_dm=True, owner_private=True), "owner"),
        (dict(guild_id=GA, owner_private=True, owner_id=None), "owner"),
        (dict(speaker_id="", is_dm=True), "speaker"),
    ],
    ids=[
        "dm-with-guild",
        "guild-without-id",
        "dm-owner-private-without-owner",
        "guild-owner-private-without-owner",
        "no-speaker",
    ],
)
def test_recall_context_rejects_impossible_conversations(kwargs, message):
    args = dict(platform="discord", speaker_id=X, channel_id="c1") | kwargs
    with pytest.raises(InvalidInput, match=message):
        RecallContext(**args)
