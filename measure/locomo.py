"""LoCoMo-format data: samples read from ``.json`` or gzipped ``.json.gz``, their turns, their evidence ids.

Format (shared/eval/README.md): a list of samples, each with ``sample_id``, ``conversation`` (``session_N``
lists of turns ``{speaker, dia_id "D<session>:<turn>", text, blip_caption?}`` and ``session_N_date_time``)
and ``qa`` (``{question, evidence: [dia_id], category}``). Bad data raises ``ValueError`` or ``KeyError``.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

GZIP_MAGIC = b"\x1f\x8b"
SECONDS_PER_TURN = 30.0  # turns of a session get distinct, ordered times from its start


@dataclass(frozen=True, slots=True)
class SampleTurn:
    dia_id: str
    speaker: str
    text: str
    at: float
    session: int


def load_samples(path: str | Path) -> list[dict[str, Any]]:
    data = json.loads(_read(Path(path)))
    if not isinstance(data, list) or not all(
        isinstance(s, dict) and "conversation" in s and "qa" in s for s in data
    ):
        raise ValueError(
            f"{path} is not LoCoMo-format data (a list of samples with 'conversation' and 'qa')"
        )
    ids = [str(s.get("sample_id")) for s in data]
    if len(set(ids)) != len(
        ids
    ):  # results are filed by sample id (the resume ledger): two samples must not share one
        raise ValueError(f"{path}: sample ids are not unique")
    return data


def _read(path: Path) -> bytes:
    """The file's bytes, gunzipped when they are gzip: known by the magic number, not the file name."""
    raw = path.read_bytes()
    if raw[:2] != GZIP_MAGIC:
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError) as exc:  # a corrupt or truncated download: bad data, like bad JSON
        raise ValueError(f"{path} is not a readable gzip file: {exc}") from None


def parse_session_date(text: str) -> float:
    """LoCoMo dates look like '1:56 pm on 8 May, 2023'."""
    clean = " ".join(text.replace(",", " ").split())
    for fmt in ("%I:%M %p on %d %B %Y", "%I:%M %p on %d %b %Y", "%d %B %Y"):
        try:
            return datetime.strptime(clean, fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo date {text!r}")


def evidence_ids(raw: list[Any], known: set[str]) -> list[str]:
    """Repair the few malformed ids ('D8:6; D9:17', 'D:11:26') and drop ids that name no turn."""
    out: list[str] = []
    for item in raw:
        for part in re.split(r"[;,\s]+", str(item)):
            match = re.fullmatch(r"D:?(\d+):(\d+)", part.strip())
            if match and (dia := f"D{match.group(1)}:{match.group(2)}") in known and dia not in out:
                out.append(dia)
    return out


def turns(sample: dict[str, Any]) -> list[SampleTurn]:
    """Every turn of every session in file order; a shared photo becomes part of the turn's text."""
    conv = sample["conversation"]
    found = []
    for key, value in conv.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if not match or not isinstance(value, list):
            continue
        start = parse_session_date(conv[f"{key}_date_time"])
        for i, turn in enumerate(value):
            text = turn.get("text", "")
            if turn.get("blip_caption"):
                text = f"{text} [shares a photo: {turn['blip_caption']}]"
            found.append(
                SampleTurn(
                    turn["dia_id"],
                    turn["speaker"],
                    text,
                    start + SECONDS_PER_TURN * i,
                    int(match.group(1)),
                )
            )
    if not found:
        raise ValueError(f"sample {sample.get('sample_id')!r} has no turns")
    return found
