"""When a reminder is due (ORCH-13), read from the person's words in their own zone.

    parse_when("Friday at 9", now, zone)   -> When(due_at, every, local)   or InvalidInput saying what to write
    split_request("tomorrow 8am call mum") -> ("tomorrow 8am", "call mum") (``/remind <when> <what>``)
    next_due(when, after, zone)            the next occurrence of a recurring reminder after ``after``

Read forms (English, any case; German, French and Spanish time words are read as English's,
``memory.time_words``): "in 20 minutes", "in 2 hours", "in 3 days"; "tomorrow 8am", "today at
17:30",
"tonight at 8"; "Friday at 9", "on Friday", "next Friday at 9:30"; "on 3 December at 14:30", "December 3 2027";
"at 14:30" (the next one); "every Monday (at 9)", "every day at 8", "daily at 8". A day named without an hour is
at 09:00. Times are wall-clock times where the person is: a date and an hour become an instant with the zone's
offset on that date, so "every day at 8" stays at 8 across a DST change (a recurring reminder is computed from the
local date, never by adding 24 hours).

"in N <unit>" is read whole ("in 5000 minutes": 3 days 11 hours 20 minutes from now), never cut.

What is refused, with the question to answer, and nothing stored: more than five years ahead, an
hour from 1 to 6 with no am/pm or minutes ("at 3": night or afternoon?), a time already past
("today at 8" at noon), a date already past this year ("on 3 December" on 5 December: say the
year), a date that does not exist, and words that name no time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo

from .errors import InvalidInput
from .evasions import ENGLISH_TENS, ENGLISH_UNITS
from .recall.when import MONTHS, WEEKDAYS
from .time_words import in_english

# a day named without an hour: the morning, when a reminder is still useful
DEFAULT_TIME = time(9, 0)
MAX_AHEAD_DAYS = 5 * 366  # "in 10000 days" is a typo, not a plan
_TOO_FAR = "that is more than five years away: say a nearer time."
_NUMBERS: dict[str, float] = {
    **{w: n for w, n in ENGLISH_UNITS.items() if n},
    **ENGLISH_TENS,
    "a": 1,
    "an": 1,
    "half an": 0.5,
    "a couple of": 2,
    "a few": 3,
}
_UNIT_S = {"minute": 60, "min": 60, "hour": 3600, "hr": 3600, "day": 86400, "week": 604800}
_DAY_RE = "|".join(WEEKDAYS) + "|" + "|".join(d[:3] for d in WEEKDAYS)
_MONTH_RE = "|".join(MONTHS) + "|" + "|".join(m[:3] for m in MONTHS) + "|sept"
_CLOCK = r"(?:(?:at|@)\s+)?(?P<clock>\d{1,2}(?::\d{2})?(?:\s*(?:am|pm|a\.m\.|p\.m\.)(?!\w))?|noon|midday|midnight)"
_NUMBER = r"\d+|" + "|".join(sorted(_NUMBERS, key=len, reverse=True))
_UNIT = r"(?P<unit>minutes?|mins?|hours?|hrs?|days?|weeks?)"
_DATE = (
    rf"(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m1>{_MONTH_RE})\.?"
    rf"|(?P<m2>{_MONTH_RE})\.?\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?)(?:,?\s+(?P<year>\d{{4}}))?"
)
# Each form reads a prefix of the text; the longest reading wins (so "Friday at 9" is not just "Friday").
_FORMS = (
    ("in", re.compile(rf"in\s+(?P<n>{_NUMBER})\s+{_UNIT}")),
    ("every_day", re.compile(rf"(?:every\s+day|daily|each\s+day)(?:\s+{_CLOCK})?")),
    ("every_week", re.compile(rf"(?:every|each)\s+(?P<day>{_DAY_RE})\.?(?:\s+{_CLOCK})?")),
    ("relative_day", re.compile(rf"(?P<rel>today|tonight|tomorrow)(?:\s+{_CLOCK})?")),
    ("weekday", re.compile(rf"(?:on\s+|next\s+|this\s+)?(?P<day>{_DAY_RE})\.?(?:\s+{_CLOCK})?")),
    ("date", re.compile(rf"(?:on\s+)?{_DATE}(?:\s+{_CLOCK})?")),
    ("clock", re.compile(rf"{_CLOCK}(?:\s+(?P<rel>today|tonight|tomorrow))?")),
)


@dataclass(frozen=True, slots=True)
class When:
    """An instant (UTC epoch seconds) and, for a recurring reminder, its rule: every '' (once), 'day' or
    'week'; ``local`` is the wall-clock time it recurs at, 'HH:MM'."""

    due_at: float
    every: str = ""
    local: str = ""


def split_request(text: str) -> tuple[str, str]:
    """``/remind <when> <what>``: the longest leading time expression and the rest ("to" dropped)."""
    cleaned = " ".join((text or "").split())
    found = _longest(cleaned.lower())
    if found is None:
        raise InvalidInput(
            "I couldn't tell when. Start with the time, like: /remind tomorrow 8am call mum, /remind in 20 minutes "
            "tea, /remind every Monday at 9 stand-up"
        )
    what = cleaned[found[1].end() :].strip(" ,:-")
    what = re.sub(r"^(?:to|that|about)\s+", "", what, flags=re.IGNORECASE)
    if not what:
        raise InvalidInput(
            "say what to remind you of after the time, like: /remind Friday at 9 call mum"
        )
    return cleaned[: found[1].end()], what


_ASKED = re.compile(
    r"^\W*(?:(?:please|pls|hey|ok(?:ay)?|so)[\s,]+)*(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
    r"remind\s+me\s+(?P<rest>.+?)[\s.!?]*$",
    re.IGNORECASE | re.DOTALL,
)


def asks_for_reminder(said: str) -> bool:
    """Whether ``said`` is a request to be reminded ("remind me ..."), with a time or not."""
    return _ASKED.match(" ".join((said or "").split())[:400]) is not None


def asked_reminder(said: str) -> tuple[str, str] | None:
    """A reminder asked in words, as ``(when, what)``: "remind me tomorrow at 9am to call the vet",
    "can you remind me to call the vet tomorrow at 9am?"; None when the message is no such ask or
    names no time (issue 45: the bot sets it when the model does not)."""
    found = _ASKED.match(" ".join((said or "").split())[:400])
    if found is None:
        return None
    rest = found["rest"]
    try:
        return split_request(rest)
    except InvalidInput:
        pass
    words = rest.split(" ")
    for i in range(1, len(words)):
        tail = " ".join(words[i:])
        time = _longest(tail.lower())
        if time is not None and time[1].end() == len(tail):
            what = re.sub(r"^(?:to|that|about)\s+", "", " ".join(words[:i]), flags=re.IGNORECASE)
            return (tail, what.strip(" ,")) if what.strip(" ,") else None
    return None


def parse_when(text: str, now: float, zone: tzinfo) -> When:
    """The due instant of ``text`` read in ``zone`` at ``now``; InvalidInput with the question to answer."""
    cleaned = " ".join((text or "").lower().split()).strip(" .,!")
    found = _longest(cleaned)
    if found is None or found[1].end() != len(cleaned):  # German, French, Spanish (LANG-3)
        cleaned = in_english(cleaned).strip(" .,!")
        found = _longest(cleaned)
    if found is None or found[1].end() != len(cleaned):
        raise InvalidInput(
            f"I couldn't read {text.strip()[:60]!r} as a time. Try 'tomorrow 8am', 'Friday at 9', 'in 2 hours', "
            "'on 3 December at 14:30' or 'every Monday at 9'."
        )
    form, match = found
    local_now = datetime.fromtimestamp(now, zone)
    when = _READERS[form](match, local_now, zone)
    if when.due_at <= now:
        raise InvalidInput(
            f"{text.strip()[:60]!r} has already passed where you are ({local_now:%A %H:%M}): say a later time."
        )
    if when.due_at - now > MAX_AHEAD_DAYS * 86400:
        raise InvalidInput(_TOO_FAR)
    return when


def next_due(when: When, after: float, zone: tzinfo) -> float:
    """The first occurrence of a recurring ``when`` strictly after ``after``, from the local date (DST-safe)."""
    if not when.every:
        raise InvalidInput("a one-off reminder has no next time")
    step = 1 if when.every == "day" else 7
    at = time.fromisoformat(when.local)
    day = datetime.fromtimestamp(when.due_at, zone).date()
    due = when.due_at
    while due <= after:
        day += timedelta(days=step)
        due = _instant(day, at, zone)
    return due


# -- reading one form ---------------------------------------------------------------------------------
def _longest(text: str) -> tuple[str, re.Match[str]] | None:
    best: tuple[str, re.Match[str]] | None = None
    for form, pattern in _FORMS:
        match = pattern.match(text)
        whole_words = match is not None and (
            match.end() == len(text) or not text[match.end()].isalnum()
        )
        if match and whole_words and (best is None or match.end() > best[1].end()):
            best = (form, match)
    return best


def _in(match: re.Match[str], now: datetime, zone: tzinfo) -> When:
    raw = match["n"]
    count = float(raw) if raw.isdigit() else _NUMBERS[raw]
    unit = next(s for u, s in _UNIT_S.items() if match["unit"].startswith(u))
    if count <= 0:
        raise InvalidInput("say a time in the future, like 'in 20 minutes'")
    if count * unit > MAX_AHEAD_DAYS * 86400:  # read whole, never cut to a nearer time
        raise InvalidInput(_TOO_FAR)
    return When(now.timestamp() + count * unit)


def _every_day(match: re.Match[str], now: datetime, zone: tzinfo) -> When:
    at = _clock(match["clock"]) or DEFAULT_TIME
    first = _instant(now.date(), at, zone)
    if first <= now.timestamp():
        first = _instant(now.date() + timedelta(days=1), at, zone)
    return When(first, "day", at.strftime("%H:%M"))


def _every_week(match: re.Match[str], now: datetime, zone: tzinfo) -> When:
    at = _clock(match["clock"]) or DEFAULT_TIME
    day = _coming(now, _weekday(match["day"]), at, zone)
    return When(_instant(day, at, zone), "week", at.strftime("%H:%M"))


def _relative_day(match: re.Match[str], now: datetime, zone: tzinfo) -> When:
    rel = match["rel"]
    at = _clock(match["clock"], evening=rel == "tonight") or (
        time(20) if rel == "tonight" else DEFAULT_TIME
    )
    day = now.date() + timedelta(days=1 if rel == "tomorrow" else 0)
    return When(_instant(day, at, zone))


def _weekday(name: str) -> int:
    return next(i for i, day in enumerate(WEEKDAYS) if day.startswith(name.rstrip(".")))


def _on_weekday(match: re.Match[str], now: datetime, zone: tzinfo) -> When:
    at = _clock(match["clock"]) or DEFAULT_TIME
    day = _coming(now, _weekday(match["day"]), at, zone)
    if (
        match.group(0).startswith("next")
        and day - now.date() < timedelta(days=7)
        and day.weekday() == now.weekday()
    ):
        day += timedelta(days=7)
    return When(_instant(day, at, zone))


def _on_date(match: re.Match[str], now: datetime, zone: tzinfo) -> When:
    at = _clock(match["clock"]) or DEFAULT_TIME
    month_name = (match["m1"] or match["m2"]).rstrip(".")
    month = next(i + 1 for i, m in enumerate(MONTHS) if m.startswith(month_name[:3]))
    day_number, year = int(match["d1"] or match["d2"]), int(match["year"] or now.year)
    try:
        day = date(year, month, day_number)
    except ValueError:
        raise InvalidInput(
            f"{day_number} {MONTHS[month - 1].title()} {year} is not a date"
        ) from None
    if match["year"] is None and _instant(day, at, zone) <= now.timestamp():
        raise InvalidInput(
            f"{day:%-d %B} has passed this year: say the year if you mean next year, like 'on {day:%-d %B} {year + 1}'."
        )
    return When(_instant(day, at, zone))


def _at_clock(match: re.Match[str], now: datetime, zone: tzinfo) -> When:
    at = _clock(match["clock"], evening=match["rel"] == "tonight")
    assert at is not None  # the pattern requires a clock
    day = now.date() + timedelta(days=1 if match["rel"] == "tomorrow" else 0)
    due = _instant(day, at, zone)
    if match["rel"] is None and due <= now.timestamp():
        due = _instant(day + timedelta(days=1), at, zone)  # "at 8" said at 10: the next 8 o'clock
    return When(due)


_READERS = {
    "in": _in,
    "every_day": _every_day,
    "every_week": _every_week,
    "relative_day": _relative_day,
    "weekday": _on_weekday,
    "date": _on_date,
    "clock": _at_clock,
}


def _coming(now: datetime, weekday: int, at: time, zone: tzinfo) -> date:
    """The next ``weekday`` whose ``at`` is still ahead (today when it is that day and the time is to come)."""
    day = now.date() + timedelta(days=(weekday - now.weekday()) % 7)
    if _instant(day, at, zone) <= now.timestamp():
        day += timedelta(days=7)
    return day


def _clock(text: str | None, *, evening: bool = False) -> time | None:
    """'9' -> 09:00, '8pm' -> 20:00, '14:30', 'noon'; an hour from 1 to 6 alone is asked about (night or day?)."""
    if not text:
        return None
    text = text.replace(".", "").replace(" ", "")
    named = {"noon": time(12), "midday": time(12), "midnight": time(0)}
    if text in named:
        return named[text]
    match = re.fullmatch(r"(\d{1,2})(?::(\d{2}))?(am|pm)?", text)
    if match is None:
        raise InvalidInput(f"I couldn't read {text!r} as a time of day")
    hour, minute, half = int(match[1]), int(match[2] or 0), match[3]
    if half:
        if not 1 <= hour <= 12:
            raise InvalidInput(f"{text} is not a time: with am/pm the hour is 1 to 12")
        hour = hour % 12 + (12 if half == "pm" else 0)
    elif evening and 1 <= hour <= 11:
        hour += 12
    elif 1 <= hour <= 6 and match[2] is None:
        raise InvalidInput(
            f"at {hour} in the morning or the afternoon? Say {hour}am or {hour}pm (or {hour + 12}:00)."
        )
    if hour > 23 or minute > 59:
        raise InvalidInput(f"{text} is not a time of day")
    return time(hour, minute)


def _instant(day: date, at: time, zone: tzinfo) -> float:
    """A local date and wall-clock time as an instant. An hour the clocks skip (spring forward) reads as the same
    wall time on the old offset (02:30 -> 03:30); an hour that happens twice (fall back), its first time."""
    return datetime.combine(day, at, tzinfo=zone).timestamp()
