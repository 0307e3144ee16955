# The bot in a container (OPS-5): the install for running, `sh scripts/install-run` (no test tools, no browser):
# libopus0 and espeak-ng from apt, then `pip install -e .` into /app/.venv.
# Build: docker build -t companion .   Run: see compose.yaml (the store lives on a volume at /data).
FROM python:3.11-slim-bookworm

RUN useradd --create-home --uid 10001 companion
WORKDIR /app
COPY pyproject.toml README.md LICENSE .env.example ./
# install-run calls fetch_voice_models.py (the voice's turn model), so both are copied
COPY scripts/install-run scripts/fetch_voice_models.py ./scripts/
COPY bot ./bot
COPY memory ./memory
COPY voice ./voice
COPY prompts ./prompts
COPY measure ./measure
# .venv/bin is on the PATH below, so no link in ~/.local/bin; no pip cache and no apt lists in the image
RUN PIP_NO_CACHE_DIR=1 sh scripts/install-run --no-link \
    && rm -rf /var/lib/apt/lists/*

# One home (bot/home.py): /data/.env if you mount one, and the store at /data/data/companion.db.
# The tombstones' key on a volume of its own (/key): a copy of /data does not carry it (bot/secret_key.py).
ENV COMPANION_HOME=/data \
    COMPANION_KEY_FILE=/key/companion.key \
    PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1
RUN mkdir -p /data /key && chown companion:companion /data /key && chmod 0700 /key
VOLUME ["/data", "/key"]
USER companion

# /healthz answers on the container's own loopback while `companion run` runs (COMPANION_HEALTH_PORT).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8766/healthz', timeout=4)"]

ENTRYPOINT ["companion"]
CMD ["run"]
