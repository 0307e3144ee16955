"""The PostgreSQL form of each numbered migration in ``memory.migrations`` (same numbers, same names).

Most of a migration's DDL is the same on both engines once its types are spelled the PostgreSQL way
(``pg_form``). What SQLite does with FTS5 virtual tables and triggers is said here once, by hand, in ``EXTRA``:
each searchable table gets a generated ``tsvector`` column (weighted as the FTS5 ``bm25()`` weights its
columns) with a GIN index, and a statement trigger that NOTIFYs other processes whose caches read it. A data
step that only upgrades an older SQLite store (a new PostgreSQL store is empty) is left out.

A new migration appends to both lists: its SQLite text in ``memory.migrations``, and here whatever
``pg_form`` cannot translate on its own.
"""

from __future__ import annotations

import re

from ..unspaced import CHARS
from .migrations import MIGRATIONS, Migration

CHANNEL = "companion_changes"
FORGOT = ":forgot"  # the payload's ending when a commit deleted or edited words (m014): caches of words drop them

_NOTIFY_FUNCTION = f"""
CREATE OR REPLACE FUNCTION companion_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME);
    RETURN NULL;
END $$;
"""


def notify_on(table: str) -> str:
    """A statement trigger: other processes hear of any commit that changed ``table`` (their caches reload)."""
    return (
        f"CREATE TRIGGER {table}_notify AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
        "FOR EACH STATEMENT EXECUTE FUNCTION companion_notify();\n"
    )


# FTS5's bm25 weights (memory.corpus) as tsvector weights: A > B > C; ptoken is not indexed (partitions are a WHERE).
_MEMORY_WORDS = (
    "setweight(to_tsvector('english', subject), 'A') || setweight(to_tsvector('english', content), 'B') || "
    "setweight(to_tsvector('english', replace(tags, ',', ' ')), 'B')"
)
_MESSAGE_WORDS = (
    "setweight(to_tsvector('english', content), 'A') || setweight(to_tsvector('english', author_name), 'B') || "
    "setweight(to_tsvector('english', context), 'C')"
)

# LANG-1 on PostgreSQL: text of scripts without spaces reaches the parser as each character and the
# pair it starts ("我喜欢" -> " 我 我喜  喜 喜欢 欢"), as the SQLite index's tokenizer stores it
# (``memory.storage.tokenizer``), so the query words of ``FtsQueryBuilder.terms`` (a Han character,
# a kana or Hangul pair) meet it. Text without such characters is passed as it is.
_SPACED = f"[{CHARS}]"
_SPACED_FUNCTION = f"""
CREATE FUNCTION companion_spaced(t text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
SELECT CASE WHEN t !~ '{_SPACED}' THEN t ELSE (
    SELECT string_agg(CASE WHEN c ~ '{_SPACED}'
        THEN ' ' || c || CASE WHEN n ~ '{_SPACED}' THEN ' ' || c || n ELSE '' END || ' '
        ELSE c END, '' ORDER BY i)
    FROM (SELECT i, substr(t, i, 1) AS c, substr(t, i + 1, 1) AS n
          FROM generate_series(1, length(t)) AS i) AS chars
) END
$$;
"""


def _spaced(words: str) -> str:
    """A words expression whose columns pass through ``companion_spaced``."""
    return re.sub(
        r"to_tsvector\('english', (.+?)\), '",
        r"to_tsvector('english', companion_spaced(\1)), '",
        words,
    )


def _words_again(table: str, words: str) -> str:
    return (
        f"DROP INDEX {table}_words;\nALTER TABLE {table} DROP COLUMN words;\n"
        f"ALTER TABLE {table} ADD COLUMN words tsvector GENERATED ALWAYS AS ({_spaced(words)}) STORED;\n"
        f"CREATE INDEX {table}_words ON {table} USING gin (words);\n"
    )


EXTRA: dict[str, str] = {
    "m001_core": _NOTIFY_FUNCTION
    + f"""
ALTER TABLE memories ADD COLUMN words tsvector GENERATED ALWAYS AS ({_MEMORY_WORDS}) STORED;
CREATE INDEX memories_words ON memories USING gin (words);
ALTER TABLE messages ADD COLUMN words tsvector GENERATED ALWAYS AS ({_MESSAGE_WORDS}) STORED;
CREATE INDEX messages_words ON messages USING gin (words);
"""
    + notify_on("memories")
    + notify_on("messages")
    + notify_on("session_summaries"),
    "m002_conversations": notify_on("identities"),
    "m006_daily": """
CREATE FUNCTION bulletins_drop_partition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM bulletins WHERE id IN (SELECT bulletin_id FROM bulletin_partitions WHERE partition_key = OLD.partition_key);
    RETURN NULL;
END $$;
CREATE TRIGGER bulletins_memory_deleted AFTER DELETE ON memories FOR EACH ROW EXECUTE FUNCTION bulletins_drop_partition();
CREATE TRIGGER bulletins_memory_changed AFTER UPDATE OF content, subject, partition_key ON memories
    FOR EACH ROW EXECUTE FUNCTION bulletins_drop_partition();
"""
    + notify_on("bulletins"),
    # SCALE-1: a second notification when words were deleted, edited or moved out of view, so caches that hold words
    # (voice's warm snapshots, pools, cached searches) drop them then, not at every message or access count written
    "m014_shared_state": f"""
CREATE FUNCTION companion_notify_forgot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME || '{FORGOT}');
    RETURN NULL;
END $$;
CREATE TRIGGER memories_forgot AFTER DELETE OR TRUNCATE
    OR UPDATE OF content, subject, tags, forgotten, superseded_by, consolidated_into, visibility, scope, scope_id, partition_key, valid_to
    ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION companion_notify_forgot();
CREATE TRIGGER messages_forgot AFTER DELETE OR TRUNCATE OR UPDATE OF content, context, partition_key ON messages
    FOR EACH STATEMENT EXECUTE FUNCTION companion_notify_forgot();
""",
    # m015's backfill with PostgreSQL's JSON functions (an upgraded store may hold rows)
    "m015_subject_person": """
UPDATE memories SET subject_person_id = scope_id
WHERE scope IN ('user', 'owner')
AND jsonb_array_length(COALESCE(provenance::jsonb -> 'sources', '[]'::jsonb)) > 0
AND NOT EXISTS (
    SELECT 1 FROM jsonb_array_elements_text(provenance::jsonb -> 'sources') AS src (value)
    WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = src.value AND m.author_id = memories.scope_id)
)
AND (lower(subject) IN ('i', 'me', 'myself', 'user')
    OR lower(subject) IN (SELECT lower(i.display_name) FROM identities i WHERE i.person_id = memories.scope_id));
""",
    # the SQLite store makes its word indexes anew; here the generated columns are (the table is rewritten)
    "m024_words_in_every_script": _SPACED_FUNCTION
    + _words_again("memories", _MEMORY_WORDS)
    + _words_again("messages", _MESSAGE_WORDS),
}

_TYPES = (
    (r"\bINTEGER PRIMARY KEY\b", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (r"\bINTEGER\b", "BIGINT"),
    (r"\bREAL\b", "DOUBLE PRECISION"),
    (r"\bBLOB\b", "BYTEA"),
    (r"\)\s*WITHOUT ROWID", ")"),
)


def pg_form(migration: Migration) -> Migration:
    """``migration`` as PostgreSQL runs it: SQLite-only statements dropped, types translated, ``EXTRA`` appended."""
    kept = [_typed(s) for s in _statements(migration.sql) if not _sqlite_only(s)]
    sql = ";\n".join(kept) + (";\n" if kept else "") + EXTRA.get(migration.name, "")
    return Migration(migration.name, sql)


def _statements(sql: str) -> list[str]:
    """Statements of a migration; a trigger body (BEGIN ... END;) stays one statement."""
    text = re.sub(r"--[^\n]*", "", sql)
    out, current = [], ""
    for part in text.split(";"):
        current += part
        if re.search(r"\bCREATE TRIGGER\b", current, re.IGNORECASE) and not re.search(
            r"\bEND\s*$", current.strip(), re.IGNORECASE
        ):
            current += ";"
            continue
        if current.strip():
            out.append(current.strip())
        current = ""
    return out


def _sqlite_only(statement: str) -> bool:
    head = statement.upper()
    return (
        "VIRTUAL TABLE" in head
        or head.startswith(("CREATE TRIGGER", "DROP TRIGGER", "INSERT OR IGNORE"))
        or re.match(r"INSERT INTO \w+_FTS\b", head) is not None
        # the word indexes made anew (m024) and their refill marker: PostgreSQL's words are a
        # generated column
        or (head.startswith(("DROP TABLE", "INSERT INTO SETTINGS")) and "_FTS" in head)
        # upgrades old SQLite rows; a new store has none
        or (head.startswith("UPDATE MESSAGES SET LEGACY_COPY"))
        or "JSON_EACH("
        in head  # SQLite's JSON: such a data step has its PostgreSQL form in ``EXTRA``
    )


def _typed(statement: str) -> str:
    for pattern, replacement in _TYPES:
        statement = re.sub(pattern, replacement, statement)
    return statement


PG_MIGRATIONS: tuple[Migration, ...] = tuple(pg_form(m) for m in MIGRATIONS)
