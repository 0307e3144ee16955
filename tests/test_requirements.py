"""Every requirement id a comment or docstring cites (``WRITE-4``, ``SEC-3``) is defined in docs/requirements.md."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("bot", "memory", "voice", "prompts", "measure", "tests", "scripts")
CITED = re.compile(r"\b([A-Z]{2,8})-(\d+)(?:(?:\.\.|/)(\d+))?\b")
# encodings, hashes, licences, made-up codes in test data
NOT_REQUIREMENTS = {
    "UTF",
    "SHA",
    "ABC",
    "XK",
    "PDF",
    "GPL",
}
DEFINED = re.compile(r"^- \*\*([A-Z]+-\d+)\*\*: \S", re.MULTILINE)


def cited(text: str) -> set[str]:
    """Ids in ``text``; a range (``RET-1..7``, ``GRAPH-1/2``) cites every id in it."""
    found = set()
    for prefix, first, last in CITED.findall(text):
        if prefix not in NOT_REQUIREMENTS:
            found |= {f"{prefix}-{n}" for n in range(int(first), int(last or first) + 1)}
    return found


def commentary(source: str) -> str:
    """A module's comments and docstrings: where the code says why."""
    comments = [
        t.string
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type == tokenize.COMMENT
    ]
    nodes = [
        n
        for n in ast.walk(ast.parse(source))
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    return "\n".join(comments + [ast.get_docstring(n) or "" for n in nodes])


def cited_in_code(root: Path = ROOT) -> dict[str, set[str]]:
    where: dict[str, set[str]] = {}
    for path in (p for top in SCANNED for p in sorted((root / top).rglob("*.py"))):
        for rid in cited(commentary(path.read_text(encoding="utf-8"))):
            where.setdefault(rid, set()).add(str(path.relative_to(root)))
    return where


def defined(page: Path = ROOT / "docs" / "requirements.md") -> set[str]:
    return set(DEFINED.findall(page.read_text(encoding="utf-8")))


def test_every_requirement_id_cited_in_a_comment_is_defined_on_the_requirements_page():
    undefined = {
        rid: sorted(paths) for rid, paths in cited_in_code().items() if rid not in defined()
    }
    assert undefined == {}


def test_the_check_reads_comments_docstrings_and_ranges_but_not_code_or_test_data(
    tmp_path: Path,
) -> None:
    (tmp_path / "memory").mkdir()
    source = (
        '"""Recall (RET-1..3) and the graph (GRAPH-1/2)."""\n\n'
        'CODE = "XYZ-9"  # a code, not a comment\n'
        "def f():\n    # WRITE-4: flush first; the text is UTF-8\n    return 'ZZ-1'\n"
    )
    (tmp_path / "memory" / "planted.py").write_text(source)
    assert set(cited_in_code(tmp_path)) == {
        "RET-1",
        "RET-2",
        "RET-3",
        "GRAPH-1",
        "GRAPH-2",
        "WRITE-4",
    }


def test_an_undefined_id_is_caught() -> None:
    assert "NOPE-1" not in defined()
    assert "WRITE-4" in defined() and "SEC-3" in defined()
