"""Discord voice sessions (VOICE-1..5). Imports ``memory`` and ``prompts`` only; nothing here yet."""
