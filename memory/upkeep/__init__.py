"""Upkeep: scheduled maintenance (decay, consolidation, daily reflection, bulletins), journals, re-embedding,
and forgetting and export through the registry of every table that can hold a person's words."""
