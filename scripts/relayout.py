"""Move ``memory/`` into sub-packages by layer and the tests into folders that mirror the packages (issue 21).

Re-runnable: a module or test already in its place is left alone, and every rewrite recognises its own output,
so running it again on code merged from a branch written for the flat layout fixes only what that code brought.

    python scripts/relayout.py          # git mv what is still flat, then rewrite imports and paths everywhere
    python scripts/relayout.py --check  # exit 1 if anything would change (nothing moved, nothing written)

What it rewrites, in every .py and .md file under the packages, tests/, scripts/, docs/ and README.md:
  - ``memory.store`` (imports, logger names, dotted strings, comments) -> ``memory.write.store``
  - ``from .store import X`` / ``from . import fts`` inside memory/, written for the flat layout -> the new place
  - ``"memory/store.py"`` path strings -> ``"memory/write/store.py"``, ``tests/test_x.py`` -> its new folder
  - ``Path(__file__)`` climbs in a file it moves one level down (the tests' ROOT, memory's ``assets`` folder)
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# -- memory/: old flat module -> new module (the top keeps the face: engine, api, models, scopes, errors, ...) --
LAYERS = {
    "storage": [  # the engines and one repository per table or aggregate: the only SQL
        "db", "migrations", "pg", "pg_migrations", "pgsearch", "vectors", "fts", "corpus", "memories", "messages",
        "sessions", "people", "graph", "knobs", "privacy", "audit", "checkins", "persona", "timezones",
        "embeddings", "footprint",
    ],
    "recall": ["retrieval", "recall", "context", "when", "leaks", "overview"],  # reading: what a context may see
    "write": ["store", "extraction", "safety", "tombstones", "wording", "ingest", "passages", "sources"],
    "upkeep": ["maintenance", "daily", "bulletin", "reembed", "journals", "forgetting", "registry", "transfer"],
}  # fmt: skip
JOBS = {"jobs": "base", "conversation_jobs": "conversation", "daily_jobs": "day", "checkin_jobs": "checkin", "upkeep_jobs": "upkeep"}
TOP = ["api", "engine", "models", "scopes", "errors", "protocols", "clock", "tools"]

MAP: dict[str, str] = {f"memory.{m}": f"memory.{layer}.{m}" for layer, mods in LAYERS.items() for m in mods}
MAP |= {f"memory.{old}": f"memory.jobs.{new}" for old, new in JOBS.items()}
MAP |= {f"memory.{m}": f"memory.{m}" for m in TOP}  # unmoved, but a moved module's ``from .clock`` must climb to it
PACKAGES = {*LAYERS, "jobs"}  # "recall" and "jobs" were modules before they were packages: see _is_new_style

# -- tests/: a test file's folder, by its name ----------------------------------------------------------------
TEST_PREFIXES = [
    ("test_memory_", "memory"),
    ("test_voice_", "voice"),
    ("test_adapter_", "bot/adapters"),
    ("test_adapters_", "bot/adapters"),
    ("test_cli_", "bot/cli"),
    ("test_cli.py", "bot/cli"),
    ("test_dashboard_", "bot/dashboard"),
    ("test_measure_", "measure"),
    ("test_recall_", "memory"),
    ("test_checkins", "bot"),
]
TEST_NAMED = {
    "test_bulletin.py": "memory",
    "test_journals.py": "memory",
    "test_timezones.py": "memory",
    "test_ingest.py": "memory",
    "test_pg_store.py": "memory",
    "test_two_writers.py": "memory",
    "test_forget_exactly.py": "memory",
    "test_knowing.py": "memory",
    "test_source_changes.py": "memory",
    "test_daily_reflection.py": "bot",
    "test_jobs.py": "bot",
    "test_consent.py": "bot",
    "test_home.py": "bot",
    "test_launch.py": "bot",
    "test_persona.py": "bot",
    "test_reply_limits.py": "bot",
    "test_log_redaction.py": "bot",
    "test_llm_answers.py": "bot",
    "test_redelivery.py": "bot",
}  # the rest (architecture, registry, readme, deploy, end-to-end, pipeline, trust...) span packages: tests/ itself
REWRITTEN = ["bot", "memory", "voice", "measure", "prompts", "tests", "scripts", "docs"]


def test_folder(name: str) -> str | None:
    if name in TEST_NAMED:
        return TEST_NAMED[name]
    return next((folder for prefix, folder in TEST_PREFIXES if name.startswith(prefix)), None)


def _path(module: str) -> Path:
    return ROOT / (module.replace(".", "/") + ".py")


def planned_moves() -> list[tuple[Path, Path]]:
    moves = [(_path(old), _path(new)) for old, new in MAP.items()]
    moves += [(p, p.parent / folder / p.name) for p in sorted((ROOT / "tests").glob("test_*.py")) if (folder := test_folder(p.name))]
    return [(old, new) for old, new in moves if old.exists() and not new.exists()]


def move(old: Path, new: Path) -> None:
    new.parent.mkdir(parents=True, exist_ok=True)
    for folder in _new_packages(new):
        (folder / "__init__.py").write_text(f'"""{folder.relative_to(ROOT)}."""\n')
        subprocess.run(["git", "add", str(folder / "__init__.py")], cwd=ROOT, check=True)
    subprocess.run(["git", "mv", str(old), str(new)], cwd=ROOT, check=True)
    deeper = len(new.relative_to(ROOT).parts) - len(old.relative_to(ROOT).parts)
    if deeper:
        new.write_text(climb(new.read_text(encoding="utf-8"), deeper), encoding="utf-8")


def _new_packages(new: Path) -> list[Path]:
    """memory/<layer>/ needs an __init__.py; test folders do not (pytest's rootdir imports, see tests/conftest.py)."""
    folder = new.parent
    return [folder] if folder.parent == ROOT / "memory" and not (folder / "__init__.py").exists() else []


def climb(text: str, deeper: int) -> str:
    """``Path(__file__)`` walks written for the old depth, walked ``deeper`` levels further."""

    def parents(match: re.Match[str]) -> str:
        ups = match.group(2).count(".parent") if match.group(2) else int(match.group(3)) + 1
        return f"{match.group(1)}.parents[{ups + deeper - 1}]"

    walk = re.compile(r"(Path\(__file__\)(?:\.resolve\(\))?)(?:((?:\.parent(?![s\w]))+)|\.parents\[(\d+)\])")
    return walk.sub(parents, text)


# -- rewriting ------------------------------------------------------------------------------------------------
DOTTED = re.compile(r"(?<![\w.])memory\.(\w+)((?:\.\w+)*)")
SLASHED = re.compile(r"(?<![\w/])memory/(\w+)\.py\b")
TEST_PATH = re.compile(r"(?<![\w/])tests/(test_\w+\.py)\b")
FROM_MEMORY = re.compile(r"(?m)^(\s*)from memory import (\w+)\s*$")  # one moved module imported from the package
TEST_IMPORT = re.compile(r"(?m)^(\s*from\s+)(?:tests\.)?(test_\w+)(\s+import\b)")  # one test borrowing another's data


def _is_new_style(first: str, rest: str) -> bool:
    """``memory.recall.context`` names the package's module; ``memory.recall.MemoryRecall`` the old module."""
    following = rest.split(".")[1] if rest else ""
    return first in PACKAGES and bool(following) and _path(f"memory.{first}.{following}").exists()


def dotted(match: re.Match[str]) -> str:
    first, rest = match.group(1), match.group(2)
    old = f"memory.{first}"
    end = match.string[match.end() : match.end() + 1]
    if old not in MAP or _is_new_style(first, rest) or (not rest and end == "("):  # memory.recall(...) is a call
        return match.group(0)
    return MAP[old] + rest


def slashed(match: re.Match[str]) -> str:
    old = f"memory.{match.group(1)}"
    return MAP[old].replace(".", "/") + ".py" if old in MAP else match.group(0)


def test_path(match: re.Match[str]) -> str:
    folder = test_folder(match.group(1))
    return f"tests/{folder}/{match.group(1)}" if folder else match.group(0)


def test_import(match: re.Match[str]) -> str:
    folder = test_folder(match.group(2) + ".py")
    return f"{match.group(1)}tests.{folder.replace('/', '.')}.{match.group(2)}{match.group(3)}" if folder else match.group(0)


def from_memory(match: re.Match[str]) -> str:
    """``from memory import maintenance`` (a module of the flat layout) -> ``from memory.upkeep import maintenance``."""
    old = f"memory.{match.group(2)}"
    return f"{match.group(1)}from {MAP[old].rpartition('.')[0]} import {MAP[old].rpartition('.')[2]}" if old in MAP else match.group(0)


def rewrite_text(text: str) -> str:
    text = FROM_MEMORY.sub(from_memory, text)
    return TEST_IMPORT.sub(test_import, TEST_PATH.sub(test_path, SLASHED.sub(slashed, DOTTED.sub(dotted, text))))


def rewrite_relative(path: Path, text: str) -> str:
    """Relative imports inside memory/ that were written for the flat layout, pointed at the new places."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    lines = text.splitlines(keepends=True)
    for node in sorted(_relative_imports(text), key=lambda n: -n.lineno):
        replacement = _relocated(package, node)
        if replacement is not None:
            head = lines[node.lineno - 1]
            lines[node.lineno - 1] = _replace_head(head, node, replacement)
    return "".join(lines)


def _relative_imports(text: str) -> list[ast.ImportFrom]:
    return [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom) and n.level]


def _relocated(package: str, node: ast.ImportFrom) -> list[tuple[str, list[str] | None]] | None:
    """None when the import already names the new layout; else (relative module, names or None for "as written")."""
    base = _absolute(package, node.level, node.module)
    names = [a.name for a in node.names]
    if node.module is None:
        moved = [n for n in names if not _exists(f"{base}.{n}") and f"memory.{n}" in MAP]
        if not moved:
            return None
        return [(_relative(package, MAP[f"memory.{n}"].rpartition(".")[0]), [n]) for n in names if n in moved] + (
            [(_relative(package, base), [n for n in names if n not in moved])] if len(moved) < len(names) else []
        )
    if _path(base).exists() or (_exists(base) and all(_exists(f"{base}.{n}") for n in names)):
        return None
    old = f"memory.{node.module}"
    return [(_relative(package, MAP[old]), None)] if node.level == 1 and old in MAP else None


def _exists(module: str) -> bool:
    return _path(module).exists() or (ROOT / module.replace(".", "/") / "__init__.py").exists()


def _absolute(package: str, level: int, module: str | None) -> str:
    parts = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join([*parts, *([module] if module else [])])


def _relative(package: str, target: str) -> str:
    here, there = package.split("."), target.split(".")
    common = next((i for i, (a, b) in enumerate(zip(here, there, strict=False)) if a != b), min(len(here), len(there)))
    return "." * (len(here) - common + 1) + ".".join(there[common:])


def _replace_head(line: str, node: ast.ImportFrom, replacement: list[tuple[str, list[str] | None]]) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    if replacement[0][1] is None:  # same names, new module: only the head changes
        return re.sub(r"from\s+\.+[\w.]*\s+import", f"from {replacement[0][0]} import", line, count=1)
    return "".join(f"{indent}from {module} import {', '.join(names or [])}\n" for module, names in replacement)


def files_to_rewrite() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for top in REWRITTEN:
        found += [p for p in sorted((ROOT / top).rglob("*")) if p.suffix in {".py", ".md"} and ".venv" not in p.parts]
    own = {Path(__file__).resolve(), ROOT / "tests" / "test_relayout.py"}  # they spell the old names on purpose
    return [p for p in found if p.is_file() and p.resolve() not in own]


# Shipped migrations are never edited (their SQL comments name owners by module): only their import lines move.
IMPORTS_ONLY = {"migrations.py", "pg_migrations.py"}


def rewrite(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py" and path.relative_to(ROOT).parts[0] == "memory":
        text = rewrite_relative(path, text)
    if path.name in IMPORTS_ONLY:
        return "".join(
            rewrite_text(line) if line.lstrip().startswith(("from ", "import ")) else line for line in text.splitlines(keepends=True)
        )
    return rewrite_text(text)


def sort_imports(paths: list[Path]) -> None:
    """A renamed module moves in isort's order (memory.fts -> memory.storage.fts): ruff puts the block right again."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff and paths:
        subprocess.run([ruff, "check", "--select", "I", "--fix", "--quiet", *map(str, paths)], cwd=ROOT, check=False)
        subprocess.run([ruff, "format", "--quiet", *map(str, paths)], cwd=ROOT, check=False)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    moves = planned_moves()
    for old, new in moves:
        print(f"move {old.relative_to(ROOT)} -> {new.relative_to(ROOT)}")
        if not check:
            move(old, new)
    changed = []
    for path in files_to_rewrite():
        text = rewrite(path)
        if text != path.read_text(encoding="utf-8"):
            changed.append(path)
            if not check:
                path.write_text(text, encoding="utf-8")
    for path in changed:
        print(f"rewrote {path.relative_to(ROOT)}")
    if not check and changed:
        sort_imports([p for p in changed if p.suffix == ".py"])
    return 1 if check and (moves or changed) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
