"""The dashboard's people, snapshot, graph, settings, guild and audit routes (DASH-1, DASH-3), through the real
aiohttp client against the real server on 127.0.0.1."""

from __future__ import annotations

import json

import aiohttp
from dashboard_support import Dashboard, occurrences

from bot.types import IncomingMessage
from memory.scopes import RecallContext
from memory.upkeep.transfer import export_person


async def audit_rows(dash: Dashboard) -> list[dict]:
    return await dash.store(dash.engine.db.rows, "SELECT * FROM dashboard_audit ORDER BY id")


# -- people ------------------------------------------------------------------------------------------------------
async def test_people_with_linked_accounts_and_a_profile_by_type(http, dash):
    async with http.get("/api/people") as r:
        people = {p["id"]: p for p in (await r.json())["items"]}
    alice = people[dash.seeded.alice]
    assert {(a["platform"], a["user_id"]) for a in alice["accounts"]} == {
        ("discord", "111"),
        ("telegram", "333"),
    }
    assert (
        alice["names"] == ["Alice", "Alice T"]
        and alice["memories"] == 2
        and people[dash.seeded.owner]["memories"] == 1
    )
    async with http.get(f"/api/people/{dash.seeded.alice}") as r:
        profile = await r.json()
    assert {m["id"] for m in profile["profile"]["semantic"]} == {
        dash.seeded.memories["bees"],
        dash.seeded.memories["tea"],
    }
    assert profile["settings"] == {
        "share_across_servers": False,
        "timezone": None,
        "timezone_default": "UTC",
    }
    async with http.get("/api/people/discord:404") as r:
        assert r.status == 404


async def test_export_is_the_same_document_as_companion_export(http, dash):
    async with http.get(f"/api/people/{dash.seeded.alice}/export") as r:
        exported = await r.json()
    expected = json.loads(
        json.dumps(await dash.store(export_person, dash.engine, [dash.seeded.alice]))
    )
    assert exported == expected and exported["format"].startswith("companion-export/")
    assert {m["content"] for m in exported["memories"]} == {
        "Alice keeps bees on her roof",
        "Alice prefers green tea",
    }
    async with http.get("/api/people/nobody/export") as r:
        assert r.status == 404


async def test_forgetting_a_person_needs_their_id_typed_back_and_leaves_no_trace_of_them_in_the_audit(
    http, dash
):
    bob = dash.seeded.bob
    async with http.put(f"/api/memory/{dash.seeded.memories['rust']}", json={"importance": 6}) as r:
        assert r.status == 200  # an audit row about Bob
    for wrong in ({"confirm": "Bob"}, {"confirm": ""}, {}, {"confirm": dash.seeded.alice}):
        async with http.delete(f"/api/people/{bob}", json=wrong) as r:
            assert r.status in (400, 422), wrong
    assert len(await dash.store(dash.engine.memory_rows.partitions_of, bob)) == 1
    async with http.delete(f"/api/people/{bob}", json={"confirm": bob}) as r:
        assert r.status == 200
        counts = (await r.json())["forgotten"]
    assert counts["memories"] == 2 and counts["identities"] == 1 and counts["dashboard_audit"] == 1
    async with http.get("/api/people") as r:
        assert bob not in {p["id"] for p in (await r.json())["items"]}
    rows = await audit_rows(dash)
    assert [r["action"] for r in rows] == ["person.forget"] and bob not in json.dumps(rows)
    # the row about his memory went with him
    assert dash.seeded.memories["rust"] not in json.dumps(rows)


# -- the snapshot -------------------------------------------------------------------------------------------------
async def test_the_snapshot_is_exactly_the_slice_the_bot_would_assemble(http, dash):
    params = {
        "platform": "discord",
        "person": dash.seeded.alice,
        "guild": "discord:900",
        "channel": "general",
        "text": "any tea?",
    }
    async with http.get("/api/snapshot", params=params) as r:
        snap = await r.json()
    orchestrator = dash.runtime.orchestrator
    message = IncomingMessage(
        platform="discord",
        channel_id="general",
        author_id="111",
        author_name="",
        text="any tea?",
        guild_id="900",
    )
    expected = await dash.store(
        lambda: orchestrator.assembler.snapshot(orchestrator.resolve(message)).render()
    )
    assert (
        snap["text"] == expected
        and "Alice prefers green tea" in snap["text"]
        and "Movie night" in snap["text"]
    )
    assert "bees" not in snap["text"]  # her DM memory stays out of the server
    assert {s["title"] for s in snap["sections"]} >= {
        "People in this conversation",
        "Community lore",
    }
    assert dash.seeded.memories["tea"] in {m["id"] for m in snap["memories"]}


async def test_owner_memory_shows_only_in_the_owners_own_snapshot_and_the_dashboard(http, dash):
    async with http.get(
        "/api/snapshot",
        params={"platform": "discord", "person": dash.seeded.alice, "text": "the domain renewal"},
    ) as r:
        assert "Renew" not in (await r.json())["text"]
    async with http.get(
        "/api/snapshot",
        params={"platform": "console", "person": dash.seeded.owner, "text": "the domain renewal"},
    ) as r:
        owner = await r.json()
    assert (
        "Renew the example.org domain" in owner["text"]
        and owner["context"]["owner_private"] is True
    )


async def test_bad_snapshot_requests(http, dash):
    cases = [
        ({"platform": "discord", "person": dash.seeded.alice}, 400),
        ({"platform": "discord", "person": dash.seeded.alice, "text": "x" * 5000}, 400),
        ({"platform": "myspace", "person": dash.seeded.alice, "text": "hi"}, 400),
        ({"platform": "discord", "text": "hi"}, 400),
        ({"platform": "discord", "person": "discord:404", "text": "hi"}, 404),
    ]
    before = await dash.store(dash.engine.db.scalar, "SELECT COUNT(*) FROM identities")
    for params, status in cases:
        async with http.get("/api/snapshot", params=params) as r:
            assert r.status == status and "error" in await r.json(), params
    # a GET records no one
    assert await dash.store(dash.engine.db.scalar, "SELECT COUNT(*) FROM identities") == before


# -- reflections, entities, graph -----------------------------------------------------------------------------------
async def test_reflections_entities_and_the_graph(http, dash):
    async with http.get("/api/reflections?limit=5") as r:
        (reflection,) = (await r.json())["items"]
    assert reflection["status"] == "done" and reflection["stored_ids"] == [
        dash.seeded.memories["bees"]
    ]
    async with http.get("/api/entities") as r:
        entities = {e["name"]: e for e in (await r.json())["items"]}
    assert entities["Rust"]["kind"] == "technology" and entities["bees"]["mentions"] == 1
    async with http.get("/api/graph") as r:
        graph = await r.json()
    label = {n["id"]: n["label"] for n in graph["nodes"]}
    edges = {(label[e["source"]], e["label"], label[e["target"]]) for e in graph["edges"]}
    assert ("Bob", "learns", "Rust") in edges and ("Alice", "keeps", "bees") in edges
    assert {n["kind"] for n in graph["nodes"]} == {"person", "entity"}
    alice = [n for n in graph["nodes"] if n["label"] == "Alice"]
    # the entity "Alice" is drawn as the person, not beside her
    assert [n["kind"] for n in alice] == ["person"]
    assert all(e["source"] in label and e["target"] in label for e in graph["edges"])
    for path in (
        "/api/reflections?limit=0",
        "/api/entities?limit=x",
        "/api/graph?limit=-3",
        "/api/audit?limit=5000",
    ):
        async with http.get(path) as r:
            assert r.status == 400, path


async def test_the_graph_draws_everyone_the_people_view_lists(http, dash):
    """Issue 45: the Graph said "No people" while People listed one. The seeded owner mentions no
    entity; a new person who has only said hello has no memory at all."""
    newcomer = await dash.store(dash.engine.people.resolve, "console", "newcomer", "Sam")
    async with http.get("/api/people") as r:
        people = {p["id"] for p in (await r.json())["items"]}
    async with http.get("/api/graph") as r:
        nodes = (await r.json())["nodes"]
    drawn = {n["person_id"]: n["label"] for n in nodes if n["kind"] == "person"}
    assert {dash.seeded.owner, newcomer} <= people and set(drawn) == people
    assert drawn[newcomer] == "Sam"


async def test_a_store_with_one_person_and_no_entities_draws_that_person(tmp_path):
    from dashboard_support import running_dashboard

    async with running_dashboard(tmp_path, seeded=False) as dash:
        sam = await dash.store(dash.engine.people.resolve, "console", "local-user", "Sam")
        async with (
            aiohttp.ClientSession(dash.url, headers=dash.headers) as http,
            http.get("/api/graph") as r,
        ):
            graph = await r.json()
    assert graph == {
        "nodes": [{"id": f"person:{sam}", "label": "Sam", "kind": "person", "person_id": sam}],
        "edges": [],
    }


# -- settings ---------------------------------------------------------------------------------------------------------
async def test_settings_are_validated_and_reach_the_running_recall_at_once(http, dash):
    async with http.get("/api/memory/search", params={"q": "bees roof"}) as r:
        assert (await r.json())["items"]
    async with http.put(
        "/api/settings", json={"recall": {"score_threshold": 1.0, "weights": {"recency": 0.1}}}
    ) as r:
        assert r.status == 200
        settings = await r.json()
    assert settings["recall"]["score_threshold"] == 1.0 and settings["recall"]["weights"] == {
        "semantic": 0.6,
        "recency": 0.1,
        "importance": 0.2,
    }
    # the store the bot's recall reads
    assert dash.engine.knobs.get("memories").score_threshold == 1.0
    async with http.get("/api/memory/search", params={"q": "bees roof"}) as r:
        assert (await r.json())["items"] == []  # the next recall already uses the new threshold
    (row,) = await audit_rows(dash)
    assert row["action"] == "settings.update" and json.loads(row["detail"])["recall"] == [
        "score_threshold",
        "weights",
    ]


async def test_every_setting_comes_with_one_line_of_help(http):
    async with http.get("/api/settings") as r:
        settings = await r.json()
    assert (
        set(settings["help"]) == knob_paths(settings["recall"]) == knob_paths(settings["messages"])
    )
    assert all(10 < len(text) <= 120 and "\n" not in text for text in settings["help"].values()), (
        settings["help"]
    )


def knob_paths(knobs: dict) -> set[str]:
    return set(knobs) | {
        f"{k}.{inner}" for k, v in knobs.items() if isinstance(v, dict) for inner in v
    }


async def test_bad_settings_change_nothing(http, dash):
    cases = [
        {"recall": {"top_k": 0}},
        {"recall": {"top_k": "many"}},
        {"recall": {"no_such_knob": 1}},
        {"recall": {"weights": {"semantic": 0, "recency": 0, "importance": 0}}},
        {
            "recall": {"top_k": 5},
            "messages": {"fusion": "magic"},
        },  # a bad second half keeps the first from being stored
        {"recall": {}},
        {"colour": "blue"},
    ]
    for payload in cases:
        async with http.put("/api/settings", json=payload) as r:
            assert r.status == 400 and "error" in await r.json(), payload
    async with http.get("/api/settings") as r:
        assert (await r.json())["recall"]["top_k"] == 10
    assert await audit_rows(dash) == []


# -- guilds --------------------------------------------------------------------------------------------------------
async def test_a_guild_purge_needs_its_name_typed_back_and_removes_everything_of_that_guild(
    http, dash
):
    async with http.get("/api/guilds") as r:
        assert (await r.json())["items"] == [
            {"id": "discord:900", "name": None, "memories": 2, "messages": 1}
        ]
    for wrong in ({"confirm": "900"}, {"confirm": "discord:9000"}, {}):
        async with http.post("/api/guilds/discord:900/purge", json=wrong) as r:
            assert r.status in (400, 422), wrong
    async with http.post("/api/guilds/discord:404/purge", json={"confirm": "discord:404"}) as r:
        assert r.status == 404
    assert (
        await dash.store(
            dash.engine.db.scalar, "SELECT COUNT(*) FROM messages WHERE guild_id = 'discord:900'"
        )
        == 1
    )
    await dash.store(_rolling_summary, dash, "they all drink green tea")
    assert occurrences(dash.db, "green tea") > 0
    async with http.post("/api/guilds/discord:900/purge", json={"confirm": "discord:900"}) as r:
        assert r.status == 200
        purged = (await r.json())["purged"]
    assert purged["memories"] == 2 and purged["messages"] == 1 and purged["channel_state"] == 1
    # lore, what was said there and its summaries: gone from the file
    assert occurrences(dash.db, "green tea") == 0
    async with http.get("/api/memory") as r:
        left = {m["id"] for m in (await r.json())["items"]}
    ids = dash.seeded.memories
    # her DM memory is not the guild's
    assert ids["tea"] not in left and ids["movies"] not in left and ids["bees"] in left
    assert (
        await dash.store(
            dash.engine.db.scalar, "SELECT COUNT(*) FROM messages WHERE guild_id = 'discord:900'"
        )
        == 0
    )
    async with http.get("/api/guilds") as r:
        assert (await r.json())["items"] == []
    assert [(r["action"], r["target"]) for r in await audit_rows(dash)] == [
        ("guild.purge", "discord:900")
    ]


def _rolling_summary(dash: Dashboard, text: str) -> None:
    state = dash.engine.channels
    state.touch(
        "discord:general",
        RecallContext("discord", dash.seeded.alice, "general", guild_id="discord:900"),
    )
    state.set_summary("discord:general", text, 0.0)
    dash.engine.db.scrub()  # checkpointed into the main file, where the byte check reads it


# -- the audit trail and the static files --------------------------------------------------------------------------------
async def test_every_change_is_in_the_audit_trail_with_who_and_no_memory_words(dash):
    browser = aiohttp.ClientSession(dash.url, cookie_jar=aiohttp.CookieJar(unsafe=True))
    async with browser:
        async with browser.post("/login", data={"token": dash.token}):
            pass
        async with browser.get("/api/session") as r:
            csrf = (await r.json())["csrf"]
        new = {
            "content": "Bob's Quokkaberry jam recipe is secret family lore",
            "scope": "user",
            "scope_id": dash.seeded.bob,
        }
        async with browser.post("/api/memory", json=new, headers={"X-CSRF-Token": csrf}) as r:
            made = (await r.json())["id"]
        async with browser.put(
            f"/api/memory/{made}",
            json={"content": "Bob's Quokkaberry jam needs plums"},
            headers={"X-CSRF-Token": csrf},
        ):
            pass
        async with browser.get("/api/audit") as r:
            items = (await r.json())["items"]
    assert [(i["action"], i["target"], i["who"]) for i in items] == [
        ("memory.update", made, "operator (browser)"),
        ("memory.create", made, "operator (browser)"),
    ]
    assert items[0]["detail"]["fields"] == ["content"] and items[0]["at"].endswith("Z")
    assert "Quokkaberry" not in json.dumps(await audit_rows(dash))


async def test_static_files_need_no_token_but_stay_inside_their_folder(dash):
    async with aiohttp.ClientSession(dash.url) as anonymous:
        async with anonymous.get("/static/app.css") as r:
            assert r.status == 200
        async with anonymous.get("/favicon.ico") as r:
            assert r.status in (200, 204)  # browsers ask before logging in: no 401 in their console
        for path in (
            "/static/../app.py",
            "/static/%2e%2e/app.py",
            "/static/index.html",
            "/static/nope.js",
        ):
            async with anonymous.get(path) as r:
                assert r.status in (401, 404), path
                assert "create_app" not in await r.text()
