"""The command line run in-process (``bot.cli.main``) against a real SQLite file: what the CLI tests share.
The ``cli`` fixture itself is in conftest.py."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.cli import main


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)

    def error_line(self) -> str:
        """The one error line; fails if there is none, several, or a traceback."""
        assert "Traceback" not in self.err
        lines = [line for line in self.err.splitlines() if "error:" in line]
        assert len(lines) == 1, self.err
        return lines[0]


class Cli:
    def __init__(self, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.db = db
        self.capsys = capsys

    def __call__(self, *argv: str, embeddings: str | None = "none") -> Result:
        globals_ = ["--db", str(self.db)] + (["--embeddings", embeddings] if embeddings else [])
        self.capsys.readouterr()
        code = main([*globals_, *argv])
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def add(self, content: str, *extra: str, embeddings: str = "none") -> str:
        result = self("memory", "add", content, *extra, "--json", embeddings=embeddings)
        assert result.code == 0, result.err
        return result.json()["id"]


def _alice(cli: Cli) -> str:
    return cli.add(
        "Alice drinks green tea every morning",
        "--subject",
        "Alice",
        "--scope",
        "user",
        "--scope-id",
        "discord:alice",
        "--tag",
        "drinks",
        "--tag",
        "Morning",
        "--importance",
        "7",
    )
