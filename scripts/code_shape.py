"""The shape of the code, measured: which modules write SQL naming each table, dict[str, Any] across
module edges, the longest functions, and MemoryStore's size. Run: python scripts/code_shape.py [root]."""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

PACKAGES = ("memory", "bot", "voice", "measure", "prompts")
TABLES = (
    "memories",
    "memory_tags",
    "memory_links",
    "messages",
    "extraction_buffer",
    "channel_state",
    "identities",
    "embed_cache",
    "settings",
    "entities",
    "entity_relations",
    "memory_entities",
    "sessions",
)
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|FROM|JOIN|INTO)\b")


def sql_strings(tree: ast.AST) -> list[str]:
    texts = [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    texts += [
        "".join(p.value for p in n.values if isinstance(p, ast.Constant))
        for n in ast.walk(tree)
        if isinstance(n, ast.JoinedStr)
    ]
    return [t for t in texts if SQL.search(t)]


def tables_named(text: str) -> set[str]:
    return {t for t in TABLES if re.search(rf"\b(FROM|JOIN|INTO|UPDATE|TABLE)\s+{t}\b", text)}


def main(root: Path) -> None:
    files = [p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))]
    owners: dict[str, set[str]] = defaultdict(set)
    dict_edges, lengths = 0, []
    for path in files:
        rel = str(path.relative_to(root))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for text in sql_strings(tree):
            for table in tables_named(text):
                owners[table].add(rel)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lengths.append(((node.end_lineno or 0) - node.lineno + 1, f"{rel}:{node.name}"))
                if not node.name.startswith(
                    "_"
                ):  # a public function: its signature is a module edge
                    notes = [a.annotation for a in node.args.args + node.args.kwonlyargs] + [
                        node.returns
                    ]
                    dict_edges += sum(
                        "dict[str, Any]" in ast.unparse(n) for n in notes if n is not None
                    )
    print("modules with SQL naming each table:")
    for table in TABLES:
        print(f"  {table:18} {len(owners[table])}  {' '.join(sorted(owners[table]))}")
    print(f"dict[str, Any] in public function signatures: {dict_edges}")
    lengths.sort(reverse=True)
    print(f"functions: {len(lengths)}, over 50 lines: {sum(n > 50 for n, _ in lengths)}; longest:")
    for n, name in lengths[:5]:
        print(f"  {n:4} {name}")
    store = (root / "memory" / "write" / "store.py").read_text(encoding="utf-8")
    cls = next(
        n for n in ast.parse(store).body if isinstance(n, ast.ClassDef) and n.name == "MemoryStore"
    )
    methods = sum(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in cls.body)
    print(
        f"MemoryStore: {(cls.end_lineno or 0) - cls.lineno + 1} lines, {methods} methods; store.py {len(store.splitlines())} lines"
    )
    outside = [p for p in files if p.parts[len(root.parts)] != "memory"]
    print(
        f"engine.db outside memory/: {sum(p.read_text(encoding='utf-8').count('engine.db') for p in outside)}"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve())
