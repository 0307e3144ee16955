"""Writing: the write policy (dedup, supersession, the judge), extraction from conversation,
tombstones, file ingest and edits or deletes at the source."""
