"""Words in scripts written without spaces between them (LANG-1): Chinese, Japanese, Thai, Lao,
Khmer, Burmese; and Korean, whose spaced words carry their particles ("학교에": at school).

Nothing here knows a dictionary. A run of such characters is read as its overlapping pairs ("我喜欢猫"
-> "我喜", "喜欢", "欢猫"), the way CJK search engines without a segmenter do: a two-character word is one
pair, a longer one its pairs in a row, and a lone character stays itself. The word index
(``memory.storage.tokenizer``) and the leak check, which reads words through it, see these pairs;
``spaced`` writes them out for readers that split on whitespace or ``\\w+``: retrieval's
short-question test, the content words of ``memory.write.wording`` (a fact and its line, the "said
again" check), tombstone marks and manners' word overlap.
"""

from __future__ import annotations

import re

# Han (with extensions and compatibility forms), kana (with halfwidth katakana), Hangul, Thai, Lao,
# Khmer, Myanmar
CHARS = (
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
    "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"
    "\u0e00-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u1000-\u109f"
    "\U00020000-\U0002fa1f"
)
RUN = re.compile(f"[{CHARS}]+")
HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
# Characters that carry grammar more than meaning: Chinese particles, pronouns and question words,
# Japanese kana particles and endings. A query's pair of two of them ("什么", "时候", "ました") is no word
# worth searching, and none of them is searched alone.
LITTLE = frozenset(
    "的了是在我你他她它们吗呢吧啊和与也都就还又很么什哪谁怎时候有没不这那个一上下去来说要会能可以过着把被给让对为从到"
    "はがをにのでともへかねよなたしてすまいうるれ"
)


def has_unspaced(text: str) -> bool:
    return RUN.search(text) is not None


def grams(run: str) -> list[str]:
    """A run's overlapping pairs, or the run itself when it is one character."""
    return [run] if len(run) < 2 else [run[i : i + 2] for i in range(len(run) - 1)]


def query_words(pairs: list[str]) -> list[str]:
    """What a query searches for, given the pairs (and lone characters) of its unspaced words.

    A Han character is a word or a root on its own, and a question and the turn it asks about rarely
    split their words alike ("露营" and "营地", "画画" and "绘画"): Chinese and Japanese ideographs are
    searched one by one, the little ones left out (measured on the Chinese dev set: hybrid R@10 77.2
    one by one, 75.9 by pairs). Kana, Hangul and Thai letters say little alone: they are searched as
    pairs, but for pairs of two little ones ("ました")."""
    out: list[str] = []
    for pair in pairs:
        han = [c for c in pair if HAN.match(c)]
        if han:
            out.extend(c for c in han if c not in LITTLE)
        elif not all(c in LITTLE for c in pair):
            out.append(pair)
    return list(dict.fromkeys(out))


def spaced(text: str, *, little: bool = True) -> str:
    """``text`` with each unspaced run written as its pairs between spaces, for readers that split
    on spaces or ``\\w+``: "我喜欢猫and dogs" -> " 我喜 喜欢 欢猫 and dogs". Text without such runs comes back
    as it is. ``little=False``: pairs of two grammar characters ("什么") left out, as stop
    words are."""
    if not has_unspaced(text):
        return text

    def pairs(run: re.Match[str]) -> str:
        kept = [p for p in grams(run.group()) if little or not all(c in LITTLE for c in p)]
        return " " + " ".join(kept) + " "

    return RUN.sub(pairs, text)


def is_pair(word: str) -> bool:
    """A word ``spaced`` made: a pair (or a lone character) of an unspaced script."""
    return len(word) <= 2 and RUN.fullmatch(word) is not None
