"""ORCH-13: reminder times read in the person's own zone, in two zones; ambiguous and past times are questions,
and a recurring reminder keeps its wall-clock time across a DST change."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from memory.errors import InvalidInput
from memory.reminder_time import next_due, parse_when, split_request

LISBON, NEW_YORK = ZoneInfo("Europe/Lisbon"), ZoneInfo("America/New_York")
# Thursday 26 November 2026, 22:00 where the person is (each zone its own instant)
NOW = {zone: datetime(2026, 11, 26, 22, 0, tzinfo=zone).timestamp() for zone in (LISBON, NEW_YORK)}

TABLE = [
    ("Friday at 9", "2026-11-27 09:00", ""),
    ("friday at 9am", "2026-11-27 09:00", ""),
    ("on Friday at 9:30", "2026-11-27 09:30", ""),
    ("tomorrow 8am", "2026-11-27 08:00", ""),
    ("tomorrow at 20:15", "2026-11-27 20:15", ""),
    ("in 2 hours", "2026-11-27 00:00", ""),
    ("in 20 minutes", "2026-11-26 22:20", ""),
    ("in half an hour", "2026-11-26 22:30", ""),
    (
        "in fifteen minutes",
        "2026-11-26 22:15",
        "",
    ),  # every number word, one table with the leak check
    ("in forty minutes", "2026-11-26 22:40", ""),
    ("in seven days", "2026-12-03 22:00", ""),
    ("in 3 days", "2026-11-29 22:00", ""),
    ("tonight at 11", "2026-11-26 23:00", ""),
    ("on 3 December at 14:30", "2026-12-03 14:30", ""),
    ("3rd of december at 2pm", "2026-12-03 14:00", ""),
    ("December 3 2027", "2027-12-03 09:00", ""),
    ("at 23:30", "2026-11-26 23:30", ""),
    ("at 8", "2026-11-27 08:00", ""),  # 8 o'clock has passed today: the next one
    ("Thursday at 10", "2026-12-03 10:00", ""),  # today is Thursday and 10:00 has passed: next week
    ("every Monday", "2026-11-30 09:00", "week"),
    ("every Monday at 9", "2026-11-30 09:00", "week"),
    ("every day at 8", "2026-11-27 08:00", "day"),
    ("daily at 7:45pm", "2026-11-27 19:45", "day"),
    # LANG-3: German, French and Spanish time words (the real 1.5B passed "am 3. Dezember um 9 Uhr")
    ("am 3. Dezember um 9 Uhr", "2026-12-03 09:00", ""),
    ("morgen um 8:30", "2026-11-27 08:30", ""),
    ("heute Abend um 23 Uhr", "2026-11-26 23:00", ""),
    ("in einer Stunde", "2026-11-26 23:00", ""),
    ("in 20 Minuten", "2026-11-26 22:20", ""),
    ("jeden Montag um 9", "2026-11-30 09:00", "week"),
    ("am Freitag um 18 Uhr", "2026-11-27 18:00", ""),
    ("demain à 8h30", "2026-11-27 08:30", ""),
    ("le 3 décembre à 14h30", "2026-12-03 14:30", ""),
    ("tous les jours à 7h", "2026-11-27 07:00", "day"),
    ("dans 2 heures", "2026-11-27 00:00", ""),
    ("mañana a las 9", "2026-11-27 09:00", ""),
    ("el 3 de diciembre a las 9", "2026-12-03 09:00", ""),
    ("en 10 minutos", "2026-11-26 22:10", ""),
    ("cada día a las 8", "2026-11-27 08:00", "day"),
]


@pytest.mark.parametrize("zone", [LISBON, NEW_YORK], ids=["Lisbon", "New York"])
@pytest.mark.parametrize(("said", "local", "every"), TABLE)
def test_a_time_is_read_in_the_persons_zone(said, local, every, zone):
    when = parse_when(said, NOW[zone], zone)
    assert datetime.fromtimestamp(when.due_at, zone).strftime("%Y-%m-%d %H:%M") == local
    assert when.every == every


@pytest.mark.parametrize(
    ("said", "ahead"),
    [
        ("in 5000 minutes", 3 * 86400 + 11 * 3600 + 20 * 60),
        ("in 4000 hours", 4000 * 3600),
        ("in 3661 minutes", 3661 * 60),
        ("in 1830 days", 1830 * 86400),
        ("in 261 weeks", 261 * 7 * 86400),
    ],
)
def test_an_amount_within_five_years_is_read_whole_never_cut(said, ahead):
    """Issue 44: amounts were cut to 3,660 units ("in 5000 minutes" fired 22 hours early)."""
    assert parse_when(said, NOW[LISBON], LISBON).due_at == NOW[LISBON] + ahead


def test_the_same_words_are_different_instants_in_two_zones():
    lisbon = parse_when("Friday at 9", NOW[LISBON], LISBON).due_at
    new_york = parse_when("Friday at 9", NOW[LISBON], NEW_YORK).due_at
    assert new_york - lisbon == 5 * 3600


@pytest.mark.parametrize("zone", [LISBON, NEW_YORK], ids=["Lisbon", "New York"])
@pytest.mark.parametrize(
    ("said", "question"),
    [
        ("at 3", "3am or 3pm"),
        ("Friday at 4", "4am or 4pm"),
        ("today at 8", "already passed"),
        ("on 3 November", "say the year"),
        ("on 31 February at 10", "not a date"),
        ("in 0 minutes", "future"),
        ("whenever you like", "couldn't read"),
        ("Friday at 9 or so", "couldn't read"),
        ("at 25:00", "not a time"),
        ("in 9999 weeks", "five years"),
        ("in 99999999 minutes", "five years"),
        ("in 3661 days", "five years"),
        ("in 1831 days", "five years"),
        ("in " + "9" * 400 + " minutes", "five years"),
        ("morgen um 3", "3am or 3pm"),  # the same questions in every language
        ("heute um 8", "already passed"),
        ("irgendwann mal", "couldn't read"),
        ("am 9", "couldn't read"),
    ],
)
def test_an_ambiguous_past_or_unreadable_time_is_a_question(said, question, zone):
    with pytest.raises(InvalidInput, match=question):
        parse_when(said, NOW[zone], zone)


@pytest.mark.parametrize(
    ("request_text", "when", "what"),
    [
        ("tomorrow 8am to call mum", "tomorrow 8am", "call mum"),
        ("Friday at 9 call mum", "Friday at 9", "call mum"),
        ("every Monday at 9 stand-up", "every Monday at 9", "stand-up"),
        ("in 20 minutes: tea", "in 20 minutes", "tea"),
        ("on 3 December at 14:30 dentist", "on 3 December at 14:30", "dentist"),
        ("sunday buy sunscreen", "sunday", "buy sunscreen"),
    ],
)
def test_remind_splits_the_time_from_what_to_remind(request_text, when, what):
    assert split_request(request_text) == (when, what)


@pytest.mark.parametrize("request_text", ["call mum", "tomorrow", "sunscreen on friday"])
def test_remind_without_a_leading_time_or_without_a_what_is_refused(request_text):
    with pytest.raises(InvalidInput):
        split_request(request_text)


@pytest.mark.parametrize(
    ("zone", "first", "expected"),
    [
        # Lisbon leaves summer time on 25 October 2026: 08:00 is 07:00 UTC before, 08:00 UTC after
        (
            LISBON,
            datetime(2026, 10, 24, 8, 0),
            ["2026-10-25 08:00 +0000", "2026-10-26 08:00 +0000"],
        ),
        # New York leaves it on 1 November 2026: 08:00 is 12:00 UTC before, 13:00 UTC after
        (
            NEW_YORK,
            datetime(2026, 10, 31, 8, 0),
            ["2026-11-01 08:00 -0500", "2026-11-02 08:00 -0500"],
        ),
        # and enters it on 8 March 2026
        (
            NEW_YORK,
            datetime(2026, 3, 7, 8, 0),
            ["2026-03-08 08:00 -0400", "2026-03-09 08:00 -0400"],
        ),
    ],
)
def test_a_daily_reminder_keeps_its_wall_clock_time_across_a_dst_change(zone, first, expected):
    start = parse_when("every day at 8", first.replace(hour=7, tzinfo=zone).timestamp(), zone)
    assert datetime.fromtimestamp(start.due_at, zone) == first.replace(tzinfo=zone)
    seen, after = [], start
    for _ in expected:
        due = next_due(after, after.due_at, zone)
        seen.append(datetime.fromtimestamp(due, zone).strftime("%Y-%m-%d %H:%M %z"))
        after = type(start)(due, after.every, after.local)
    assert seen == expected


def test_a_weekly_reminder_skips_missed_weeks_to_the_next_one_to_come():
    start = parse_when("every Monday at 9", NOW[LISBON], LISBON)
    five_weeks_later = start.due_at + 5 * 7 * 86400 + 60
    due = datetime.fromtimestamp(next_due(start, five_weeks_later, LISBON), LISBON)
    assert due.strftime("%A %H:%M") == "Monday 09:00" and due.timestamp() > five_weeks_later
