"""Fetch the turn model (VOICE-6) into the environment: ``python scripts/fetch_voice_models.py [folder]``.

Smart Turn v3.2 ships inside pipecat's wheel on PyPI (``pipecat/audio/turn/smart_turn/data``), and nowhere else
on a registry. Installing pipecat-ai would pull in dozens of packages and pin protobuf below 7, which clashes
with ours: so the wheel alone is downloaded (``pip download --no-deps``), the model file and pipecat's licence
(BSD 2-Clause) are copied out, and the wheel is thrown away. The folder defaults to the one the bot reads
(``voice.turn.default_model_dir()``: inside this environment). Run again, it does nothing.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from voice.turn import SMART_TURN_FILE, default_model_dir  # noqa: E402  (the checkout, not an installed copy)

WHEEL = "pipecat-ai==1.14.0"
# The model as pipecat ships it (and as the model's own repository publishes it at v3.2): a changed file is refused.
SMART_TURN_SHA256 = "2bb026316b14a660486a75b1733cd3fbab8c2fd0314dc9af7be49f8cca967e4f"
MEMBERS = {
    f"pipecat/audio/turn/smart_turn/data/{SMART_TURN_FILE}": SMART_TURN_FILE,
    "pipecat_ai-1.14.0.dist-info/licenses/LICENSE": "LICENSE-pipecat.txt",
}


def fetch(folder: Path) -> None:
    if all((folder / name).is_file() for name in MEMBERS.values()):
        print(f"the turn model is already in {folder}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        pip = [
            sys.executable,
            "-m",
            "pip",
            "download",
            WHEEL,
            "--no-deps",
            "--only-binary=:all:",
            "-q",
            "-d",
            tmp,
        ]
        subprocess.run(pip, check=True)
        (wheel,) = Path(tmp).glob("pipecat_ai-*.whl")
        folder.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive:
            found = {name: archive.read(member) for member, name in MEMBERS.items()}
        if hashlib.sha256(found[SMART_TURN_FILE]).hexdigest() != SMART_TURN_SHA256:
            raise SystemExit(
                f"{WHEEL} carries a different {SMART_TURN_FILE} than the one measured; not installed"
            )
        for name, data in found.items():
            (folder / name).write_bytes(data)
    print(f"the turn model is in {folder}")


if __name__ == "__main__":
    fetch(Path(sys.argv[1]) if len(sys.argv) > 1 else default_model_dir())
