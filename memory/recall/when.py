"""Dates in a question, grounded against the time it is asked ("last week", "in May", "on 3 June 2023").

Recall gives a small lift to what was said inside the span a question points at (``date_boost``): a
conversation's own dates are the strongest hint of which of many similar turns it means. English
forms are read, numeric dates of every script ("2023年10月13日", "2023-10-13", "13.10.2023") and
"yesterday" and "today" in a few languages; anything else yields no span and changes nothing. Spans
are generous (a month for "in May", two weeks for "last week"): the lift is a nudge, never a filter.
Dates are the asker's (``zone``, ORCH-8): "on 3 June" in Tokyo starts nine hours before it starts in
London.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, tzinfo

from ..clock import DAY

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH = (
    "(?P<month>" + "|".join([*MONTHS, *(m[:3] for m in MONTHS if m != "may"), "sept"]) + r")\.?"
)
_COUNTS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_COUNTS |= {"a couple of": 2, "couple of": 2, "a few": 3, "few": 3, "several": 4}
_UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 30.44, "year": 365.25}
_COUNT = "|".join(sorted(_COUNTS, key=len, reverse=True))

_DAY_MONTH_YEAR = (
    re.compile(rf"\b{_MONTH}\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<year>\d{{4}})\b"),
    re.compile(
        rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(?P<year>\d{{4}})\b"
    ),
)
# numeric dates of other languages (LANG-3): 2023年10月13日 (zh, ja), 2023년 10월 13일 (ko), 2023-10-13,
# 13.10.2023 (de, ru)
_NUMERIC_DAYS = (
    re.compile(
        r"(?P<year>\d{4})\s*[年년]\s*(?P<month>\d{1,2})\s*[月월]\s*(?P<day>\d{1,2})\s*[日号號일]?"
    ),
    re.compile(r"(?<![\d-])(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})(?![\d-])"),
    re.compile(r"(?<![\d.])(?P<day>\d{1,2})\.(?P<month>\d{1,2})\.(?P<year>\d{4})(?![\d.])"),
)
_NUMERIC_MONTH = re.compile(r"(?P<year>\d{4})\s*[年년]\s*(?P<month>\d{1,2})\s*[月월](?!\s*\d)")
# "yesterday" and "today" in the languages the bot hears most (English is in ``_relative``'s
# patterns) ("hier", French yesterday, is German "here": left out)
_YESTERDAY = re.compile(r"昨天|昨日|어제|\b(?:gestern|вчера|ayer|ieri|ontem)\b")
_TODAY = re.compile(r"今天|今日|오늘|\b(?:heute|сегодня|hoy|aujourd'hui|oggi|hoje)\b")
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(?P<year>\d{{4}})\b")
_MONTH_ALONE = re.compile(rf"\b(?:in|during|of|since|early|late|mid)\s+{_MONTH}\b(?!\s*\d)")
_YEAR_ALONE = re.compile(r"\b(?:in|during|of)\s+(?P<year>(?:19|20)\d\d)\b")
_AGO = re.compile(rf"\b(?P<count>\d+|{_COUNT})\s+(?P<unit>day|week|month|year)s?\s+ago\b")
_LAST = re.compile(
    r"\blast\s+(?P<what>week|weekend|month|year|night|" + "|".join(WEEKDAYS) + r")\b"
)


def spans(text: str, now: float, zone: tzinfo = UTC) -> list[tuple[float, float]]:
    """The (start, end) epoch-second spans ``text`` names, relative to ``now`` in ``zone``; [] when it names none."""
    lowered = (text or "")[:2_000].lower()
    found: list[tuple[float, float]] = []
    taken: list[
        tuple[int, int]
    ] = []  # text already read as a fuller date ("May 3, 2023" is not also "May 2023")

    def free(match: re.Match[str]) -> bool:
        return not any(a <= match.start() < b for a, b in taken)

    for pattern in _DAY_MONTH_YEAR:
        for m in pattern.finditer(lowered):
            if (
                start := _timestamp(int(m["year"]), _month(m["month"]), int(m["day"]), zone)
            ) is not None:
                found.append((start, start + DAY))
                taken.append(m.span())
    for pattern in _NUMERIC_DAYS:
        for m in pattern.finditer(lowered):
            if (
                free(m)
                and (start := _timestamp(int(m["year"]), int(m["month"]), int(m["day"]), zone))
                is not None
            ):
                found.append((start, start + DAY))
                taken.append(m.span())
    for m in _NUMERIC_MONTH.finditer(lowered):
        span = (
            _month_span(int(m["year"]), int(m["month"]), zone)
            if 1 <= int(m["month"]) <= 12
            else None
        )
        if free(m) and span is not None:
            found.append(span)
            taken.append(m.span())
    for m in _MONTH_YEAR.finditer(lowered):
        if free(m) and (span := _month_span(int(m["year"]), _month(m["month"]), zone)) is not None:
            found.append(span)
            taken.append(m.span())
    for m in _MONTH_ALONE.finditer(lowered):
        if free(m):
            found.extend(_recent_months(_month(m["month"]), now, zone))
    for m in _YEAR_ALONE.finditer(lowered):
        if free(m) and (start := _timestamp(int(m["year"]), 1, 1, zone)) is not None:
            found.append((start, _timestamp(int(m["year"]) + 1, 1, 1, zone) or start + 366 * DAY))
    return found + _relative(lowered, now, zone)


def _relative(text: str, now: float, zone: tzinfo) -> list[tuple[float, float]]:
    found = []
    if re.search(r"\b(yesterday|last night)\b", text) or _YESTERDAY.search(text):
        found.append((now - 2 * DAY, now))
    if re.search(r"\b(today|this morning|tonight)\b", text) or _TODAY.search(text):
        found.append((now - DAY, now + DAY))
    for m in _AGO.finditer(text):
        count = int(m["count"]) if m["count"].isdigit() else _COUNTS[m["count"]]
        back = min(count, 10_000) * _UNIT_DAYS[m["unit"]] * DAY
        slack = max(2 * DAY, 0.25 * back)
        found.append((now - back - slack, now - back + slack))
    for m in _LAST.finditer(text):
        what = m["what"]
        if what in WEEKDAYS:
            back = (datetime.fromtimestamp(now, zone).weekday() - WEEKDAYS.index(what)) % 7 or 7
            found.append((now - (back + 1) * DAY, now - (back - 1) * DAY))
        elif what in ("week", "weekend"):
            found.append((now - 14 * DAY, now))
        elif what == "month":
            found.append((now - 62 * DAY, now))
        elif what == "year":
            found.append((now - 730 * DAY, now - 120 * DAY))
    return found


def _month(token: str) -> int:
    token = token.rstrip(".")
    return next(i + 1 for i, name in enumerate(MONTHS) if name.startswith(token))


def _timestamp(year: int, month: int, day: int, zone: tzinfo) -> float | None:
    try:
        return datetime(year, month, day, tzinfo=zone).timestamp()
    except ValueError:  # "February 30", "year 0": not a date
        return None


def _month_span(year: int, month: int, zone: tzinfo) -> tuple[float, float] | None:
    start = _timestamp(year, month, 1, zone)
    end = _timestamp(year + (month == 12), month % 12 + 1, 1, zone)
    return None if start is None or end is None else (start, end)


def _recent_months(month: int, now: float, zone: tzinfo) -> list[tuple[float, float]]:
    """A month named without a year: that month this year and last, as far as it has begun."""
    year = datetime.fromtimestamp(now, zone).year
    return [
        span
        for y in (year, year - 1)
        if (span := _month_span(y, month, zone)) is not None and span[0] <= now
    ]


# A question that asks when ("when did Caroline go to the conference?", "Caroline什么时候去的？") and a
# turn that says a time ("two days ago I went to...", "两天前我去了..."): what answers a "when" is
# most often the turn that tells it with a time word (``when_boost``).
_ASKS_WHEN = re.compile(
    r"\b(?:when|what time|what date|what day|how long ago|which (?:day|month|year|week))\b"
    r"|什么时候|何时|哪天|哪一天|几号|哪年|哪个月|いつ|언제"
    r"|\b(?:wann|cuándo|cuando|quand|quando|когда)\b"
)
_WEEKDAY = "|".join(WEEKDAYS)
_TELLS_TIME = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|recently|earlier|later"
    rf"|(?:last|next|this|past|coming)\s+(?:week|weekend|month|year|night|morning|{_WEEKDAY})"
    rf"|{_WEEKDAY}|" + "|".join(m for m in MONTHS if m != "may") + r"|(?:19|20)\d\d)\b"
    r"|昨天|今天|明天|前天|后天|昨晚|今晚|明晚|上周|下周|本周|这周|上个?星期|下个?星期|周末"
    r"|上个?月|下个?月|这个月|去年|明年|今年|前年|[天周年]前|个月前|星期[一二三四五六日天]"
    r"|周[一二三四五六日]|\d+\s*[月号日]|昨日|今日|明日|先週|来週|先月|来月|来年|어제|오늘|내일"
    r"|\b(?:gestern|heute|morgen|letzte[nrs]?|nächste[nrs]?|vor\s+\d+|вчера|сегодня|завтра"
    r"|назад|прошл\w+|ayer|hoy|mañana|pasad[oa]|hace|demain|dernière?|ieri|oggi|domani"
    r"|scors[oa]|ontem|hoje|amanhã|passad[oa])\b",
    re.IGNORECASE,
)


def asks_when(text: str) -> bool:
    """Whether a question asks when something happened or will."""
    return bool(_ASKS_WHEN.search((text or "")[:2_000].lower()))


def tells_time(text: str) -> bool:
    """Whether a turn says a time: a relative day or week, a weekday, a month, a year."""
    return bool(_TELLS_TIME.search((text or "")[:4_000]))
