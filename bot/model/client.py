"""Everything that talks to an OpenAI-compatible server goes through the openai SDK here.

Errors (ORCH-6)::

    LLMError               what callers catch: the model kept failing after the bounded retries
     +-- MalformedAnswer   internal: an HTTP 200 answer that is not a chat completion; retried
     |                     like a 5xx, then surfaces as a plain LLMError
     +-- StreamCut         a stream failed after some of its text was shown: never retried (a retry
     |                     would show the text again, "HelHelHel"); the caller apologises
     +-- TurnTimeout       the turn's one deadline passed (a model that trickles is not waited for
     |                     once per attempt, 3 x 60 s)
     +-- ModelTimeout      one request got no answer within COMPANION_LLM_TIMEOUT_S: not retried (a server
                           that hangs would be waited for three times), reported as a timeout

Every answer is checked in one place (``_parse``; ``_StreamedAnswer`` for streams) and comes out as
a plain, normalised message dict, so nothing downstream touches the SDK's lax response objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import openai

import prompts

from ..clients import async_openai_client, openai_client
from ..counts import counted
from ..spending.usage import Usage, usage_of
from ..types import StreamSink
from .gate import ModelGate
from .honesty import Ran, honest
from .quirks import refused, server_words
from .reply_checks import Draft, Echoes, without_clock
from .textual_tools import HoldBack, TextCall, find_calls, not_run_yet, run_written

log = logging.getLogger(__name__)


class OpenAIEmbedder:
    """An OpenAI-compatible /embeddings endpoint as a ``memory.protocols.Embedder``."""

    def __init__(
        self, base_url: str, api_key: str, model: str, dim: int | None = None, timeout: float = 30.0
    ) -> None:
        self._client = openai_client(base_url, api_key, timeout=timeout, max_retries=2)
        self.model = model
        self.fingerprint = f"openai:{base_url.rstrip('/')}:{model}"
        self._dim = dim

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        out: list[list[float]] = []
        for i in range(0, len(texts), 256):
            response = self._client.embeddings.create(
                model=self.model, input=[t or " " for t in texts[i : i + 256]]
            )
            out.extend(item.embedding for item in sorted(response.data, key=lambda d: d.index))
        vectors = np.asarray(out, dtype=np.float32)
        if self._dim is None:
            self._dim = vectors.shape[1]
        return vectors


@dataclass(frozen=True, slots=True)
class Answer:
    """What one ``ChatClient.run`` gave: the reply's words, and what the server reported for each
    request of it (ORCH-9). A run's results are its own: the client is shared by every chat."""

    text: str
    usage: tuple[Usage, ...] = ()


# the usage of the run in progress in this task (``ChatClient.run`` sets and resets it): two chats
# running at once each read their own
_RUN_USAGE: ContextVar[list[Usage] | None] = ContextVar("run_usage", default=None)


class LLMError(Exception):
    """The model could not be reached or kept failing after the bounded retries (ORCH-6)."""


class MalformedAnswer(LLMError):
    """An answer whose shape is not a chat completion (a text body, no choices, a call without a name...)."""


class StreamCut(LLMError):
    """A streamed answer failed after part of it reached the person; it is not retried."""


class TurnTimeout(LLMError):
    """The whole turn (every attempt and tool call) took longer than its deadline."""


class ModelTimeout(LLMError):
    """A request timed out: the server is overloaded, still loading the model, or hangs."""


CUT = "_cut"  # marks an answer that max_tokens cut off (finish_reason "length")
# the one more ask of an answer that had no words: a sentence or two, not another 1,024-token call
AGAIN_TOKENS = 200
# (model, what the answer said it cost) -> recorded
UsageHook = Callable[[str, Usage | None], Awaitable[None]]


class ToolBox(Protocol):
    """The turn's tools as the loop calls them; ``remembering``: the turn's words go to extraction,
    ``forgot``: something was forgotten before the model was asked (what the honesty check lets the
    reply say it did)."""

    @property
    def remembering(self) -> bool: ...

    @property
    def forgot(self) -> bool: ...

    def schemas(self) -> list[dict[str, Any]]: ...

    async def call(self, name: str, arguments: str) -> str: ...


# A malformed answer is retried like a 5xx: a flaky proxy or an overloaded local server often answers
# properly the next time, and a malformed answer never changed anything on the server side.
RETRYABLE = (
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.RateLimitError,
    openai.InternalServerError,
    MalformedAnswer,
)


class SyncCompleter:
    """One blocking chat completion through the openai SDK, as a ``memory.protocols.Completer``.

    The CLI's maintenance commands run outside any event loop, so a plain sync client is all they need.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        *,
        timeout: float,
        max_retries: int = 2,
        max_tokens: int | None = None,
        on_usage: Callable[[str, Usage | None], None] | None = None,
    ) -> None:
        self._client = openai_client(base_url, api_key, timeout=timeout, max_retries=max_retries)
        self.model, self.max_tokens = model, max_tokens
        self.on_usage = on_usage  # ORCH-14: (model, usage) per answer, filed in the ledger on the caller's thread

    def __call__(self, system: str, user: str, *, temperature: float = 0.0) -> str:
        response = self._client.chat.completions.create(
            model=self.model,
            temperature=temperature,
            max_tokens=self.max_tokens or openai.omit,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        )
        if self.on_usage is not None:
            self.on_usage(self.model, usage_of(_plain(response)))
        return response.choices[0].message.content or ""


class ChatClient:
    """Chat completions with a bounded tool loop, bounded retries with backoff, and optional streaming."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_steps: int = 6,
        turn_deadline_s: float = 120.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_call: Callable[[float, bool], None] | None = None,
        max_tokens: int | None = None,
        on_usage: UsageHook | None = None,
        gate: ModelGate | None = None,
    ) -> None:
        self._client = async_openai_client(base_url, api_key, timeout=timeout, max_retries=0)
        self.gate = gate  # a reply's turn goes before background calls on the same local model
        self.model, self.max_retries, self.backoff_s, self.max_steps, self._sleep = (
            model,
            max_retries,
            backoff_s,
            max_steps,
            sleep,
        )
        self.turn_deadline_s, self.timeout_s = turn_deadline_s, timeout
        self.tools_off = (
            False  # set when the server rejected ``tools``: some local models have no tool calling
        )
        self.structured_off = False  # set when the server rejected ``response_format``
        self.max_tokens = max_tokens  # on every request: a weak model that rambles is stopped (COMPANION_*_MAX_TOKENS)
        self.on_call = on_call  # (seconds, failed) per request, for /metrics
        self.on_usage = (
            on_usage  # (model, usage or None) per answered request, for the usage ledger (ORCH-14)
        )
        self._stream_usage = True  # False once the server refused stream_options

    async def aclose(self) -> None:
        """Close the connection pool while the event loop still runs (``Runtime.stop`` does): the
        SDK closes a dropped client's pool only on a running loop, so one dropped after the loop
        ended leaves its sockets open until the process exits (a ResourceWarning each)."""
        await self._client.close()

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        temperature: float | None = None,
        schema: dict[str, Any] | None = None,
    ) -> str:
        """One completion without tools (extraction, reflection, compaction); "" when the model said nothing.

        ``schema``: a JSON schema the answer must follow, sent as ``response_format`` where the server takes it
        (llama.cpp turns it into a grammar); a server that refuses it is asked without it from then on."""
        extra: dict[str, Any] = {"temperature": temperature} if temperature is not None else {}
        if schema is not None and not self.structured_off:
            extra["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema},
            }
        message = await self._create(messages, None, None, **extra)
        return message["content"]

    async def run(
        self,
        messages: list[dict[str, Any]],
        tools: ToolBox | None = None,
        stream: StreamSink | None = None,
    ) -> Answer:
        """The tool loop: the model may call tools up to ``max_steps`` times, then must answer in text, all
        within ``turn_deadline_s`` (``TurnTimeout``): the per-request timeout alone let a trickling stream
        take 3 attempts x 60 s. A failure is raised (``LLMError``), never kept on the client."""
        usage: list[Usage] = []
        token = _RUN_USAGE.set(usage)
        try:
            async with self._first(), asyncio.timeout(self.turn_deadline_s):
                return Answer(await self._loop(messages, tools, stream), tuple(usage))
        except TimeoutError as exc:
            raise TurnTimeout(
                f"no answer within the turn's deadline ({self.turn_deadline_s:g} s)"
            ) from exc
        finally:
            _RUN_USAGE.reset(token)

    def _first(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self.gate.reply() if self.gate is not None else contextlib.nullcontext()

    async def _loop(
        self, messages: list[dict[str, Any]], tools: ToolBox | None, stream: StreamSink | None
    ) -> str:
        convo, last = list(messages), self.max_steps
        ran: list[Ran] = []
        schemas = tools.schemas() if tools else []
        names = _names(schemas)
        echoes = Echoes(convo, schemas)
        for step in range(self.max_steps + 1):
            offer = schemas if schemas and step < last and not self.tools_off else None
            draft = Draft(stream, echoes) if stream else None
            message = await self._drafted(convo, offer, draft, names)
            # a call cut off by max_tokens is half a call, never run (a 0.5B spent 1,024 tokens)
            cut = bool(message.pop(CUT, False))
            calls = [] if cut else message.get("tool_calls") or []
            # ORCH-9: calls the model wrote as text
            written, prose = find_calls(message["content"], names)
            written = [] if cut else written
            if tools is not None and (calls or (written and step < last)):
                if draft is not None:
                    await draft.release()
                last = await self._run_calls(convo, message, calls, written, tools, ran, step, last)
                continue
            prose = await self._checked(prose, convo, names, draft, echoes, cut)
            backed = {
                "extracted": tools is not None and tools.remembering,
                "forgot": tools is not None and tools.forgot,
            }
            return await honest(prose, ran, stream, **backed)
        return ""

    async def _run_calls(
        self,
        convo: list[dict[str, Any]],
        message: dict[str, Any],
        calls: list[dict[str, Any]],
        written: list[TextCall],
        tools: ToolBox,
        ran: list[Ran],
        step: int,
        last: int,
    ) -> int:
        """One step's calls run and their results added to ``convo``; returns the last step."""
        if calls:
            convo.append(message)
            for call in calls:
                name, arguments = call["function"]["name"], call["function"]["arguments"]
                ran.append(Ran(name, arguments, await tools.call(name, arguments)))
                convo.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": ran[-1].result}
                )
        elif not_run_yet(written, ran):
            convo.extend(await run_written(message["content"], written, tools, ran))
        else:
            # A weak model writes the same call again after its result: once more, in words and
            # without tools
            convo += [
                {"role": "assistant", "content": message["content"]},
                {"role": "user", "content": prompts.render("tool_repeat")},
            ]
            return step + 1
        return last

    async def _checked(
        self,
        prose: str,
        convo: list[dict[str, Any]],
        names: frozenset[str],
        draft: Draft | None,
        echoes: Echoes,
        cut: bool,
    ) -> str:
        """The final answer's words, or the words of one more ask when it had none (empty, a call
        cut off or hidden) or only words the model was given (``bot.model.reply_checks``; a parrot already
        shown stays: nothing takes it back). Issue 45: a person read "…" after 420 s of a call cut
        off and hidden."""
        shown = draft is not None and draft.open
        # a note copied from the bot's earlier replies is no answer; nor a speaker's label
        prose = echoes.as_theirs(echoes.unlabelled(without_clock(prose)))
        if prose and (shown or not echoes.parroted(prose)):
            if draft is not None:
                await draft.release(prose)
            return prose
        why = "only words it was given" if prose else "a call cut off" if cut else "empty"
        log.warning("the model's answer was %s; asked once more, without tools", why)
        return await self._again(convo, names, draft.sink if draft else None, echoes)

    async def _again(
        self,
        convo: list[dict[str, Any]],
        names: frozenset[str],
        stream: StreamSink | None,
        echoes: Echoes,
    ) -> str:
        """One more ask, without tools and with a short budget; "" when its answer has no words of
        its own either, and the caller tells the person so."""
        ask = [*convo, {"role": "user", "content": prompts.render("answer_again")}]
        draft = Draft(stream, echoes) if stream else None
        budget = min(AGAIN_TOKENS, self.max_tokens or AGAIN_TOKENS)
        message = await self._drafted(ask, None, draft, names, max_tokens=budget)
        message.pop(CUT, None)
        _, prose = find_calls(message["content"], names)
        prose = echoes.unlabelled(without_clock(prose))
        if prose and echoes.parroted(prose) and not (draft and draft.open):
            # the person's own words said as the bot's, twice: told back to them as theirs
            prose = echoes.told_back(prose) or echoes.their_words.fact_of(prose) or ""
        if not prose:
            log.warning("the model gave no answer when asked again; the person is told so")
            return ""
        if draft is not None:
            await draft.release(prose)
        return prose

    async def _drafted(
        self,
        convo: list[dict[str, Any]],
        offer: list[dict[str, Any]] | None,
        draft: Draft | None,
        names: frozenset[str],
        **extra: Any,
    ) -> dict[str, Any]:
        """``_create`` into a draft; a stream cut or timed out after text came shows what the draft
        held, and the apology follows it, as without a draft."""
        try:
            return await self._create(convo, offer, draft, names=names, **extra)
        except (StreamCut, asyncio.CancelledError):  # the turn's deadline cancels
            if draft is not None:
                await draft.release()
            raise

    async def _create(
        self,
        messages,
        tools,
        stream: StreamSink | None,
        names: frozenset[str] = frozenset(),
        **extra: Any,
    ) -> dict[str, Any]:
        args: dict[str, Any] = {"model": self.model, "messages": messages, **extra}
        if self.max_tokens:
            args.setdefault("max_tokens", self.max_tokens)
        if tools:
            args["tools"] = tools
        for attempt in range(self.max_retries + 1):
            try:
                return await self._attempt(args, stream, names)
            except openai.APIStatusError as exc:
                feature = refused(exc, args)
                if feature is None:
                    self._failed(exc, attempt)
                    await self._sleep(self.backoff_s * 2**attempt)
                    continue
                self._feature_off(feature, exc)
                less = {k: v for k, v in extra.items() if k != feature}
                return await self._create(
                    messages, None if feature == "tools" else tools, stream, names, **less
                )
            except openai.APITimeoutError as exc:
                log.warning("LLM call timed out after %g s; not retried", self.timeout_s)
                raise ModelTimeout(
                    f"the model server did not answer within {self.timeout_s:g} s"
                ) from exc
            except RETRYABLE as exc:
                self._failed(exc, attempt)
                await self._sleep(self.backoff_s * 2**attempt)
            except openai.APIError as exc:
                raise LLMError(f"the model refused the request: {type(exc).__name__}") from exc
        raise AssertionError("unreachable")

    def _failed(self, exc: Exception, attempt: int) -> None:
        """A retryable failure is logged and retried; the last one, and any refusal, raises ``LLMError``."""
        if not isinstance(exc, RETRYABLE):
            raise LLMError(f"the model refused the request: {type(exc).__name__}") from exc
        log.warning(
            "LLM call failed (%s); attempt %d of %d",
            _reason(exc),
            attempt + 1,
            self.max_retries + 1,
        )
        if attempt >= self.max_retries:
            failed = counted(attempt + 1, "time")
            raise LLMError(f"the model failed {failed}: {type(exc).__name__}") from exc

    def _feature_off(self, feature: str, exc: openai.APIStatusError) -> None:
        """Once, for the rest of the run: the server does not take ``tools`` (the model chats without them;
        memories still come from extraction, and /forget needs no model) or ``response_format`` (extraction
        asks for JSON in words only). One log line, with the server's own words."""
        already = self.tools_off if feature == "tools" else self.structured_off
        self.tools_off = self.tools_off or feature == "tools"
        self.structured_off = self.structured_off or feature == "response_format"
        if not already:
            outcome = "tools are off from now on; memories are saved by extraction"
            if feature == "response_format":
                outcome = "asking for JSON without response_format from now on"
            log.warning(
                "the model server refuses %s (HTTP %d: %r): %s",
                feature,
                exc.status_code,
                server_words(exc),
                outcome,
            )

    async def _attempt(
        self, args: dict[str, Any], stream: StreamSink | None, names: frozenset[str]
    ) -> dict[str, Any]:
        start, failed = time.perf_counter(), True
        try:
            if stream is not None:
                answer = await self._streamed(args, stream, names)
            else:
                with _undecodable_is_malformed():
                    response = await self._client.chat.completions.create(**args)
                    answer = _parse(response)
                await self._note_usage(usage_of(_plain(response)))
            failed = False
            return answer
        finally:
            if self.on_call is not None:
                self.on_call(time.perf_counter() - start, failed)

    async def _note_usage(self, usage: Usage | None) -> None:
        if usage is not None:
            if (run := _RUN_USAGE.get()) is not None:
                run.append(usage)
            log.debug("model %s: %s", self.model, usage.describe())
        if (
            self.on_usage is not None
        ):  # also without figures: the ledger counts the call as unreported
            await self.on_usage(self.model, usage)

    async def _streamed(
        self, args: dict[str, Any], sink: StreamSink, names: frozenset[str]
    ) -> dict[str, Any]:
        """Streams text deltas to ``sink`` and reassembles tool calls from their fragments.

        A failure before any text was shown is retried like any other; after, it is a ``StreamCut``: the
        person already read the start, and a retry would show it again ("HelHelHel"). A tool call the model
        writes as text is held back (``HoldBack``) and never shown.
        """
        answer = _StreamedAnswer()
        hold = HoldBack(sink)
        try:
            async with contextlib.aclosing(self._chunks(args)) as chunks:
                async for chunk in chunks:
                    if text := answer.add(chunk):
                        await hold(text)
            message = answer.message()
            await self._note_usage(answer.usage)
        except RETRYABLE as exc:
            if hold.shown:
                raise StreamCut(f"the stream failed after text was shown ({_reason(exc)})") from exc
            raise
        await hold.end(names)
        return message

    async def _chunks(self, args: dict[str, Any]) -> AsyncGenerator[object, None]:
        """The SDK's chunks; the HTTP stream is closed on every exit, also when the sink raises."""
        with _undecodable_is_malformed():
            async with await self._open_stream(args) as stream:
                async for chunk in stream:
                    yield chunk

    async def _open_stream(self, args: dict[str, Any]) -> Any:
        """include_usage: the server's usage (the prompt cache's figures, ORCH-9) comes in a last chunk. A
        server that refuses the option is asked without it, once and for the rest of the run."""
        if self._stream_usage:
            try:
                return await self._client.chat.completions.create(
                    **args, stream=True, stream_options={"include_usage": True}
                )
            except openai.BadRequestError as exc:
                if "stream_options" not in str(exc):
                    raise
                self._stream_usage = False
                log.warning(
                    "the model server refuses stream_options (%s): streamed replies come without usage",
                    _excerpt(str(exc)),
                )
        return await self._client.chat.completions.create(**args, stream=True)


# -- checking answers ------------------------------------------------------------------------------------
# The SDK builds its response objects without validation: a 200 body of ``{}`` or ``{"choices": []}``
# or a tool call with ``"function": null`` comes back as an object that raises AttributeError or
# IndexError on use, and a non-JSON body comes back as a str. So every answer is turned into plain data
# and checked here, and whatever does not fit raises MalformedAnswer, which the retry loop understands.


def _parse(response: object) -> dict[str, Any]:
    """The assistant message of a chat completion as ``{"role", "content": str, ["tool_calls"]}``."""
    data = _plain(response)
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedAnswer(f"not a chat completion (no choices): {_excerpt(data)}")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise MalformedAnswer(f"no message in {_excerpt(choices[0])}")
    calls = [
        _tool_call(raw, i) for i, raw in enumerate(_list(message.get("tool_calls"), "tool_calls"))
    ]
    out: dict[str, Any] = {
        "role": "assistant",
        "content": _clean(_string(message.get("content"), "content")),
    }
    if calls:
        out["tool_calls"] = calls
    if choices[0].get("finish_reason") == "length":
        out[CUT] = (
            True  # taken off again before the message joins a conversation (``ChatClient._loop``)
        )
    return out


def _tool_call(raw: object, index: int) -> dict[str, Any]:
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not isinstance(function, dict):
        raise MalformedAnswer(f"tool call without a function: {_excerpt(raw)}")
    name = _string(function.get("name"), "tool name")
    if not name.strip():
        raise MalformedAnswer(f"tool call without a name: {_excerpt(raw)}")
    # Servers leave out the arguments of a call without parameters; the tools parse "{}" as "none".
    arguments = _string(function.get("arguments"), "tool arguments") or "{}"
    # Some servers leave out the id; the tool result must still point at the call it answers.
    call_id = _string(raw.get("id"), "tool call id") or f"call_{index}"
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": _clean(name), "arguments": _clean(arguments)},
    }


class _StreamedAnswer:
    """Reassembles a streamed answer chunk by chunk, checking each chunk's shape as it arrives."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.chunks = 0
        self.finished = False
        self.reason: object = None
        self.usage: Usage | None = None

    def add(self, chunk: object) -> str:
        """Takes one chunk; returns its text delta (lone surrogates replaced) for the sink."""
        data = _plain(chunk)
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list):
            raise MalformedAnswer(f"stream chunk without choices: {_excerpt(data)}")
        self.usage = usage_of(data) or self.usage  # llama.cpp adds its timings to the last chunks
        if not choices:  # the usage-only chunk that stream_options.include_usage adds
            return ""
        delta = choices[0].get("delta") if isinstance(choices[0], dict) else None
        if not isinstance(delta, dict):
            raise MalformedAnswer(f"stream chunk without a delta: {_excerpt(data)}")
        self.chunks += 1
        self.reason = choices[0].get("finish_reason") or self.reason
        self.finished = self.finished or bool(self.reason)
        for position, part in enumerate(_list(delta.get("tool_calls"), "tool_calls")):
            self._add_call_part(part, position)
        text = _string(delta.get("content"), "content")
        self.text.append(text)
        return _clean(text)

    def _add_call_part(self, part: object, position: int) -> None:
        if not isinstance(part, dict):
            raise MalformedAnswer(f"bad tool call fragment: {_excerpt(part)}")
        function, index = part.get("function"), part.get("index", position)
        if not isinstance(index, int) or not isinstance(function, (dict, type(None))):
            raise MalformedAnswer(f"bad tool call fragment: {_excerpt(part)}")
        call = self.calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
        call["id"] = _string(part.get("id"), "tool call id") or call["id"]
        for key in ("name", "arguments"):
            call[key] += _string((function or {}).get(key), f"tool {key}")

    def message(self) -> dict[str, Any]:
        """The whole answer, checked like a non-streamed one."""
        # Servers end every complete answer with a finish_reason; a stream that stops before one was
        # cut short (a proxy timeout, a crashed server) and its text or tool arguments are partial.
        if not self.chunks:
            raise MalformedAnswer("the stream ended without any chunk")
        if not self.finished:
            raise MalformedAnswer(
                f"the stream ended without a finish_reason after {self.chunks} chunks"
            )
        calls = [
            {"id": c["id"], "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(self.calls.items())
        ]
        message = {"content": "".join(self.text), "tool_calls": calls}
        return _parse({"choices": [{"message": message, "finish_reason": self.reason}]})


@contextlib.contextmanager
def _undecodable_is_malformed() -> Iterator[None]:
    """The SDK lets json.loads errors out raw: a JSON content type over a non-JSON body, garbage SSE data."""
    try:
        yield
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MalformedAnswer(f"undecodable body ({exc})") from exc


def _plain(value: object) -> object:
    """SDK objects as the JSON they were built from (``exclude_unset``: a missing field stays missing)."""
    return value.to_dict(warnings=False) if isinstance(value, openai.BaseModel) else value


def _string(value: object, what: str) -> str:
    """A string field that may be absent (None counts as absent); any other type is malformed."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedAnswer(f"{what} is not a string: {_excerpt(value)}")
    return value


def _list(value: object, what: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedAnswer(f"{what} is not a list: {_excerpt(value)}")
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean(text: str) -> str:
    """Lone surrogates (JSON may escape half a pair, ``"\\ud800"``) become U+FFFD; valid pairs join up.

    SQLite and every channel API need valid UTF-8, and one bad character should not cost the whole answer.
    """
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _excerpt(value: object) -> str:
    """A bounded look at a bad answer for the log line; answers never contain the API key."""
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _names(schemas: list[dict[str, Any]]) -> frozenset[str]:
    """The tools on offer this turn: only calls naming one of them are run (ORCH-9)."""
    return frozenset(str((schema.get("function") or {}).get("name", "")) for schema in schemas) - {
        ""
    }


def _reason(exc: Exception) -> str:
    return str(exc) if isinstance(exc, MalformedAnswer) else type(exc).__name__
