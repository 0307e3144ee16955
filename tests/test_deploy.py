"""What an operator deploys (OPS-5): the container image, the compose file, the systemd unit, the licence and
the settings template. Docker cannot build here (no daemon), so the Dockerfile is checked the way a linter
(hadolint) would, and against the README's own install script it must follow."""

from __future__ import annotations

import configparser
import re
import tomllib
from pathlib import Path

import yaml

from bot.config import Settings, _env_name

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()
INSTALL = (ROOT / "scripts" / "install").read_text()
INSTALL_RUN = (ROOT / "scripts" / "install-run").read_text()


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    lines = [
        line.strip()
        for line in joined.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_the_image_is_built_from_a_pinned_base_and_the_install_scripts_own_steps() -> None:
    steps = instructions()
    base = next(args for op, args in steps if op == "FROM")
    assert ":" in base and not base.endswith(":latest")  # hadolint DL3006/DL3007
    runs = " ".join(args for op, args in steps if op == "RUN")
    # the install for running
    assert "sh scripts/install-run --no-link" in runs and "PIP_NO_CACHE_DIR=1" in runs
    assert "rm -rf /var/lib/apt/lists/*" in runs  # DL3009
    apt = re.search(r"apt-get install (.+)", INSTALL_RUN)
    assert apt and "--no-install-recommends" in apt.group(1) and "-y" in apt.group(1)  # DL3015
    # the README's install is the same one, with the test tools
    assert 'install-run" --test' in INSTALL


def test_the_install_for_running_has_no_test_tools_and_no_browser() -> None:
    """A server, the container and the service get what the bot runs on: no pytest, no Playwright (165 MB), no
    chromium; the README's install adds them with --test."""
    defaults = re.search(r'^packages="(.+)"', INSTALL_RUN, re.MULTILINE).group(1).split()
    assert defaults == ["libopus0", "espeak-ng"] and re.search(
        r'^extras=""', INSTALL_RUN, re.MULTILINE
    )
    assert '--test) packages="$packages chromium"; extras="[test]"' in INSTALL_RUN
    test_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["test"]
    required = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(p.startswith("pytest") for p in test_extra) and not any(
        p.startswith(("pytest", "playwright")) for p in required
    )
    # a service user without sudo is told the command, not stopped at a prompt
    assert "sudo -n true" in INSTALL_RUN


def test_every_package_the_project_ships_is_copied_and_nothing_secret_is() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {
        name.rstrip("*") for name in project["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    copied = {args.split()[0] for op, args in instructions() if op == "COPY"}
    assert packages <= copied and all((ROOT / name).exists() for name in copied if name != ".")
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".env", ".venv", "data", "*.db", ".git"} <= set(ignored)


def test_every_script_the_install_for_running_calls_is_copied_into_the_image() -> None:
    """Issue 45: install-run calls scripts/fetch_voice_models.py, which the image did not copy, so
    the turn model was never fetched in the container."""
    commands = "\n".join(
        line for line in INSTALL_RUN.splitlines() if not line.lstrip().startswith("#")
    )
    called = set(re.findall(r"\bscripts/[\w.-]+", commands))
    assert "scripts/fetch_voice_models.py" in called
    copied = {
        source
        for op, args in instructions()
        if op == "COPY"
        for source in args.split()[:-1]  # the last argument is the destination
    }
    assert called <= copied and all((ROOT / name).exists() for name in called)


def test_the_container_runs_as_a_user_keeps_its_store_on_the_volume_and_checks_its_health() -> None:
    steps = dict(instructions())
    assert steps["USER"] not in ("root", "0")  # DL3002
    assert "COMPANION_HOME=/data" in steps["ENV"] and "/data" in steps["VOLUME"]
    port = Settings.model_fields["health_port"].default
    assert f"127.0.0.1:{port}/healthz" in steps["HEALTHCHECK"]
    assert steps["CMD"] == '["run"]' and steps["ENTRYPOINT"] == '["companion"]'


def test_compose_runs_the_bot_with_an_optional_dashboard_on_host_loopback() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    bot, dashboard = compose["services"]["bot"], compose["services"]["dashboard"]
    assert (
        bot["command"] == ["run"]
        and "companion-data:/data" in bot["volumes"]
        and "companion-data" in compose["volumes"]
    )
    # the model server is named by URL in .env; a localhost one is the Docker host's, not the container's
    assert bot["environment"]["COMPANION_LOOPBACK_ALIAS"] == "host.docker.internal"
    assert "host.docker.internal:host-gateway" in bot["extra_hosts"]
    assert dashboard["profiles"] == ["dashboard"] and dashboard["command"] == ["dashboard"]
    # never published to the world
    assert all(port.startswith("127.0.0.1:") for port in dashboard["ports"])
    assert "ports" not in bot  # /healthz and /metrics stay inside


def test_the_systemd_unit_runs_companion_run_in_its_home_and_stops_gracefully() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string((ROOT / "deploy" / "companion.service").read_text())
    service = unit["Service"]
    assert service["ExecStart"].endswith("/.venv/bin/companion run") and service["User"] != "root"
    assert (
        service["Environment"].startswith("COMPANION_HOME=") and service["KillSignal"] == "SIGTERM"
    )
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_the_licence_file_is_the_one_pyproject_names() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"]["text"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


def test_the_env_example_lists_every_setting_and_no_internal_requirement_ids() -> None:
    text = (ROOT / ".env.example").read_text()
    # MAINT-4, OPS-5, ...: ours, not the reader's
    assert not re.findall(r"\b[A-Z]{2,6}-\d+\b", text)
    named = set(re.findall(r"^(\w+)=", text, re.MULTILINE))
    missing = [_env_name(field) for field in Settings.model_fields if _env_name(field) not in named]
    assert missing == []


def test_the_systemd_unit_makes_every_file_owner_only_and_keeps_the_service_to_its_home() -> None:
    """Issue 31: the unit had no UMask, so a store made under it was 0644 (the bot sets 0077 itself too)."""
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string((ROOT / "deploy" / "companion.service").read_text())
    service = unit["Service"]
    assert service["UMask"] == "0077"
    hardening = {
        "NoNewPrivileges": "true",
        "ProtectSystem": "strict",
        "ProtectHome": "true",
        "PrivateTmp": "true",
    }
    hardening |= {
        "PrivateDevices": "true",
        "RestrictSUIDSGID": "true",
        "CapabilityBoundingSet": "",
        "LockPersonality": "true",
    }
    assert {key: service.get(key) for key in hardening} == hardening
    home = service["Environment"].removeprefix("COMPANION_HOME=")
    # the one place it writes
    assert service["ReadWritePaths"] == home and service["WorkingDirectory"] == home
    # chat services, models, PostgreSQL
    assert {"AF_INET", "AF_INET6", "AF_UNIX"} <= set(service["RestrictAddressFamilies"].split())
