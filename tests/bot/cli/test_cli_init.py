"""``companion init`` on what an attacker or an accident leaves where the settings file goes
(issue 44): a symbolic link is never written through, a FIFO is refused at once (never opened, so
never waited on), and the folders it makes are the owner's only whatever the umask; a folder others
may write in is kept, with a warning.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from tests.cli_support import Cli, Result

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("COMPANION_HOME", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config" / "companion" / ".env"


@pytest.mark.parametrize("force", [False, True])
def test_a_dangling_link_where_the_settings_go_is_refused_and_nothing_is_written_where_it_points(
    cli: Cli, config: Path, tmp_path: Path, force: bool
) -> None:
    elsewhere = tmp_path / "public" / "keys.txt"
    elsewhere.parent.mkdir()
    config.parent.mkdir(parents=True)
    config.symlink_to(elsewhere)
    result = cli("init", *(["--force"] if force else []))
    assert result.code != 0 and "symbolic link" in result.error_line()
    assert not elsewhere.exists() and config.is_symlink()


def test_force_over_a_link_to_a_file_leaves_that_file_as_it_was(
    cli: Cli, config: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "shared.txt"
    elsewhere.write_text("someone else's file\n")
    config.parent.mkdir(parents=True)
    config.symlink_to(elsewhere)
    result = cli("init", "--force")
    assert result.code != 0 and "symbolic link" in result.error_line()
    assert elsewhere.read_text() == "someone else's file\n"


def test_a_fifo_where_the_settings_go_is_refused_at_once_and_never_opened(
    cli: Cli, config: Path
) -> None:
    config.parent.mkdir(parents=True)
    os.mkfifo(config)
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(cli("init", "--force")), daemon=True)
    worker.start()
    worker.join(5)
    if worker.is_alive():  # it opened the FIFO and waits for a reader: let it go, then fail
        with open(config, "rb") as reader:
            reader.read()
        worker.join(5)
        pytest.fail("init blocked on the FIFO")
    result = done[0]
    assert isinstance(result, Result)
    assert result.code != 0 and "not a regular file (a FIFO)" in result.error_line()
    assert stat.S_ISFIFO(config.lstat().st_mode)
    again = cli("init")  # without --force: the same clear line, not "already there"
    assert again.code != 0 and "a FIFO" in again.error_line()


def test_the_folders_init_makes_are_the_owner_s_only_whatever_the_umask(
    cli: Cli, config: Path
) -> None:
    before = os.umask(0)
    try:
        assert cli("init").code == 0
    finally:
        os.umask(before)
    assert config.read_text() == (ROOT / ".env.example").read_text()
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    for folder in (config.parent, config.parent.parent):  # companion/ and the config folder it made
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert [p.name for p in config.parent.iterdir()] == [".env"]  # no temporary file left


def test_a_folder_others_may_write_in_is_kept_with_a_warning(cli: Cli, config: Path) -> None:
    config.parent.mkdir(parents=True)
    config.parent.chmod(0o777)
    result = cli("init")
    assert result.code == 0
    assert "can be written by other users (777)" in result.err and "chmod 700" in result.err
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o777  # theirs to change, not ours
    assert stat.S_IMODE(config.stat().st_mode) == 0o600


def test_force_replaces_a_regular_file_whole_and_for_the_owner_only(cli: Cli, config: Path) -> None:
    config.parent.mkdir(parents=True)
    config.write_text("OPENAI_API_KEY=old\n" * 1000)
    config.chmod(0o644)
    assert cli("init", "--force").code == 0
    assert config.read_text() == (ROOT / ".env.example").read_text()
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
