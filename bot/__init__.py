"""The bot: composition root, config, LLM client, orchestrator, channels, scheduler and CLI."""
