"""One home for config and store (OPS-5, bot/home.py): a command started from any folder finds the same
config file and the same store, says which, and ``chat`` never silently starts an empty store."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bot.cli import main
from bot.home import HomeError, find_home


@pytest.fixture
def clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No COMPANION_* variables, user folders under tmp_path, started from an unrelated folder."""
    for name in list(os.environ):
        if name.startswith("COMPANION_") or name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return tmp_path


def write_env(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in [*lines, "COMPANION_EMBEDDINGS=none"]))
    return path


def stats(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict, str]:
    capsys.readouterr()
    code = main([*argv, "stats", "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == 0 else {}, captured.err


def test_with_no_config_anywhere_the_store_is_in_the_user_data_folder(tmp_path: Path) -> None:
    home = find_home(
        None,
        {"XDG_DATA_HOME": str(tmp_path / "share"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")},
        tmp_path,
    )
    assert home.env_file is None and home.source == "none"
    assert home.default_store == tmp_path / "share" / "companion" / "companion.db"


def test_the_precedence_is_env_file_then_companion_home_then_project_folder_then_user_config(
    tmp_path: Path,
) -> None:
    user = write_env(tmp_path / "cfg" / "companion" / ".env")
    project = tmp_path / "project"
    write_env(project / ".env")
    named = write_env(tmp_path / "named.env")
    environ = {"XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    assert find_home(None, environ, tmp_path).env_file == user
    assert find_home(None, environ, project).env_file == project / ".env"
    assert (
        find_home(None, {**environ, "COMPANION_HOME": str(tmp_path / "h")}, project).source
        == "COMPANION_HOME"
    )
    assert (
        find_home(named, {**environ, "COMPANION_HOME": str(tmp_path / "h")}, project).env_file
        == named
    )


def test_a_checkout_with_a_store_but_no_env_keeps_its_data_folder(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "companion.db").write_bytes(b"")
    home = find_home(None, {"XDG_CONFIG_HOME": str(tmp_path / "cfg")}, tmp_path)
    assert (
        home.source == "project folder" and home.default_store == tmp_path / "data" / "companion.db"
    )


def test_a_missing_env_file_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(HomeError, match="nope.env"):
        find_home(tmp_path / "nope.env", {}, tmp_path)


def test_a_missing_env_file_on_the_command_line_exits_2(
    clean: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--env-file", str(clean / "nope.env"), "stats"])
    assert code == 2 and "nope.env: no such file" in capsys.readouterr().err


def test_a_relative_store_in_the_user_config_is_found_from_any_folder(
    clean: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_env(clean / "config" / "companion" / ".env", "COMPANION_DB_PATH=mine.db")
    assert (
        main(
            [
                "memory",
                "add",
                "Biscuit is the cat",
                "--subject",
                "Biscuit",
                "--scope",
                "user",
                "--scope-id",
                "console:me",
            ]
        )
        == 0
    )
    code, data, _ = stats(capsys)
    assert code == 0 and data["memories"] == 1
    assert (config.parent / "mine.db").exists() and not (clean / "elsewhere" / "mine.db").exists()


def test_companion_home_holds_the_config_and_the_store(
    clean: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    write_env(clean / "home" / ".env")
    monkeypatch.setenv("COMPANION_HOME", str(clean / "home"))
    assert (
        main(
            [
                "memory",
                "add",
                "Biscuit is the cat",
                "--subject",
                "Biscuit",
                "--scope",
                "user",
                "--scope-id",
                "console:me",
            ]
        )
        == 0
    )
    assert (clean / "home" / "data" / "companion.db").exists()
    # nothing was created where the command started
    assert not list((clean / "elsewhere").iterdir())


def test_the_environment_still_wins_over_the_file(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_env(clean / "config" / "companion" / ".env", "COMPANION_DB_PATH=from-file.db")
    monkeypatch.setenv("COMPANION_DB_PATH", str(clean / "from-env.db"))
    assert (
        main(
            [
                "memory",
                "add",
                "Biscuit is the cat",
                "--subject",
                "Biscuit",
                "--scope",
                "user",
                "--scope-id",
                "console:me",
            ]
        )
        == 0
    )
    assert (clean / "from-env.db").exists() and not (
        clean / "config" / "companion" / "from-file.db"
    ).exists()


def test_doctor_names_the_config_file_it_read(
    clean: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_env(
        clean / "config" / "companion" / ".env", "OPENAI_BASE_URL=http://127.0.0.1:9/v1"
    )
    main(["doctor", "--json"])
    checks = {c["check"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert (
        checks["config file"]["status"] == "ok" and str(config) in checks["config file"]["detail"]
    )
    assert str(clean / "share" / "companion" / "companion.db") in checks["store"]["detail"]


def test_chat_without_a_store_and_without_a_terminal_refuses_and_creates_nothing(
    clean: Path, monkeypatch, capsys
) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.StringIO("hello\n"))
    code = main(["chat", "--no-stream"])
    err = capsys.readouterr().err
    store = clean / "share" / "companion" / "companion.db"
    assert code == 2 and f"there is no store at {store}" in err and "--new-store" in err
    assert "config: no config file" in err  # and it said where it looked first
    assert not store.exists()
