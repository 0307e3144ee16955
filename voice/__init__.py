"""Discord voice sessions (VOICE-1..5). Imports ``memory`` and ``prompts`` only.

Beside the audio path: warm.py (VOICE-2 topic-drift gate), caches.py (VOICE-3 session caches) and
compaction.py (VOICE-4 rolling summary with the WRITE-4 flush), which are pure logic.
"""
