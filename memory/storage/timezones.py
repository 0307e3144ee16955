"""Where a person is in time (ORCH-8): their own IANA zone, else the operator's default (``COMPANION_TIMEZONE``).

A person sets theirs with ``/timezone Europe/Lisbon``, in the dashboard, or by confirming an offer made when they
said where they live ("I live in Lisbon" -> "Shall I use Europe/Lisbon for you?"): a zone is never set silently,
because a wrong guess would move their quiet hours and their "yesterday". The choice is one row of
``person_settings`` (owned by ``memory.storage.people``), so forgetting and exporting a person already cover it.

    Timezones.zone_of(person_id)   THE lookup other code uses (quiet hours, prompts, extraction): a tzinfo, never None
    Timezones.zone_for(ctx)        a place's day: a DM is its person's, a server channel the operator default's
    Timezones.set / clear / own    the person's own choice; an unknown name is refused with ``InvalidInput``
    Timezones.offer(person, text)  the zone to offer when ``text`` says where they live, once per zone
    parse_zone(name)               an IANA name (any case) as a ZoneInfo, or ``InvalidInput``
    said_zone(text)                the zone a sentence names as where the speaker lives, or None
"""

from __future__ import annotations

import logging
import re
from functools import cache
from zoneinfo import ZoneInfo, available_timezones

from ..errors import InvalidInput
from ..scopes import RecallContext
from .people import People

log = logging.getLogger(__name__)
ZONE_KEY, OFFERED_KEY = "timezone", "timezone_offered"
REGIONS = ("Africa", "America", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific")
# Cities people name that are not the tz database's own city for their zone.
ALIASES = {
    "new york city": "America/New_York",
    "nyc": "America/New_York",
    "boston": "America/New_York",
    "washington": "America/New_York",
    "miami": "America/New_York",
    "atlanta": "America/New_York",
    "san francisco": "America/Los_Angeles",
    "seattle": "America/Los_Angeles",
    "portland": "America/Los_Angeles",
    "dallas": "America/Chicago",
    "houston": "America/Chicago",
    "beijing": "Asia/Shanghai",
    "delhi": "Asia/Kolkata",
    "new delhi": "Asia/Kolkata",
    "mumbai": "Asia/Kolkata",
    "bangalore": "Asia/Kolkata",
    "munich": "Europe/Berlin",
    "frankfurt": "Europe/Berlin",
    "hamburg": "Europe/Berlin",
    "barcelona": "Europe/Madrid",
    "porto": "Europe/Lisbon",
    "milan": "Europe/Rome",
    "edinburgh": "Europe/London",
    "manchester": "Europe/London",
    "osaka": "Asia/Tokyo",
    "kyoto": "Asia/Tokyo",
}
# Zone cities that are also everyday words ("I'm in Christmas mode"): never read as a place.
NOT_PLACES = frozenset(
    {"easter", "christmas", "wake", "midway", "stanley", "regina", "victoria", "jersey"}
)
_SAID = re.compile(
    r"\b(?:i\s+live\s+in|i'm\s+living\s+in|i\s+am\s+living\s+in|i'm\s+based\s+in|i\s+am\s+based\s+in|i\s+(?:have\s+|'ve\s+)?moved\s+to"
    r"|i'm\s+in|i\s+am\s+in|i'm\s+on|i\s+am\s+on|my\s+time\s*zone\s+is)\s+(?P<rest>[^.,;!?\n]{1,60})"
)
_WORD = re.compile(r"[a-z][a-z/_'-]*")


def parse_zone(name: str) -> ZoneInfo:
    """``name`` as a zone of the tz database, whatever its case ("europe/lisbon"); anything else is refused."""
    wanted = (name or "").strip()
    found = _zones_by_lower().get(wanted.lower())
    if found is None:
        raise InvalidInput(
            f"unknown time zone {wanted[:60]!r}: use a tz database name like Europe/Lisbon, America/New_York or Asia/Tokyo"
        )
    return ZoneInfo(found)


def said_zone(text: str) -> str | None:
    """The zone of the place ``text`` says the speaker lives or is ("I live in Lisbon", "I'm in Tokyo time")."""
    lowered = (text or "")[:2_000].lower().replace("\u2019", "'")
    for match in _SAID.finditer(lowered):
        words = _WORD.findall(match["rest"])[:4]
        if words and words[0] in ("the", "a", "an"):
            continue  # "I'm in the kitchen", "I'm in a meeting": a room or a state, not a city
        for size in (3, 2, 1):
            zone = _by_city().get(" ".join(words[:size]))
            if zone is not None and len(words) >= size:
                return zone
    return None


class Timezones:
    """A person's zone and the operator's default; ``default`` is an IANA name (validated by the settings)."""

    def __init__(self, people: People, default: str = "UTC") -> None:
        self.people = people
        self.default = parse_zone(default)

    def zone_of(self, person_id: str) -> ZoneInfo:
        """The person's own zone, else the operator default."""
        return self.own(person_id) or self.default

    def name_of(self, person_id: str) -> str:
        """``zone_of`` as its IANA name (what a ``RecallContext`` carries)."""
        return self.zone_of(person_id).key

    def zone_for(self, ctx: RecallContext) -> ZoneInfo:
        """A DM lives in its person's day; a server channel, shared by people of many zones, in the operator's."""
        return self.zone_of(ctx.speaker_id) if ctx.is_dm else self.default

    def own(self, person_id: str) -> ZoneInfo | None:
        name = self.people.setting(person_id, ZONE_KEY)
        if not name:
            return None
        try:
            return parse_zone(name)
        except (
            InvalidInput
        ):  # a zone the tz database dropped since it was set: the default, and a trace of why
            log.warning(
                "the stored time zone %r of %s is no longer known; using the default",
                name,
                person_id,
            )
            return None

    def set(self, person_id: str, name: str) -> ZoneInfo:
        zone = parse_zone(name)
        self.people.set_setting(person_id, ZONE_KEY, zone.key)
        return zone

    def clear(self, person_id: str) -> None:
        self.people.clear_setting(person_id, ZONE_KEY)

    def offer(self, person_id: str, text: str) -> str | None:
        """The zone to offer when ``text`` names where the person lives and it is not theirs already. Each zone
        is offered once (remembered), so someone who ignores the offer is not asked again at every mention."""
        zone = said_zone(text)
        if zone is None or zone == getattr(self.own(person_id), "key", None):
            return None
        if self.people.setting(person_id, OFFERED_KEY) == zone:
            return None
        self.people.set_setting(person_id, OFFERED_KEY, zone)
        return zone

    def unrecorded_offer(self, person_id: str, text: str) -> str | None:
        """``offer`` for someone not remembered (/privacy off): made each time, nothing written (not even which
        zone was offered: that says where they live)."""
        zone = said_zone(text)
        return None if zone is None or zone == getattr(self.own(person_id), "key", None) else zone


@cache
def _zones_by_lower() -> dict[str, str]:
    return {name.lower(): name for name in available_timezones()}


@cache
def _by_city() -> dict[str, str]:
    """City names to zones ("lisbon" -> "Europe/Lisbon", "new york" -> "America/New_York"), the aliases included."""
    cities: dict[str, str] = {}
    for name in sorted(available_timezones()):
        region, _, city = name.partition("/")
        place = city.rpartition("/")[2].replace("_", " ").lower()
        if region in REGIONS and place and place not in NOT_PLACES:
            cities.setdefault(place, name)
    cities.update({zone.lower(): zone for zone in _zones_by_lower().values() if "/" in zone})
    return cities | ALIASES
