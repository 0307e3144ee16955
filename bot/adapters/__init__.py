"""Channel adapters: the only code that imports discord or telegram (CHAN-1..3).

Each adapter turns a platform event into a ``bot.types.IncomingMessage``, decides whether the bot is
addressed, hands it to a ``bot.types.Conversation`` (``reply``, ``observe`` or ``command``) and sends the
answer back in pieces the platform accepts. None of them knows about memory, SQL or the LLM.

- ``telegram_adapter.TelegramAdapter``  python-telegram-bot 22, long polling
- ``discord_adapter.DiscordAdapter``    discord.py 2.7, gateway + slash commands
- ``console.ConsoleChat``               a terminal session, streaming
- ``text.split_message``                splitting long replies (shared)
- ``common``                            command list, errors, per-chat ordering, recent speakers

Import the adapter modules directly: this package does not import them, so using one platform never
loads the other's library.
"""
