"""Identity across platforms (CHAN-4): platform ids map to one person id; /link joins two.

Until linked, each platform id is its own person (``"<platform>:<id>"``). Linking with a one-time code
moves everything stored under the newer id (memories, DM history, buffers) onto the person who made
the code, so from then on both accounts see one set of memories.

A link code is an account key: it is issued and redeemed only in DMs (the caller checks), used once,
expires after ten minutes, and an account that fails ``MAX_FAILURES`` times in an hour is refused
for the rest of that hour, so codes cannot be guessed.

A person's reach (SEC-1): the server partitions their memories sit in, and whether they opted in to
let what they say in one server come up in others (``/share on``).

A person's consent (SEC-5): whether they asked not to be remembered (``/privacy off``), kept as a
``person_settings`` row only while it is off, so linking two accounts keeps the stricter choice.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Protocol

from ..clock import Clock
from ..errors import InvalidInput
from ..models import Visibility
from ..scopes import user_partition
from .db import Database
from .memories import MemoryRepository

CODE_TTL_S = 600.0
MAX_FAILURES, FAILURE_WINDOW_S = 5, 3600.0
SHARE_KEY = "share_across_servers"
REMEMBER_KEY = "remember"  # present (value "off") only while the person asked not to be remembered


class MovesPeople(Protocol):
    def move_person(self, source: str, target: str) -> None: ...


class People:
    def __init__(
        self, db: Database, clock: Clock, rows: MemoryRepository, movers: Sequence[MovesPeople] = ()
    ) -> None:
        """``movers``: the owners of what a person has (memories, messages, buffers, chats' saved contexts), moved in
        this order when two accounts are linked."""
        self.db, self.clock, self.rows, self.movers = db, clock, rows, tuple(movers)

    def lookup(self, platform: str, platform_user_id: str) -> str:
        """The person id ``resolve`` would give this account, recording nothing (ORCH-5's snapshot writes nothing)."""
        return self.lookup_many(platform, [platform_user_id])[0]

    def lookup_many(self, platform: str, platform_user_ids: list[str]) -> list[str]:
        """``lookup`` of each account, in one statement."""
        known = self.known(platform, platform_user_ids)
        return [
            known[str(uid)][0] if str(uid) in known else f"{platform}:{uid}"
            for uid in platform_user_ids
        ]

    def known(self, platform: str, platform_user_ids: list[str]) -> dict[str, tuple[str, str]]:
        """platform user id -> (person id, display name) of the accounts already met, in one statement."""
        if not platform_user_ids:
            return {}
        marks = ", ".join("?" for _ in platform_user_ids)
        sql = f"SELECT platform_user_id, person_id, display_name FROM identities WHERE platform = ? AND platform_user_id IN ({marks})"
        return {
            uid: (person, name)
            for uid, person, name in self.db.execute(sql, (platform, *map(str, platform_user_ids)))
        }

    def resolve(self, platform: str, platform_user_id: str, display_name: str = "") -> str:
        """The person id behind a platform account (recorded on first sight)."""
        return self.resolve_many(platform, [(platform_user_id, display_name)])[0]

    def resolve_many(self, platform: str, accounts: list[tuple[str, str]]) -> list[str]:
        """``resolve`` of each (platform user id, display name), the accounts read in one statement (a turn's speaker
        and participants: one round trip to a PostgreSQL server rather than one each)."""
        known = self.known(platform, [uid for uid, _ in accounts])
        people = []
        for uid, name in accounts:
            person = self._recorded(platform, str(uid), name, known.get(str(uid)))
            # an account listed twice is read as written
            known[str(uid)] = (
                person,
                name or known.get(str(uid), ("", ""))[1],
            )
            people.append(person)
        return people

    def _recorded(
        self, platform: str, platform_user_id: str, display_name: str, row: tuple[str, str] | None
    ) -> str:
        """The account's person, its new display name written, or the account recorded when ``row`` says it is new."""
        if row:
            if display_name and display_name != row[1]:
                self.db.execute(
                    "UPDATE identities SET display_name = ? WHERE platform = ? AND platform_user_id = ?",
                    (display_name, platform, platform_user_id),
                )
            return row[0]
        person = f"{platform}:{platform_user_id}"
        self.db.execute(
            "INSERT INTO identities (platform, platform_user_id, person_id, display_name, linked_at) VALUES (?, ?, ?, ?, ?)",
            (platform, str(platform_user_id), person, display_name, self.clock.now()),
        )
        return person

    def accounts(self, person_id: str) -> list[dict]:
        return self.db.rows(
            "SELECT platform, platform_user_id, display_name FROM identities WHERE person_id = ?",
            (person_id,),
        )

    def known_account(self, platform: str, platform_user_id: str) -> bool:
        """Whether the bot has met this account (a lookup that, unlike ``resolve``, records nothing)."""
        return bool(
            self.db.scalar(
                "SELECT 1 FROM identities WHERE platform = ? AND platform_user_id = ?",
                (platform, str(platform_user_id)),
            )
        )

    def person_ids(self) -> list[str]:
        """Every person with an account the bot has met."""
        return [
            p for (p,) in self.db.execute("SELECT DISTINCT person_id FROM identities ORDER BY 1")
        ]

    def name(self, person_id: str) -> str:
        return (
            self.db.scalar(
                "SELECT display_name FROM identities WHERE person_id = ? AND display_name != '' LIMIT 1",
                (person_id,),
            )
            or person_id
        )

    def issue_code(self, person_id: str) -> str:
        code = "-".join(secrets.token_hex(3) for _ in range(3))  # 72 bits
        now = self.clock.now()
        with self.db.transaction():
            self.db.execute(
                "DELETE FROM link_codes WHERE person_id = ? OR expires_at < ?", (person_id, now)
            )
            self.db.execute(
                "INSERT INTO link_codes (code, person_id, expires_at) VALUES (?, ?, ?)",
                (code, person_id, now + CODE_TTL_S),
            )
        return code

    def redeem(self, code: str, platform: str, platform_user_id: str) -> str:
        """Link this account to the person who issued ``code``; returns that person id."""
        now = self.clock.now()
        if self._failures(platform, platform_user_id, now) >= MAX_FAILURES:
            raise InvalidInput("too many wrong link codes; try again in an hour")
        row = self.db.one(
            "SELECT person_id, expires_at FROM link_codes WHERE code = ?", (code.strip().lower(),)
        )
        if row is None or row["expires_at"] < now:
            self.db.execute(
                "INSERT INTO link_failures (platform, platform_user_id, failed_at) VALUES (?, ?, ?)",
                (platform, str(platform_user_id), now),
            )
            raise InvalidInput(
                "that link code is unknown or expired; ask for a new one with /link on your other account"
            )
        target = row["person_id"]
        current = self.resolve(platform, platform_user_id)
        with self.db.transaction():
            self.db.execute("DELETE FROM link_codes WHERE code = ?", (code.strip().lower(),))
            if current != target:
                self._merge(current, target)
        return target

    def _failures(self, platform: str, platform_user_id: str, now: float) -> int:
        return int(
            self.db.scalar(
                "SELECT COUNT(*) FROM link_failures WHERE platform = ? AND platform_user_id = ? AND failed_at > ?",
                (platform, str(platform_user_id), now - FAILURE_WINDOW_S),
            )
        )

    # -- reach (SEC-1) ---------------------------------------------------------------------------------
    def shares(self, person_id: str) -> bool:
        return self.setting(person_id, SHARE_KEY) == "on"

    def set_sharing(self, person_id: str, on: bool) -> None:
        self.set_setting(person_id, SHARE_KEY, "on" if on else "off")

    # -- a person's settings (person_settings) -------------------------------------------------------
    def setting(self, person_id: str, key: str) -> str | None:
        """One of a person's settings (``/share``, ``/timezone``...), None when never set."""
        value = self.db.scalar(
            "SELECT value FROM person_settings WHERE person_id = ? AND key = ?", (person_id, key)
        )
        return None if value is None else str(value)

    def set_setting(self, person_id: str, key: str, value: str) -> None:
        self.db.execute(
            "INSERT INTO person_settings (person_id, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (person_id, key) DO UPDATE SET value = excluded.value",
            (person_id, key, value),
        )

    def clear_setting(self, person_id: str, key: str) -> None:
        self.db.execute(
            "DELETE FROM person_settings WHERE person_id = ? AND key = ?", (person_id, key)
        )

    def reach(self, speaker: str, people: tuple[str, ...], *, is_dm: bool) -> tuple[str, ...]:
        """Extra partitions a context may read: in a DM, all of the speaker's own; in a server, all of
        those of the people here who opted in to sharing across servers."""
        if is_dm:
            return tuple(self.rows.partitions_of(speaker))
        private = {p: user_partition(p, Visibility.PRIVATE) for p in people}
        sharing = self.sharing(people)
        return tuple(
            k for p in people if p in sharing for k in self.rows.partitions_of(p) if k != private[p]
        )

    def sharing(self, people: tuple[str, ...]) -> set[str]:
        """Which of ``people`` opted in to sharing across servers: one statement for a turn's people (each a round
        trip to a PostgreSQL server otherwise)."""
        if not people:
            return set()
        marks = ", ".join("?" for _ in people)
        sql = f"SELECT person_id FROM person_settings WHERE key = ? AND value = 'on' AND person_id IN ({marks})"
        return {str(p) for (p,) in self.db.execute(sql, (SHARE_KEY, *people))}

    # -- consent (SEC-5) --------------------------------------------------------------------------------
    def remembered(self, person_id: str) -> bool:
        return (
            self.db.scalar(
                "SELECT value FROM person_settings WHERE person_id = ? AND key = ?",
                (person_id, REMEMBER_KEY),
            )
            != "off"
        )

    def set_remembered(self, person_id: str, on: bool) -> None:
        if on:
            self.db.execute(
                "DELETE FROM person_settings WHERE person_id = ? AND key = ?",
                (person_id, REMEMBER_KEY),
            )
            return
        self.db.execute(
            "INSERT INTO person_settings (person_id, key, value) VALUES (?, ?, 'off') "
            "ON CONFLICT (person_id, key) DO UPDATE SET value = excluded.value",
            (person_id, REMEMBER_KEY),
        )

    def own_names(self, person_id: str) -> list[str]:
        """The display names of a person's accounts that no other person uses. Display names are chosen by
        their owners: one shared with someone else (an impersonator's rename, or two Sams) proves nothing,
        so it names nobody."""
        rows = self.db.execute(
            "SELECT DISTINCT mine.display_name FROM identities mine WHERE mine.person_id = ? AND length(mine.display_name) >= 2 "
            "AND NOT EXISTS (SELECT 1 FROM identities other WHERE other.person_id != mine.person_id "
            "AND lower(other.display_name) = lower(mine.display_name)) ORDER BY 1",
            (person_id,),
        )
        return [name for (name,) in rows]

    def names_of(self, person_ids: list[str]) -> dict[str, set[str]]:
        """Each person's display names on all their accounts (empty ones left out), 400 people a statement."""
        found: dict[str, set[str]] = {}
        for i in range(0, len(person_ids), 400):
            chunk = tuple(person_ids[i : i + 400])
            marks = ", ".join("?" for _ in chunk)
            sql = f"SELECT person_id, display_name FROM identities WHERE person_id IN ({marks}) AND display_name != ''"
            for person, name in self.db.execute(sql, chunk):
                found.setdefault(person, set()).add(name)
        return found

    # -- linking ---------------------------------------------------------------------------------------
    def _merge(self, source: str, target: str) -> None:
        """Everything stored under ``source`` now belongs to ``target`` (inside the caller's transaction)."""
        self.db.execute(
            "UPDATE identities SET person_id = ?, linked_at = ? WHERE person_id = ?",
            (target, self.clock.now(), source),
        )
        for mover in self.movers:
            mover.move_person(source, target)
        self.db.execute(
            "UPDATE OR REPLACE person_settings SET person_id = ? WHERE person_id = ?",
            (target, source),
        )
