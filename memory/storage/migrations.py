"""Append-only numbered migrations. Never edit one that has shipped: add the next.

Vector tables (vec0) are not here: their dimension is fixed by the first embedder the store meets
(MEM-4), so ``memory.vectors`` creates them then.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Migration:
    name: str
    sql: str


M001_CORE = Migration(
    "m001_core",
    """
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE memories (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL CHECK (type IN ('semantic', 'episodic', 'procedural')),
    kind TEXT NOT NULL DEFAULT 'other',
    subject TEXT NOT NULL,
    content TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT 'user-stated',
    importance REAL NOT NULL DEFAULT 5,
    scope TEXT NOT NULL CHECK (scope IN ('user', 'guild', 'owner')),
    scope_id TEXT NOT NULL,
    visibility TEXT NOT NULL DEFAULT 'public' CHECK (visibility IN ('public', 'private')),
    partition_key TEXT NOT NULL,
    ptoken TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    ttl REAL,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_accessed_at REAL,
    consolidated_into TEXT,
    superseded_by TEXT,
    forgotten INTEGER NOT NULL DEFAULT 0,
    valid_from REAL,
    valid_to REAL,
    provenance TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX memories_partition ON memories (partition_key, updated_at);
CREATE INDEX memories_created ON memories (partition_key, created_at);
CREATE INDEX memories_importance ON memories (partition_key, importance, updated_at);
CREATE INDEX memories_hash ON memories (content_hash);

CREATE VIRTUAL TABLE memory_fts USING fts5 (
    subject, content, tags, ptoken,
    content = 'memories', content_rowid = 'rid', tokenize = 'porter unicode61'
);
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memory_fts (rowid, subject, content, tags, ptoken)
    VALUES (new.rid, new.subject, new.content, new.tags, new.ptoken);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, subject, content, tags, ptoken)
    VALUES ('delete', old.rid, old.subject, old.content, old.tags, old.ptoken);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF subject, content, tags, ptoken ON memories BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, subject, content, tags, ptoken)
    VALUES ('delete', old.rid, old.subject, old.content, old.tags, old.ptoken);
    INSERT INTO memory_fts (rowid, subject, content, tags, ptoken)
    VALUES (new.rid, new.subject, new.content, new.tags, new.ptoken);
END;

CREATE TABLE memory_tags (
    memory_rid INTEGER NOT NULL REFERENCES memories (rid) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    PRIMARY KEY (memory_rid, tag)
);
CREATE INDEX memory_tags_tag ON memory_tags (tag);

CREATE TABLE memory_entities (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL UNIQUE,
    entity_type TEXT NOT NULL DEFAULT 'concept',
    first_seen REAL NOT NULL,
    last_seen REAL NOT NULL,
    mention_count INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE memory_entity_mentions (
    memory_rid INTEGER NOT NULL REFERENCES memories (rid) ON DELETE CASCADE,
    entity_id INTEGER NOT NULL REFERENCES memory_entities (id) ON DELETE CASCADE,
    PRIMARY KEY (memory_rid, entity_id)
);
CREATE INDEX mentions_entity ON memory_entity_mentions (entity_id);

CREATE TABLE memory_relations (
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES memory_entities (id) ON DELETE CASCADE,
    relation TEXT NOT NULL,
    target_id INTEGER NOT NULL REFERENCES memory_entities (id) ON DELETE CASCADE,
    strength INTEGER NOT NULL DEFAULT 1,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    UNIQUE (source_id, relation, target_id)
);
-- Which memories asserted a relation: the back-reference, and what makes forgetting complete.
CREATE TABLE memory_relation_sources (
    relation_id INTEGER NOT NULL REFERENCES memory_relations (id) ON DELETE CASCADE,
    memory_rid INTEGER NOT NULL REFERENCES memories (rid) ON DELETE CASCADE,
    PRIMARY KEY (relation_id, memory_rid)
);
CREATE INDEX relation_sources_memory ON memory_relation_sources (memory_rid);

CREATE TABLE memory_links (
    src_rid INTEGER NOT NULL REFERENCES memories (rid) ON DELETE CASCADE,
    dst_rid INTEGER NOT NULL REFERENCES memories (rid) ON DELETE CASCADE,
    relation TEXT NOT NULL CHECK (relation IN
        ('related_to', 'updates', 'contradicts', 'caused_by', 'result_of', 'part_of')),
    weight REAL NOT NULL DEFAULT 1,
    created_at REAL NOT NULL,
    PRIMARY KEY (src_rid, dst_rid, relation)
);
CREATE INDEX memory_links_dst ON memory_links (dst_rid);

CREATE TABLE messages (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    platform TEXT NOT NULL,
    guild_id TEXT,
    channel_id TEXT NOT NULL,
    author_id TEXT NOT NULL,
    author_name TEXT NOT NULL DEFAULT '',
    role TEXT NOT NULL DEFAULT 'user' CHECK (role IN ('user', 'assistant')),
    modality TEXT NOT NULL DEFAULT 'text',
    content TEXT NOT NULL,
    context TEXT NOT NULL DEFAULT '',
    prev_rid INTEGER,
    platform_message_id TEXT,
    partition_key TEXT NOT NULL,
    ptoken TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX messages_channel ON messages (platform, channel_id, created_at);
CREATE INDEX messages_partition ON messages (partition_key, created_at);
CREATE INDEX messages_author ON messages (author_id);

CREATE VIRTUAL TABLE message_fts USING fts5 (
    content, author_name, context, ptoken,
    content = 'messages', content_rowid = 'rid', tokenize = 'porter unicode61'
);
CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
    INSERT INTO message_fts (rowid, content, author_name, context, ptoken)
    VALUES (new.rid, new.content, new.author_name, new.context, new.ptoken);
END;
CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
    INSERT INTO message_fts (message_fts, rowid, content, author_name, context, ptoken)
    VALUES ('delete', old.rid, old.content, old.author_name, old.context, old.ptoken);
END;
CREATE TRIGGER messages_au AFTER UPDATE OF content, author_name, context, ptoken ON messages BEGIN
    INSERT INTO message_fts (message_fts, rowid, content, author_name, context, ptoken)
    VALUES ('delete', old.rid, old.content, old.author_name, old.context, old.ptoken);
    INSERT INTO message_fts (rowid, content, author_name, context, ptoken)
    VALUES (new.rid, new.content, new.author_name, new.context, new.ptoken);
END;

CREATE TABLE session_summaries (
    id INTEGER PRIMARY KEY,
    platform TEXT NOT NULL,
    guild_id TEXT,
    channel_id TEXT NOT NULL,
    modality TEXT NOT NULL DEFAULT 'text',
    participants TEXT NOT NULL DEFAULT '[]',
    text TEXT NOT NULL,
    started_at REAL,
    ended_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX session_summaries_where ON session_summaries (platform, guild_id, ended_at);

CREATE TABLE reflections (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    scope_hint TEXT NOT NULL DEFAULT '',
    started_at REAL NOT NULL,
    finished_at REAL,
    status TEXT NOT NULL DEFAULT 'running',
    input_excerpt TEXT NOT NULL DEFAULT '',
    facts TEXT NOT NULL DEFAULT '[]',
    stored_ids TEXT NOT NULL DEFAULT '[]',
    error TEXT
);

CREATE TABLE embed_cache (
    fingerprint TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (fingerprint, content_hash)
) WITHOUT ROWID;
""",
)

M002_CONVERSATIONS = Migration(
    "m002_conversations",
    """
-- CHAN-4: a person is one subject across platforms once linked.
CREATE TABLE identities (
    platform TEXT NOT NULL,
    platform_user_id TEXT NOT NULL,
    person_id TEXT NOT NULL,
    display_name TEXT NOT NULL DEFAULT '',
    linked_at REAL NOT NULL,
    PRIMARY KEY (platform, platform_user_id)
);
CREATE INDEX identities_person ON identities (person_id);
CREATE TABLE link_codes (code TEXT PRIMARY KEY, person_id TEXT NOT NULL, expires_at REAL NOT NULL);

-- WRITE-1: user messages waiting for background extraction; persisted so a restart loses nothing.
CREATE TABLE extraction_buffer (
    id INTEGER PRIMARY KEY,
    channel_key TEXT NOT NULL,
    person_id TEXT NOT NULL,
    context TEXT NOT NULL,
    message_id TEXT,
    author_name TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    due_at REAL NOT NULL
);
CREATE INDEX extraction_buffer_channel ON extraction_buffer (channel_key, due_at);
CREATE INDEX extraction_buffer_person ON extraction_buffer (person_id);

-- Prompt sections read memories by kind and subject within what a context sees.
CREATE INDEX memories_kind ON memories (partition_key, kind, importance, updated_at);
CREATE INDEX memories_subject ON memories (partition_key, subject);

-- Per-channel conversation state: silence timer for micro-reflection, text compaction.
CREATE TABLE channel_state (
    channel_key TEXT PRIMARY KEY,
    context TEXT NOT NULL,
    last_message_at REAL NOT NULL,
    session_started_at REAL NOT NULL,
    reflected_at REAL,
    compacted_until REAL NOT NULL DEFAULT 0,
    rolling_summary TEXT NOT NULL DEFAULT ''
);
""",
)

M003_FTS_INSERT_IN_BULK = Migration(
    "m003_fts_insert_in_bulk",
    """
-- New rows reach the FTS indexes through one INSERT ... SELECT per write transaction (Corpus.index_text),
-- not a trigger per row: FTS5 flushes its pending terms at every statement savepoint, so a per-row
-- trigger wrote one index segment per row and bulk loads crawled past a few hundred thousand rows.
DROP TRIGGER memories_ai;
DROP TRIGGER messages_ai;
""",
)

M004_TRUST = Migration(
    "m004_trust",
    """
-- SEC-3: deleted words must not stay readable in the index segments (FTS5 removes them in place).
INSERT INTO memory_fts (memory_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO message_fts (message_fts, rank) VALUES ('secure-delete', 1);

-- SEC-1: a public user fact learned in a server belongs to that server (its partition names it).
ALTER TABLE memories ADD COLUMN guild_id TEXT;
CREATE INDEX memories_owner ON memories (scope_id, partition_key);

-- A bot reply names the user turn it answers, so forgetting that turn takes the reply with it.
ALTER TABLE messages ADD COLUMN answers_rid INTEGER;
CREATE INDEX messages_answers ON messages (answers_rid) WHERE answers_rid IS NOT NULL;
CREATE INDEX messages_platform_id ON messages (platform, channel_id, platform_message_id);

-- Write-ahead: a buffered turn is held while its reply is being made (released at start-up), and a
-- batch that keeps failing is retried with backoff, then parked in dead_letters (never dropped).
ALTER TABLE extraction_buffer ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
ALTER TABLE extraction_buffer ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE extraction_buffer ADD COLUMN last_error TEXT;
ALTER TABLE extraction_buffer ADD COLUMN message_rid INTEGER;
CREATE TABLE dead_letters (
    id INTEGER PRIMARY KEY,
    job TEXT NOT NULL,
    channel_key TEXT NOT NULL,
    person_id TEXT NOT NULL,
    context TEXT NOT NULL,
    message_id TEXT,
    message_rid INTEGER,
    author_name TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL,
    created_at REAL NOT NULL,
    attempts INTEGER NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    failed_at REAL NOT NULL
);
CREATE INDEX dead_letters_person ON dead_letters (person_id);

-- Background jobs of a channel (reflection, compaction) back off after a failure instead of retrying every tick.
ALTER TABLE channel_state ADD COLUMN retry_at REAL NOT NULL DEFAULT 0;
ALTER TABLE channel_state ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;

-- The reflections audit names the chat and the people it read, so forgetting can find it.
ALTER TABLE reflections ADD COLUMN channel_key TEXT;
ALTER TABLE reflections ADD COLUMN people TEXT NOT NULL DEFAULT '[]';

-- /link: failed redemptions per account, for the rate limit.
CREATE TABLE link_failures (platform TEXT NOT NULL, platform_user_id TEXT NOT NULL, failed_at REAL NOT NULL);
CREATE INDEX link_failures_account ON link_failures (platform, platform_user_id, failed_at);

-- Per-person choices (SEC-1 opt-in to share what they say across servers).
CREATE TABLE person_settings (
    person_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (person_id, key)
);
""",
)

# SLOTS (filled by the work in progress; each is written by one hand only)
M005_DASHBOARD = Migration(
    "m005_dashboard",
    """
-- DASH-3: every change made through the dashboard (memory.audit owns it). Ids, field names and counts only,
-- never a memory's words; person_id names whom a row concerns, so forgetting that person removes it.
CREATE TABLE dashboard_audit (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    who TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL DEFAULT '',
    person_id TEXT,
    detail TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX dashboard_audit_at ON dashboard_audit (at);
CREATE INDEX dashboard_audit_person ON dashboard_audit (person_id) WHERE person_id IS NOT NULL;
""",
)

M006_DAILY = Migration(
    "m006_daily",
    """
-- MAINT-4: which chat's UTC day the daily reflection has read (memory.daily owns it). A day is marked only
-- after its facts are stored, so a crash redoes it (dedup keeps that from duplicating). partition_key is the
-- chat's message partition (guild|G or dm|person): forgetting a person finds the markers of their DMs.
CREATE TABLE daily_reflections (
    id INTEGER PRIMARY KEY,
    channel_key TEXT NOT NULL,
    day TEXT NOT NULL,
    partition_key TEXT NOT NULL,
    stored INTEGER NOT NULL DEFAULT 0,
    audit_id INTEGER,
    done_at REAL NOT NULL,
    UNIQUE (channel_key, day)
);
CREATE INDEX daily_reflections_partition ON daily_reflections (partition_key);
-- A store that already has history starts with today: its past days were extracted turn by turn, and reflecting a
-- whole week of every chat at the first start after the upgrade would be a burst of model calls for little.
INSERT OR IGNORE INTO daily_reflections (channel_key, day, partition_key, done_at)
SELECT platform || ':' || channel_id, date(created_at, 'unixepoch'), MIN(partition_key), unixepoch()
FROM messages WHERE created_at < unixepoch(date('now')) GROUP BY platform, channel_id, date(created_at, 'unixepoch');

-- MAINT-5: one briefing per scope (guild, a person's DMs, the owner), written by the model from the memories
-- that scope sees (memory.bulletin owns it). people: whose memories it could paraphrase (forgetting finds it).
CREATE TABLE bulletins (
    id INTEGER PRIMARY KEY,
    scope TEXT NOT NULL CHECK (scope IN ('guild', 'dm', 'owner')),
    scope_id TEXT NOT NULL,
    text TEXT NOT NULL,
    people TEXT NOT NULL DEFAULT '[]',
    memory_count INTEGER NOT NULL DEFAULT 0,
    built_at REAL NOT NULL,
    UNIQUE (scope, scope_id)
);
-- The memory partitions a bulletin was built from, indexed so that the triggers below find it by one key.
CREATE TABLE bulletin_partitions (
    bulletin_id INTEGER NOT NULL REFERENCES bulletins (id) ON DELETE CASCADE,
    partition_key TEXT NOT NULL,
    PRIMARY KEY (bulletin_id, partition_key)
);
CREATE INDEX bulletin_partitions_key ON bulletin_partitions (partition_key);
-- A bulletin paraphrases the memories of its partitions: when one of them is deleted (forgotten, withdrawn at its
-- source, deleted by the operator), changes its words, or moves to another person (linking), every bulletin
-- built from that partition goes, whichever path did it; the refresh job writes a new one later.
CREATE TRIGGER bulletins_memory_deleted AFTER DELETE ON memories BEGIN
    DELETE FROM bulletins WHERE id IN (SELECT bulletin_id FROM bulletin_partitions WHERE partition_key = old.partition_key);
END;
CREATE TRIGGER bulletins_memory_changed AFTER UPDATE OF content, subject, partition_key ON memories BEGIN
    DELETE FROM bulletins WHERE id IN (SELECT bulletin_id FROM bulletin_partitions WHERE partition_key = old.partition_key);
END;
""",
)

M007_JOURNALS_INGEST = Migration(
    "m007_journals_ingest",
    """
-- WRITE-7: files ingested into a scope (memory.ingest owns both tables). A file is known by its resolved path
-- and the partition it went to; its hash says whether it changed. scope_id names whom the memories are
-- about, so forgetting that person (or purging that guild) removes the bookkeeping too.
CREATE TABLE ingest_files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    partition_key TEXT NOT NULL,
    scope TEXT NOT NULL,
    scope_id TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    passages INTEGER NOT NULL DEFAULT 0,
    ingested_at REAL NOT NULL,
    UNIQUE (path, partition_key)
);
CREATE INDEX ingest_files_scope ON ingest_files (scope_id);
-- One row per (passage, memory made from it): hashes and line ranges, never the words. A passage that gave no
-- memory keeps one row with no memory. Forgetting a memory removes its rows (the cascade), so a forgotten
-- passage is not counted as already ingested.
CREATE TABLE ingest_passages (
    file_id INTEGER NOT NULL REFERENCES ingest_files (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    passage_hash TEXT NOT NULL,
    page INTEGER,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    memory_id TEXT REFERENCES memories (id) ON DELETE CASCADE
);
CREATE INDEX ingest_passages_file ON ingest_passages (file_id, seq);
CREATE INDEX ingest_passages_memory ON ingest_passages (memory_id) WHERE memory_id IS NOT NULL;
""",
)

M008_TOMBSTONES = Migration(
    "m008_tombstones",
    """
-- SEC-5: what a forgotten fact leaves behind (memory.tombstones owns it): keyed hashes (HMAC-SHA256 with a random
-- key of this store, kept in settings) of its normalised content and of its subject with its content, each bound
-- to whom the fact was about. Never the words: without the key a hash cannot even be tested against a guess.
-- scope_id and guild_id say whose it is, so forgetting that person (or purging that guild) removes it too.
CREATE TABLE tombstones (
    id INTEGER PRIMARY KEY,
    scope TEXT NOT NULL,
    scope_id TEXT NOT NULL,
    guild_id TEXT,
    content_mac TEXT NOT NULL,
    fact_mac TEXT NOT NULL,
    buried_at REAL NOT NULL
);
CREATE INDEX tombstones_content ON tombstones (content_mac);
CREATE INDEX tombstones_fact ON tombstones (fact_mac);
CREATE INDEX tombstones_scope ON tombstones (scope_id);
""",
)

M009_MESSAGE_IDEMPOTENCE = Migration(
    "m009_message_idempotence",
    """
ALTER TABLE messages ADD COLUMN legacy_copy INTEGER NOT NULL DEFAULT 0;
UPDATE messages SET legacy_copy = rid
WHERE platform_message_id IS NOT NULL
  AND rid > (
    SELECT MIN(first.rid) FROM messages AS first
    WHERE first.platform = messages.platform AND first.channel_id = messages.channel_id
      AND first.platform_message_id = messages.platform_message_id
  );
CREATE UNIQUE INDEX messages_delivered ON messages (platform, channel_id, platform_message_id, legacy_copy)
WHERE platform_message_id IS NOT NULL;
""",
)

M010_PRIVACY = Migration(
    "m010_privacy",
    """
-- SEC-5: servers and groups whose admins asked the bot to remember nothing said there (/privacy server off;
-- memory.privacy owns it). Ids and a time only, never anyone's words. A person's own choice is a row of
-- person_settings (memory.people).
CREATE TABLE privacy_places (guild_id TEXT PRIMARY KEY, since REAL NOT NULL);
""",
)

M011_PERSONA = Migration(
    "m011_persona",
    """
-- ORCH-7: a server's or group's own persona text, set by its admins (memory.persona); one row per place.
-- set_by is the admin's person id (or "dashboard"): the words are theirs, so forgetting them removes the row.
CREATE TABLE place_personas (
    guild_id TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    set_by TEXT NOT NULL,
    set_at REAL NOT NULL
);
CREATE INDEX place_personas_set_by ON place_personas (set_by);
""",
)

M012_CHECKINS = Migration(
    "m012_checkins",
    """
-- ORCH-8: who turned check-ins on, and the DM to reach them in (memory.checkins owns both tables). Only a DM is
-- ever recorded: a check-in never goes to a group. Ids only, never words.
CREATE TABLE checkin_people (
    person_id TEXT PRIMARY KEY,
    platform TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    platform_user_id TEXT NOT NULL,
    enabled_at REAL NOT NULL
);
-- One follow-up per (person, memory), planned once: pending -> sending (committed before the network call) -> sent;
-- failed, expired or cancelled otherwise. The message is written when it is sent and stored in the DM's history
-- (message_id), never here. Forgetting the memory deletes its rows by the cascade, whichever path deletes it.
CREATE TABLE checkins (
    id INTEGER PRIMARY KEY,
    person_id TEXT NOT NULL,
    memory_id TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    due_at REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'sending', 'sent', 'failed', 'expired', 'cancelled')),
    attempts INTEGER NOT NULL DEFAULT 0,
    retry_at REAL NOT NULL DEFAULT 0,
    claimed_at REAL,
    sent_at REAL,
    message_id TEXT,
    created_at REAL NOT NULL,
    UNIQUE (person_id, memory_id)
);
CREATE INDEX checkins_due ON checkins (state, due_at);
CREATE INDEX checkins_memory ON checkins (memory_id);
""",
)

# SCALE-1: a background job is claimed before it runs, so several processes on one store run it once. A claim
# lasts ``lease_until`` (the holder renews it while the model writes) and is deleted in the job's last write
# transaction; a holder that died leaves it to expire, and the next taker counts ``attempts``. Job keys name
# chats, days and row ids, never words (memory.storage.claims owns the table).
M013_JOB_CLAIMS = Migration(
    "m013_job_claims",
    """
CREATE TABLE job_claims (
    key TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    lease_until REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 1,
    claimed_at REAL NOT NULL
);
""",
)

M014_SHARED_STATE = Migration(
    "m014_shared_state",
    """
-- SCALE-1 / OPS-5: the per-account message rate limit lives in the store, so it holds across every process of a
-- sharded bot. One row per account ("platform:user id"): the wall-clock times of its recent replies (a JSON list,
-- never longer than the limit), whether it was told to slow down, and when it last wrote. Ids and times, never words;
-- about one row per account, like identities.
CREATE TABLE rate_windows (
    account TEXT PRIMARY KEY,
    hits TEXT NOT NULL DEFAULT '[]',
    told INTEGER NOT NULL DEFAULT 0,
    last_at REAL NOT NULL DEFAULT 0
);
""",
)

# SEC-5: whom a memory is about, by identity (a person id), decided when it is written (memory.write.subjects):
# the speaker, an @mention or reply target, or the one known participant of the place the name matches; NULL for
# nobody in particular (lore, ambiguous names). /about me lists and vetoes by this column, never by display names.
# Backfilled only where it is certain: a person's own fact, learned from their own messages alone, whose subject
# is one of their names or "I"/"me" (the rest stay NULL: their authors still see them as their own).
M015_SUBJECT_PERSON = Migration(
    "m015_subject_person",
    """
ALTER TABLE memories ADD COLUMN subject_person_id TEXT;
CREATE INDEX memories_subject_person ON memories (subject_person_id);
UPDATE memories SET subject_person_id = scope_id
WHERE scope IN ('user', 'owner')
AND EXISTS (SELECT 1 FROM json_each(memories.provenance, '$.sources'))
AND NOT EXISTS (
    SELECT 1 FROM json_each(memories.provenance, '$.sources') AS src
    WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = src.value AND m.author_id = memories.scope_id)
)
AND (lower(subject) IN ('i', 'me', 'myself', 'user')
    OR lower(subject) IN (SELECT lower(i.display_name) FROM identities i WHERE i.person_id = memories.scope_id));
""",
)

M016_TOMBSTONE_TRACES = Migration(
    "m016_tombstone_traces",
    """
-- SEC-5 (issue 31): a tombstone also holds its fact's trace (memory.write.traces): short keyed hashes of the
-- forms of its telling words with their weights ("03f2a:4 191c0:8"), and 32 keyed sign bits of its meaning (hex),
-- so a reworded or translated fact still matches; keyed = 1 when the key is the operator's, outside the store.
-- Rows from before (keyed = 0) were made with the key the store kept in its settings: they keep only their exact
-- hashes, and that key is moved out of the store on first use (memory.write.tombstones.LEGACY).
ALTER TABLE tombstones ADD COLUMN marks TEXT NOT NULL DEFAULT '';
ALTER TABLE tombstones ADD COLUMN signature TEXT NOT NULL DEFAULT '';
ALTER TABLE tombstones ADD COLUMN keyed INTEGER NOT NULL DEFAULT 0;
CREATE INDEX tombstones_owner ON tombstones (scope_id, scope);
""",
)

# ORCH-13: reminders a person asked for (/remind, or the reminder_set tool), owned by memory.storage.reminders.
# The text is the person's words: forgetting them (a matching /forget, /forget everything, a server's purge)
# deletes the row; a one-off reminder's row is deleted once it was delivered. due_at is UTC; zone and wall_time
# ('HH:MM') let a recurring one ('day', 'week') find its next occurrence on the local calendar. A row is claimed
# by a process (holder, lease_until) before it is sent; see the module for why a dead sender's row is sent again.
M020_REMINDERS = Migration(
    "m020_reminders",
    """
CREATE TABLE reminders (
    id INTEGER PRIMARY KEY,
    person_id TEXT NOT NULL,
    platform TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    guild_id TEXT,
    is_dm INTEGER NOT NULL DEFAULT 0,
    platform_user_id TEXT NOT NULL,
    text TEXT NOT NULL,
    zone TEXT NOT NULL,
    due_at REAL NOT NULL,
    every TEXT NOT NULL DEFAULT '' CHECK (every IN ('', 'day', 'week')),
    wall_time TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sending', 'undelivered')),
    attempts INTEGER NOT NULL DEFAULT 0,
    retry_at REAL NOT NULL DEFAULT 0,
    holder TEXT,
    lease_until REAL NOT NULL DEFAULT 0,
    sent_count INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
CREATE INDEX reminders_due ON reminders (state, due_at);
CREATE INDEX reminders_person ON reminders (person_id);
""",
)

# A message re-delivered after a crash (Telegram re-sends updates it did not see confirmed) is stored once: one
# row per (platform, chat, platform message id). Copies stored before this migration are kept (each may be a
# memory's source, and deleting at the source must still find them all) but numbered apart by
# ``legacy_copy`` (their own rid; 0 for every original), so the unique index can be built over them.
# SEC-7: a server or group the bot was removed from is purged after a grace period (memory.upkeep.retention owns the
# table): its id, when the bot left and when the purge is due. Ids and times, never words; the row goes with the purge,
# or when the bot is added back.
M021_RETENTION = Migration(
    "m021_retention",
    """
CREATE TABLE place_departures (
    guild_id TEXT PRIMARY KEY,
    platform TEXT NOT NULL,
    left_at REAL NOT NULL,
    purge_at REAL NOT NULL
);
""",
)

# ORCH-14: the usage ledger (memory.storage.ledger owns it): calls and tokens a day per person, place, job kind and
# model, as the model servers reported them. Counts and ids, never words; a person's rows go when they are forgotten.
M022_USAGE_LEDGER = Migration(
    "m022_usage_ledger",
    """
CREATE TABLE usage_ledger (
    day TEXT NOT NULL,
    person_id TEXT NOT NULL DEFAULT '',
    platform TEXT NOT NULL DEFAULT '',
    place_id TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL,
    model TEXT NOT NULL DEFAULT '',
    calls INTEGER NOT NULL DEFAULT 0,
    unreported INTEGER NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX usage_ledger_key ON usage_ledger (day, person_id, platform, place_id, kind, model);
CREATE INDEX usage_ledger_person ON usage_ledger (person_id, day);
CREATE INDEX usage_ledger_place ON usage_ledger (place_id, person_id, day);  -- a place's own rows, not its people's
""",
)

# ORCH-10/12: group manners and reactions (memory.storage.manners owns the tables). ``place_modes``: a channel's or
# group's mode, set by its admins (ids and a word). ``reply_memories``: which memories a reply of the bot used, and
# ``reply_posts``: the platform ids the reply was posted as, so a reaction on one finds them. ``reply_reactions``:
# one vote per person per reply (a removed and re-added 👍 counts once). ``memory_feedback``: how a memory was
# received, and whether the next reflection should recheck it. Ids, counts and emoji, never words; every row goes
# with its memory or its reply (ON DELETE CASCADE), and a person's votes with the person.
M023_GROUP_MANNERS = Migration(
    "m023_group_manners",
    """
CREATE TABLE place_modes (
    channel_key TEXT PRIMARY KEY,
    guild_id TEXT,
    mode TEXT NOT NULL CHECK (mode IN ('addressed', 'chime-in', 'all')),
    set_at REAL NOT NULL
);
CREATE TABLE reply_memories (
    reply_rid INTEGER NOT NULL REFERENCES messages (rid) ON DELETE CASCADE,
    memory_rid INTEGER NOT NULL REFERENCES memories (rid) ON DELETE CASCADE,
    PRIMARY KEY (reply_rid, memory_rid)
);
CREATE INDEX reply_memories_memory ON reply_memories (memory_rid);
CREATE TABLE reply_posts (
    platform TEXT NOT NULL,
    channel_id TEXT NOT NULL,
    post_id TEXT NOT NULL,
    reply_rid INTEGER NOT NULL REFERENCES messages (rid) ON DELETE CASCADE,
    PRIMARY KEY (platform, channel_id, post_id)
);
CREATE INDEX reply_posts_reply ON reply_posts (reply_rid);
CREATE TABLE reply_reactions (
    reply_rid INTEGER NOT NULL REFERENCES messages (rid) ON DELETE CASCADE,
    person_id TEXT NOT NULL,
    emoji TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (reply_rid, person_id)
);
CREATE INDEX reply_reactions_person ON reply_reactions (person_id);
CREATE TABLE memory_feedback (
    memory_rid INTEGER PRIMARY KEY REFERENCES memories (rid) ON DELETE CASCADE,
    up REAL NOT NULL DEFAULT 0,
    down REAL NOT NULL DEFAULT 0,
    recheck INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL
);
CREATE INDEX memory_feedback_recheck ON memory_feedback (recheck) WHERE recheck = 1;
""",
)


def _words_index(table: str, content: str, columns: tuple[str, ...]) -> str:
    """One word index made anew with the tokenizer that splits unspaced scripts
    (``memory.storage.tokenizer``), its delete and update triggers, and secure-delete. It starts
    empty: ``Database.reindex_words`` fills it from the rows (resumable), so nothing is lost and an
    interrupted upgrade goes on where it stopped."""
    cols = ", ".join(columns)
    old = ", ".join(f"old.{c}" for c in columns)
    new = ", ".join(f"new.{c}" for c in columns)
    return f"""
DROP TRIGGER {content}_ad;
DROP TRIGGER {content}_au;
DROP TABLE {table};
CREATE VIRTUAL TABLE {table} USING fts5 (
    {cols},
    content = '{content}', content_rowid = 'rid', tokenize = 'companion'
);
INSERT INTO {table} ({table}, rank) VALUES ('secure-delete', 1);
CREATE TRIGGER {content}_ad AFTER DELETE ON {content} BEGIN
    INSERT INTO {table} ({table}, rowid, {cols}) VALUES ('delete', old.rid, {old});
END;
CREATE TRIGGER {content}_au AFTER UPDATE OF {cols} ON {content} BEGIN
    INSERT INTO {table} ({table}, rowid, {cols}) VALUES ('delete', old.rid, {old});
    INSERT INTO {table} (rowid, {cols}) VALUES (new.rid, {new});
END;
INSERT INTO settings (key, value) VALUES ('words.reindex.{table}', '0')
    ON CONFLICT (key) DO UPDATE SET value = '0';
"""


# the word indexes, each with the table it indexes and its columns (what ``Database.reindex_words``
# refills)
WORD_INDEXES = {
    "memory_fts": ("memories", ("subject", "content", "tags", "ptoken")),
    "message_fts": ("messages", ("content", "author_name", "context", "ptoken")),
}

# LANG-1: both word indexes made anew with a tokenizer that splits Chinese, Japanese, Thai... (the
# old one read a whole Chinese sentence as one word), then refilled from the rows in steps
# (``Database.reindex_words``).
M024_WORDS_IN_EVERY_SCRIPT = Migration(
    "m024_words_in_every_script",
    "".join(_words_index(table, *source) for table, source in WORD_INDEXES.items()),
)

MIGRATIONS: tuple[Migration, ...] = (
    M001_CORE,
    M002_CONVERSATIONS,
    M003_FTS_INSERT_IN_BULK,
    M004_TRUST,
    M005_DASHBOARD,
    M006_DAILY,
    M007_JOURNALS_INGEST,
    M008_TOMBSTONES,
    M009_MESSAGE_IDEMPOTENCE,
    M010_PRIVACY,
    M011_PERSONA,
    M012_CHECKINS,
    M013_JOB_CLAIMS,
    M014_SHARED_STATE,
    M015_SUBJECT_PERSON,
    M016_TOMBSTONE_TRACES,
    M020_REMINDERS,
    M021_RETENTION,
    M022_USAGE_LEDGER,
    M023_GROUP_MANNERS,
    M024_WORDS_IN_EVERY_SCRIPT,
)
