"""The shared test helpers are one module: a second copy (imported under another name) would make two
HashEmbedder classes and two fixtures' worth of state."""

from __future__ import annotations

import sys


def test_the_shared_test_helpers_are_loaded_under_one_name_only():
    import tests.pipeline_support  # noqa: F401  (imports the helpers the pipeline tests use)

    loaded = [
        name
        for name, module in sys.modules.items()
        if getattr(module, "__file__", "") and module.__file__.endswith("tests/conftest.py")
    ]
    assert loaded == ["conftest"], loaded
