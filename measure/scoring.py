"""How an answer to a LoCoMo-format question is scored (EVAL-2): token F1, abstention, a judge's
verdict.

Token F1 is LoCoMo's metric (Maharana et al. 2024, ``task_eval/evaluation.py``): both texts
normalised (lowercase, commas and other punctuation dropped, the articles "a", "an", "the" and the
word "and" dropped, whitespace collapsed), then the harmonic mean of the token precision and recall
of their overlap (a token counted as often as it is in both). As there, a multi-hop answer (category
1) is split at commas and each gold part scored against its best answer part, averaged; an
open-domain gold (category 3) counts up to its first ";". LoCoMo also stems each token (Porter);
this does not, so an answer with "running" for a gold "run" scores lower here than there.

Category 5 (adversarial: the question gives a fact to the wrong speaker) has no answer to match: the
answer is right (1.0) when it abstains, that is says it does not know or that it was not mentioned
(``abstains``)."""

from __future__ import annotations

import re
import string
from collections import Counter

ADVERSARIAL = 5
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation + "‘’“”–—…")
# What an answer that abstains says: LoCoMo's own two phrases and the ways a chat model says it, in
# the dev sets' languages (English, Chinese).
_ABSTAINS = re.compile(
    r"\b(no information( is)? available|not mentioned|(was|were|is|are)n'?t mentioned|"
    r"never mentioned|(did|do|does)(n'?t| not) (mention|say|know|remember|recall)|"
    r"(don'?t|do not|doesn'?t) have (any )?"
    r"(information|record|memory|details)|no (record|mention|memory|information|details)|"
    r"(can'?t|cannot|could ?n'?o?t) (recall|remember|find|say)|not sure|unknown|i have no idea)\b"
    r"|不知道|没有提到|未提到|未提及|没提到|不记得|没有相关|没有.*信息",
    re.IGNORECASE,
)
VERDICTS = ("CORRECT", "WRONG")


def normalise_answer(text: str) -> str:
    """LoCoMo's ``normalize_answer``: lowercase, no commas, punctuation, articles or "and"; single
    spaces."""
    text = text.replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(answer: str, gold: str) -> float:
    """Token-overlap F1 of the normalised texts (0.0 when they share no token)."""
    said, wanted = normalise_answer(answer).split(), normalise_answer(gold).split()
    same = sum((Counter(said) & Counter(wanted)).values())
    if not same:
        return 0.0
    precision, recall = same / len(said), same / len(wanted)
    return 2 * precision * recall / (precision + recall)


def multi_f1(answer: str, gold: str) -> float:
    """Category 1: each comma-separated part of the gold against its best part of the answer,
    averaged."""
    parts = [p.strip() for p in answer.split(",")]
    golds = [g.strip() for g in gold.split(",")]
    return sum(max(token_f1(p, g) for p in parts) for g in golds) / len(golds)


def abstains(answer: str) -> bool:
    """The answer says it does not know, or that the conversation never said so."""
    return bool(_ABSTAINS.search(answer.replace("’", "'")))


def score_answer(answer: str, gold: str, category: int) -> float:
    """The question's F1 as LoCoMo scores its category; 1.0 or 0.0 (abstained or not) for category
    5."""
    if category == ADVERSARIAL:
        return 1.0 if abstains(answer) else 0.0
    if category == 1:
        return multi_f1(answer, gold)
    if category == 3:
        gold = gold.split(";")[0]
    return token_f1(answer, gold)


def verdict(text: str) -> str | None:
    """The judge's label: the last of CORRECT or WRONG it wrote (after its one sentence of reasons);
    None if neither."""
    found = re.findall(r"\b(CORRECT|WRONG)\b", text.upper())
    return found[-1] if found else None
