"""In-process fake OpenAI, Telegram and Discord servers for end-to-end tests.

Each is an aiohttp server on 127.0.0.1 (ephemeral port) used as an async
context manager inside the test's event loop, so the real client libraries run
unmodified against it.
"""

from ._base import FakeFile
from .discord_server import APPLICATION_ID as DISCORD_APPLICATION_ID
from .discord_server import BOT_ID as DISCORD_BOT_ID
from .discord_server import FakeDiscord
from .openai_server import Delay, FakeOpenAI, HTTPError, ToolCall, embed
from .telegram_server import BOT_ID as TELEGRAM_BOT_ID
from .telegram_server import BOT_USERNAME as TELEGRAM_BOT_USERNAME
from .telegram_server import FakeTelegram

__all__ = [
    "DISCORD_APPLICATION_ID",
    "DISCORD_BOT_ID",
    "Delay",
    "FakeDiscord",
    "FakeFile",
    "FakeOpenAI",
    "FakeTelegram",
    "HTTPError",
    "TELEGRAM_BOT_ID",
    "TELEGRAM_BOT_USERNAME",
    "ToolCall",
    "embed",
]
