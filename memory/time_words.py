"""A reminder's time said in German, French or Spanish, read as the English forms
``memory.reminder_time`` knows (LANG-3): the real 1.5B set a German user's reminder with "am 3.
Dezember um 9 Uhr", and the tool's English error was all the person read.

    in_english("am 3. Dezember um 9 Uhr")   -> "on 3 december at 9"
    in_english("demain à 8h30")             -> "tomorrow at 8:30"
    in_english("el lunes a las 9")          -> "on monday at 9"

Word for word, on lower-cased text: the words of a time (days, months, today and tomorrow, "in N
units", every day or week, "at") and the clock's own forms ("9 Uhr", "8h30"). Anything else stays as
it was, so an English time, or words that name no time, read as before.
"""

from __future__ import annotations

import re

from .recall.when import MONTHS, WEEKDAYS

_DAYS = {
    "de": ("montag", "dienstag", "mittwoch", "donnerstag", "freitag", "samstag", "sonntag"),
    "fr": ("lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche"),
    "es": ("lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"),
}
_MONTHS = {
    "de": "januar februar märz april mai juni juli august september oktober november dezember",
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre décembre",
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre "
    "diciembre",
}
# several words first: "heute abend" before "heute"
_PHRASES = {
    "heute abend": "tonight",
    "heute nacht": "tonight",
    "jeden tag": "every day",
    "ce soir": "tonight",
    "cette nuit": "tonight",
    "chaque jour": "every day",
    "tous les jours": "every day",
    "esta noche": "tonight",
    "cada día": "every day",
    "todos los días": "every day",
    "a las": "at",
    "a la": "at",
    "de la mañana": "am",
    "de la tarde": "pm",
    "de la noche": "pm",
}
_WORDS = {
    # German
    "heute": "today",
    "morgen": "tomorrow",
    "täglich": "daily",
    "um": "at",
    "jeden": "every",
    "jede": "every",
    "nächsten": "next",
    "nächste": "next",
    "diesen": "this",
    "minuten": "minutes",
    "stunde": "hour",
    "stunden": "hours",
    "tag": "day",
    "tagen": "days",
    "woche": "week",
    "wochen": "weeks",
    # French
    "aujourd'hui": "today",
    "demain": "tomorrow",
    "dans": "in",
    "à": "at",
    "heure": "hour",
    "heures": "hours",
    "jour": "day",
    "jours": "days",
    "semaine": "week",
    "semaines": "weeks",
    "chaque": "every",
    "prochain": "next",
    "midi": "noon",
    "minuit": "midnight",
    # Spanish
    "hoy": "today",
    "mañana": "tomorrow",
    "en": "in",
    "minutos": "minutes",
    "hora": "hour",
    "horas": "hours",
    "día": "day",
    "días": "days",
    "semana": "week",
    "semanas": "weeks",
    "cada": "every",
    "próximo": "next",
    "mediodía": "noon",
    "medianoche": "midnight",
}
_NUMBERS = {
    "ein": "1", "eine": "1", "einer": "1", "einem": "1", "zwei": "2", "drei": "3", "vier": "4",
    "fünf": "5", "zehn": "10", "zwanzig": "20", "dreißig": "30",
    "un": "1", "une": "1", "deux": "2", "trois": "3", "quatre": "4", "cinq": "5", "dix": "10",
    "vingt": "20", "trente": "30",
    "uno": "1", "una": "1", "dos": "2", "tres": "3", "cuatro": "4", "cinco": "5", "diez": "10",
    "veinte": "20", "treinta": "30",
}  # fmt: skip
for _days in _DAYS.values():
    _WORDS.update(zip(_days, WEEKDAYS, strict=True))
for _months in _MONTHS.values():
    _WORDS.update(zip(_months.split(), MONTHS, strict=True))
_WORDS.update(_NUMBERS)
_PHRASE = re.compile(r"\b(?:" + "|".join(sorted(_PHRASES, key=len, reverse=True)) + r")\b")
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_DAY_OR_DATE = "|".join([*WEEKDAYS, r"\d{1,2}\s"])
# "am 3." / "am Freitag", "le 3", "el lunes", "el 3 de diciembre": a day named, English's "on"
_ON = re.compile(rf"^(?:am|le|el)\s+(?=(?:{_DAY_OR_DATE}))")
_FORMS = (
    (re.compile(r"\b(\d{1,2})\.(?=\s*[^\W\d_])"), r"\1"),  # "3. december" -> "3 december"
    (re.compile(r"\b(\d{1,2})\s+de\s+(?=[^\W\d_])"), r"\1 "),  # "3 de december"
    (re.compile(r"\b(\d{1,2})\s*h\s*(\d{2})\b"), r"\1:\2"),  # "8h30" -> "8:30"
    (re.compile(r"\b(\d{1,2})\s*h\b"), r"\1"),  # "9h" -> "9"
    (re.compile(r"\s*\buhr\b"), ""),  # "9 uhr" -> "9"
)


def in_english(text: str) -> str:
    """``text`` (lower-cased) with the time words of German, French and Spanish in English."""
    said = " ".join(text.lower().split())
    said = _PHRASE.sub(lambda m: _PHRASES[m.group(0)], said)
    said = _WORD.sub(lambda m: _WORDS.get(m.group(0), m.group(0)), said)
    for pattern, english in _FORMS:
        said = pattern.sub(english, said)
    return _ON.sub("on ", said)
