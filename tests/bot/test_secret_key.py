"""The tombstones' key lives outside the store (issue 31, item 3): a 0600 key file beside the config, found as the
config is, or derived from COMPANION_SECRET_KEY; a broken key file is refused by name, never replaced."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.home import find_home, key_file
from bot.secret_key import KeyFileError, read_or_make, tombstone_key
from memory.storage.db import Database


def test_a_key_file_is_made_once_0600_in_a_0700_folder_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "config" / "companion.key"
    key = read_or_make(path)
    assert len(key) == 32 and read_or_make(path) == key
    assert (
        stat.S_IMODE(path.stat().st_mode) == 0o600
        and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    )


@pytest.mark.parametrize("content", ["", "not a key", "ab" * 31, "zz" * 32])
def test_a_broken_key_file_is_refused_by_name_and_left_as_it_is(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "companion.key"
    path.write_text(content)
    with pytest.raises(KeyFileError, match="companion.key does not hold a key"):
        read_or_make(path)
    assert path.read_text() == content  # never replaced: a new key would silently undo every forget


def test_a_secret_setting_gives_the_same_key_everywhere_and_no_file(tmp_path: Path) -> None:
    settings = load_settings(
        _env_file=None, db_path=tmp_path / "a.db", secret_key="correct horse battery staple " * 2
    )
    other = load_settings(
        _env_file=None,
        db_path=tmp_path / "elsewhere" / "b.db",
        secret_key="correct horse battery staple " * 2,
    )
    assert tombstone_key(settings) == tombstone_key(other)
    assert list(tmp_path.iterdir()) == []


def test_a_key_file_that_cannot_be_made_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(KeyFileError, match="cannot make the key file .*COMPANION_KEY_FILE"):
        read_or_make(tmp_path / "a-file" / "companion.key")


def test_the_key_file_is_found_beside_the_config_file(tmp_path: Path) -> None:
    env = tmp_path / "conf" / ".env"
    env.parent.mkdir()
    env.write_text("")
    assert key_file(find_home(env)) == tmp_path / "conf" / "companion.key"
    home = find_home(None, {"COMPANION_HOME": str(tmp_path / "home")}, cwd=tmp_path)
    assert key_file(home) == tmp_path / "home" / "companion.key"
    xdg = find_home(None, {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}, cwd=tmp_path / "nowhere")
    assert (
        key_file(xdg, {"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
        == tmp_path / "xdg" / "companion" / "companion.key"
    )


def test_the_cli_keeps_the_key_beside_the_config_or_the_store_and_none_in_the_store(
    cli, tmp_path: Path
) -> None:
    """Beside the config file when there is one; with none, beside the store, where the bot, a command and a
    dashboard opening that store all find the same key (a command once made its own in the user's config folder
    while the bot used the store's, and the command's forget did not hold for the bot)."""
    memory = cli.add(
        "Alice keeps a tortoise called Quintrell",
        "--subject",
        "pet",
        "--scope",
        "user",
        "--scope-id",
        "discord:1234",
    )
    assert cli("memory", "delete", memory, "--yes").code == 0
    made = tmp_path / "companion.key"  # beside store.db: no config file here
    assert made.is_file() and stat.S_IMODE(made.stat().st_mode) == 0o600
    config = tmp_path / "xdg-config" / "companion"
    config.mkdir(parents=True)
    (config / ".env").write_text("COMPANION_LOG_LEVEL=INFO\n")
    memory = cli.add(
        "Alice keeps a newt called Brindlewort",
        "--subject",
        "pet",
        "--scope",
        "user",
        "--scope-id",
        "discord:1234",
    )
    assert cli("memory", "delete", memory, "--yes").code == 0
    assert stat.S_IMODE((config / "companion.key").stat().st_mode) == 0o600
    db = Database(tmp_path / "store.db")
    try:
        assert [k for (k,) in db.execute("SELECT key FROM settings") if "key" in k] == []
    finally:
        db.close()


def test_processes_starting_together_all_get_the_one_key(tmp_path: Path) -> None:
    from concurrent.futures import ProcessPoolExecutor

    path = tmp_path / "companion.key"
    with ProcessPoolExecutor(4) as pool:
        keys = list(pool.map(read_or_make, [path] * 16))
    assert len(set(keys)) == 1 and [p.name for p in tmp_path.iterdir()] == ["companion.key"]


def test_a_key_in_the_store_s_folder_is_made_with_a_warning_and_one_elsewhere_without(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 44, item 11: with no config file the key was made beside the store, silently, so a copy
    of the folder (the container's volume) carried both."""
    store = tmp_path / "data" / "companion.db"
    beside = load_settings(_env_file=None, db_path=store)
    tombstone_key(beside)
    assert "in the store's folder" in caplog.text and (store.parent / "companion.key").is_file()
    caplog.clear()
    apart = load_settings(
        _env_file=None, db_path=store, key_file=tmp_path / "key" / "companion.key"
    )
    tombstone_key(apart)
    assert "store's folder" not in caplog.text


def test_the_container_keeps_the_key_on_a_volume_of_its_own() -> None:
    import yaml

    root = Path(__file__).resolve().parents[2]
    compose = yaml.safe_load((root / "compose.yaml").read_text())
    for service in compose["services"].values():
        key = Path(service["environment"]["COMPANION_KEY_FILE"])
        assert not key.is_relative_to(service["environment"]["COMPANION_HOME"])
        assert any(v.endswith(f":{key.parent}") for v in service["volumes"])
    assert "COMPANION_KEY_FILE=/key/companion.key" in (root / "Dockerfile").read_text()
    assert 'VOLUME ["/data", "/key"]' in (root / "Dockerfile").read_text()
