"""A German fact in the first person told about its person (issue 45, LANG-3): "Ich arbeite als
Krankenpfleger" filed as said reads to a chat model as its own life, as English did. So, as
``third_person`` does for English and Chinese:

    "Ich arbeite als Krankenpfleger."              ->  "Jonas arbeitet als Krankenpfleger."
    "Mein Zahnarzttermin ist am 3. Dezember."      ->  "Jonas' Zahnarzttermin ist am 3. Dezember."
    "Seit Mai wohne ich in München."               ->  "Seit Mai wohnt Jonas in München."
    "Merk dir, dass ich allergisch gegen Erdnüsse bin."  ->  "Jonas ist allergisch gegen Erdnüsse."

The verb next to "ich" (after it, or before it when the sentence starts with something else) agrees:
"bin" -> "ist", "habe" -> "hat", the common strong verbs by a table ("fahre" -> "fährt"), and a
regular "-e" form by its stem ("wohne" -> "wohnt", "arbeite" -> "arbeitet"); modals and past forms
are the same for both. "mein-" is the name's ("Jonas'", "Lenas"); "mich" and "mir" the name. A
sentence whose verb cannot be found is left as said (the snapshot still labels whose it is)."""

from __future__ import annotations

import re

_GERMAN = re.compile(r"\b(?:ich|mein(?:e[mnrs]?)?|mich|mir)\b", re.IGNORECASE)
_TOKEN = re.compile(r"[^\W\d_]+")
_REQUEST = re.compile(r"^\W*merke?\s+dir\s*,?\s*(?:dass\s+)?", re.IGNORECASE)
_SAME_WORDS = (  # the same after "ich" and after a name: modals, past forms
    "kann muss will darf soll mag möchte war hatte wurde ging kam sah fuhr lief aß trank sprach "
    "wusste konnte musste wollte durfte sollte mochte"
)
_SAME = frozenset(_SAME_WORDS.split())
_IRREGULAR = {
    "bin": "ist",
    "habe": "hat",
    "hab": "hat",
    "werde": "wird",
    "weiß": "weiß",
    "lese": "liest",
    "esse": "isst",
    "sehe": "sieht",
    "fahre": "fährt",
    "laufe": "läuft",
    "schlafe": "schläft",
    "spreche": "spricht",
    "nehme": "nimmt",
    "gebe": "gibt",
    "helfe": "hilft",
    "treffe": "trifft",
    "trage": "trägt",
    "halte": "hält",
    "lasse": "lässt",
    "vergesse": "vergisst",
    "wasche": "wäscht",
    "backe": "bäckt",
    "tue": "tut",
}


def german(text: str) -> bool:
    """A sentence holding the German first person ("ich", "mein-", "mich", "mir")."""
    return _GERMAN.search(text) is not None


def told(text: str, name: str) -> str:
    """``text`` about ``name``; as said when no verb next to "ich" is found."""
    asked = _REQUEST.match(text)
    if asked:
        text = _verb_second(text[asked.end() :])
    tokens = list(_TOKEN.finditer(text))
    out, at = [], 0
    for i, token in enumerate(tokens):
        word = token.group()
        low = word.lower()
        if low == "ich":
            verb = _verb_of(tokens, i)
            if verb is None:
                return text if not asked else _capital(text)
            said = name
        elif low in ("mich", "mir"):
            said = name
        elif re.fullmatch(r"mein(?:e[mnrs]?)?", low):
            said = _genitive(name)
        else:
            continue
        out.append(text[at : token.start()] + said)
        at = token.end()
    out.append(text[at:])
    result = "".join(out)
    return _agreed(result, tokens, text)


def _verb_of(tokens: list[re.Match[str]], i: int) -> int | None:
    """The index of the verb "ich" goes with: the word after it, or the one before it."""
    for j in (i + 1, i - 1):
        if 0 <= j < len(tokens) and _agree(tokens[j].group()) is not None:
            return j
    return None


def _agreed(result: str, tokens: list[re.Match[str]], text: str) -> str:
    """``result`` with the verb beside each "ich" of ``text`` made third person."""
    for i, token in enumerate(tokens):
        if token.group().lower() != "ich":
            continue
        j = _verb_of(tokens, i)
        if j is None:
            continue
        verb = tokens[j].group()
        result = re.sub(rf"\b{re.escape(verb)}\b", _agree(verb) or verb, result, count=1)
    return result


def _agree(verb: str) -> str | None:
    """The third person of a first-person present ``verb``; None when it is no such verb."""
    low = verb.lower()
    if not verb.islower():
        return None
    if low in _SAME:
        return verb
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if len(low) > 3 and low.endswith("e") and not low.endswith(("ee", "ie")):
        stem = low[:-1]
        doubled = stem.endswith(("t", "d")) or re.search(r"[^aeiouäöülrh]n$", stem)
        return stem + ("et" if doubled else "t")
    return None


def _verb_second(clause: str) -> str:
    """A "dass" clause as a main one: its last word, the verb, after "ich" ("ich allergisch ...
    bin." -> "ich bin allergisch ...")."""
    found = re.fullmatch(r"\s*(ich)\s+(.*?)\s+([^\W\d_]+)([.!]?)\s*", clause, re.IGNORECASE)
    if found is None or _agree(found[3]) is None:
        return clause
    return f"{found[1]} {found[3]} {found[2]}{found[4]}"


def _genitive(name: str) -> str:
    return f"{name}'" if name[-1:].lower() in "sßxz" else f"{name}s"


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
