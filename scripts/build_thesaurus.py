"""Makes memory/assets/thesaurus.tsv.gz from the bundled MiniLM and its tokenizer's vocabulary (memory.recall.thesaurus).

    .venv/bin/python scripts/build_thesaurus.py [OUT]

About 20 s on two cores; the same model and vocabulary give the same file.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))

import memory.recall.thesaurus as thesaurus  # noqa: E402
from memory.storage.embeddings import ASSETS, OnnxMiniLM  # noqa: E402
from memory.storage.fts import STOP_WORDS, FtsQueryBuilder  # noqa: E402
from memory.storage.pgsearch import tokenizer_db  # noqa: E402


def main(out: Path) -> None:
    tokens = json.loads((ASSETS / "minilm-tokenizer.json").read_text(encoding="utf-8"))["model"][
        "vocab"
    ]
    words = thesaurus.vocabulary(sorted(tokens, key=tokens.get), STOP_WORDS)
    model = OnnxMiniLM()
    vectors = np.concatenate([model.embed(words[i : i + 256]) for i in range(0, len(words), 256)])
    lines = thesaurus.build(words, vectors, FtsQueryBuilder(tokenizer_db(), "message_fts").stem)
    # no name, no time in the gzip header: the same words give the same bytes
    with out.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
        f.write(("\n".join(lines) + "\n").encode("utf-8"))
    print(f"{out}: {len(lines)} words with neighbours of {len(words)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else thesaurus.THESAURUS)
