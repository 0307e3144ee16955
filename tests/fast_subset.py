"""What the fast subset leaves out (``pytest -m "not slow"``, docs/README.md): the module paths and
test ids ``tests/conftest.py`` marks slow."""

# Modules whose tests run real Whisper, several processes, a browser, the benchmarks or the
# long suites: `pytest -m "not slow"` leaves them out for a contributor's loop (docs/README.md);
# `sh scripts/check` runs everything.
SLOW = (
    "tests/voice/",
    "tests/measure/",
    "tests/test_group_trust_suite.py",
    "tests/test_multiprocess.py",
    "tests/test_chat_terminal.py",
    "tests/test_first_steps.py",
    "tests/memory/test_forget_rewording.py",
    "tests/memory/test_two_writers.py",
    "tests/memory/test_memory_mirror_bench.py",
    "tests/bot/dashboard/test_dashboard_browser.py",
    "tests/bot/cli/test_cli.py::test_bench_json_is_the_only_thing_on_stdout",
    "tests/bot/test_group_replay.py",
)
