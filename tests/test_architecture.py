"""The import arrows of STYLE.md, read from the AST of every module: prompts <- memory <- voice <- bot."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = {"bot", "memory", "voice", "prompts"}
PLATFORMS = {"discord", "telegram"}


def imports(path: Path) -> set[str]:
    """Top-level package names a module imports, relative imports resolved against its own package."""
    package = path.relative_to(ROOT).parts[:-1]  # memory/store.py and memory/__init__.py both live in ("memory",)
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            found.add((base + (node.module or "").split("."))[0] if base or node.module else package[0])
    return found


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def forbidden(package: str) -> set[str]:
    return {
        "memory": {"bot", "voice", "openai", "aiohttp"} | PLATFORMS,
        "prompts": OURS - {"prompts"},
        "voice": {"bot"} | PLATFORMS,
        "bot": set(),
    }[package]


@pytest.mark.parametrize("package", ["memory", "prompts", "voice", "bot"])
def test_layers_import_only_downwards(package):
    assert modules(package), f"no modules found under {package}/"
    bad = {str(p.relative_to(ROOT)): sorted(imports(p) & forbidden(package)) for p in modules(package)}
    assert {k: v for k, v in bad.items() if v} == {}


def test_only_adapters_touch_discord_or_telegram():
    offenders = [str(p.relative_to(ROOT)) for pkg in OURS for p in modules(pkg)
                 if imports(p) & PLATFORMS and "adapters" not in p.relative_to(ROOT).parts[:2]]
    assert offenders == []


def test_the_import_reader_sees_relative_and_absolute_imports():
    assert {"memory", "numpy"} <= imports(ROOT / "memory" / "store.py")
    assert "prompts" in imports(ROOT / "memory" / "maintenance.py")
