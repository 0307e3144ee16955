"""One public name, one meaning (issue 46, item 3): a top-level class, function or type alias of
the project is defined in one module only, so a reader (or an import) never has to ask which
``Turn`` or ``Place`` is meant. Constants (``MAX_CHARS``, ``BATCH``) are each module's own
settings and type variables (``T``) a signature's own: neither is counted.

One kind of repeat is allowed, a **convention**: every command module has its ``register``,
every dashboard page its handlers (``show``, ``put``...), every voice and adapter module its
``logger``: the same role in each, looked up by the module. When the rule came, 45 names were
defined twice or more (``Turn`` three times, ``Progress`` seven); all were renamed or merged.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.test_architecture import plant_module

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "memory", "voice", "measure", "prompts")
CONVENTIONS = {
    "register",  # a command module's (bot/cli) or dashboard page's hook
    "logger",  # a module's own logger
    "show", "put", "forget", "search", "list_memories", "snapshot",  # dashboard and CLI handlers
}  # fmt: skip


def top_level_names(tree: ast.Module) -> set[str]:
    """The public names a module defines at its top level."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_") and n != "log" and not n.isupper()}


def defined_twice(root: Path = ROOT) -> dict[str, list[str]]:
    """Public name -> the modules defining it, for names defined in more than one."""
    where: dict[str, list[str]] = defaultdict(list)
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for name in top_level_names(tree):
                where[name].append(path.relative_to(root).as_posix())
    return {name: paths for name, paths in where.items() if len(paths) > 1}


def test_no_public_name_is_defined_twice():
    repeated = defined_twice()
    assert {n: p for n, p in repeated.items() if n not in CONVENTIONS} == {}


def test_a_planted_second_definition_is_found(tmp_path: Path):
    for module, text in {
        "memory/a.py": "class Turn:\n    pass\n_private = 1\n",
        "voice/b.py": "Turn = int\n_private = 2\n",
        "bot/c.py": "def Turn():\n    pass\n",
        "measure/d.py": "log = None\nMAX_CHARS = 2\nT = 1\n",
        "prompts/e.py": "log = None\nMAX_CHARS = 3\nT = 2\n",
    }.items():
        plant_module(tmp_path, module, text)
    assert defined_twice(tmp_path) == {"Turn": ["bot/c.py", "memory/a.py", "voice/b.py"]}
