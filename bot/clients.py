"""The one place an openai SDK client is made (chat, extraction, embeddings, speech, the doctor's check), and the
one reading of a secret setting.

``api_key or "none"``: the SDK refuses an empty key, and local servers (llama.cpp, Ollama) need none. The SDK is
imported inside the functions: most commands never talk to a model, and it is slow to import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import openai
    from pydantic import SecretStr


def secret(value: SecretStr | None) -> str:
    """A secret setting's value, "" when it is not set."""
    return value.get_secret_value() if value is not None else ""


def openai_client(
    base_url: str, api_key: str, *, timeout: float, max_retries: int
) -> openai.OpenAI:
    import openai

    return openai.OpenAI(
        base_url=base_url, api_key=api_key or "none", timeout=timeout, max_retries=max_retries
    )


def async_openai_client(
    base_url: str, api_key: str, *, timeout: float, max_retries: int
) -> openai.AsyncOpenAI:
    import openai

    return openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key or "none", timeout=timeout, max_retries=max_retries
    )
