"""Every delete is the one forget (issue 31 item 9, SEC-3): whichever way a person or the operator asks to
delete a memory (the CLI, the dashboard, the memory_delete tool, /forget, the /about veto, ``ingest --forget``, and
the async API a program embedding the memory calls),
it leaves a tombstone, no journal line, none of the words of the messages it came from in any file beside the
store, and what remains (a reflection over a later message, a re-ingest of the file) does not learn it back.

Each case runs against the real dashboard server over a real store file (with its journals), the CLI in-process
on the same file, and the real orchestrator for the chat commands."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from bot.cli import main as cli_main
from bot.types import IncomingMessage
from memory.api import AsyncMemory
from memory.jobs.base import Facts, WriteFacts
from memory.models import NewMemory, Provenance, Scope, Visibility
from memory.scopes import RecallContext
from memory.storage.messages import NewMessage
from memory.tools import MemoryTools
from tests.dashboard_support import Dashboard, running_dashboard

pytestmark = pytest.mark.asyncio
ALICE, CHAT = "telegram:55", "55"
WORD = "quintrell"  # in the fact and its source message, nowhere else
FACT = "Alice keeps a tortoise called Quintrell"


@dataclass
class Case:
    dash: Dashboard
    root: Path
    memory_id: str = ""
    notes: Path | None = None  # the ingested file, for the ingest case

    @property
    def engine(self):
        return self.dash.engine

    def cli(self, *argv: str) -> int:
        return cli_main(["--db", str(self.dash.db), "--embeddings", "none", *argv])

    async def command(self, name: str, argument: str) -> str:
        message = IncomingMessage("telegram", CHAT, "55", "Alice", f"/{name} {argument}")
        return await self.dash.runtime.orchestrator.command(name, argument, message)


def _fact(sources: tuple[str, ...]) -> NewMemory:
    where = Provenance(platform="telegram", channel_id=CHAT, sources=sources)
    return NewMemory(
        FACT, "tortoise", Scope.USER, ALICE, visibility=Visibility.PRIVATE, provenance=where
    )


def _said(engine, text: str) -> str:
    message = NewMessage(
        platform="telegram",
        channel_id=CHAT,
        author_id=ALICE,
        author_name="Alice",
        content=text,
        dm_person_id=ALICE,
    )
    return engine.messages.add(message)


async def told_in_chat(case: Case) -> None:
    said = await case.dash.store(_said, case.engine, "I keep a tortoise called Quintrell")
    case.memory_id = (await case.dash.store(case.engine.memories.add, _fact((said,)))).memory.id


async def ingested(case: Case) -> None:
    case.notes = case.root / "notes" / "tortoise.md"
    case.notes.parent.mkdir()
    case.notes.write_text(f"# Pets\n\n{FACT}.\n")
    assert (
        case.cli(
            "ingest",
            str(case.notes),
            "--no-llm",
            "--scope",
            "user",
            "--scope-id",
            ALICE,
            "--private",
        )
        == 0
    )
    case.memory_id = case.engine.db.scalar(
        "SELECT id FROM memories WHERE content LIKE ?", (f"%{WORD}%",)
    )


# -- the ways to delete ------------------------------------------------------------------------------------------
async def by_cli(case: Case) -> None:
    assert case.cli("memory", "delete", case.memory_id, "--yes") == 0


async def by_dashboard(case: Case) -> None:
    url = f"{case.dash.url}/api/memory/{case.memory_id}"
    async with (
        aiohttp.ClientSession(headers=case.dash.headers) as http,
        http.delete(url) as response,
    ):
        assert response.status == 200, await response.text()


async def by_tool(case: Case) -> None:
    def call() -> str:
        tools = MemoryTools(case.engine, RecallContext("telegram", ALICE, CHAT, is_dm=True))
        tools.call("memory_search", json.dumps({"query": "tortoise called Quintrell"}))
        return tools.call("memory_delete", json.dumps({"id": case.memory_id}))

    assert '"deleted"' in await case.dash.store(call)


async def by_forget_command(case: Case) -> None:
    assert (await case.command("forget", "my tortoise Quintrell")).startswith("Forgotten")


async def by_about_veto(case: Case) -> None:
    assert (await case.command("about", f"veto {case.memory_id[:8]}")).startswith("Forgotten")


async def by_async_api(case: Case) -> None:
    memory = AsyncMemory(case.engine, case.dash.runtime.runner)
    assert (await memory.forgetting.memory(case.memory_id)).memories == (case.memory_id,)


async def by_ingest_forget(case: Case) -> None:
    assert case.notes is not None and case.cli("ingest", "--forget", str(case.notes)) == 0


Way = Callable[[Case], Awaitable[None]]
WAYS: list[tuple[str, Way, Way]] = [
    ("companion memory delete", told_in_chat, by_cli),
    ("dashboard DELETE /api/memory/:id", told_in_chat, by_dashboard),
    ("the memory_delete tool", told_in_chat, by_tool),
    ("/forget", told_in_chat, by_forget_command),
    ("/about veto", told_in_chat, by_about_veto),
    ("AsyncMemory.forgetting.memory", told_in_chat, by_async_api),
    ("companion ingest --forget", ingested, by_ingest_forget),
]


def files_holding(folder: Path, word: str) -> list[str]:
    return [
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and word.encode() in p.read_bytes().lower()
    ]


def relearned(case: Case, later: str) -> int:
    """What a reflection over a later message that says it again (written before the forget's end) stores."""
    candidate = _fact((later,))
    return len(WriteFacts(case.engine, Facts((candidate,))).gather())


@pytest.mark.parametrize(("way", "learn", "delete"), WAYS, ids=[w[0] for w in WAYS])
async def test_every_delete_is_the_one_forget_tombstone_no_journal_line_no_source_words_not_learned_back(
    tmp_path, way: str, learn: Way, delete: Way
):
    async with running_dashboard(tmp_path / "store", seeded=False) as dash:
        case = Case(dash, tmp_path)
        await learn(case)
        # stays: not a source
        later = await dash.store(_said, dash.engine, "my tortoise ate a strawberry")
        await dash.store(dash.engine.journals.flush)
        assert files_holding(dash.db.parent, WORD), "the fact was never written"
        await delete(case)
        engine = dash.engine
        assert (
            engine.db.scalar(
                "SELECT COUNT(*) FROM memories WHERE lower(content) LIKE ?", (f"%{WORD}%",)
            )
            == 0
        )
        assert (
            engine.db.scalar("SELECT COUNT(*) FROM tombstones WHERE scope_id = ?", (ALICE,)) >= 1
        ), way
        await dash.store(engine.journals.flush)
        await dash.store(engine.db.execute, "PRAGMA wal_checkpoint(TRUNCATE)")
        assert files_holding(dash.db.parent, WORD) == [], way  # the store, its WAL, the journals
        assert await dash.store(relearned, case, later) == 0, way
        if case.notes is not None:  # the file read again: its passage is new, its fact forgotten
            assert (
                case.cli(
                    "ingest",
                    str(case.notes),
                    "--no-llm",
                    "--scope",
                    "user",
                    "--scope-id",
                    ALICE,
                    "--private",
                )
                == 0
            )
            assert (
                engine.db.scalar(
                    "SELECT COUNT(*) FROM memories WHERE lower(content) LIKE ?", (f"%{WORD}%",)
                )
                == 0
            )
