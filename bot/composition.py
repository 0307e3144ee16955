"""The composition root: the one place Settings become objects.

    build_embedder   the configured embedding model (or None: BM25 only)
    open_engine      a store for a command (read-only for commands that only read)
    build_completer  the blocking extraction-model client maintenance commands use
    build_budgets    the usage ledger's recorder and the daily budgets (ORCH-14), for the model clients and replies
    build_runtime    the bot's whole object graph, as one frozen bundle: store, memory thread, model clients,
                     orchestrator, background work, daily jobs, check-ins, scheduler settings (the
                     adapters, built after it, are filed in its check-in and reminder jobs)
    build_orchestrator  the reply pipeline and its collaborators (also the bench's turn hook)
    build_checkins   the check-in job (ORCH-8); build_channels hands it each adapter's delivery to DMs
    build_channels   the chat adapters (and voice) for ``companion run``
    build_ingest_watch  the ingest folder watched while the bot runs (COMPANION_INGEST_DIR)
    build_dashboard  the dashboard on the bot's store and memory thread (COMPANION_DASHBOARD_ENABLED)

Everything built here is handed its values and never reads configuration again. Imports of the store,
the SDKs and the platforms are made inside the functions, so the command line can import this module
without paying for them (``--help``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .clients import secret
from .counts import counted
from .secret_key import tombstone_key

if TYPE_CHECKING:
    from memory import (
        AsyncMemory,
        AsyncRunner,
        Clock,
        Embedder,
        IngestTarget,
        MemoryEngine,
        Timezones,
    )

    from .checkins import CheckinJob
    from .config import Settings
    from .daily import BulletinRefresh, DailyReflection
    from .dashboard.app import DashboardServer
    from .health import Metrics
    from .images.vision import VisionOptions
    from .ingest_watch import IngestWatch
    from .jobs import JobRunner
    from .manners import Judge
    from .model.client import ChatClient, SyncCompleter, UsageHook
    from .model.gate import ModelGate
    from .orchestrator import Orchestrator
    from .persona import Persona
    from .reminders.sending import ReminderJob
    from .resolution import OwnerPolicy
    from .runtime import Runtime
    from .schedule import Schedule
    from .spending.budgets import Budgets, Limits
    from .spoken.sessions import Extract, VoiceOptions
    from .types import Conversation

_DEFAULT: Any = object()  # "the configured one", as opposed to an explicit None (no embeddings)


def build_embedder(settings: Settings, *, timeout: float | None = None) -> Embedder | None:
    """The configured embedding model; None when embeddings are off (recall then uses BM25 only).

    ``timeout`` bounds each request of a remote provider (the doctor's short check); None keeps its default.
    """
    if settings.embeddings == "local":
        return _local_embedder(settings)
    if settings.embeddings == "openai":
        from .model.client import OpenAIEmbedder

        return OpenAIEmbedder(
            base_url=settings.embedding_base_url or settings.llm_base_url,
            api_key=secret(settings.embedding_api_key) or secret(settings.llm_api_key),
            model=settings.embedding_model,
            dim=settings.embedding_dim,
            **({"timeout": timeout} if timeout is not None else {}),
        )
    return None


def _local_embedder(settings: Settings) -> Embedder:
    """The bundled model chosen (an own ONNX folder is an English-family model run the same way)."""
    from memory import LocalDefault, MultilingualE5, OnnxMiniLM

    if settings.embedding_local == "english" or settings.embedding_model_dir is not None:
        return OnnxMiniLM(model_dir=settings.embedding_model_dir)
    return MultilingualE5() if settings.embedding_local == "multilingual" else LocalDefault()


def open_engine(
    settings: Settings,
    embedder: Embedder | None,
    *,
    readonly: bool = False,
    clock: Clock | None = None,
) -> MemoryEngine:
    """The store at ``settings.db_path`` (the one way a store is opened: a command's and the bot's); pass
    ``embedder=None`` for work that never embeds (and for reembed).

    ``readonly`` is for commands that only read: a read-only file still serves them, and a mistyped
    path is an error instead of a new empty store. A configured model that did not make the stored
    vectors is refused here, before any work (MEM-4).
    """
    from memory import MemoryEngine, is_postgres, read_only

    from .config import journal_dir, store_location

    where = store_location(settings)
    # a PostgreSQL reader is a role the operator grants, not a file mode
    readonly = readonly and not is_postgres(where)
    if readonly:
        _upgrade_once(settings.db_path)
    engine = MemoryEngine(
        read_only(settings.db_path) if readonly else where,
        embedder,
        clock,
        vector_mirror=settings.vector_mirror,
        vector_mirror_mb=settings.vector_mirror_mb,
        journal_dir=None if readonly else journal_dir(settings),
        secret_key=tombstone_key(settings),
        **_repository_settings(settings),
    )
    try:
        engine.embeddings.check_model()
    except BaseException:
        engine.close()
        raise
    return engine


def _upgrade_once(path: Path) -> None:
    """A store written by an older version is migrated before a reader opens it, as any writing command would do."""
    from memory import SchemaError, StoreFile, StoreUnavailable

    reader = StoreFile(path)
    behind = reader.behind
    reader.close()
    if not behind:
        return
    try:
        StoreFile.upgrade(path)
    except StoreUnavailable:
        raise SchemaError(
            f"{path} was written by an older companion and needs "
            f"{counted(behind, 'schema migration')}, "
            "but it is read-only: make it writable once to upgrade it"
        ) from None


def build_completer(
    settings: Settings,
    engine: MemoryEngine | None = None,
    kind: str = "other",
    runner: AsyncRunner | None = None,
) -> SyncCompleter:
    """With ``engine``, each call is filed in its usage ledger under ``kind`` (ORCH-14): on the caller's thread, or
    queued on ``runner``'s memory thread (``bot.spending.budgets.ledger_hook``)."""
    from .config import llm_timeouts
    from .model.client import SyncCompleter
    from .spending.budgets import ledger_hook

    server = extraction_server(settings)
    return SyncCompleter(
        *server,
        settings.extraction_model or settings.chat_model,
        timeout=llm_timeouts(settings, server[0])[0],
        max_retries=settings.llm_max_retries,
        max_tokens=settings.job_max_tokens,
        on_usage=ledger_hook(engine, kind, runner) if engine is not None else None,
    )


def build_runtime(
    settings: Settings,
    *,
    clock: Clock | None = None,
    embedder: Embedder | None = _DEFAULT,
    backoff_s: float = 0.5,
) -> Runtime:
    """The bot's object graph, refused (before anything starts) when the embedding model did not make the
    store's vectors. ``clock``, ``embedder`` and ``backoff_s`` are for tests and benchmarks. Each part is built
    with everything it needs but one: the check-in and reminder jobs' tables of outlets
    (platform -> adapter) start empty. The adapters talk to this runtime's front door, so they are
    built after it, and whoever builds them (``build_channels``, the console) files each one in
    those two tables."""
    from memory import AsyncRunner

    from .background import Background
    from .health import Metrics
    from .jobs import JobRunner, ModelCompleter
    from .manners import ModelJudge
    from .resolution import OwnerPolicy
    from .runtime import Runtime
    from .spoken.providers import voice_options

    engine, persona = _open_for_the_bot(
        settings, clock, build_embedder(settings) if embedder is _DEFAULT else embedder
    )
    runner = AsyncRunner()
    buffer, summaries, channels, zones = (
        engine.buffer,
        engine.summaries,
        engine.channels,
        engine.zones,
    )
    # OPS-5: /metrics, counted by the chat model's client and the adapters' front door
    metrics = Metrics()
    # ORCH-14: both clients' calls go to its ledger
    budgets = build_budgets(settings, engine, runner, metrics)
    gate = model_gate(settings)  # issue 45: replies before background calls on one local model
    extraction_model = _chat_client(
        settings,
        settings.extraction_model or settings.chat_model,
        backoff_s,
        server=extraction_server(settings),
        max_tokens=settings.job_max_tokens,
        on_usage=budgets.record,
    )
    chat_model = _chat_client(
        settings,
        settings.chat_model,
        backoff_s,
        on_call=metrics.model_call,
        max_tokens=settings.reply_max_tokens,
        on_usage=budgets.record,
        gate=gate,
    )
    jobs = JobRunner(
        engine, runner, ModelCompleter(extraction_model, gate), lease_s=settings.job_lease_s
    )
    background = Background(
        jobs,
        buffer,
        channels,
        summaries,
        silence_s=settings.reflection_silence_s,
        zone_of=zones.name_of,
    )
    orchestrator = build_orchestrator(
        engine,
        runner,
        chat_model,
        owners=OwnerPolicy(frozenset(settings.owner_ids)),
        persona=persona,
        summary_window_s=settings.summary_window_s,
        voice_options=voice_options(settings),
        extract=background.extract,  # WRITE-4: a voice compaction hands its turns to extraction first
        vision=vision_options(settings),  # ORCH-11
        limits=budgets.limits,
        judge=ModelJudge(ModelCompleter(extraction_model), lambda: persona.name)
        if settings.manners_judge
        else None,
    )
    daily, bulletins = _daily_jobs(settings, jobs, zones)
    return Runtime(
        engine,
        runner,
        orchestrator,
        background,
        _schedule(settings),
        daily=daily,
        bulletins=bulletins,
        checkins=build_checkins(settings, orchestrator, budgets),  # ORCH-8
        reminders=build_reminders(settings, orchestrator.memory),  # ORCH-13
        ingest=build_ingest_watch(settings, engine, runner)
        if settings.ingest_dir is not None
        else None,
        dashboard=build_dashboard(settings, engine, runner, orchestrator, budgets.limits)
        if settings.dashboard_enabled
        else None,
        metrics=metrics,
        budgets=budgets,
        **build_retention(settings, jobs),  # SEC-7
        flush_s=settings.shutdown_flush_s,
        models=(chat_model, extraction_model),
    )


def build_budgets(
    settings: Settings, engine: MemoryEngine, runner: AsyncRunner, metrics: Metrics | None = None
) -> Budgets:
    """ORCH-14: the usage ledger's recorder and the daily budgets."""

    from .spending.budgets import Budgets, Limits

    limits = Limits(settings.budget_person_tokens, settings.budget_server_tokens)
    return Budgets(engine.ledger, runner, engine.clock, limits, metrics)


def build_retention(settings: Settings, jobs: JobRunner) -> dict[str, Any]:
    """SEC-7: the periodic retention job and the adapters' place watch, sharing one record of departures."""
    from memory import Housekeeping, Leaving

    from .retention import PlaceWatch, RetentionJob

    leaving = Leaving(jobs.engine, jobs.runner, settings.leave_grace_days)
    days = settings.message_retention_days or None
    upkeep = Housekeeping(jobs.engine, jobs.runner)
    return {
        "retention": RetentionJob(jobs, upkeep, leaving, days),
        "places": PlaceWatch(leaving),
    }


def _open_for_the_bot(
    settings: Settings, clock: Clock | None, embedder: Embedder | None
) -> tuple[MemoryEngine, Persona]:
    """The bot's store (``open_engine``) and persona; the store closed when the persona cannot be read."""
    from .persona import Persona, read_persona

    engine = open_engine(settings, embedder, clock=clock)
    try:
        # checked by Settings already; read once here
        return engine, Persona(read_persona(settings.persona_file))
    except BaseException:
        engine.close()
        raise


def _repository_settings(settings: Settings) -> dict[str, Any]:
    """The operator's settings of the engine's repositories (each built once, by the engine)."""
    return {
        "extraction_debounce_s": settings.extraction_debounce_s,
        "summary_ttl_s": settings.summary_ttl_s,
        "timezone": settings.timezone,
    }


def _daily_jobs(
    settings: Settings, jobs: JobRunner, zones: Timezones
) -> tuple[DailyReflection, BulletinRefresh]:
    """MAINT-4's reflection on each chat's day (in its zone) and MAINT-5's bulletin refresh, for the scheduler."""
    from memory import Bulletins, DailyReflections

    from .daily import BulletinRefresh, DailyReflection

    days = DailyReflections(jobs.engine, zone_for=zones.zone_for)
    return DailyReflection(jobs, days, zones.name_of), BulletinRefresh(
        jobs, Bulletins(jobs.engine, min_changes=settings.bulletin_min_changes)
    )


def _schedule(settings: Settings) -> Schedule:
    from .schedule import Schedule

    return Schedule(
        settings.scheduler_enabled,
        settings.consolidation_cron,
        settings.maintenance_cron,
        daily_cron=settings.daily_reflection_cron,
        bulletin_cron=settings.bulletin_cron,
        checkin_cron=settings.checkin_cron,
        retention_cron=settings.retention_cron,
    )


def build_orchestrator(
    engine: MemoryEngine,
    runner: AsyncRunner,
    llm: ChatClient,
    *,
    owners: OwnerPolicy,
    persona: Persona,
    summary_window_s: float = 1800.0,
    voice_options: VoiceOptions | None = None,
    extract: Extract | None = None,
    vision: VisionOptions | None = None,
    limits: Limits | None = None,
    judge: Judge | None = None,
) -> Orchestrator:
    """The reply pipeline and what it is made of. ``extract`` is the background's extraction of a channel's
    buffered turns; without it (the bench) a voice flush only makes the turns due for the next tick."""
    from memory import AsyncMemory

    from .assembly import Assembler
    from .commands import CommandDesk, Commands
    from .images.vision import Sight
    from .manners import GroupManners
    from .orchestrator import Orchestrator
    from .resolution import Resolver
    from .spending.budgets import Limits
    from .spoken.sessions import VoiceOptions, VoiceSessions

    people, buffer, channels = engine.people, engine.buffer, engine.channels
    resolver = Resolver(people, owners, engine.zones, channels)
    voice = VoiceSessions(engine, runner, llm, voice_options or VoiceOptions(), extract=extract)
    assembler = Assembler(engine, persona=persona, summary_window_s=summary_window_s)
    return Orchestrator(
        engine,
        runner,
        llm,
        resolver=resolver,
        memory=AsyncMemory(engine, runner, buffer=buffer, channels=channels),
        assembler=assembler,
        commands=CommandDesk(
            Commands(engine, people, resolver.resolve, persona, engine.zones, limits or Limits()),
            runner,
        ),
        voice=voice,
        sight=Sight(llm, runner, engine.model_traits, vision) if vision is not None else None,
        manners=GroupManners(lambda: assembler.bot_name, judge, clock=engine.clock.now),  # ORCH-10
    )


def vision_options(settings: Settings) -> VisionOptions:
    """ORCH-11: whether the chat model gets images, and the limits on what people send."""
    from .images.intake import MB, ImageLimits
    from .images.vision import VisionOptions, vision_key

    limits = ImageLimits(int(settings.image_max_mb * MB), settings.images_per_message)
    return VisionOptions(
        settings.vision, limits, vision_key(settings.llm_base_url, settings.chat_model)
    )


def build_checkins(
    settings: Settings, orchestrator: Orchestrator, budgets: Budgets | None = None
) -> CheckinJob:
    """ORCH-8: the check-in job on the chat model; the adapters add their deliveries when they start. None are
    written for a person whose day's spend reached QUIET (ORCH-14)."""
    from memory import QuietHours

    from .checkins import CheckinJob, CheckinOptions

    options = CheckinOptions(
        per_week=settings.checkins_per_week, quiet=QuietHours.parse(settings.checkin_quiet_hours)
    )
    from .jobs import JobRunner, ModelCompleter

    # a check-in is a chat turn
    chat_model = JobRunner(
        orchestrator.engine,
        orchestrator.runner,
        ModelCompleter(orchestrator.llm, orchestrator.llm.gate),
        lease_s=settings.job_lease_s,
    )
    return CheckinJob(
        chat_model,
        orchestrator.resolve,
        lambda: orchestrator.assembler.bot_name,
        orchestrator.zones.zone_of,  # quiet hours and due days in the person's own zone
        options,
        allowed=None
        if budgets is None
        else lambda person, where: budgets.allows_checkin(
            person, orchestrator.owners.is_owner(*where)
        ),
    )


def build_reminders(settings: Settings, memory: AsyncMemory) -> ReminderJob:
    """ORCH-13: the reminder job on memory's reminders service; the adapters add themselves to its posts when they start."""
    from .reminders.sending import ReminderJob

    return ReminderJob(memory.reminding, lease_s=settings.job_lease_s)


def ingest_target(settings: Settings) -> IngestTarget:
    """Where ingested files go unless told otherwise: the owner's private memory (the first configured owner,
    else the console's local user, whom ``companion chat`` treats as the owner)."""
    from memory import IngestTarget
    from memory.models import Scope, Visibility

    return IngestTarget(
        Scope.OWNER, (settings.owner_ids or ["console:local-user"])[0], Visibility.PRIVATE
    )


def has_model(settings: Settings) -> bool:
    """Whether an extraction model is configured: a key, or a server other than the default (local ones need no key)."""
    default = type(settings).model_fields["llm_base_url"].default
    return settings.llm_api_key is not None or settings.llm_base_url.rstrip("/") != str(
        default
    ).rstrip("/")


def build_ingest_watch(
    settings: Settings, engine: MemoryEngine, runner: AsyncRunner
) -> IngestWatch:
    """The ingest folder (WRITE-7), ingested into the owner's memory, by the extraction model when there is one."""
    from memory import Ingesting

    from .ingest_watch import IngestWatch

    assert settings.ingest_dir is not None
    complete = build_completer(settings, engine, "ingest", runner) if has_model(settings) else None
    ingesting = Ingesting(engine, runner, ingest_target(settings), complete)
    return IngestWatch(ingesting, settings.ingest_dir, settings.ingest_poll_s)


def build_dashboard(
    settings: Settings,
    engine: MemoryEngine,
    runner: AsyncRunner,
    orchestrator: Orchestrator,
    limits: Limits | None = None,
) -> DashboardServer:
    """The dashboard over the running bot's own store and memory thread (no second writer), started and
    stopped with it; refused, before anything starts, without a long COMPANION_DASHBOARD_TOKEN or on a
    non-loopback host that is not allowed (DASH-3, ``bot.dashboard.startup``)."""
    from .config import ConfigError
    from .dashboard.app import DashboardServer, create_app
    from .dashboard.services import DashboardServices
    from .dashboard.startup import start_refusal

    token = secret(settings.dashboard_token)
    problem = start_refusal(
        token, settings.dashboard_host, allow_remote=settings.dashboard_allow_remote
    )
    if problem:
        engine.close()
        runner.shutdown()
        raise ConfigError(problem)
    services = DashboardServices.of(engine, runner, orchestrator, limits)
    app = create_app(services, token=token, public_hosts=public_hosts(settings))
    return DashboardServer(app, settings.dashboard_host, settings.dashboard_port)


def public_hosts(settings: Settings) -> tuple[str, ...]:
    """Host names the dashboard answers to besides loopback ones (COMPANION_DASHBOARD_PUBLIC_HOST, comma-separated)."""
    return tuple(h.strip() for h in (settings.dashboard_public_host or "").split(",") if h.strip())


def extraction_server(settings: Settings) -> tuple[str, str]:
    """(base URL, key) of the extraction model: its own when set (a local model for extraction), else the chat model's."""
    return (
        settings.extraction_base_url or settings.llm_base_url,
        secret(settings.extraction_api_key)
        or (secret(settings.llm_api_key) if not settings.extraction_base_url else ""),
    )


def model_gate(settings: Settings) -> ModelGate | None:
    """One gate for the replies and the background jobs when both ask one local server (a model
    of one slot, COMPANION_LOCAL_MODEL among them); None when the jobs have a server of their own,
    or the server is remote (it answers many at once; a busy bot's replies would starve the jobs)."""
    from .model.gate import ModelGate
    from .model.quirks import is_local

    shared = extraction_server(settings)[0] == settings.llm_base_url
    return ModelGate() if shared and is_local(settings.llm_base_url) else None


def _chat_client(
    settings: Settings,
    model: str,
    backoff_s: float,
    *,
    server: tuple[str, str] | None = None,
    on_call: Callable[[float, bool], None] | None = None,
    max_tokens: int | None = None,
    on_usage: UsageHook | None = None,
    gate: ModelGate | None = None,
) -> ChatClient:
    from .config import llm_timeouts
    from .model.client import ChatClient

    base_url, api_key = server or (settings.llm_base_url, secret(settings.llm_api_key))
    timeout, deadline = llm_timeouts(settings, base_url)
    return ChatClient(
        base_url,
        api_key,
        model,
        timeout=timeout,
        max_retries=settings.llm_max_retries,
        backoff_s=backoff_s,
        max_steps=settings.max_tool_steps,
        turn_deadline_s=deadline,
        on_call=on_call,
        max_tokens=max_tokens,
        on_usage=on_usage,
        gate=gate,
    )


def build_channels(settings: Settings, runtime: Runtime) -> tuple[list[Any], Any]:
    """The adapters for the platforms that have a token, and Discord voice when it is enabled (joined only
    when someone asks with /voice join; the speech model loads on first use)."""
    adapters: list[Any] = []
    voice = None
    conversation = front_door_of(settings, runtime)
    if (
        settings.telegram_token and settings.telegram == "on"
    ):  # off: another process of this bot polls Telegram
        from .adapters.telegram_adapter import TelegramAdapter

        adapters.append(
            TelegramAdapter(conversation, secret(settings.telegram_token), places=runtime.places)
        )
    if settings.discord_token:
        from .adapters.discord_adapter import DiscordAdapter, Shards

        persona = runtime.orchestrator.persona
        shards = (
            Shards(settings.discord_shard_count, tuple(settings.discord_shards))
            if settings.discord_shard_count
            else None
        )
        discord_adapter = DiscordAdapter(
            conversation,
            secret(settings.discord_token),
            channels=settings.discord_channels,
            on_named=persona.learn_platform_name,
            shards=shards,
            places=runtime.places,
        )
        adapters.append(discord_adapter)
        if settings.voice_enabled:
            voice = _discord_voice(settings, runtime, discord_adapter)
    if (
        runtime.checkins is not None
    ):  # ORCH-8: a check-in goes out through the adapter of the DM it was asked for in
        runtime.checkins.deliveries.update(
            {adapter.platform: adapter.send_direct for adapter in adapters}
        )
    if (
        runtime.reminders is not None
    ):  # ORCH-13: a reminder goes out through the adapter of the place it was asked in
        runtime.reminders.posts.update({adapter.platform: adapter for adapter in adapters})
    return adapters, voice


def front_door_of(settings: Settings, runtime: Runtime) -> Conversation:
    """The orchestrator as the chat adapters see it: counted for /metrics, behind the per-person rate limit (OPS-5),
    each reply charged and held to the daily budgets (ORCH-14)."""

    from .ratelimit import MessageLimit, Window, front_door

    limit = MessageLimit(settings.rate_limit_messages, settings.rate_limit_window_s)
    return front_door(
        budgeted(runtime),
        Window(limit, runtime.engine.rate_windows, runtime.runner),
        runtime.metrics,
    )


def budgeted(runtime: Runtime) -> Conversation:
    """The orchestrator behind the daily budgets (ORCH-14), for the chat adapters and voice; itself without them."""
    from .spending.budgets import Budgeted

    orchestrator = runtime.orchestrator
    if runtime.budgets is None:
        return orchestrator
    return Budgeted(
        orchestrator,
        runtime.budgets,
        orchestrator.people,
        orchestrator.owners,
        lambda: orchestrator.assembler.bot_name,
    )


def build_health(settings: Settings, runtime: Runtime) -> Any:
    """GET /healthz and /metrics for ``companion run`` (OPS-5); None when turned off."""
    from .health import HealthServer, Metrics, Queues

    if not settings.health_enabled:
        return None

    async def queues() -> Queues:
        buffer = runtime.background.buffer
        return Queues(
            await runtime.runner.run(buffer.pending), await runtime.runner.run(buffer.dead_count)
        )

    return HealthServer(
        runtime.metrics or Metrics(), queues, settings.health_host, settings.health_port
    )


def _discord_voice(settings: Settings, runtime: Runtime, adapter: Any) -> Any:
    from .adapters.discord_voice import DiscordVoice, register_voice_commands
    from .spoken.providers import speech_providers, voice_settings

    stt, tts = speech_providers(settings)
    persona = runtime.orchestrator.persona
    voice = DiscordVoice(
        adapter.client,
        budgeted(runtime),
        stt,
        tts,
        voice_settings(settings),
        wake_name=lambda: persona.name,
    )
    register_voice_commands(adapter.client.tree, voice)
    return voice
