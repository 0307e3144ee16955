"""The first steps a person takes, as they take them (issue 35): the README's chat steps copied literally into a
shell in a folder that is not the checkout, with an empty home, reach a reply; ``companion init`` writes the
settings file where every later command finds it; a model server on the host is reachable from the container."""

from __future__ import annotations

import asyncio
import os
import re
import stat
import sys
from pathlib import Path

import pytest

from bot.config import Settings, through_alias
from tests.cli_support import Cli
from tests.fakes import FakeOpenAI
from tests.test_chat_terminal import Terminal

ROOT = Path(__file__).resolve().parent.parent
PROMPT = r"shell-ready> "  # the prompt of the shell the person types into


def readme_chat_steps() -> list[str]:
    """The commands of the README's first code block under "Chat in the terminal", comments dropped."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Chat in the terminal", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


async def test_the_readmes_chat_steps_copied_literally_reach_a_reply_from_any_folder(
    tmp_path: Path,
) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "somewhere-else"
    (home / ".local" / "bin").mkdir(parents=True)
    elsewhere.mkdir()
    # what the install leaves: `companion` linked in ~/.local/bin, which the person's PATH holds
    (home / ".local" / "bin" / "companion").symlink_to(Path(sys.executable).parent / "companion")
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("COMPANION_", "OPENAI_", "XDG_"))
    }
    steps = readme_chat_steps()
    assert (
        steps[0] == "companion init"
        and steps[-1] == "companion chat"
        and not any("cp " in s or ".venv" in s for s in steps)
    )
    async with FakeOpenAI() as srv:
        srv.default = lambda body: "Hello there, nice to meet you!"
        env = {
            **clean,
            "HOME": str(home),
            "PATH": f"{home / '.local' / 'bin'}:{clean.get('PATH', '/usr/bin:/bin')}",
            "PYTHONPATH": str(ROOT),
            "TERM": "xterm",
            "PS1": "shell-ready> ",
            # "then edit it": the settings the person writes into the file, given here in the environment (which wins)
            "OPENAI_BASE_URL": srv.base_url,
            "OPENAI_API_KEY": "test-key",
            "COMPANION_EMBEDDINGS": "none",
        }
        term = Terminal(["bash", "--norc", "--noprofile"], env)
        try:
            at = await term.expect(PROMPT)
            term.type(f"cd {elsewhere}\r")
            at = await term.expect(PROMPT, at)
            for step in steps:
                term.type(step + "\r")
                if step == "companion chat":
                    at = await term.expect(r"Start a new, empty one\? \[y/N\] ", at, timeout=60)
                    term.type("y\r")
                    at = await term.expect(r"you> ", at, timeout=60)
                    term.type("hi, I'm new here\r")
                    at = await term.expect(r"nice to meet\s+you!", at, timeout=60)
                    term.type("/quit\r")
                at = await term.expect(PROMPT, at, timeout=90)
            term.type("exit\r")
            await asyncio.to_thread(term.proc.wait, 30)
        finally:
            term.close()
    assert (home / ".config" / "companion" / ".env").is_file()
    assert (home / ".local" / "share" / "companion" / "companion.db").is_file()
    assert (
        "Traceback" not in term.screen
        and "No such file" not in term.screen
        and "command not found" not in term.screen
    )


def test_init_writes_the_settings_file_for_its_owner_only_and_never_over_one(
    cli: Cli, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv("COMPANION_HOME", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    written = tmp_path / "config" / "companion" / ".env"
    assert cli("init").code == 0
    assert written.read_text() == (ROOT / ".env.example").read_text()
    assert (
        stat.S_IMODE(written.stat().st_mode) == 0o600
        and stat.S_IMODE(written.parent.stat().st_mode) == 0o700
    )
    written.write_text("OPENAI_API_KEY=mine\n")
    again = cli("init")
    assert (
        again.code == 2
        and "already there" in again.error_line()
        and written.read_text() == "OPENAI_API_KEY=mine\n"
    )
    assert cli("init", "--force").code == 0 and "OPENAI_BASE_URL" in written.read_text()


@pytest.mark.parametrize(
    "url,expected",
    [
        ("http://localhost:11434/v1", "http://host.docker.internal:11434/v1"),
        ("http://127.0.0.1:8080/v1", "http://host.docker.internal:8080/v1"),
        ("http://[::1]:8000/v1", "http://host.docker.internal:8000/v1"),
        ("http://user:pw@localhost/v1", "http://user:pw@host.docker.internal/v1"),
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("http://ollama.lan:11434/v1", "http://ollama.lan:11434/v1"),
    ],
)
def test_in_a_container_a_localhost_model_url_means_the_host(url: str, expected: str) -> None:
    assert through_alias(url, "host.docker.internal") == expected


def test_the_loopback_alias_applies_to_every_model_url_and_only_when_set() -> None:
    local = "http://localhost:11434/v1"
    aliased = Settings(
        llm_base_url=local, extraction_base_url=local, loopback_alias="host.docker.internal"
    )
    assert (
        aliased.llm_base_url
        == aliased.extraction_base_url
        == "http://host.docker.internal:11434/v1"
    )
    assert Settings(llm_base_url=local).llm_base_url == local
