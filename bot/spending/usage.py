"""What a model server says a request cost: prompt tokens, and how many of them it read from its prompt cache.

Servers cache a prompt's stable prefix (ORCH-9); the share they reused is how we see whether the prompt is
built for it. OpenAI, vLLM and llama.cpp say it in ``usage.prompt_tokens_details.cached_tokens``; llama.cpp
also sends ``timings.cache_n`` (reused) and ``timings.prompt_n`` (read afresh) outside ``usage``. A server
that says neither (Ollama's OpenAI endpoint) leaves ``cached`` unknown, never 0.

``speed_of``: how fast a request was read and written, from llama.cpp's ``timings`` (``prompt_per_second``,
``predicted_per_second``), else the usage over the seconds the whole request took (``companion doctor``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    prompt: int  # prompt tokens of the request
    cached: int | None  # of those, read from the server's cache; None when the server does not say
    completion: int = 0

    @property
    def cached_share(self) -> float | None:
        if self.cached is None or self.prompt <= 0:
            return None
        return min(1.0, self.cached / self.prompt)

    def describe(self) -> str:
        share = self.cached_share
        cached = "cache not reported" if share is None else f"{self.cached} cached ({share:.0%})"
        return f"prompt {self.prompt} tokens, {cached}, {self.completion} generated"


def usage_of(body: object) -> Usage | None:
    """The usage a completion (or a stream's last chunk) reports, or None when it reports none."""
    if not isinstance(body, dict):
        return None
    usage, timings = body.get("usage"), body.get("timings")
    usage = usage if isinstance(usage, dict) else {}
    timings = timings if isinstance(timings, dict) else {}
    if not usage and not timings:
        return None
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    if cached is None:
        cached = _count(timings.get("cache_n"))
    prompt = _count(usage.get("prompt_tokens"))
    if prompt is None:  # llama.cpp's own figures: what it reused plus what it read
        fresh = _count(timings.get("prompt_n"))
        prompt = None if fresh is None else fresh + (cached or 0)
    return Usage(prompt or 0, cached, _count(usage.get("completion_tokens")) or 0)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass(frozen=True, slots=True)
class Speed:
    prompt: int  # prompt tokens read afresh (a cached prefix is not read again)
    generated: int
    prompt_per_s: float | None  # None: only the whole request's time is known
    generated_per_s: float | None
    seconds: float

    def describe(self) -> str:
        if self.prompt_per_s is None or self.generated_per_s is None:
            return f"{self.prompt} prompt and {self.generated} generated tokens in {self.seconds:.1f} s"
        return (
            f"read {self.prompt} prompt tokens at {self.prompt_per_s:.1f} a second, "
            f"wrote {self.generated} at {self.generated_per_s:.1f} a second"
        )


def speed_of(body: object, seconds: float) -> Speed | None:
    """The speed of one completion that took ``seconds``; None when it reports no token counts at all."""
    timings = body.get("timings") if isinstance(body, dict) else None
    if isinstance(timings, dict):
        fresh, made = _count(timings.get("prompt_n")), _count(timings.get("predicted_n"))
        read, wrote = (
            _rate(timings.get("prompt_per_second")),
            _rate(timings.get("predicted_per_second")),
        )
        if fresh is not None and made is not None and read is not None and wrote is not None:
            return Speed(fresh, made, read, wrote, seconds)
    usage = usage_of(body)
    if usage is None:
        return None
    return Speed(usage.prompt - (usage.cached or 0), usage.completion, None, None, seconds)


def _rate(value: Any) -> float | None:
    return (
        float(value)
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
        else None
    )
