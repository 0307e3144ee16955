"""Builders for the JSON objects the fake Discord server hands to discord.py.

Kept apart from the server so the (long) shapes Discord uses for users, guilds,
channels, messages and interactions live in one readable place. Ids are emitted
as strings, as the real API does.
"""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime
from typing import Any

BOT_ID = 4242
APPLICATION_ID = 4243
BOT_NAME = "companion"
OWNER_ID = 4244
DISCORD_EPOCH_MS = 1420070400000
_counter = itertools.count()

# view_channel, send_messages, embed_links, attach_files, read_message_history,
# add_reactions, use_application_commands, send_messages_in_threads
EVERYONE_PERMISSIONS = str(sum(1 << bit for bit in (10, 11, 14, 15, 16, 6, 31, 38)))
ALL_PERMISSIONS = str((1 << 50) - 1)


def snowflake() -> int:
    """A fresh, increasing id with a real timestamp, so ``created_at`` works."""
    millis = int(time.time() * 1000) - DISCORD_EPOCH_MS
    return (millis << 22) | (next(_counter) & 0x3FFFFF)


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def user(user_id: int, username: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": str(user_id),
        "username": username,
        "discriminator": "0",
        "global_name": username,
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
    }


def bot_user() -> dict[str, Any]:
    return {
        **user(BOT_ID, BOT_NAME, bot=True),
        "verified": True,
        "mfa_enabled": False,
        "flags": 0,
        "email": None,
    }


def member(user_payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """Guild member; without ``user`` it is the partial form MESSAGE_CREATE uses."""
    data = {
        "roles": [],
        "joined_at": now_iso(),
        "deaf": False,
        "mute": False,
        "flags": 0,
        "nick": None,
        "avatar": None,
        "premium_since": None,
        "pending": False,
    }
    if user_payload is not None:
        data["user"] = user_payload
    return data


def application() -> dict[str, Any]:
    """``GET /oauth2/applications/@me``: discord.py reads these keys at login."""
    return {
        "id": str(APPLICATION_ID),
        "name": BOT_NAME,
        "description": "",
        "icon": None,
        "bot_public": True,
        "bot_require_code_grant": False,
        "verify_key": "0" * 64,
        "owner": user(OWNER_ID, "owner"),
        "team": None,
        "flags": 0,
        "summary": "",
        "rpc_origins": [],
        "bot": bot_user(),
    }


VIEW_CHANNEL = 1 << 10
SEND_MESSAGES = 1 << 11


def text_channel(
    channel_id: int,
    name: str,
    guild_id: int,
    position: int,
    private: bool = False,
    read_only: bool = False,
) -> dict[str, Any]:
    """``private``: @everyone may not view it (only the guild's owner, who may do anything, can read
    it); ``read_only``: @everyone may read it but not post in it (an announcements channel)."""
    denied = (VIEW_CHANNEL if private else 0) | (SEND_MESSAGES if read_only else 0)
    hidden = [{"id": str(guild_id), "type": 0, "allow": "0", "deny": str(denied)}] if denied else []
    return {
        "id": str(channel_id),
        "type": 0,
        "guild_id": str(guild_id),
        "name": name,
        "position": position,
        "permission_overwrites": hidden,
        "nsfw": False,
        "parent_id": None,
        "topic": None,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "flags": 0,
    }


def dm_channel(channel_id: int, recipient: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(channel_id),
        "type": 1,
        "recipients": [recipient],
        "last_message_id": None,
        "flags": 0,
    }


def guild(
    guild_id: int,
    name: str,
    channels: list[tuple[int, str]],
    members: list[tuple[int, str]],
    private: frozenset[int] = frozenset(),
    read_only: frozenset[int] = frozenset(),
) -> dict[str, Any]:
    """A complete GUILD_CREATE body; member_count == len(members) avoids chunking."""
    everyone = {
        "id": str(guild_id),
        "name": "@everyone",
        "permissions": EVERYONE_PERMISSIONS,
        "position": 0,
        "color": 0,
        "hoist": False,
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }
    member_list = [member(bot_user())] + [member(user(uid, uname)) for uid, uname in members]
    return {
        "id": str(guild_id),
        "name": name,
        "icon": None,
        "splash": None,
        "banner": None,
        "discovery_splash": None,
        "description": None,
        "owner_id": str(OWNER_ID),
        "unavailable": False,
        "large": False,
        "member_count": len(member_list),
        "joined_at": now_iso(),
        "roles": [everyone],
        "emojis": [],
        "stickers": [],
        "features": [],
        "channels": [
            text_channel(cid, cname, guild_id, i, cid in private, cid in read_only)
            for i, (cid, cname) in enumerate(channels)
        ],
        "threads": [],
        "members": member_list,
        "presences": [],
        "voice_states": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "mfa_level": 0,
        "nsfw_level": 0,
        "premium_tier": 0,
        "premium_subscription_count": 0,
        "premium_progress_bar_enabled": False,
        "system_channel_id": None,
        "system_channel_flags": 0,
        "rules_channel_id": None,
        "public_updates_channel_id": None,
        "afk_channel_id": None,
        "afk_timeout": 300,
        "application_id": None,
        "vanity_url_code": None,
        "preferred_locale": "en-US",
        "max_members": 500000,
        "max_video_channel_users": 25,
    }


def message(
    message_id: int, channel_id: int, author: dict[str, Any], content: str, **extra: Any
) -> dict[str, Any]:
    """A full message object; ``extra`` adds or overrides keys (guild_id, member...)."""
    data = {
        "id": str(message_id),
        "channel_id": str(channel_id),
        "author": author,
        "content": content,
        "timestamp": now_iso(),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "components": [],
        "pinned": False,
        "type": 0,
        "flags": 0,
    }
    data.update(extra)
    return data


def option_type(value: Any) -> int:
    """Application-command option type for a Python value (str 3, int 4, ...)."""
    if isinstance(value, bool):
        return 5
    if isinstance(value, int):
        return 4
    if isinstance(value, float):
        return 10
    return 3


def interaction(
    interaction_id: int,
    token: str,
    name: str,
    *,
    user_payload: dict[str, Any],
    channel: dict[str, Any],
    guild_id: int | None,
    options: list[dict[str, Any]],
    command_id: int,
    command_guild_id: int | None,
) -> dict[str, Any]:
    """An APPLICATION_COMMAND (type 2) INTERACTION_CREATE body, guild or DM."""
    data: dict[str, Any] = {"id": str(command_id), "name": name, "type": 1, "options": options}
    if command_guild_id is not None:
        data["guild_id"] = str(command_guild_id)
    payload: dict[str, Any] = {
        "id": str(interaction_id),
        "application_id": str(APPLICATION_ID),
        "type": 2,
        "token": token,
        "version": 1,
        "data": data,
        "channel_id": channel["id"],
        "channel": channel,
        "locale": "en-US",
        "app_permissions": ALL_PERMISSIONS,
        "entitlements": [],
        "attachment_size_limit": 26214400,
    }
    if guild_id is not None:
        payload.update(
            guild_id=str(guild_id),
            guild_locale="en-US",
            context=0,
            member={**member(user_payload), "permissions": ALL_PERMISSIONS},
            authorizing_integration_owners={"0": str(guild_id)},
        )
    else:
        payload.update(
            user=user_payload, context=1, authorizing_integration_owners={"1": user_payload["id"]}
        )
    return payload
