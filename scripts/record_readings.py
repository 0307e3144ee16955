"""Records what a real model reads, in English, for each fact of the two paraphrase suites
(``tests.paraphrase_support``) written in another language (``memory.write.glosses.foreign``: the
facts the write path asks it to read, ``memory.jobs.base``), for the tests to replay (the default
run never calls a model):

    PYTHONPATH=. OPENAI_BASE_URL=http://127.0.0.1:8092/v1 OPENAI_API_KEY=local \\
        python scripts/record_readings.py qwen2.5-coder-1.5b-instruct tests/memory/data/forget_readings_1.5b.json

(``../shared/tools/real-model serve 1.5b 8092`` serves that model.) The file keeps the hash of the prompt: answers to
another prompt measure nothing, so the test refuses them. Answers already in the file, to the same prompt by the
same model, are kept.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

from openai import OpenAI

import prompts
from memory.write.glosses import foreign
from tests.paraphrase_support import HOLDOUT, LANGUAGES, SUITE, suite

OWN_NAMES = frozenset({"alice"})  # the suites' person


def sentences() -> list[str]:
    """Every sentence of the suites a later fact could be (the rewordings and the unrelated facts),
    and the forgotten facts themselves (a tombstone laid in another language is read in English
    too: ``memory.jobs.readings``)."""
    found = []
    for path in (SUITE, HOLDOUT, LANGUAGES):
        facts, unrelated = suite(path)
        found += [fact for fact, _ in facts]
        found += [text for _, rewordings in facts for _, text in rewordings] + unrelated
    return list(dict.fromkeys(found))


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def main(model: str, path: Path) -> None:
    client, system = OpenAI(), prompts.render("gloss")
    old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    same = old.get("model") == model and old.get("prompt_sha256") == sha256(system)
    known, readings = old.get("readings", {}) if same else {}, {}
    for text in (t for t in sentences() if foreign(t, OWN_NAMES)):
        if text in known:
            readings[text] = known[text]
        else:
            start = time.monotonic()
            reply = client.chat.completions.create(
                model=model,
                temperature=0.0,
                max_tokens=80,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": text}],
            )
            readings[text] = reply.choices[0].message.content or ""
            print(f"{time.monotonic() - start:5.1f} s  {text}", file=sys.stderr)
    record = {"model": model, "prompt_sha256": sha256(system), "readings": readings}
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
