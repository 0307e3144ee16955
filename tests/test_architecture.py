"""The import arrows (docs/README.md), read from the AST of every module:
prompts <- memory <- voice <- bot <- measure; inside memory/, storage <- recall, write <- upkeep <- jobs.

An import is a statement or a string that names a module: ``importlib.import_module("x.y")``,
``__import__("x")``, ``"-m", "x.y"`` handed to a new interpreter, or a ``"x.y:attr"`` string for an
import helper. A dynamic import whose name is not written out is a finding of its own: that is how an
upward import hides (``memory/bench.py`` once loaded ``bot.benchturn`` from a string it was given).
``measure`` is the top layer, and only ``bot/cli*`` may import it, inside a function (the command's handler).
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = {"bot", "memory", "voice", "prompts", "measure"}
PLATFORMS = {"discord", "telegram"}
FORBIDDEN = {
    "prompts": OURS - {"prompts"},
    "memory": {"bot", "voice", "measure", "openai", "aiohttp"} | PLATFORMS,
    "voice": {"bot", "measure"} | PLATFORMS,
    "bot": {"measure"},  # but see cli_handler_may_import
    "measure": set(),
}
DYNAMIC = "<dynamic>"  # import_module(name) with a name the AST cannot read
LOADERS = {"import_module", "__import__"}
ENTRY_POINT = re.compile(r"([A-Za-z_]\w*)(?:\.\w+)*:[A-Za-z_]\w*(?:\.\w+)*")  # "module.path:attr"


@dataclass(frozen=True)
class Import:
    name: str  # the top-level package, or DYNAMIC
    lazy: bool  # inside a function: runs when it is called, not when the module is loaded


def import_sites(path: Path, root: Path = ROOT) -> set[Import]:
    # memory/write/store.py lives in ("memory", "write"); only the first part matters
    package = path.relative_to(root).parts[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return {Import(name, lazy) for node, lazy in _nodes(tree) for name in _named(node, package)}


def imports(path: Path) -> set[str]:
    return {site.name for site in import_sites(path)}


def _nodes(node: ast.AST, lazy: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        yield child, lazy
        yield from _nodes(
            child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        )


def _named(node: ast.AST, package: tuple[str, ...]) -> set[str]:
    """Top-level names one node imports; a relative name is its own package."""
    if isinstance(node, ast.Import):
        return {alias.name.split(".")[0] for alias in node.names}
    if isinstance(node, ast.ImportFrom):
        return {package[0] if node.level else (node.module or "").split(".")[0]}
    if (
        isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) in LOADERS
    ):
        name = _leading_text(node.args[0]) if node.args else None
        return {
            DYNAMIC if name is None else package[0] if name.startswith(".") else name.split(".")[0]
        }
    if isinstance(node, (ast.List, ast.Tuple)):  # [sys.executable, "-m", "pkg.mod", ...]
        texts = [_text(e) for e in node.elts]
        return {b.split(".")[0] for a, b in zip(texts, texts[1:], strict=False) if a == "-m" and b}
    match = ENTRY_POINT.fullmatch(_text(node) or "")
    return {match.group(1)} if match and match.group(1) in OURS else set()


def _leading_text(node: ast.AST) -> str | None:
    """A module name's text, or the constant start of an f-string when it fixes the package:
    f".{home}" is the importing package's own module, f"bot.{x}" is bot's; f"{x}" is unknown."""
    if isinstance(node, ast.JoinedStr) and node.values:
        start = _text(node.values[0])
        return start if start and (start.startswith(".") or "." in start) else None
    return _text(node)


def _text(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def cli_handler_may_import(path: Path, site: Import) -> bool:
    """The one way to measure: a command handler of bot/cli/, when the command runs."""
    return site.name == "measure" and site.lazy and path.parts[:-1] == ("bot", "cli")


def violations(package: str, root: Path = ROOT) -> dict[str, list[str]]:
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root)
        bad = {
            s.name
            for s in import_sites(path, root)
            if s.name in FORBIDDEN[package] | {DYNAMIC} and not cli_handler_may_import(rel, s)
        }
        if bad:
            found[str(rel)] = sorted(bad)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layers_import_only_downwards(package):
    assert list((ROOT / package).rglob("*.py")), f"no modules found under {package}/"
    assert violations(package) == {}


def test_only_adapters_touch_discord_or_telegram():
    offenders = [
        str(p.relative_to(ROOT))
        for pkg in OURS
        for p in (ROOT / pkg).rglob("*.py")
        if imports(p) & PLATFORMS and "adapters" not in p.relative_to(ROOT).parts[:2]
    ]
    assert offenders == []


def test_the_import_reader_sees_relative_and_absolute_imports():
    assert {"memory", "numpy"} <= imports(ROOT / "memory" / "write" / "store.py")
    assert "prompts" in imports(ROOT / "memory" / "upkeep" / "maintenance.py")
    assert Import("measure", lazy=True) in import_sites(ROOT / "bot" / "cli" / "upkeep.py")
    assert Import("measure", lazy=False) not in import_sites(ROOT / "bot" / "cli" / "upkeep.py")


PLANTED = [
    (
        'import importlib\n\ndef load():\n    return importlib.import_module("bot.benchturn")\n',
        ["bot"],
    ),
    ('from importlib import import_module\nturn = import_module("measure.turn")\n', ["measure"]),
    ('voice = __import__("voice.warm")\n', ["voice"]),
    ("import importlib\n\ndef load(name):\n    return importlib.import_module(name)\n", [DYNAMIC]),
    ('import importlib\nown = importlib.import_module(f".{name}", __name__)\n', []),
    ('import importlib\nup = importlib.import_module(f"bot.{name}")\n', ["bot"]),
    ('import importlib\nany = importlib.import_module(f"{name}.x")\n', [DYNAMIC]),
    ('def run(bench, hook="measure.turn:make_turn"):\n    return bench(hook)\n', ["measure"]),
    ('import sys\nCMD = [sys.executable, "-m", "bot.cli", "stats"]\n', ["bot"]),
    (
        'import importlib\nfine = importlib.import_module(".db", "memory"), importlib.import_module("numpy")\n'
        'NOT_IMPORTS = ("bench:u0", "12:30", "http://127.0.0.1:9/v1", "-m")\n',
        [],
    ),
]


@pytest.mark.parametrize("source, expected", PLANTED)
def test_string_imports_obey_the_same_arrows(
    tmp_path: Path, source: str, expected: list[str]
) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "planted.py").write_text(source)
    assert violations("memory", tmp_path) == ({"memory/planted.py": expected} if expected else {})


def test_only_a_cli_handler_imports_measure(tmp_path: Path) -> None:
    (tmp_path / "bot" / "adapters").mkdir(parents=True)
    (tmp_path / "bot" / "cli").mkdir(parents=True)
    lazy = "def run_eval(args):\n    from measure.evaluation import evaluate_locomo\n"
    (tmp_path / "bot" / "cli" / "handler.py").write_text(lazy)
    (tmp_path / "bot" / "cli" / "eager.py").write_text("from measure.bench import run_bench\n")
    (tmp_path / "bot" / "orchestrator.py").write_text(lazy)
    (tmp_path / "bot" / "adapters" / "cli_console.py").write_text(lazy)
    assert violations("bot", tmp_path) == {
        "bot/adapters/cli_console.py": ["measure"],
        "bot/cli/eager.py": ["measure"],
        "bot/orchestrator.py": ["measure"],
    }


# -- one owner per table ----------------------------------------------------------------------------------------
# SQL naming a table lives in its owner's module. Declared exceptions, by design:
#   memory/storage/migrations.py   creates and reshapes every table
#   memory/storage/pg_migrations.py  the same, in PostgreSQL's form (SCALE-1)
#   memory/upkeep/registry.py     the forget registry: it names every table that can hold a person's words
#   memory/storage/corpus.py       the corpus/FTS plumbing, shared by memories and messages (and the link graph recall walks)
SQL_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+([a-z_]+)\b")
EXEMPT = {
    "memory/storage/migrations.py",
    "memory/storage/pg_migrations.py",
    "memory/upkeep/registry.py",
    "memory/storage/corpus.py",
}
OWNERS = {
    "memories": "memory/storage/memories.py",
    "memory_tags": "memory/storage/memories.py",
    "memory_links": "memory/storage/memories.py",
    "messages": "memory/storage/messages.py",
    "extraction_buffer": "memory/storage/sessions.py",
    "embed_cache": "memory/storage/embeddings.py",
    "settings": "memory/storage/knobs.py",
    "dead_letters": "memory/storage/sessions.py",
    "person_settings": "memory/storage/people.py",
    "privacy_places": "memory/storage/privacy.py",
}
# Not debt but declared joins: queries inside memory/storage/ that read another repository's table in
# the same statement (a join or a subquery the database runs in one go), each with why. Nothing outside
# storage/ names a table; a new pair must be declared here with its reason.
KNOWN_SHARED = {
    ("memories", "memory/storage/graph.py"),  # entity reads joined to live memories
    ("memories", "memory/storage/embeddings.py"),  # the unchanged-text hash check before embedding
    ("memories", "memory/storage/checkins.py"),  # a check-in read with its memory's subject
    (
        "messages",
        "memory/storage/embeddings.py",
    ),  # a cached vector is dropped once no row holds its text
    (
        "extraction_buffer",
        "memory/storage/messages.py",
    ),  # a deleted message's pending row, same transaction
    (
        "settings",
        "memory/storage/db.py",
    ),  # the schema's own bookkeeping, read before any owner exists
    (
        "person_settings",
        "memory/storage/messages.py",
    ),  # the /privacy off filter on what jobs read, one subquery
    ("privacy_places", "memory/storage/messages.py"),  # the same filter for a place switched off
    (
        "schema_version",
        "memory/storage/db.py",
    ),  # each engine's migration runner records its version (SCALE-1)
    ("schema_version", "memory/storage/pg.py"),
    (
        "schema_version",
        "memory/storage/catalog.py",
    ),  # read before opening: is a store here, and how far migrated
}


def sql_tables(path: Path) -> set[str]:
    """Tables named by SQL in the module's string literals (f-strings by their literal parts)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    texts = [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    texts += [
        "".join(p.value for p in n.values if isinstance(p, ast.Constant))
        for n in ast.walk(tree)
        if isinstance(n, ast.JoinedStr)
    ]
    return {
        m
        for t in texts
        if re.search(r"\b(SELECT|INSERT|UPDATE|DELETE)\b", t)
        for m in SQL_TABLE.findall(t)
    }


def table_strays(root: Path = ROOT) -> set[tuple[str, str]]:
    """(table, module) pairs where SQL names a table outside its one module."""
    named: dict[str, set[str]] = {}
    for pkg in sorted(OURS):
        for path in sorted((root / pkg).rglob("*.py")):
            rel = str(path.relative_to(root))
            for table in sql_tables(path) - {"sqlite_master", "json_each", "pragma_table_info"}:
                named.setdefault(table, set()).add(rel)
    strays = set()
    for table, modules in named.items():
        modules -= EXEMPT
        owner = OWNERS.get(table) or (min(modules) if len(modules) == 1 else None)
        strays |= {(table, m) for m in modules if m != owner}
    return strays


def test_sql_naming_a_table_lives_in_that_tables_module():
    assert table_strays() - KNOWN_SHARED == set()


def test_the_known_shared_tables_are_still_shared():
    """A declared join no longer made is struck from KNOWN_SHARED, so it cannot come back unnoticed."""
    assert KNOWN_SHARED - table_strays() == set()


def test_a_planted_query_on_another_modules_table_is_found(tmp_path: Path) -> None:
    (tmp_path / "memory" / "storage").mkdir(parents=True)
    (tmp_path / "bot").mkdir()
    (tmp_path / "memory" / "storage" / "memories.py").write_text(
        'SQL = "SELECT * FROM memories WHERE id = ?"\n'
    )
    (tmp_path / "memory" / "storage" / "people.py").write_text(
        'SQL = "SELECT rid FROM identities"\n'
    )
    (tmp_path / "bot" / "doctor.py").write_text(
        'def n(db, t):\n    return db.scalar(f"SELECT COUNT(*) FROM memories WHERE x = {t}")\n'
    )
    assert table_strays(tmp_path) == {("memories", "bot/doctor.py")}


# -- the store is reached through memory/, never its connection -----------------------------------------------
def engine_db_sites(root: Path = ROOT) -> list[str]:
    sites = []
    for pkg in sorted(OURS - {"memory"}):
        for path in sorted((root / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr == "db"
                    and ast.unparse(node.value).endswith("engine")
                ):
                    sites.append(f"{path.relative_to(root)}:{node.lineno}")
    return sites


def test_nothing_outside_memory_reaches_engine_db():
    assert engine_db_sites() == []


def test_a_planted_engine_db_is_found(tmp_path: Path) -> None:
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot" / "x.py").write_text(
        "def f(svc):\n    with svc.engine.db.transaction():\n        pass\n"
    )
    assert engine_db_sites(tmp_path) == ["bot/x.py:2"]


# -- no import cycles between modules -----------------------------------------------------------------------------
def module_imports(path: Path, root: Path) -> set[str]:
    """Our modules this one imports when it is loaded or type-checked (a function's own imports aside)."""
    rel = path.relative_to(root).with_suffix("")
    package = rel.parts[:-1] if rel.name != "__init__" else rel.parts[:-1]
    found = set()
    for node, lazy in _nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if lazy or not isinstance(node, ast.ImportFrom):
            continue
        base = list(package[: len(package) - node.level + 1]) if node.level else []
        module = base + (node.module.split(".") if node.module else [])
        for alias in node.names:
            for name in (".".join(module + [alias.name]), ".".join(module)):
                if (root / (name.replace(".", "/") + ".py")).exists():
                    found.add(name)
                    break
    return found


def import_cycles(
    root: Path = ROOT, packages: frozenset[str] = frozenset({"memory"})
) -> list[list[str]]:
    graph = {}
    for pkg in sorted(packages):
        for path in sorted((root / pkg).rglob("*.py")):
            if path.name != "__init__.py":
                graph[".".join(path.relative_to(root).with_suffix("").parts)] = module_imports(
                    path, root
                )
    cycles, state = [], {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for nxt in sorted(graph.get(name, ())):
            if state.get(nxt) == "open":
                cycles.append(trail[trail.index(nxt) :] + [nxt])
            elif nxt in graph and nxt not in state:
                visit(nxt, trail + [nxt])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return cycles


def test_memory_modules_import_each_other_without_a_cycle():
    assert import_cycles() == []


def test_a_planted_import_cycle_is_found(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "a.py").write_text("from .b import B\nA = 1\n")
    (tmp_path / "memory" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\nB = 2\n"
    )
    (tmp_path / "memory" / "c.py").write_text("def late():\n    from .a import A\n    return A\n")
    assert import_cycles(tmp_path) == [["memory.a", "memory.b", "memory.a"]]


# -- no thread waits on the event loop ---------------------------------------------------------------------------
# A worker thread that hands a coroutine back to the loop and blocks on its result (``run_coroutine_threadsafe``)
# ties the two together: voice compaction once did, to reach the model. Model calls are awaited on the loop
# (``memory.jobs.base``: gather and apply on the memory thread, ask on the loop); nothing below the bot starts a loop.
BRIDGES = {"run_coroutine_threadsafe"}  # anywhere
LOOP_STARTERS = {"run", "run_until_complete", "new_event_loop"}  # asyncio.run & co., below the bot
NO_LOOPS_IN = ("memory", "voice", "prompts")


def loop_crossings(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    below_bot = path.relative_to(root).parts[0] in NO_LOOPS_IN
    found = []
    for node in ast.walk(tree):
        name = _called(node)
        if name in BRIDGES or (below_bot and name in LOOP_STARTERS and _on_asyncio(node)):
            found.append(f"{path.relative_to(root)}:{node.lineno} {name}")
    return found


def _called(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    return (
        node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
    )


def _on_asyncio(node: ast.AST) -> bool:
    """``asyncio.run(...)``, ``loop.run_until_complete(...)``: a call of ``run`` on anything but asyncio is not one."""
    func = node.func  # type: ignore[attr-defined]
    if isinstance(func, ast.Attribute) and func.attr == "run":
        return isinstance(func.value, ast.Name) and func.value.id == "asyncio"
    return True


def test_no_thread_waits_on_the_event_loop_and_nothing_below_the_bot_starts_one():
    found = [
        hit
        for pkg in sorted(OURS)
        for path in sorted((ROOT / pkg).rglob("*.py"))
        for hit in loop_crossings(path)
    ]
    assert found == []


@pytest.mark.parametrize(
    "source, caught",
    [
        (
            "import asyncio\n\ndef call(loop, coro):\n    return asyncio.run_coroutine_threadsafe(coro, loop).result()\n",
            True,
        ),
        ("import asyncio\n\ndef summary(coro):\n    return asyncio.run(coro)\n", True),
        (
            "import asyncio\n\ndef summary(coro):\n    return asyncio.new_event_loop().run_until_complete(coro)\n",
            True,
        ),
        ("def fine(runner, fn):\n    return runner.run(fn)\n", False),
    ],
)
def test_the_loop_check_catches_a_bridge_planted_in_memory(
    tmp_path: Path, source: str, caught: bool
) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "planted.py").write_text(source)
    assert bool(loop_crossings(tmp_path / "memory" / "planted.py", tmp_path)) is caught


# -- no import cycles between modules of any package, lazy imports included --------------------------------------
# ``import_cycles`` above reads memory/ at load time; this one reads every package and a function's own imports too:
# the composition root imports lazily, and ``composition`` <-> ``voice_providers`` was a circle that way.
def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of_module(path: Path, known: set[str], root: Path = ROOT) -> set[str]:
    """Our modules this one imports, at load time, lazily or for types only (a circle to a reader all the same)."""
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(package, node.level, node.module)
            found |= {
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            }
    return {name for name in found if name in known and name != me}


def _absolute(package: str, level: int, module: str | None) -> str:
    if not level:
        return module or ""
    parts = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join([*parts, *([module] if module else [])])


def circles(root: Path = ROOT, packages: set[str] = OURS) -> list[list[str]]:
    paths = [
        p
        for pkg in sorted(packages)
        if (root / pkg).is_dir()
        for p in sorted((root / pkg).rglob("*.py"))
    ]
    known = {module_name(p, root) for p in paths}
    graph = {module_name(p, root): imports_of_module(p, known, root) for p in paths}
    return [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the groups of modules that reach each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


def test_no_import_cycles_between_modules_of_any_package():
    assert circles() == []


def test_the_cycle_check_sees_a_type_only_circle(tmp_path: Path) -> None:
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot" / "runtime.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .app import App\n"
    )
    (tmp_path / "bot" / "app.py").write_text("from bot.services import Services\n")
    (tmp_path / "bot" / "services.py").write_text("def of(runtime):\n    from . import runtime\n")
    (tmp_path / "bot" / "alone.py").write_text("from .app import App\n")
    assert circles(tmp_path, {"bot"}) == [["bot.app", "bot.runtime", "bot.services"]]


# -- storage is memory's floor: it imports nothing above it ---------------------------------------------------
# Below storage only the base modules (models, scopes, errors, clock, protocols, safety, evasions...); the engine
# builds every repository over its Database, so a repository never needs the engine, the write policy or upkeep
# (privacy once called upkeep's forget_memory: the call moved up to ``memory.upkeep.forgetting.veto``).
ABOVE_STORAGE = (
    "memory.engine",
    "memory.api",
    "memory.tools",
    "memory.recall",
    "memory.write",
    "memory.upkeep",
    "memory.jobs",
)


def storage_imports_above(root: Path = ROOT) -> set[tuple[str, str]]:
    """(storage module, module above storage) for each import, at load time, lazily or for types only."""
    known = {module_name(p, root) for p in (root / "memory").rglob("*.py")}
    found = set()
    for path in sorted((root / "memory" / "storage").rglob("*.py")):
        for name in imports_of_module(path, known, root):
            if any(name == up or name.startswith(f"{up}.") for up in ABOVE_STORAGE):
                found.add((str(path.relative_to(root)), name))
    return found


def test_storage_imports_nothing_above_it():
    """The message search is handed recall's ranker by the engine (``memory.storage.ranking``)."""
    assert storage_imports_above() == set()


def test_a_planted_upward_import_in_storage_is_found(tmp_path: Path) -> None:
    for module in (
        "engine",
        "models",
        "storage/db",
        "storage/__init__",
        "upkeep/forgetting",
        "write/store",
        "recall/recall",
    ):
        (tmp_path / "memory" / f"{module}.py").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "memory" / f"{module}.py").write_text("")
    (tmp_path / "memory" / "storage" / "people.py").write_text(
        "from typing import TYPE_CHECKING\nfrom ..models import Memory\nfrom .db import Database\n"
        "if TYPE_CHECKING:\n    from ..engine import MemoryEngine\n"
        "def veto():\n    from ..upkeep.forgetting import forget_memory\n"
        "import memory.write.store\nfrom memory.recall import recall\n"
    )
    assert storage_imports_above(tmp_path) == {
        ("memory/storage/people.py", "memory.engine"),
        ("memory/storage/people.py", "memory.upkeep.forgetting"),
        ("memory/storage/people.py", "memory.write.store"),
        ("memory/storage/people.py", "memory.recall.recall"),
    }


# -- inside memory/, no layer imports one above it -------------------------------------------------
# storage (the floor) < recall, write < upkeep < jobs (storage's own rule above keeps it off recall
# and write too). The engine builds every repository and the write policy, so it sits with the lower
# layers. What they shared with upkeep moved down (issue 46): the journals (storage/journals.py),
# the reflections audit (storage/reflections.py), a context's bulletin (BulletinRows.for_context),
# the chat-summaries forget (write/sources.py); forget_file moved up to upkeep/forgetting.py.
ABOVE = {
    "memory/storage": ("memory.upkeep", "memory.jobs"),
    "memory/recall": ("memory.upkeep", "memory.jobs"),
    "memory/write": ("memory.upkeep", "memory.jobs"),
    "memory/engine.py": ("memory.upkeep", "memory.jobs"),
    "memory/upkeep": ("memory.jobs",),
}


def lower_layers_importing_upward(root: Path = ROOT) -> set[tuple[str, str]]:
    """(module, module of a layer above it) for each import: at load time, lazily or for types."""
    known = {module_name(p, root) for p in (root / "memory").rglob("*.py")}
    found = set()
    for lower, above in ABOVE.items():
        where = root / lower
        paths = [where] if where.suffix == ".py" else sorted(where.rglob("*.py"))
        for path in (p for p in paths if p.exists()):
            for name in imports_of_module(path, known, root):
                if any(name == up or name.startswith(f"{up}.") for up in above):
                    found.add((str(path.relative_to(root)), name))
    return found


def test_storage_recall_write_and_the_engine_never_import_upkeep_or_jobs_nor_upkeep_jobs():
    assert lower_layers_importing_upward() == set()


def test_a_planted_upward_import_inside_memory_is_found(tmp_path: Path) -> None:
    for module in (
        "engine",
        "upkeep/__init__",
        "upkeep/forgetting",
        "upkeep/journals",
        "jobs/base",
        "storage/db",
        "write/store",
        "recall/context",
        "recall/overview",
    ):
        (tmp_path / "memory" / f"{module}.py").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "memory" / f"{module}.py").write_text("")
    (tmp_path / "memory" / "write" / "ingest.py").write_text(
        "from ..storage.db import Database\ndef forget_file():\n"
        "    from ..upkeep.forgetting import forget_memory\n"
    )
    (tmp_path / "memory" / "recall" / "overview.py").write_text("from ..upkeep import journals\n")
    (tmp_path / "memory" / "engine.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import memory.jobs.base\n"
    )
    (tmp_path / "memory" / "upkeep" / "forgetting.py").write_text("from ..write.store import x\n")
    (tmp_path / "memory" / "upkeep" / "journals.py").write_text("from ..jobs import base\n")
    assert lower_layers_importing_upward(tmp_path) == {
        ("memory/write/ingest.py", "memory.upkeep.forgetting"),
        ("memory/recall/overview.py", "memory.upkeep.journals"),
        ("memory/engine.py", "memory.jobs.base"),
        ("memory/upkeep/journals.py", "memory.jobs.base"),
    }


# -- one composition root: nothing wired after construction -----------------------------------------------------
def assigned_onto_built_objects(source: str, function: str) -> list[str]:
    """Attribute assignments (``x.y = ...``, ``setattr``) in ``function``; in an ``__init__``, its own ``self.y`` are fine."""
    tree = ast.parse(source)
    found = []
    for fn in (
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function
    ):
        for node in ast.walk(fn):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, (ast.AugAssign, ast.AnnAssign))
                else []
            )
            for target in (
                e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])
            ):
                if isinstance(target, ast.Attribute) and not (_self_in_init(function, target)):
                    found.append(f"{function}:{target.lineno} {ast.unparse(target)}")
            if _called(node) == "setattr":
                found.append(f"{function}:{node.lineno} setattr")
    return found


def _self_in_init(function: str, target: ast.Attribute) -> bool:
    return (
        function == "__init__" and isinstance(target.value, ast.Name) and target.value.id == "self"
    )


def assigned_anywhere(source: str) -> list[str]:
    """``assigned_onto_built_objects`` of every function of a module, lifecycle state aside (``LIFECYCLE``)."""
    names = sorted(
        {
            n.name
            for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
    )
    found = [hit for name in names for hit in assigned_onto_built_objects(source, name)]
    return [hit for hit in found if not hit.split(" ", 1)[1].startswith(LIFECYCLE)]


# What a started bot holds (its scheduler and tasks, made by ``Runtime.start``): state, not wiring, kept in one
# declared holder so that nothing else of a built runtime changes.
LIFECYCLE = "self._running."


@pytest.mark.parametrize("module", ["bot/composition.py", "bot/runtime.py"])
def test_the_composition_root_and_the_runtime_assign_nothing_onto_built_objects(
    module: str,
) -> None:
    source = (ROOT / module).read_text(encoding="utf-8")
    assert "def " in source
    assert assigned_anywhere(source) == []


@pytest.mark.parametrize(
    "module",
    ["bot/orchestrator.py", "bot/turn/stages.py", "bot/turn/tools.py", "bot/turn/guard.py"],
)
def test_the_orchestrator_and_the_turn_assign_nothing_onto_the_parts_they_are_given(
    module: str,
) -> None:
    source = (ROOT / module).read_text(encoding="utf-8")
    assert "def __init__(" in source
    assert assigned_onto_built_objects(source, "__init__") == []


def test_the_wiring_check_catches_an_assignment_after_construction():
    source = (
        "def build_runtime(settings):\n    runtime = Runtime()\n    runtime.daily = Daily()\n"
        "    orchestrator.voice.extract = background.extract\n    setattr(runtime, 'x', 1)\n    return runtime\n"
        "class Orchestrator:\n    def __init__(self, voice):\n        self.voice = voice\n        voice.owner = self\n"
    )
    assert assigned_onto_built_objects(source, "build_runtime") == [
        "build_runtime:3 runtime.daily",
        "build_runtime:4 orchestrator.voice.extract",
        "build_runtime:5 setattr",
    ]
    assert assigned_onto_built_objects(source, "__init__") == ["__init__:10 voice.owner"]


def test_the_wide_wiring_check_reads_every_function_but_a_started_runtimes_own_state():
    source = (
        "def _open(settings):\n    engine = Engine()\n    engine.memories.tombstones.own_names = People(engine).own_names\n"
        "    return engine\n"
        "class Runtime:\n    async def start(self):\n        self._running.scheduler = make()\n"
        "        self.background.zone_of = str\n"
    )
    assert assigned_anywhere(source) == [
        "_open:3 engine.memories.tombstones.own_names",
        "start:8 self.background.zone_of",
    ]


# -- typed values across the package edges ----------------------------------------------------------------------
UNTYPED = "dict[str, Any]"
# a storage row read by its column's name
ROW_READ = re.compile(r"\.row\[|\brow\[[\"']|\brow\.get\(")
# the ``from_row`` constructors: where storage turns a row into a value
BUILT_FROM_ROWS = {"memory/models.py"}


def names_used(root: Path, packages: tuple[str, ...]) -> set[str]:
    """Every name, attribute and imported name the modules of ``packages`` mention."""
    found: set[str] = set()
    for path in (p for package in packages for p in (root / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Name):
                found.add(node.id)
            elif isinstance(node, ast.Attribute):
                found.add(node.attr)
            elif isinstance(node, ast.ImportFrom):
                found.update(alias.name for alias in node.names)
    return found


def public_functions(
    tree: ast.Module,
) -> Iterator[tuple[str, str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, the name a caller writes, node) of the module's public functions and public classes' methods;
    a constructor is called by its class's name."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith(
            "_"
        ):
            yield node.name, node.name, node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for fn in (
                n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            ):
                if fn.name == "__init__":
                    yield f"{node.name}.__init__", node.name, fn
                elif not fn.name.startswith("_"):
                    yield f"{node.name}.{fn.name}", fn.name, fn


def _annotations(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.expr]:
    arguments = fn.args
    for arg in [
        *arguments.posonlyargs,
        *arguments.args,
        *arguments.kwonlyargs,
        arguments.vararg,
        arguments.kwarg,
    ]:
        if arg is not None and arg.annotation is not None:
            yield arg.annotation
    if fn.returns is not None:
        yield fn.returns


def engine_parts(root: Path) -> dict[str, str]:
    """attribute -> class of what ``MemoryEngine`` builds (``self.messages = MessageLog(...)``): the bot reaches
    those objects through the engine without naming their class."""
    tree = ast.parse((root / "memory" / "engine.py").read_text(encoding="utf-8"))
    parts = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
        ):
            for target in node.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "self"
                ):
                    parts[target.attr] = node.value.func.id
    return parts


def untyped_signatures(root: Path = ROOT, callers: tuple[str, ...] = ("bot", "voice")) -> set[str]:
    """``path:Class.function`` of memory's public functions that take or return ``dict[str, Any]`` and that ``callers``
    can call: a function they name, or a method they name of a class they name or reach through the engine (by
    name: a method another reachable class shares a name with counts too, which errs on the safe side)."""
    used = names_used(root, callers)
    reached = used | {cls for attr, cls in engine_parts(root).items() if attr in used}
    found = set()
    for path in sorted((root / "memory").rglob("*.py")):
        for qualified, called, fn in public_functions(ast.parse(path.read_text(encoding="utf-8"))):
            owner = qualified.split(".")[0] if "." in qualified else None
            if called not in used or (owner is not None and owner not in reached):
                continue
            if any(UNTYPED in ast.unparse(a) for a in _annotations(fn)):
                found.add(f"{path.relative_to(root).as_posix()}:{qualified}")
    return found


def row_reads(root: Path = ROOT) -> dict[str, int]:
    """path -> how many times a storage row is read by column name outside ``memory/storage/`` (and the value types)."""
    found = {}
    for path in sorted(p for package in sorted(OURS) for p in (root / package).rglob("*.py")):
        name = path.relative_to(root).as_posix()
        if name.startswith("memory/storage/") or name in BUILT_FROM_ROWS:
            continue
        if count := len(ROW_READ.findall(path.read_text(encoding="utf-8"))):
            found[name] = count
    return found


def test_no_untyped_dict_crosses_from_memory_to_the_bot_or_voice():
    """The doctor, restore and the upgrade check open a store as ``memory.StoreFile`` (values, never
    rows); the dashboard's entities are ``Entity`` values."""
    assert untyped_signatures() == set(), (
        "type it (a value of memory.models), or JsonObject if it truly is JSON"
    )


def test_rows_are_read_by_column_name_only_in_storage():
    """SQL runs in the table's repository (memory/storage/), which hands up values, not rows."""
    assert row_reads() == {}, (
        "read a value of memory.models (converted in memory/storage/), not a row"
    )


def test_the_signature_counter_sees_a_planted_untyped_method_the_bot_reaches(
    tmp_path: Path,
) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "bot").mkdir()
    (tmp_path / "voice").mkdir()
    (tmp_path / "memory" / "engine.py").write_text(
        "class MemoryEngine:\n    def __init__(self):\n        self.log = Log()\n"
    )
    (tmp_path / "memory" / "log.py").write_text(
        "from typing import Any\n"
        "class Log:\n"
        "    def last(self) -> list[dict[str, Any]]: ...\n"  # reached through engine.log: counted
        "    def _own(self, row: dict[str, Any]) -> int: ...\n"  # private: not counted
        "class Hidden:\n"
        "    def last(self, row: dict[str, Any]) -> int: ...\n"  # its class is out of the bot's reach
        "def export(data: dict[str, Any]) -> None: ...\n"  # named by the bot: counted
        "def unused(data: dict[str, Any]) -> None: ...\n"
    )
    (tmp_path / "bot" / "x.py").write_text(
        "from memory.log import export\n\ndef f(engine):\n    export(engine.log.last())\n"
    )
    assert untyped_signatures(tmp_path) == {"memory/log.py:Log.last", "memory/log.py:export"}


def test_the_row_counter_sees_row_reads_outside_storage(tmp_path: Path) -> None:
    for package in OURS:
        (tmp_path / package).mkdir()
    (tmp_path / "memory" / "storage").mkdir()
    # storage reads rows: fine
    (tmp_path / "memory" / "storage" / "rows.py").write_text("x = row['id']\n")
    (tmp_path / "voice" / "warm.py").write_text(
        "a = hit.row['content']\nb = row[\"rid\"]\nc = row.get('role')\nd = rows[0]\n"
    )
    assert row_reads(tmp_path) == {"voice/warm.py": 3}


# -- bot and voice see memory through its face: ``memory`` (services, errors, protocols) and ``memory.models`` ----------
FACE = frozenset({"memory", "memory.models"})


def deep_memory_imports(root: Path = ROOT) -> dict[str, set[str]]:
    """Per module of bot/ and voice/, the memory modules it imports beyond the face (lazy and type-only included)."""
    known = {module_name(p, root) for p in (root / "memory").rglob("*.py")}
    found = {}
    for path in sorted(
        p for pkg in ("bot", "voice") if (root / pkg).is_dir() for p in (root / pkg).rglob("*.py")
    ):
        deep = {m for m in imports_of_module(path, known, root) if m not in FACE}
        if deep:
            found[path.relative_to(root).as_posix()] = deep
    return found


def test_bot_and_voice_import_only_memorys_face():
    assert {path: sorted(deep) for path, deep in deep_memory_imports().items()} == {}


def test_each_name_of_the_face_has_one_home_and_is_the_object_it_names():
    """The areas' tables are merged into one: a name in two of them would silently keep the later one
    (the dashboard's Reflection and the reflection job once shared a name)."""
    import memory

    tables = [
        value
        for name, value in vars(memory).items()
        if name.isupper() and name.startswith("_") and name != "_HOMES" and isinstance(value, dict)
    ]
    names = [name for table in tables for name in table]
    assert len(tables) >= 6 and sorted(n for n in set(names) if names.count(n) > 1) == []
    for name, home in memory._HOMES.items():
        assert getattr(memory, name) is getattr(importlib.import_module(f"memory.{home}"), name)


def face_names_unused(root: Path = ROOT) -> list[str]:
    """The face's names that no module of bot/ or voice/ imports from ``memory``."""
    import memory

    used: set[str] = set()
    for path in (p for pkg in ("bot", "voice") for p in (root / pkg).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "memory" and not node.level:
                used |= {alias.name for alias in node.names}
    return sorted(set(memory._HOMES) - used)


def test_each_name_of_the_face_is_used_by_the_bot_or_voice():
    """The face is what bot/ and voice/ use (issue 46): a name only tests import lives in its module."""
    assert face_names_unused() == []


def plant_module(root: Path, module: str, text: str) -> None:
    """A module of a planted tree (``module``: its path under ``root``, folders made)."""
    (root / module).parent.mkdir(parents=True, exist_ok=True)
    (root / module).write_text(text)


def test_the_face_check_sees_deep_imports_and_lets_the_face_pass(tmp_path: Path) -> None:
    for module, text in {
        "memory/__init__.py": "",
        "memory/models.py": "",
        "memory/storage/__init__.py": "",
        "memory/storage/db.py": "",
        "bot/face.py": "from memory import AsyncRunner\nfrom memory.models import Memory\nimport memory\n",
        "bot/deep.py": "def f():\n    from memory.storage.db import AsyncRunner\n",
        "bot/package.py": "from memory import storage\n",
        "voice/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import memory.storage.db\n",
    }.items():
        plant_module(tmp_path, module, text)
    assert deep_memory_imports(tmp_path) == {
        "bot/deep.py": {"memory.storage.db"},
        "bot/package.py": {"memory.storage"},
        "voice/typed.py": {"memory.storage.db"},
    }


# Lines over 100 columns: code is formatted at 100 (ruff format); what is left is prose the formatter cannot
# split (comments, docstrings, strings), held at 140 by E501 until rewrapped. A ratchet: it may only go down.
LONG_LINES_LEFT = 4_340


def long_lines(root: Path = ROOT) -> int:
    paths = [p for package in sorted(OURS | {"tests"}) for p in (root / package).rglob("*.py")]
    lines = (line for path in paths for line in path.read_text(encoding="utf-8").splitlines())
    return sum(1 for line in lines if len(line) > 100)


def test_lines_over_100_columns_only_get_fewer():
    assert long_lines() <= LONG_LINES_LEFT


def test_every_module_marked_slow_still_exists():
    """The fast subset's list names paths: a module renamed would silently join the fast run."""
    from tests.fast_subset import SLOW

    assert [entry for entry in SLOW if not (ROOT / entry.split("::")[0]).exists()] == []
