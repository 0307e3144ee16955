"""``companion doctor`` against the local fake OpenAI-compatible server, the token format checks it shares
with ``companion run``, and the API-key warning it shares with ``companion chat``."""

from __future__ import annotations

import asyncio

import pytest

from bot.cli.doctor import key_warning, token_problems
from bot.model.quirks import is_local
from tests.cli_support import Cli, _alice
from tests.fakes import FakeOpenAI, HTTPError

DISCORD = "MTA5ODc2NTQzMjEwOTg3NjU0Mw.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456789_-"
TELEGRAM = "7012345678:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1"


def findings(result) -> dict[str, dict]:
    return {f["check"]: f for f in result.json()["checks"]}


async def test_doctor_passes_when_everything_is_in_place(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as srv:
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("DISCORD_TOKEN", DISCORD)
        monkeypatch.setenv("TELEGRAM_TOKEN", TELEGRAM)
        monkeypatch.setenv("COMPANION_CHAT_MODEL", "chat-model")
        monkeypatch.setenv("COMPANION_EXTRACTION_MODEL", "extraction-model")
        await asyncio.to_thread(_alice, cli)
        result = await asyncio.to_thread(cli, "doctor", "--json", embeddings="openai")
        text = await asyncio.to_thread(cli, "doctor", embeddings="openai")

    assert result.code == 0 and result.json()["ok"] is True, result.out
    found = findings(result)
    assert set(found) == {
        "config file",
        "store",
        "files",
        "model",
        "vision",
        "extraction model",
        "embeddings",
        "tokens",
        "schedule",
    }
    assert all(f["status"] == "ok" for f in found.values())
    assert "1 memory, integrity ok" in found["store"]["detail"]
    assert [r["model"] for r in srv.chat_requests][:2] == ["chat-model", "extraction-model"]
    assert srv.embedding_requests  # the provider was asked for a vector
    assert text.code == 0 and text.out.strip().endswith("everything needed is in place")
    # secrets are never shown (SEC-4)
    assert DISCORD not in text.out + result.out and TELEGRAM not in text.out + result.out


async def test_doctor_names_an_unreachable_model_server(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # nothing listens there
    monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    result = await asyncio.to_thread(cli, "doctor")
    assert result.code == 1 and "Traceback" not in result.err
    line = next(line for line in result.out.splitlines() if line.startswith("FAIL  model"))
    assert "cannot reach http://127.0.0.1:9/v1" in line and "refused" in line.lower()
    assert "OPENAI_BASE_URL" in result.out and result.out.strip().endswith(
        ("1 problem to fix", "problems to fix")
    )


async def test_doctor_names_a_model_the_server_does_not_have(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as srv:
        srv.script(
            HTTPError(
                404,
                {
                    "error": {
                        "message": "model 'llama9' not found",
                        "type": "not_found",
                        "param": None,
                        "code": None,
                    }
                },
            )
        )
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("COMPANION_CHAT_MODEL", "llama9")
        result = await asyncio.to_thread(cli, "doctor", "--json")
    model = findings(result)["model"]
    assert result.code == 1 and model["status"] == "fail"
    assert "llama9" in model["detail"] and "COMPANION_CHAT_MODEL" in model["fix"]


async def test_doctor_checks_token_formats_without_connecting(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as srv:
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("DISCORD_TOKEN", "Bot " + DISCORD)
        monkeypatch.setenv("TELEGRAM_TOKEN", "7012345678-AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1")
        result = await asyncio.to_thread(cli, "doctor", "--json")
    tokens = [f for f in result.json()["checks"] if f["check"] == "tokens"]
    assert result.code == 1 and [f["status"] for f in tokens] == ["fail", "fail"]
    assert "DISCORD_TOKEN" in tokens[0]["detail"] and "'Bot ' prefix" in tokens[0]["detail"]
    assert "TELEGRAM_TOKEN" in tokens[1]["detail"] and DISCORD not in result.out


def test_doctor_reports_a_bad_configuration_as_a_finding(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPANION_MAINTENANCE_CRON", "every night")
    result = cli("doctor", "--json")
    assert result.code == 1 and result.json()["ok"] is False
    config = findings(result)["config"]
    assert config["status"] == "fail" and "COMPANION_MAINTENANCE_CRON" in config["detail"]


async def test_doctor_reports_a_damaged_store_and_a_missing_one(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeOpenAI() as srv:
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        missing = findings(await asyncio.to_thread(cli, "doctor", "--json"))["store"]
        cli.db.write_bytes(b"garbage" * 1000)
        damaged = await asyncio.to_thread(cli, "doctor", "--json")
    assert (
        missing["status"] == "warn"
        and "no store" in missing["detail"]
        and not cli.db.with_suffix(".db-wal").exists()
    )
    store = findings(damaged)["store"]
    assert (
        damaged.code == 1
        and store["status"] == "fail"
        and str(cli.db) in store["detail"]
        and "restore" in store["fix"]
    )


@pytest.mark.parametrize(
    "discord, telegram, named",
    [
        (DISCORD, TELEGRAM, []),
        ("", "", []),
        ("Bot " + DISCORD, "", ["DISCORD_TOKEN"]),
        (
            "MTA5ODc2NTQzMjEwOTg3NjU0Mw.GhIjKl",
            "",
            ["DISCORD_TOKEN"],
        ),  # two parts: the signature is missing
        ("1098765432109876543", "", ["DISCORD_TOKEN"]),  # the application id, not the token
        (DISCORD + " ", "", ["DISCORD_TOKEN"]),  # a trailing space from .env
        ("", "7012345678:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw", ["TELEGRAM_TOKEN"]),  # 34 characters
        ("", "bot7012345678:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1", ["TELEGRAM_TOKEN"]),
        ("nonsense", "nonsense", ["DISCORD_TOKEN", "TELEGRAM_TOKEN"]),
    ],
)
def test_token_formats(discord: str, telegram: str, named: list[str]) -> None:
    problems = token_problems(discord, telegram)
    assert [p.split()[0] for p in problems] == named
    assert all(discord not in p for p in problems if discord) and all(
        telegram not in p for p in problems if telegram
    )


@pytest.mark.parametrize(
    "url, local",
    [
        ("http://localhost:11434/v1", True),
        ("http://127.0.0.1:8080/v1", True),
        ("http://[::1]:1234/v1", True),
        ("http://192.168.1.20:11434/v1", True),
        ("http://gpu-box.local:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://openrouter.ai/api/v1", False),
        ("http://8.8.8.8/v1", False),
    ],
)
def test_which_servers_are_local(url: str, local: bool) -> None:
    assert is_local(url) is local
    assert (key_warning(url, "") is None) is local
    assert key_warning(url, "sk-test") is None


def test_the_key_warning_names_the_variable_and_the_server() -> None:
    warning = key_warning("https://api.openai.com/v1", "")
    assert (
        warning is not None
        and "OPENAI_API_KEY" in warning
        and "https://api.openai.com/v1" in warning
    )


# -- companion run: a malformed token is refused by name, before anything connects ---------------------------------
@pytest.mark.parametrize(
    "variable, value",
    [
        ("TELEGRAM_TOKEN", "12345:short"),
        ("DISCORD_TOKEN", "not-a-discord-token"),
    ],
)
def test_run_refuses_a_malformed_token_before_connecting(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    result = cli("run")
    assert result.code == 2 and variable in result.error_line() and value not in result.err
    # refused before the runtime (store, model client, platform) was even built
    assert not cli.db.exists()


def test_run_refuses_telegram_off_without_discord_as_it_would_serve_nothing(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TELEGRAM_TOKEN", "123456:" + "A" * 35)
    # another process of the bot polls Telegram (SCALE-1)
    monkeypatch.setenv("COMPANION_TELEGRAM", "off")
    result = cli("run")
    assert result.code == 2 and "COMPANION_TELEGRAM=off" in result.error_line()
    assert not cli.db.exists()


async def test_doctor_shows_whether_the_chat_model_sees_images_from_the_kept_probe(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ORCH-11: not asked yet, then the verdict the bot kept (per server and model), then what COMPANION_VISION forces."""
    from bot.images.vision import vision_key
    from memory.storage.db import Database
    from memory.storage.model_traits import ModelTraits, SightTrait

    async with FakeOpenAI() as srv:
        monkeypatch.setenv("COMPANION_OPENAI_BASE_URL", srv.base_url)
        await asyncio.to_thread(_alice, cli)
        before = findings(await asyncio.to_thread(cli, "doctor", "--json"))["vision"]
        db = Database(cli.db)
        ModelTraits(db).keep_sight(
            vision_key(srv.base_url, "gpt-4o-mini"), SightTrait(False, "2026-11-20T10:00:00+00:00")
        )
        db.close()
        after = findings(await asyncio.to_thread(cli, "doctor", "--json"))["vision"]
        monkeypatch.setenv("COMPANION_VISION", "off")
        off = findings(await asyncio.to_thread(cli, "doctor", "--json"))["vision"]
    assert before["status"] == "ok" and "not asked yet" in before["detail"]
    assert (
        after["status"] == "warn"
        and "cannot see images (asked 2026-11-20" in after["detail"]
        and "COMPANION_VISION=on" in after["fix"]
    )
    assert off["status"] == "ok" and off["detail"].startswith("off (COMPANION_VISION)")
    # the doctor itself shows no image
    assert not [body for body in srv.chat_requests if "image_url" in str(body)]
