"""Voice, the bot's side: ``sessions`` (a voice channel's conversation as the orchestrator answers it:
warm memory, cached searches, compaction into extraction) and ``providers`` (speech to text and back on
an OpenAI-compatible server). The platform's side is ``bot.adapters.discord_voice``; the session itself
(utterances, speech, playback) is the ``voice`` package; its records are ``memory.SpokenSessions``.
"""
