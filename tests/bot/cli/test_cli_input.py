"""The command line's front door: --version, a cheap start, input validation, errors as JSON, stdin, --force.

Run in-process through ``bot.cli.main`` against a real SQLite file (the ``cli`` fixture of test_cli.py),
except where a fresh interpreter is the point (what ``--help`` imports).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_support import Cli, _alice

ROOT = Path(__file__).parents[3]


def test_version_comes_from_the_package_metadata(cli: Cli) -> None:
    from importlib.metadata import version

    result = cli("--version")
    assert result.code == 0 and result.out == f"companion {version('companion')}\n"


def test_help_imports_none_of_the_heavy_libraries() -> None:
    # What `companion --help` pays for at start-up: each of these costs 50-800 ms to import on two cores.
    code = (
        "import sys; from bot.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ('openai', 'aiohttp', 'numpy', 'sqlite_vec', 'apsw', 'rich', 'pydantic', 'apscheduler', 'onnxruntime')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_help_explains_exit_codes_and_json_errors(cli: Cli) -> None:
    top = cli("--help")
    assert (
        top.code == 0 and "exit codes" in top.out and '{"error": "...", "exit_code": N}' in top.out
    )
    assert all(name in top.out for name in ("doctor", "restore"))


# -- validation: exit 2, one line naming the problem -----------------------------------------------------------
@pytest.mark.parametrize(
    "argv, fragment",
    [
        (
            ["memory", "add", "a note", "--subject", "s", "--scope", "user", "--scope-id", ""],
            "--scope-id: must not be empty",
        ),
        (
            ["memory", "add", "a note", "--subject", "s", "--scope", "user", "--scope-id", "   "],
            "--scope-id: must not be empty",
        ),
        (["memory", "list", "--scope-id", ""], "--scope-id: must not be empty"),
        (["memory", "export", "--person", ""], "--person: must not be empty"),
        (["decay", "--factor", "-1"], "above 0 and below 1"),
        (["decay", "--factor", "2"], "above 0 and below 1"),
        (["decay", "--factor", "1"], "above 0 and below 1"),
        (["decay", "--factor", "0"], "above 0 and below 1"),
        (["decay", "--factor", "half"], "between 0 and 1"),
        (
            ["snapshot", "hello", "--user", "u1", "--platform", "myspace"],
            "invalid choice: 'myspace'",
        ),
        (["memory", "search", ""], "the query is empty"),
        (["memory", "search", "  \t"], "the query is empty"),
    ],
)
def test_bad_values_are_refused_with_one_line(cli: Cli, argv: list[str], fragment: str) -> None:
    _alice(cli)
    result = cli(*argv)
    assert result.code == 2 and fragment in result.error_line()


def test_owner_ids_need_a_platform_prefix(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPANION_OWNER_IDS", "1234")
    result = cli("memory", "list")
    assert result.code == 2 and "Traceback" not in result.err
    assert "COMPANION_OWNER_IDS" in result.err and "discord:1234" in result.err
    monkeypatch.setenv("COMPANION_OWNER_IDS", "discord:1234, telegram:5678")
    _alice(cli)
    assert cli("memory", "list").code == 0


def test_a_valid_factor_still_works(cli: Cli) -> None:
    _alice(cli)
    assert cli("decay", "--factor", "0.5", "--json").json() == {"decayed": 0}


# -- errors with --json: one JSON object on stderr, stdout left for results --------------------------------------
@pytest.mark.parametrize(
    "argv, code, fragment",
    [
        (
            ["memory", "show", "0b7c6a1e-0000-4000-8000-000000000000", "--json"],
            2,
            "no memory with id",
        ),  # raised by the store
        (["memory", "list", "--limit", "0", "--json"], 2, "above 0"),  # refused by argparse
        (["decay", "--factor", "7", "--json"], 2, "above 0 and below 1"),
    ],
)
def test_json_errors_are_one_object_on_stderr(
    cli: Cli, argv: list[str], code: int, fragment: str
) -> None:
    _alice(cli)
    result = cli(*argv)
    assert result.code == code and result.out == ""
    error = json.loads(result.err.strip().splitlines()[-1])
    assert error["exit_code"] == code and fragment in error["error"]


def test_a_configuration_error_with_json_is_json(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPANION_LLM_TIMEOUT_S", "-5")
    result = cli("stats", "--json")
    error = json.loads(result.err)
    assert (
        result.code == 2 and error["exit_code"] == 2 and "COMPANION_LLM_TIMEOUT_S" in error["error"]
    )


# -- memory add - : the text from stdin -------------------------------------------------------------------------
def test_memory_add_dash_reads_the_text_from_stdin(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        sys, "stdin", io.StringIO("Alice keeps bees on her roof\nand sells the honey\n")
    )
    memory_id = cli.add("-", "--subject", "Alice", "--scope", "user", "--scope-id", "discord:alice")
    # the store normalises whitespace (WRITE-6), so the two lines read as one sentence
    assert (
        cli("memory", "show", memory_id, "--json").json()["content"]
        == "Alice keeps bees on her roof and sells the honey"
    )

    monkeypatch.setattr(sys, "stdin", io.StringIO("   \n"))
    empty = cli(
        "memory", "add", "-", "--subject", "Alice", "--scope", "user", "--scope-id", "discord:alice"
    )
    assert empty.code == 2 and "no text on stdin" in empty.error_line()


# -- one rule for every command that writes a file: no overwrite without --force --------------------------------
def test_export_refuses_to_overwrite_without_force(cli: Cli, tmp_path: Path) -> None:
    _alice(cli)
    target = tmp_path / "alice.json"
    target.write_text("my precious notes")
    refused = cli("memory", "export", "--person", "discord:alice", "-o", str(target))
    assert refused.code == 2 and "--force" in refused.error_line()
    assert target.read_text() == "my precious notes"

    assert (
        cli("memory", "export", "--person", "discord:alice", "-o", str(target), "--force").code == 0
    )
    assert json.loads(target.read_text())["person_ids"] == ["discord:alice"]
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize(
    "command", [["backup"], ["memory", "export", "--person", "discord:alice", "-o"]]
)
def test_file_writers_refuse_a_directory_or_a_missing_folder(
    cli: Cli, tmp_path: Path, command: list[str]
) -> None:
    _alice(cli)
    into_dir = cli(*command, str(tmp_path))
    assert into_dir.code == 2 and "is a directory" in into_dir.error_line()
    nowhere = cli(*command, str(tmp_path / "no" / "such" / "dir.out"))
    assert nowhere.code == 2 and "does not exist" in nowhere.error_line()


def test_python_dash_m_bot_version(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPANION_")}
    done = subprocess.run(
        [sys.executable, "-m", "bot", "--version"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert done.returncode == 0 and done.stdout.startswith("companion ")


# -- tags: one per flag, repeated; the memory's text is never taken for a tag (issue 45) ----------
@pytest.mark.parametrize("text_first", [True, False], ids=["text-then-tags", "tags-then-text"])
def test_memory_add_takes_tags_one_per_flag_in_either_order_and_keeps_the_text(
    cli: Cli, text_first: bool
) -> None:
    text = "Bea keeps bees on her allotment"
    tags = ["--tag", "bees", "--tag", "Garden"]
    where = ["--subject", "Bea", "--scope", "user", "--scope-id", "discord:bea"]
    argv = [text, *tags, *where] if text_first else [*tags, text, *where]
    added = cli("memory", "add", *argv, "--json")
    assert added.code == 0, added.err
    shown = cli("memory", "show", added.json()["id"], "--json").json()
    assert shown["content"] == text and shown["tags"] == ["bees", "garden"]


def test_two_words_after_one_tag_flag_are_refused_not_swallowed(cli: Cli) -> None:
    """`--tag a b "text"` made both words tags and the text one more; now b is an extra argument."""
    kept = _alice(cli)
    result = cli(
        "memory", "add", "--tag", "bees", "honey", "Bea keeps bees",
        "--subject", "Bea", "--scope", "user", "--scope-id", "discord:bea",
    )  # fmt: skip
    assert result.code == 2 and "unrecognized arguments" in result.error_line()
    assert [m["id"] for m in cli("memory", "list", "--json").json()] == [kept]


def test_memory_search_filters_before_the_query_leave_the_query_alone(cli: Cli) -> None:
    memory_id = _alice(cli)
    found = cli(
        "memory", "search", "--tag", "morning", "--type", "semantic", "green tea",
        "--mode", "bm25", "--json",
    )  # fmt: skip
    assert found.code == 0, found.err
    assert [hit["memory"]["id"] for hit in found.json()] == [memory_id]


def test_memory_edit_replaces_the_tags_with_the_repeated_flags(cli: Cli) -> None:
    memory_id = _alice(cli)
    edited = cli("memory", "edit", memory_id, "--tag", "tea", "--tag", "Cups", "--json")
    assert edited.code == 0 and edited.json()["tags"] == ["tea", "cups"]
