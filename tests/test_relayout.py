"""scripts/relayout.py: the tree is in its layout, and code written for the flat memory/ is pointed at the new places."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("relayout", ROOT / "scripts" / "relayout.py")
assert SPEC and SPEC.loader
relayout = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(relayout)


def test_nothing_is_left_in_the_flat_layout():
    """A module added at memory/<old name>.py or an import of one (code merged from before the move) fails here."""
    done = subprocess.run([sys.executable, "scripts/relayout.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "")


def test_absolute_names_and_paths_written_for_the_flat_layout_are_moved_once():
    old = 'from memory.store import MemoryStore\nlog = logging.getLogger("memory.db")\nOWNER = "memory/memories.py"\n'
    new = relayout.rewrite_text(old)
    assert new == (
        'from memory.write.store import MemoryStore\nlog = logging.getLogger("memory.storage.db")\nOWNER = "memory/storage/memories.py"\n'
    )
    assert relayout.rewrite_text(new) == new


def test_a_module_that_became_a_package_keeps_its_new_names_and_calls_on_a_variable():
    text = "from memory.recall.context import X\nfrom memory.recall import MemoryRecall\nmemory.recall(ctx)\n"
    assert (
        relayout.rewrite_text(text)
        == "from memory.recall.context import X\nfrom memory.recall.recall import MemoryRecall\nmemory.recall(ctx)\n"
    )


def test_a_relative_import_from_the_flat_layout_climbs_to_its_new_place():
    moved = ROOT / "memory" / "write" / "store.py"
    text = "from .db import Database\nfrom .safety import check\nfrom .clock import Clock\nfrom . import fts\n"
    assert relayout.rewrite_relative(moved, text) == (
        "from ..storage.db import Database\nfrom .safety import check\nfrom ..clock import Clock\nfrom ..storage import fts\n"
    )


def test_a_test_moved_one_folder_down_still_finds_the_repository_root():
    assert relayout.climb("ROOT = Path(__file__).resolve().parent.parent\n", 1) == "ROOT = Path(__file__).resolve().parents[2]\n"
    assert relayout.climb("ROOT = Path(__file__).parents[1]\n", 2) == "ROOT = Path(__file__).parents[3]\n"
    assert relayout.test_folder("test_memory_new.py") == "memory" and relayout.test_folder("test_architecture.py") is None


def test_a_module_imported_from_the_package_itself_is_moved_and_a_face_name_is_left():
    old = "from memory import maintenance\nfrom memory import MemoryEngine\n"
    assert relayout.rewrite_text(old) == "from memory.upkeep import maintenance\nfrom memory import MemoryEngine\n"
