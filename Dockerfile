# The bot in a container (OPS-5). The same install as README's `sh scripts/install`, without the test tools
# and the browser: the system libraries voice needs from apt, then `pip install -e .` into /app/.venv.
# Build: docker build -t companion .   Run: see compose.yaml (the store lives on a volume at /data).
FROM python:3.11-slim-bookworm

# libopus0: the Opus codec Discord voice loads; espeak-ng: the offline text-to-speech voice (scripts/install)
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libopus0 espeak-ng \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 10001 companion
WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY bot ./bot
COPY memory ./memory
COPY voice ./voice
COPY prompts ./prompts
COPY measure ./measure
RUN python -m venv /app/.venv && /app/.venv/bin/pip install --no-cache-dir -e .

# One home (bot/home.py): /data/.env if you mount one, and the store at /data/data/companion.db.
ENV COMPANION_HOME=/data \
    PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1
RUN mkdir -p /data && chown companion:companion /data
VOLUME ["/data"]
USER companion

# /healthz answers on the container's own loopback while `companion run` runs (COMPANION_HEALTH_PORT).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8766/healthz', timeout=4)"]

ENTRYPOINT ["companion"]
CMD ["run"]
