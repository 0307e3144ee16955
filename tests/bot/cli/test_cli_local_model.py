"""COMPANION_LOCAL_MODEL: a GGUF file run by llama.cpp inside the process (bot/model/local.py).

Always run: the clear errors at start (no such file, a folder, files that are not GGUF, the wheel not installed)
and the doctor's speed line against the fake server. With the wheel (the ``local-model`` extra): a file that
looks like GGUF but that llama.cpp cannot load, after the one warning about the ignored server settings. With
the wheel and a real model file named by COMPANION_TEST_GGUF: a console chat turn through the model in a
``companion chat`` process that must exit promptly, and the doctor's figures.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bot.cli.doctor import check_local_model
from bot.config import INSTALL
from bot.model.local import Loaded
from tests.cli_support import Cli
from tests.fakes import FakeOpenAI, HTTPError
from tests.fakes.openai_server import RawAnswer

ROOT = Path(__file__).resolve().parents[3]
# read at import: the cli fixture clears every COMPANION_* variable
GGUF = os.environ.get("COMPANION_TEST_GGUF", "")
HAS_WHEEL = importlib.util.find_spec("xllamacpp") is not None
needs_wheel = pytest.mark.skipif(
    not HAS_WHEEL, reason='the local-model extra is not installed (pip install -e ".[local-model]")'
)
needs_model = pytest.mark.skipif(
    not (HAS_WHEEL and GGUF and Path(GGUF).is_file()),
    reason="needs the local-model extra and COMPANION_TEST_GGUF=path/to/model.gguf",
)


def looks_like_gguf(path: Path) -> Path:
    """The magic and a version, then nothing a model needs: passes the start-up check, fails in llama.cpp."""
    path.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 64)
    return path


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "does not exist"),
        ("folder", "is not a file"),
        (b"", "is not a GGUF model file"),
        (b"gguf\x03\x00\x00\x00", "is not a GGUF model file"),  # the magic is case-sensitive
        (b"PK\x03\x04model.safetensors", "is not a GGUF model file"),
        ("\u200b".encode(), "is not a GGUF model file"),
    ],
    ids=["missing", "folder", "empty", "lower-case magic", "zip", "zero-width space"],
)
def test_a_file_that_cannot_be_a_model_stops_every_command_with_one_error_naming_the_variable(
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    content: bytes | str | None,
    said: str,
) -> None:
    path = tmp_path / "model.gguf"
    if content == "folder":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    monkeypatch.setenv("COMPANION_LOCAL_MODEL", str(path))
    for argv in (["chat", "--new-store"], ["memory", "list"]):
        result = cli(*argv)
        assert result.code == 2, result.err
        assert "invalid configuration" in result.error_line()
        detail = result.err.splitlines()[1]
        assert (
            detail.strip().startswith("COMPANION_LOCAL_MODEL:")
            and said in detail
            and str(path) in detail
        )
        assert "Traceback" not in result.out + result.err and "loading" not in result.err
    assert not cli.db.exists()  # nothing was started, nothing written


def test_without_the_wheel_the_error_says_how_to_install_it(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # as if the extra were not installed (import fails, find_spec None)
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    monkeypatch.setenv("COMPANION_LOCAL_MODEL", str(looks_like_gguf(tmp_path / "model.gguf")))
    result = cli("chat", "--new-store")
    assert result.code == 2 and "Traceback" not in result.err
    assert (
        f"COMPANION_LOCAL_MODEL: Value error, running a model file needs llama.cpp: {INSTALL}"
        in result.err
    )
    doctor = cli("doctor")  # the doctor reports it as its finding instead of stopping
    assert doctor.code == 1 and "FAIL  config" in doctor.out and INSTALL in doctor.out


def test_the_install_advice_names_this_environments_pip_and_the_checkout_by_full_path(
    tmp_path: Path,
) -> None:
    """Issue 45: `pip install -e ".[local-model]"` used the first pip on the PATH and worked only
    inside the checkout. The advice runs as given from any folder, into the bot's environment."""
    pip, _, target = INSTALL.partition(" install -e ")
    assert Path(pip) == Path(sys.prefix) / "bin" / "pip" and target == f"'{ROOT}[local-model]'"
    # that pip installs into this very environment, asked from a folder that is not the checkout
    done = subprocess.run(
        [pip, "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and str(Path(sys.prefix).resolve()) in done.stdout, done.stdout


def test_a_tilde_in_the_path_is_the_home_folder(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("COMPANION_LOCAL_MODEL", "~/nothing-here.gguf")
    result = cli("memory", "list")
    assert result.code == 2 and f"{tmp_path}/nothing-here.gguf does not exist" in result.err


@needs_wheel
def test_a_file_llama_cpp_cannot_load_is_one_error_after_one_warning(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("COMPANION_LOCAL_MODEL", str(looks_like_gguf(tmp_path / "broken.gguf")))
    monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("COMPANION_OPENAI_API_KEY", "sk-not-needed")
    # the default: nothing of the person's own to warn about
    monkeypatch.setenv("COMPANION_CHAT_MODEL", "gpt-4o-mini")
    result = cli("chat", "--new-store")
    assert result.code == 2, result.err
    assert (
        "llama.cpp could not load" in result.error_line()
        and str(tmp_path / "broken.gguf") in result.error_line()
    )
    warnings = [line for line in result.err.splitlines() if "warning:" in line]
    assert warnings == [
        "warning: COMPANION_LOCAL_MODEL is set, so OPENAI_BASE_URL, OPENAI_API_KEY are ignored"
    ]
    assert "sk-not-needed" not in result.err and "Traceback" not in result.err
    assert not any(t.name == "local-model" for t in threading.enumerate())

    doctor = cli("doctor")
    assert (
        doctor.code == 1
        and "FAIL  config" in doctor.out
        and "llama.cpp could not load" in doctor.out
    )
    # a command that never asks the model loads nothing
    added = cli(
        "memory",
        "add",
        "Sam has a grey cat",
        "--subject",
        "Sam",
        "--scope",
        "user",
        "--scope-id",
        "console:sam",
    )
    assert added.code == 0 and "loading" not in added.err and "warning" not in added.err, added.err


async def test_the_doctor_times_the_local_model_with_llama_cpps_own_timings() -> None:
    loaded = Loaded(Path("/models/tiny.gguf"), 491_400_064, "tiny", 7.25)
    timings = {
        "prompt_n": 40,
        "prompt_per_second": 8.04,
        "predicted_n": 9,
        "predicted_per_second": 2.4,
    }
    answer = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "tiny",
        "timings": timings,
    }
    answer["choices"] = [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "To remember."},
        }
    ]
    async with FakeOpenAI() as srv:
        srv.script(RawAnswer(answer), "To remember.", HTTPError(500))
        timed, counted_only, failed = [await _check(loaded, srv.base_url) for _ in range(3)]
    assert timed.status == "ok" and timed.detail == (
        "/models/tiny.gguf (491 MB) as tiny, loaded in 7.2 s; read 40 prompt tokens at 8.0 a second, wrote 9 at 2.4 a second"
    )
    # usage, no timings
    assert (
        counted_only.status == "ok" and " prompt and 2 generated tokens in " in counted_only.detail
    )
    assert failed.status == "fail" and "did not answer" in failed.detail
    assert [r["model"] for r in srv.chat_requests] == ["tiny"] * 3 and all(
        r["max_tokens"] == 48 for r in srv.chat_requests
    )


async def _check(loaded: Loaded, base_url: str):
    import asyncio

    return await asyncio.to_thread(check_local_model, loaded, base_url, "key")


# -- against a real model file (COMPANION_TEST_GGUF) ----------------------------------------------------------
def _env(tmp_path: Path) -> dict[str, str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("COMPANION_") and k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY")
    }
    return {
        **clean,
        "PYTHONPATH": str(Path(__file__).parents[3]),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
        "COMPANION_LOCAL_MODEL": GGUF,
        "COMPANION_LOCAL_MODEL_THREADS": "1",  # the machine is shared: one thread was faster than two under load
        "COMPANION_EMBEDDINGS": "none",
        "OPENAI_API_KEY": "sk-ignored",
    }


@needs_model
def test_a_console_chat_turn_through_the_model_in_process_and_a_prompt_exit(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "bot",
        "--db",
        str(tmp_path / "store.db"),
        "chat",
        "--no-stream",
        "--new-store",
        "--name",
        "Sam",
    ]
    started = time.monotonic()
    chat = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path),
    )
    assert chat.stdin is not None and chat.stdout is not None
    chat.stdin.write("Hello! I'm Sam and I have a grey cat called Biscuit.\n")
    chat.stdin.flush()
    # load and answer on a busy machine: minutes at worst
    reply = _line_starting(chat, "Companion> ", timeout_s=900)
    answered = time.monotonic()
    chat.stdin.write("/quit\n")
    chat.stdin.flush()
    try:
        # /quit extracts for at most 5 s (COMPANION_SHUTDOWN_FLUSH_S), then llama.cpp stops
        code = chat.wait(timeout=120)
    finally:
        chat.kill()
    quit_s = time.monotonic() - answered
    err = chat.stderr.read() if chat.stderr else ""
    assert code == 0, err
    assert reply.removeprefix("Companion> ").strip() and "(!)" not in reply, reply
    assert "Traceback" not in err and "Segmentation" not in err, err
    assert "warning: COMPANION_LOCAL_MODEL is set, so OPENAI_API_KEY is ignored" in err
    print(
        f"\nfirst reply after {answered - started:.1f} s (load included); exit {quit_s:.1f} s after /quit; {reply}"
    )
    assert quit_s < 60, f"companion chat took {quit_s:.1f} s to exit after /quit"


def _line_starting(process: subprocess.Popen[str], prefix: str, timeout_s: float) -> str:
    """The first line of the process's output that starts with ``prefix`` (read in a thread: a pipe has no timeout)."""
    found: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if prefix in line:
                found.append(line[line.index(prefix) :].rstrip("\n"))
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout_s)
    assert found, f"no line with {prefix!r} in {timeout_s} s"
    return found[0]


@needs_model
def test_the_doctor_says_what_it_loaded_and_how_fast_it_is_and_stops_it(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPANION_LOCAL_MODEL", GGUF)
    monkeypatch.setenv("COMPANION_LOCAL_MODEL_THREADS", "1")
    result = cli("doctor")
    line = next(line for line in result.out.splitlines() if line.startswith("OK    local model"))
    size = Path(GGUF).stat().st_size / 1e6
    assert (
        f"{GGUF} ({size:,.0f} MB) as {Path(GGUF).stem}, loaded in " in line and " a second" in line
    ), result.out
    # stopped: its holder thread is gone
    assert not any(t.name == "local-model" for t in threading.enumerate())
    # only the findings: the load's progress note, no log lines of the load or the stop (issue 45)
    assert result.err.splitlines() == [f"loading {Path(GGUF).name} with llama.cpp ..."], result.err
    print(f"\n{line}\nload average {os.getloadavg()}")
