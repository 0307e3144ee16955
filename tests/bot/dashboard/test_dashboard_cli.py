"""Running the dashboard (DASH-3): ``companion dashboard`` as a real process (the issue's bar), its refusal
without a token, and the dashboard inside the bot's runtime on the bot's own store and memory thread."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest
from conftest import remember
from pipeline_support import build_runtime

from bot.config import ConfigError, load_settings
from bot.dashboard.common import SERVICES
from memory.engine import MemoryEngine
from memory.models import Scope

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "long-enough-dashboard-token-0123456789"  # past MIN_TOKEN (24)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening_addresses(port: int) -> list[str]:
    """Local addresses of every TCP socket listening on ``port`` (from /proc, IPv4 and IPv6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.append(address)
    return found


def wait_for(port: int, process: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the dashboard exited: {process.communicate()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("the dashboard did not start listening")


async def test_the_bar_companion_dashboard_answers_only_with_the_token_and_only_on_loopback(
    tmp_path,
):
    db = tmp_path / "store.db"
    with MemoryEngine(db, None) as engine:
        remember(engine, "Alice keeps bees on her roof", scope_id="alice")
        remember(
            engine,
            "The operator renews the domain in March",
            scope=Scope.OWNER,
            scope_id="console:local-user",
        )
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPANION_")}
    env.update(
        COMPANION_DASHBOARD_TOKEN=TOKEN, COMPANION_DB_PATH=str(db), COMPANION_EMBEDDINGS="none"
    )
    command = [sys.executable, "-m", "bot", "dashboard", "--port", str(port)]
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(port, process)
        url = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/api/memory") as r:
                assert r.status == 401 and r.content_type == "application/json"
            async with http.get(
                f"{url}/api/memory", headers={"Authorization": f"Bearer {TOKEN}"}
            ) as r:
                assert r.status == 200 and r.content_type == "application/json"
                listed = await r.json()
            async with http.get(f"{url}/", headers={"Authorization": f"Bearer {TOKEN}"}) as r:
                assert (
                    r.status == 200
                    and r.content_type == "text/html"
                    and "<html" in (await r.text()).lower()
                )
        assert {m["content"] for m in listed["items"]} == {
            "Alice keeps bees on her roof",
            "The operator renews the domain in March",
        }
        # 127.0.0.1, and nothing on another address or on IPv6
        assert listening_addresses(port) == ["0100007F"]
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert f"http://127.0.0.1:{port}/" in out + err
    # where to find the token is said once; the token itself never (the scrollback and captured logs keep it)
    assert (out + err).count(
        "log in with the token: COMPANION_DASHBOARD_TOKEN in the environment"
    ) == 1
    assert TOKEN not in out + err


def test_without_a_token_the_dashboard_refuses_to_start_and_says_how_to_set_one(cli):
    result = cli("dashboard", "--port", str(free_port()))
    assert result.code == 2 and "COMPANION_DASHBOARD_TOKEN=" in result.error_line()
    assert cli("dashboard", "--port", "70000").code == 2


def test_the_settings_are_safe_by_default(monkeypatch):
    for name in [n for n in os.environ if n.startswith("COMPANION_DASHBOARD")]:
        monkeypatch.delenv(name)
    settings = load_settings(_env_file=None)
    assert (
        settings.dashboard_enabled,
        settings.dashboard_host,
        settings.dashboard_port,
        settings.dashboard_token,
    ) == (
        False,
        "127.0.0.1",
        8765,
        None,
    )
    monkeypatch.setenv("COMPANION_DASHBOARD_TOKEN", "s3cret-value")
    assert "s3cret-value" not in repr(load_settings(_env_file=None))


async def test_inside_the_bot_it_shares_the_store_and_the_memory_thread(tmp_path, srv):
    from memory.clock import FakeClock

    runtime = build_runtime(
        tmp_path / "bot.db",
        srv,
        FakeClock(),
        dashboard_enabled=True,
        dashboard_token=TOKEN,
        dashboard_port=0,
    )
    assert (
        runtime.dashboard is not None and runtime.dashboard.app[SERVICES].runner is runtime.runner
    )
    await runtime.start(background_loop=False)
    try:
        url = f"http://127.0.0.1:{runtime.dashboard.port}"
        new = {"content": "Alice waters the bees at dawn", "scope": "user", "scope_id": "alice"}
        async with (
            aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as http,
            http.post(f"{url}/api/memory", json=new) as r,
        ):
            assert r.status == 201
            made = (await r.json())["id"]
        assert (await runtime.runner.run(runtime.engine.memory_rows.get, made)).content == new[
            "content"
        ]
    finally:
        srv.default = lambda body: "[]"
        await runtime.stop()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", runtime.dashboard.port)) != 0  # stopped with the bot


def test_inside_the_bot_it_refuses_to_start_without_a_token(tmp_path):
    with pytest.raises(ConfigError, match="COMPANION_DASHBOARD_TOKEN"):
        build_runtime(tmp_path / "bot.db", _NoServer(), None, dashboard_enabled=True)  # type: ignore[arg-type]


def test_a_short_token_is_refused_naming_the_minimum_and_the_variable(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("COMPANION_DASHBOARD_TOKEN", "hunter2-is-short")
    result = cli("dashboard", "--port", str(free_port()))
    assert (
        result.code == 2
        and "COMPANION_DASHBOARD_TOKEN" in result.error_line()
        and "at least 24" in result.error_line()
    )
    with pytest.raises(
        ConfigError,
        match="COMPANION_DASHBOARD_TOKEN is 16 characters; the dashboard needs at least 24",
    ):
        build_runtime(
            tmp_path / "bot.db",
            _NoServer(),
            None,
            dashboard_enabled=True,
            dashboard_token="hunter2-is-short",
        )  # type: ignore[arg-type]


def test_a_host_other_than_loopback_is_refused_unless_allowed(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("COMPANION_DASHBOARD_TOKEN", TOKEN)
    result = cli("dashboard", "--host", "0.0.0.0", "--port", str(free_port()))
    assert result.code == 2 and "COMPANION_DASHBOARD_ALLOW_REMOTE=true" in result.error_line()
    remote = {"dashboard_enabled": True, "dashboard_token": TOKEN, "dashboard_host": "0.0.0.0"}
    with pytest.raises(ConfigError, match="not 0.0.0.0"):
        build_runtime(tmp_path / "bot.db", _NoServer(), None, **remote)  # type: ignore[arg-type]
    allowed = build_runtime(
        tmp_path / "ok.db", _NoServer(), None, dashboard_allow_remote=True, **remote
    )  # type: ignore[arg-type]
    try:
        # built, not started
        assert allowed.dashboard is not None and allowed.dashboard.host == "0.0.0.0"
    finally:
        allowed.engine.close()
        allowed.runner.shutdown()


class _NoServer:
    base_url = "http://127.0.0.1:9/v1"  # never called: start-up is refused before anything runs
