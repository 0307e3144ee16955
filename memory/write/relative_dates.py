"""Relative dates in a learned fact, resolved against when its lines were written (issue 45): a fact
read weeks later must not say "last month". The extraction prompt asks the model to resolve them; a
model that copies the line as it was said ("I moved to York last month") is resolved here, in
English, against the newest of the fact's source lines in the speaker's zone (ORCH-8):

    "yesterday", "today", "tonight", "tomorrow"       ->  "on 20 October 2026" ...
    "last night", "this morning", "next evening"      ->  "on the night of 20 October 2026"
    "last week", "this week", "next week"             ->  "in the week of 12 October 2026"
    "last month", "this month", "next month"          ->  "in September 2026"
    "last year", "this year", "next year"             ->  "in 2025"
    "last Friday", "next Friday"                      ->  "on Friday 16 October 2026"
    "3 days ago", "two weeks ago", "five years ago"   ->  "on ...", "around ...", "in 2021"

After "since", "until", "before", "after", "from", "by", "for", "on", "in" or "during" the
"on" or "in" is left out ("since 2025", "all for 7 December 2026"). Other languages are left as
they were written (the prompt's resolution is all they get)."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, tzinfo

from ..recall.when import _COUNTS, MONTHS, WEEKDAYS

_LINKS = r"(?:(?P<link>since|until|till|before|after|from|by|for|on|in|during)\s+)?"
_COUNT = "|".join(sorted(_COUNTS, key=len, reverse=True))
_PHRASE = re.compile(
    _LINKS
    + r"\b(?:(?P<day>yesterday|today|tonight|tomorrow)"
    + r"|(?P<part>this|last|next)\s+"
    + r"(?P<span>night|morning|afternoon|evening|week|weekend|month|year|"
    + "|".join(WEEKDAYS)
    + r")"
    + rf"|(?P<count>\d+|{_COUNT})\s+(?P<unit>day|week|month|year)s?\s+ago)\b",
    re.IGNORECASE,
)


def resolved(text: str, at: float | None, zone: tzinfo) -> str:
    """``text`` with its English relative dates written out, as of ``at`` (None: left as it is)."""
    if at is None or not text:
        return text
    today = datetime.fromtimestamp(at, zone).date()

    def written(match: re.Match[str]) -> str:
        when = _when(match, today)
        if when is None:
            return match.group()
        link = match["link"]
        said = when if link is None else f"{link} {when.split(' ', 1)[1]}"
        if link is not None and link.lower() in ("on", "in") and when.startswith(("on ", "in ")):
            said = when  # "on tomorrow" was never English: the phrase's own word
        return said[:1].upper() + said[1:] if match.group()[:1].isupper() else said

    return _PHRASE.sub(written, text)


def _when(match: re.Match[str], today: date) -> str | None:
    """The phrase as "on <day>", "in <month>", ... (None: a phrase left as it is, "this Friday")."""
    if match["day"]:
        shift = {"yesterday": -1, "today": 0, "tonight": 0, "tomorrow": 1}[match["day"].lower()]
        return f"on {_day(today + timedelta(days=shift))}"
    if match["count"]:
        return _ago(match["count"].lower(), match["unit"].lower(), today)
    part, span = match["part"].lower(), match["span"].lower()
    step = {"last": -1, "this": 0, "next": 1}[part]
    if span in WEEKDAYS:
        return None if part == "this" else f"on {_weekday(today, WEEKDAYS.index(span), step)}"
    if span in ("night", "morning", "afternoon", "evening"):
        return f"on the {span} of {_day(today + timedelta(days=step))}"
    if span in ("week", "weekend"):
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
        return f"in the week of {_day(monday)}"
    if span == "month":
        return f"in {_month(today, step)}"
    return f"in {today.year + step}"


def _ago(count: str, unit: str, today: date) -> str:
    n = min(int(count) if count.isdigit() else _COUNTS[count], 5_000)
    if unit == "day":
        return f"on {_day(today - timedelta(days=n))}"
    if unit == "week":
        return f"around {_day(today - timedelta(weeks=n))}"
    if unit == "month":
        return f"in {_month(today, -n)}"
    return f"in {today.year - n}"


def _day(d: date) -> str:
    return f"{d.day} {MONTHS[d.month - 1].capitalize()} {d.year}"


def _month(today: date, step: int) -> str:
    index = today.year * 12 + today.month - 1 + step
    return f"{MONTHS[index % 12].capitalize()} {index // 12}"


def _weekday(today: date, weekday: int, step: int) -> str:
    """The named weekday before (``step`` -1) or after (1) ``today``, never today itself."""
    days = (
        (today.weekday() - weekday) % 7 or 7 if step < 0 else (weekday - today.weekday()) % 7 or 7
    )
    d = today + timedelta(days=step * days)
    return f"{WEEKDAYS[d.weekday()].capitalize()} {_day(d)}"
