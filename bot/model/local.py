"""COMPANION_LOCAL_MODEL: a GGUF model file run by llama.cpp inside this process, for a person who has a model
file (Ollama and LM Studio keep theirs as GGUF files) and no server running.

The ``local-model`` extra (xllamacpp: llama.cpp's own OpenAI-compatible server, prebuilt) serves the file from
threads of this process on 127.0.0.1, at a port the system picks and behind a key made for this run. The chat
and extraction models are pointed at it, with the file's name as the model name, so every request takes the
same openai SDK path as with any server (tool calls through the model's own chat template).

    ignored_settings(s)        the server settings a local model makes moot (the command line warns once)
    LocalModel.start(s)        load and serve; ``serve(s)`` the Settings pointed at it; ``loaded`` what and how fast
    LocalModel.stop()          stop it, or leave it to end with the process (below)

A missing file, one that is not GGUF, or no wheel is refused when the settings are read (``config.gguf_problem``);
a file llama.cpp cannot load is a ``ConfigError`` naming the variable too, from ``start``.

Stopping. xllamacpp's Server has no stop: it stops when the object is freed, and freeing it joins llama.cpp's
threads, which wait, with the GIL held, for every request still answered to a client still connected (measured:
for ever). So the Server is held by a daemon thread and freed there once ``/slots`` shows no request in work (a
request whose client left is dropped within a second: 0.9-1.1 s measured; the free then takes 0.4-1.4 s). One
still in work at stop is left to end with the process: a daemon thread's frame is never freed at exit (exit
measured at 0.5-0.7 s with a generation running). That happens after `/quit`: the extraction request the flush
closed is dropped only at llama.cpp's next batch, minutes away on a busy CPU. Its client gone, the exit was clean
in 4 runs of 4; with a client of ours still connected and waiting, llama.cpp crashed at exit in 3 runs of 6.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import WHEEL
from ..installs import venv_pip

if TYPE_CHECKING:
    from ..config import Settings

log = logging.getLogger(__name__)
# a request whose client has gone is dropped by llama.cpp within ~1 s; a little more for a loaded machine
STOP_WAIT_S = 3.0
RELEASE_WAIT_S = 30.0  # freeing the Server took 0.4-1.4 s; never wait for ever at exit
# The settings a model in this process replaces, with the variable a person set: (field, variable).
SERVER_SETTINGS = (
    ("llm_base_url", "OPENAI_BASE_URL"),
    ("llm_api_key", "OPENAI_API_KEY"),
    ("chat_model", "COMPANION_CHAT_MODEL"),
    ("extraction_model", "COMPANION_EXTRACTION_MODEL"),
    ("extraction_base_url", "COMPANION_EXTRACTION_BASE_URL"),
    ("extraction_api_key", "COMPANION_EXTRACTION_API_KEY"),
)


def ignored_settings(settings: Settings) -> list[str]:
    """The variables set to something of their own that a model in this process makes moot."""
    fields = type(settings).model_fields
    return [
        variable
        for field, variable in SERVER_SETTINGS
        if getattr(settings, field) not in (None, fields[field].default)
    ]


@dataclass(frozen=True, slots=True)
class Loaded:
    """What was loaded and how long it took, for ``companion doctor``."""

    path: Path
    size: int  # bytes
    alias: str  # the model name requests use
    seconds: float

    def describe(self) -> str:
        return f"{self.path} ({self.size / 1e6:,.0f} MB) as {self.alias}, loaded in {self.seconds:.1f} s"


class LocalModel:
    """llama.cpp's server on 127.0.0.1, in this process, for as long as a command runs."""

    def __init__(self, server: Any, loaded: Loaded, api_key: str) -> None:
        self.loaded = loaded
        self.base_url = f"{server.listening_address}/v1"
        self.api_key = api_key
        # the only reference: the holder thread frees it (the module docstring says why)
        self._held = [server]
        self._release = threading.Event()
        self._holder = threading.Thread(
            target=_hold, args=(self._held, self._release), name="local-model", daemon=True
        )
        self._holder.start()

    @classmethod
    def start(cls, settings: Settings) -> LocalModel:
        """Load ``settings.local_model`` and serve it; ConfigError when the wheel or llama.cpp refuses it."""
        from ..config import ConfigError

        assert settings.local_model is not None
        path = settings.local_model
        try:
            import xllamacpp
        except ImportError as exc:  # installed but unusable here (an older C library, another CPU)
            raise ConfigError(
                f"COMPANION_LOCAL_MODEL: the {WHEEL} wheel cannot be loaded here: {exc}"
            ) from None
        # other users of this machine reach 127.0.0.1 too; /slots shows prompts
        api_key = secrets.token_urlsafe(24)
        started = time.monotonic()
        try:
            server = xllamacpp.Server(_params(xllamacpp, settings, path.stem, api_key))
        except (
            RuntimeError
        ):  # llama.cpp says only "Failed to init server"; with verbosity on it would flood the chat
            raise ConfigError(
                f"COMPANION_LOCAL_MODEL: llama.cpp could not load {path}: a damaged or cut-short file, a model this llama.cpp "
                f"does not know ({venv_pip()} install -U {WHEEL}), "
                "or not enough memory for it and its context "
                f"(COMPANION_LOCAL_MODEL_CONTEXT={settings.local_model_context})"
            ) from None
        loaded = Loaded(path, path.stat().st_size, path.stem, time.monotonic() - started)
        log.info("local model %s", loaded.describe())
        return cls(server, loaded, api_key)

    def serve(self, settings: Settings) -> Settings:
        """``settings`` with the chat and extraction models at this server (what ``ignored_settings`` names goes)."""
        from pydantic import SecretStr

        return settings.model_copy(
            update={
                "llm_base_url": self.base_url,
                "llm_api_key": SecretStr(self.api_key),
                "chat_model": self.loaded.alias,
                "extraction_model": None,
                "extraction_base_url": None,
                "extraction_api_key": None,
            }
        )

    def stop(self) -> None:
        """Free llama.cpp once no request is in work; else leave it to end with the process (see the docstring)."""
        if self._release.is_set():
            return
        started = time.monotonic()
        if self._answering(STOP_WAIT_S):
            log.warning(
                "the local model is still answering a request; it stops when this process ends"
            )
            return
        self._release.set()
        self._holder.join(RELEASE_WAIT_S)
        log.info("local model stopped in %.1f s", time.monotonic() - started)

    def _answering(self, wait_s: float) -> bool:
        """Whether a slot still works on a request after up to ``wait_s`` seconds (a closed one is dropped soon)."""
        deadline = time.monotonic() + wait_s
        while _busy(self.base_url.removesuffix("/v1"), self.api_key):
            if time.monotonic() >= deadline:
                return True
            time.sleep(0.1)
        return False


def _params(xllamacpp: Any, settings: Settings, alias: str, api_key: str) -> Any:
    params = xllamacpp.CommonParams()
    params.model.path = str(settings.local_model)
    params.model_alias = alias
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # the system picks a free one; the server reports it in listening_address
    params.api_keys = [api_key]
    params.endpoint_slots = True  # stop() asks /slots whether a request is in work
    params.n_ctx = settings.local_model_context
    params.verbosity = -1  # llama.cpp's log lines would land in the middle of `companion chat`
    if settings.local_model_threads:
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = settings.local_model_threads
    return params


def _busy(root: str, api_key: str) -> bool:
    request = urllib.request.Request(
        f"{root}/slots", headers={"Authorization": f"Bearer {api_key}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=2.0) as response:
            slots = json.loads(response.read())
    except (OSError, ValueError):  # no answer: nothing of ours can be waiting on it either
        return False
    return any(isinstance(slot, dict) and slot.get("is_processing") for slot in slots)


def _hold(held: list[Any], release: threading.Event) -> None:
    release.wait()
    held.clear()  # the Server is freed here: llama.cpp stops and joins its threads
