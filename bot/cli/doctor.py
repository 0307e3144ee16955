"""``companion doctor``: is everything the bot needs in place, and if not, what to change.

    check         what it does                                                          fails when
    config        loads Settings (a bad variable is reported, not a crash)              a variable is invalid
    store         opens the store read-only: schema version, PRAGMA quick_check         damaged, not a store, newer
                  (PostgreSQL: server and pgvector versions, database size, schema)     unreachable, no pgvector, newer
    model         one short chat completion with the chat (and extraction) model        unreachable, key or model refused
    vision        whether the chat model sees images: COMPANION_VISION, or the answer   (a warning: it cannot see)
                  the bot kept when it first showed the model a test image (ORCH-11)
    local model   COMPANION_LOCAL_MODEL: the file, its size and name, its load time,    it does not answer
                  and its speed in one timed completion (prompt and generated tokens/s)
    api key       an empty key for a server that is not on this machine or network      (a warning)
    embeddings    one embedding; its dimension and fingerprint against the store's      provider down, model mismatch
    tokens        the format of DISCORD_TOKEN / TELEGRAM_TOKEN (no connection made)     malformed
    schedule      the cron expressions and when they fire next                          invalid
    files         the store and its -wal/-shm, its folder, journals, exports, the log    group or others may read

Exit 1 when a check fails (warnings do not fail). The network checks are bounded and never retried:
the doctor reports the state of things, it does not wait for a server to come back.

Other commands reuse the cheap checks before they start: ``run`` refuses a malformed token
(``token_problems``) before connecting, and ``chat`` warns (``startup_warnings``) when the key is
missing for a remote server or the server does not answer. This module imports only the standard
library at the top (the command line imports it to register ``doctor``).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..counts import counted

if TYPE_CHECKING:
    from memory import ServerFacts, SightTrait, StoreFile

    from ..config import Settings
    from ..model.local import Loaded

# Discord: base64url(user id) . base64url(timestamp) . base64url(HMAC); Telegram: bot id ":" 35 characters.
DISCORD_TOKEN = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
TELEGRAM_TOKEN = re.compile(r"\d+:[A-Za-z0-9_-]{35}")
REACH_TIMEOUT_S = (
    3.0  # chat's start-up check: long enough for a remote API, short enough not to annoy
)
MODEL_TIMEOUT_S = 20.0  # doctor's completion: a local model may need to load first
# the timed completion of a model in this process: a 1.5B on one busy core read ~3 prompt tokens a second
LOCAL_MODEL_TIMEOUT_S = 120.0
SPEED_PROMPT = "In one sentence: why do people keep diaries?"
EMBED_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    status: str  # "ok" | "warn" | "fail"
    detail: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class Unreachable:
    """Why the model server did not take a request: ``key`` when it answered but refused the API key."""

    message: str
    key: bool = False


def register(subparsers: argparse._SubParsersAction) -> None:
    text = "check the model server, embeddings, tokens, store and schedule, and say what to fix"
    p = subparsers.add_parser(
        "doctor", help=text, description=text + " (exit 1 if something is wrong)"
    )
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.set_defaults(
        handler=run_doctor,
        on_config_error=report_config_error,
        uses_model=True,
        report_only=True,  # no INFO log lines among the findings (bot.cli.main)
    )


def run_doctor(args: argparse.Namespace, settings: Settings) -> int:
    return report(
        [*home_findings(args), *run_checks(settings, getattr(args, "local_model", None))],
        as_json=args.json,
    )


def home_findings(args: argparse.Namespace) -> list[Finding]:
    """Which config file was read (bot/home.py): the first thing to check when the bot seems to have forgotten everything."""
    home = getattr(args, "home", None)
    if home is None:
        return []
    # No file is fine (a container is configured by its environment); the line still says where none was found.
    return [Finding("config file", "ok", home.describe_config())]


def report_config_error(args: argparse.Namespace, error: Exception) -> int:
    """Settings did not load: that is the finding (the other checks need Settings)."""
    finding = Finding(
        "config",
        "fail",
        str(error),
        "fix the variables named above in .env or the environment (see .env.example)",
    )
    return report([*home_findings(args), finding], as_json=args.json)


def run_checks(settings: Settings, local: Loaded | None = None) -> list[Finding]:
    """Every check; ``local`` is the model file loaded in this process (COMPANION_LOCAL_MODEL), timed instead of asked."""
    from ..clients import secret
    from ..config import store_location

    where = str(store_location(settings))
    is_pg = where.startswith(("postgresql://", "postgres://"))
    store, stored = (
        check_pg_store(where) if is_pg else check_store(Path(where.removeprefix("sqlite://")))
    )
    return [
        store,
        *([] if is_pg else [check_files(Path(where.removeprefix("sqlite://")), settings)]),
        *(
            [check_local_model(local, settings.llm_base_url, secret(settings.llm_api_key))]
            if local
            else check_models(settings)
        ),
        check_vision(settings, where),
        *check_key(settings),
        check_embeddings(settings, stored),
        *check_tokens(settings),
        check_schedule(settings),
    ]


def report(findings: list[Finding], *, as_json: bool) -> int:
    """Plain lines (no wrapping: a finding is read, or grepped, whole), or one JSON document; exit 1 on a failure."""
    failed = [f for f in findings if f.status == "fail"]
    if as_json:
        from .output import print_json

        print_json({"ok": not failed, "checks": [asdict(f) for f in findings]})
        return 1 if failed else 0
    lines = []
    for f in findings:
        lines.append(f"{f.status.upper():<5} {f.check:<17} {f.detail}")
        if f.fix and f.status != "ok":
            lines.append(f"{'':<23} fix: {f.fix}")
    lines.append(
        f"{counted(len(failed), 'problem')} to fix" if failed else "everything needed is in place"
    )
    sys.stdout.write("\n".join(lines) + "\n")
    return 1 if failed else 0


# -- the cheap checks other commands reuse --------------------------------------------------------------
def token_problems(discord: str, telegram: str) -> list[str]:
    """One line per malformed token, naming its variable; the token itself is never shown (SEC-4)."""
    problems = []
    if discord and not DISCORD_TOKEN.fullmatch(discord):
        hint = (
            "leave out the 'Bot ' prefix"
            if discord.lower().startswith("bot ")
            else "copy it again from the Bot page of the developer portal"
        )
        problems.append(
            f"DISCORD_TOKEN is not a Discord bot token (three dot-separated base64 parts): {hint}"
        )
    if telegram and not TELEGRAM_TOKEN.fullmatch(telegram):
        problems.append(
            "TELEGRAM_TOKEN is not a Telegram bot token (digits:35 characters): copy it again from @BotFather"
        )
    return problems


def key_warning(base_url: str, api_key: str) -> str | None:
    from ..model.quirks import is_local  # it imports openai: not at --help's start

    if api_key or is_local(base_url):
        return None
    return f"OPENAI_API_KEY is empty but the model server {base_url} is not on this machine: set the key in .env"


def reach(base_url: str, api_key: str, timeout: float = REACH_TIMEOUT_S) -> Unreachable | None:
    """None when the server answers a GET of /models (free, and any answer but 401/403 will do); else why not."""
    import urllib.error
    import urllib.request

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(f"{base_url.rstrip('/')}/models", headers=headers),
            timeout=timeout,
        ):
            return None
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return Unreachable(
                f"the model server at {base_url} refused the API key (HTTP {exc.code}): check OPENAI_API_KEY",
                key=True,
            )
        return None  # it answered; some servers simply have no /models
    except (OSError, ValueError) as exc:  # refused, timed out, no such host, or not a URL at all
        reason = getattr(exc, "reason", exc)
        return Unreachable(
            f"cannot reach the model server at {base_url} ({reason}): is it running? check OPENAI_BASE_URL"
        )


def startup_warnings(base_url: str, api_key: str) -> list[str]:
    """What ``chat`` says before it starts: a missing key, a server that does not answer (bounded by REACH_TIMEOUT_S)."""
    warnings = [w for w in (key_warning(base_url, api_key),) if w]
    problem = reach(base_url, api_key)
    if problem and not (
        problem.key and warnings
    ):  # a refused empty key is what the first warning already says
        warnings.append(problem.message)
    return warnings


# -- the doctor's own checks -------------------------------------------------------------------------------
def check_store(path: Path) -> tuple[Finding, dict[str, Any]]:
    """(finding, the store's recorded embedding dim/fingerprint); opened read-only, so the doctor changes nothing."""
    from memory import MemoryStoreError, StoreFile

    if not path.exists():
        return Finding(
            "store",
            "warn",
            f"no store at {path} yet",
            "nothing to do if this is a new install: chat, run or memory add create it; otherwise check COMPANION_DB_PATH",
        ), {}
    try:
        db = StoreFile(path)
    except (MemoryStoreError, OSError) as exc:
        return Finding(
            "store",
            "fail",
            str(exc),
            "point COMPANION_DB_PATH at the store, or `companion restore` a backup",
        ), {}
    try:
        return _store_finding(db, path), {
            "dim": db.get_setting("embedding.dim"),
            "fingerprint": db.get_setting("embedding.fingerprint"),
        }
    finally:
        db.close()


def check_files(store: Path, settings: Settings) -> Finding:
    """Issue 31: what the bot keeps on disk is for its owner alone. The store folder is looked at itself (it may be a
    folder of the operator's with other things in it); the bot's own folders in it are looked through."""
    from memory import SIDE_FILES, exposed

    from ..config import journal_dir

    bot_made = [
        *(store.with_name(store.name + side) for side in SIDE_FILES),
        store.with_suffix(".log"),
        store.parent / "exports",
    ]
    found = exposed([store, *bot_made, *filter(None, [journal_dir(settings)])])
    if store.parent.exists() and store.parent.stat().st_mode & 0o077:
        found.insert(0, store.parent)
    if not found:
        return Finding(
            "files",
            "ok",
            "the store, its folder and the bot's files are readable by their owner only",
        )
    shown = ", ".join(str(p) for p in found[:3]) + (
        f" and {len(found) - 3} more" if len(found) > 3 else ""
    )
    tops = [str(p) for p in found if p.parent not in found or p.parent == store.parent]
    fix = f"chmod -R go-rwx {' '.join(tops)} (from now on the bot makes its files 0600 and its folders 0700)"
    return Finding("files", "fail", f"group or others may read {shown}", fix)


def _store_finding(db: StoreFile, path: Path) -> Finding:
    verdict = db.quick_check()
    if verdict != "ok":
        return Finding(
            "store",
            "fail",
            f"{path} is damaged: {verdict}",
            "`companion restore` a backup made with `companion backup`",
        )
    if db.behind:
        return Finding(
            "store",
            "warn",
            f"{path}: {counted(db.behind, 'schema migration')} pending",
            "none: the next command that writes applies them",
        )
    return Finding("store", "ok", f"{path}: {counted(db.memories(), 'memory')}, integrity ok")


def check_pg_store(url: str) -> tuple[Finding, dict[str, Any]]:
    """(finding, the store's recorded embedding dim/fingerprint) for a PostgreSQL store. Read first through a connection
    of its own; the store is opened (for its counts and settings) only when that changes nothing (``ServerFacts.ready``)."""
    from memory import StoreFile, StoreUnavailable, server_facts

    try:
        facts = server_facts(url)
    except StoreUnavailable as exc:
        fix = (
            "check COMPANION_DATABASE_URL (user, password, host, database) and that the server runs"
        )
        return Finding("store", "fail", str(exc), fix), {}
    if not facts.ready:
        return _pg_finding(facts, 0), {}
    db = StoreFile(url)
    try:
        stored = {
            "dim": db.get_setting("embedding.dim"),
            "fingerprint": db.get_setting("embedding.fingerprint"),
        }
        return _pg_finding(facts, db.memories()), stored
    finally:
        db.close()


def _pg_finding(facts: ServerFacts, memories: int) -> Finding:
    from memory import too_old_vector

    size = f"{facts.database_bytes / 1e6:.1f} MB"
    vector = facts.vector_installed or facts.vector_available
    detail = f"PostgreSQL {facts.server}, pgvector {vector or 'missing'}, {size}, schema {facts.schema} of {facts.known}"
    if too_old_vector(vector):
        fix = "install pgvector 0.5 or newer on the server (e.g. the postgresql-NN-pgvector package, or the pgvector/pgvector image)"
        return Finding("store", "fail", detail, fix)
    if facts.schema > facts.known:
        return Finding(
            "store", "fail", f"{detail}: newer than this program knows", "upgrade companion"
        )
    if not facts.ready:
        pending = (
            "the vector extension is not created yet"
            if facts.vector_installed is None
            else "schema migration(s) pending"
        )
        return Finding(
            "store",
            "warn",
            f"{detail}: {pending}",
            "none: the next command that writes does it (its role needs CREATE rights)",
        )
    return Finding("store", "ok", f"{detail}, {counted(memories, 'memory')}")


def check_models(settings: Settings) -> list[Finding]:
    from ..clients import secret

    models = {
        "model": settings.chat_model,
        "extraction model": settings.extraction_model or settings.chat_model,
    }
    if models["extraction model"] == models["model"]:
        del models["extraction model"]
    return [
        _ask_model(name, settings.llm_base_url, secret(settings.llm_api_key), model)
        for name, model in models.items()
    ]


def _ask_model(check: str, base_url: str, api_key: str, model: str) -> Finding:
    """One short completion through the openai SDK, as the bot makes them; its error type says what to fix."""
    import openai

    from ..clients import openai_client

    client = openai_client(base_url, api_key, timeout=MODEL_TIMEOUT_S, max_retries=0)
    try:
        # max_tokens: a CPU-served model that rambles would make the check wait for its whole answer
        client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "Answer with the word OK."}],
            max_tokens=16,
        )
    except openai.APIConnectionError as exc:  # includes timeouts
        return Finding(
            check,
            "fail",
            f"cannot reach {base_url} ({_root_cause(exc)})",
            "start the model server, or set OPENAI_BASE_URL to where it runs",
        )
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        return Finding(
            check,
            "fail",
            f"{base_url} refused the API key (HTTP {exc.status_code})",
            "set OPENAI_API_KEY",
        )
    except openai.NotFoundError:
        return Finding(
            check,
            "fail",
            f"{base_url} has no model {model!r} (HTTP 404)",
            f"set {_model_variable(check)} to a model the server has (or pull it, e.g. `ollama pull {model}`)",
        )
    except openai.APIStatusError as exc:
        return Finding(
            check,
            "fail",
            f"{base_url} answered HTTP {exc.status_code} for model {model!r}: {exc.message}",
            f"check {_model_variable(check)} and the server's log",
        )
    return Finding(check, "ok", f"{base_url} answered with {model}")


def check_vision(settings: Settings, where: str) -> Finding:
    """ORCH-11: what COMPANION_VISION says, or (auto) the probe's verdict the bot kept in the store; read only."""
    model, limits = (
        settings.chat_model,
        f"up to {settings.images_per_message} a message, {settings.image_max_mb:g} MB each",
    )
    if settings.vision != "auto":
        shown = (
            f"photos go to the model, {limits}"
            if settings.vision == "on"
            else "photos are kept as [photo], never shown to the model"
        )
        return Finding("vision", "ok", f"{settings.vision} (COMPANION_VISION): {shown}")
    kept = _kept_vision(settings, where)
    if kept is None:
        return Finding(
            "vision",
            "ok",
            f"{model}: not asked yet; the bot shows it a test image at the first photo and keeps the answer",
        )
    if kept.sees:
        return Finding(
            "vision",
            "ok",
            f"{model} sees images (asked {kept.asked_at}): photos go to it, {limits}; their captions are kept",
        )
    fix = "use a model that sees for photos; if this one does (llama.cpp started with --mmproj), set COMPANION_VISION=on"
    return Finding(
        "vision",
        "warn",
        f"{model} cannot see images (asked {kept.asked_at}): photos are kept as [photo]",
        fix,
    )


def _kept_vision(settings: Settings, where: str) -> SightTrait | None:
    """The probe's verdict in the store, or None (not asked yet, or no store to read: the store finding says why)."""
    from memory import StoreFile

    from ..images.vision import vision_key

    is_pg = where.startswith(("postgresql://", "postgres://"))
    path = Path(where.removeprefix("sqlite://"))
    if not is_pg and not path.exists():
        return None
    try:
        with StoreFile(where if is_pg else path) as db:
            return db.sight(vision_key(settings.llm_base_url, settings.chat_model))
    except Exception:  # a damaged, newer or unreachable store: the store finding already says so
        return None


def check_local_model(local: Loaded, base_url: str, api_key: str) -> Finding:
    """What was loaded, and its speed: one short completion timed by llama.cpp (its ``timings``), else by the clock."""
    import openai

    from ..clients import openai_client
    from ..spending.usage import speed_of

    client = openai_client(base_url, api_key, timeout=LOCAL_MODEL_TIMEOUT_S, max_retries=0)
    started = time.monotonic()
    try:
        response = client.chat.completions.create(
            model=local.alias, messages=[{"role": "user", "content": SPEED_PROMPT}], max_tokens=48
        )
    except openai.APIError as exc:
        fix = "try another GGUF file, or a smaller COMPANION_LOCAL_MODEL_CONTEXT"
        return Finding(
            "local model",
            "fail",
            f"{local.describe()}, but it did not answer: {_root_cause(exc)}",
            fix,
        )
    speed = speed_of(response.model_dump(), time.monotonic() - started)
    return Finding(
        "local model",
        "ok",
        f"{local.describe()}; {speed.describe() if speed else 'no speed reported'}",
    )


def _root_cause(exc: BaseException) -> str:
    """The SDK says only "Connection error."; the socket error under it says refused, timed out or unknown host."""
    for _ in range(8):  # bounded: a chain is short, and a pathological one must not hang the doctor
        under = exc.__cause__ or exc.__context__
        if under is None:
            break
        exc = under
    return str(exc) or type(exc).__name__


def _model_variable(check: str) -> str:
    return "COMPANION_CHAT_MODEL" if check == "model" else "COMPANION_EXTRACTION_MODEL"


def check_key(settings: Settings) -> list[Finding]:
    from ..clients import secret

    warning = key_warning(settings.llm_base_url, secret(settings.llm_api_key))
    return (
        [Finding("api key", "warn", warning, "local servers need none; remote ones do")]
        if warning
        else []
    )


def check_embeddings(settings: Settings, stored: dict[str, Any]) -> Finding:
    from ..composition import build_embedder

    if settings.embeddings == "none":
        return Finding("embeddings", "ok", "off: recall uses full-text search (BM25) only")
    try:
        embedder = build_embedder(settings, timeout=EMBED_TIMEOUT_S)
        assert embedder is not None
        embedder.embed(["doctor"])
    except (
        Exception
    ) as exc:  # any provider failure is the finding: a missing model file, a network error, HTTP
        return Finding(
            "embeddings",
            "fail",
            f"the {settings.embeddings} embedding provider failed: {type(exc).__name__}: {exc}",
            "check COMPANION_EMBEDDING_BASE_URL / _MODEL / _API_KEY, or set COMPANION_EMBEDDINGS=none",
        )
    return _compare_with_store(embedder.fingerprint, embedder.dim, stored)


def _compare_with_store(fingerprint: str, dim: int, stored: dict[str, Any]) -> Finding:
    if stored.get("dim") and int(stored["dim"]) != dim:
        return Finding(
            "embeddings",
            "fail",
            f"{fingerprint} makes {dim}-dimensional vectors; the store holds {stored['dim']}",
            "`companion reembed --allow-dimension-change`, or configure the store's model again",
        )
    if stored.get("fingerprint") and stored["fingerprint"] != fingerprint:
        return Finding(
            "embeddings",
            "fail",
            f"the store's vectors were made by {stored['fingerprint']}, not by {fingerprint}",
            "`companion reembed`, or configure the store's model again",
        )
    return Finding("embeddings", "ok", f"{fingerprint} ({dim} dimensions) works")


def check_tokens(settings: Settings) -> list[Finding]:
    from ..clients import secret

    discord, telegram = secret(settings.discord_token), secret(settings.telegram_token)
    if not (discord or telegram):
        return [
            Finding(
                "tokens",
                "warn",
                "neither DISCORD_TOKEN nor TELEGRAM_TOKEN is set: `companion run` has nothing to start",
                "set one to run on a platform; `companion chat` works without",
            )
        ]
    problems = token_problems(discord, telegram)
    if problems:
        return [
            Finding("tokens", "fail", problem, "no connection was made; fix the variable in .env")
            for problem in problems
        ]
    present = " and ".join(
        name for name, token in (("DISCORD_TOKEN", discord), ("TELEGRAM_TOKEN", telegram)) if token
    )
    return [
        Finding(
            "tokens",
            "ok",
            f"{present} well-formed (the platform checks the rest at `companion run`)",
        )
    ]


def check_schedule(settings: Settings) -> Finding:
    if not settings.scheduler_enabled:
        return Finding(
            "schedule",
            "ok",
            "off (COMPANION_SCHEDULER_ENABLED=false): run consolidate, decay and prune yourself",
        )
    try:
        times = [
            f"{name} {expr!r} next {_next_fire(expr)}"
            for name, expr in (
                ("consolidation", settings.consolidation_cron),
                ("maintenance", settings.maintenance_cron),
                ("daily reflection", settings.daily_reflection_cron),
                ("bulletin", settings.bulletin_cron),
            )
        ]
    except ValueError as exc:
        fix = "fix COMPANION_CONSOLIDATION_CRON / _MAINTENANCE_CRON / _DAILY_REFLECTION_CRON / _BULLETIN_CRON (5 fields, UTC)"
        return Finding("schedule", "fail", str(exc), fix)
    return Finding("schedule", "ok", "; ".join(times))


def _next_fire(expression: str) -> str:
    from datetime import datetime

    from apscheduler.triggers.cron import CronTrigger

    when = CronTrigger.from_crontab(expression, timezone="UTC").get_next_fire_time(
        None, datetime.now(UTC)
    )
    return when.strftime("%Y-%m-%d %H:%M UTC") if when else "never"
