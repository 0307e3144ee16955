"""What an operator reads at an 80-column terminal: ``memory list`` puts a memory's words first, and
``memory search`` says which file and lines an ingested passage came from (issue 22)."""

from __future__ import annotations

import pytest

from tests.cli_support import Cli

LONG = "Alice drinks green tea every morning before she walks her two dogs along the river"


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def test_memory_list_at_80_columns_keeps_a_memory_on_a_few_full_lines(
    cli: Cli, narrow: None
) -> None:
    cli.add(
        LONG,
        "--subject",
        "Alice",
        "--scope",
        "user",
        "--scope-id",
        "discord:12345678901234567",
        "--tag",
        "drinks",
    )
    shown = cli("memory", "list").out
    assert all(len(line) <= 80 for line in shown.splitlines()), shown
    assert "Alice drinks green tea every morning before she walks" in shown  # not one word per line
    assert "user:discord:12345678901234567" in shown and "#drinks" in shown


def test_memory_search_names_the_file_and_line_of_an_ingested_passage(
    cli: Cli, narrow: None, tmp_path
) -> None:
    (tmp_path / "notes.md").write_text(
        "# Bridges\n\nThe old bridge over the river is painted red.\n"
    )
    assert (
        cli("ingest", "notes.md", "--no-llm", "--scope", "guild", "--scope-id", "discord:1").code
        == 0
    )
    shown = cli("memory", "search", "bridge", "--mode", "bm25").out
    assert "The old bridge over the river is painted red." in shown
    # a long path may fold, never vanish
    assert "notes.md#L3" in "".join(line.strip("│ ") for line in shown.splitlines())


@pytest.mark.parametrize("bare", ["local-user", "333", "discord:", "slack:42"])
def test_memory_add_refuses_an_id_no_conversation_would_ever_read(cli: Cli, bare: str) -> None:
    refused = cli(
        "memory",
        "add",
        "Alice keeps bees",
        "--subject",
        "Alice",
        "--scope",
        "user",
        "--scope-id",
        bare,
    )
    assert refused.code == 2 and "discord:1234" in refused.error_line()
    guild = cli(
        "memory",
        "add",
        "The guild meets on Fridays",
        "--subject",
        "meetups",
        "--scope",
        "guild",
        "--scope-id",
        bare,
    )
    assert guild.code == 2 and "guild ids look like discord:1234" in guild.error_line()
    assert cli("memory", "list", "--json").json() == []


def test_memory_add_takes_the_platform_form_and_a_person_the_store_knows(cli: Cli) -> None:
    cli.add(
        "Alice keeps bees", "--subject", "Alice", "--scope", "user", "--scope-id", "discord:999"
    )
    cli.add(
        "I keep a diary", "--subject", "me", "--scope", "owner", "--scope-id", "console:local-user"
    )
    cli.add(
        "The guild meets on Fridays",
        "--subject",
        "meetups",
        "--scope",
        "guild",
        "--scope-id",
        "telegram:-100123",
    )
    assert sorted(m["scope_id"] for m in cli("memory", "list", "--json").json()) == [
        "console:local-user",
        "discord:999",
        "telegram:-100123",
    ]
