"""Whether the chat model can see, and what a shared image leaves in memory (ORCH-11).

    COMPANION_VISION  on: images go to the model; off: never; auto: the model is asked once (``probe``: a red
                      square, "what colour?") and the answer is kept in the store per server and model, so
                      ``companion doctor`` shows it and no later start asks again
    Sight.look        a message's images -> its text with one note per image, and the turn's image parts
    with_notes        an edited message keeps the notes of its photos (an edit changes the words, not the photos)

What the store keeps is text, in the message's own row and place: "[photo: <one-line caption>]" when
the model saw it, "[photo]" when it cannot see, "[photo not read: <why>]" when the file was refused
or the sender's or the place's day's budget is spent (ORCH-14: then no call is made, and none later:
the bytes are not kept). So extraction, recall, the leak check and every forget treat a photo as the
words it was (the sender's), and the bytes are never written anywhere. A caption is charged to the
sender and the place, kind "caption", also for group talk not spoken to the bot
(``bot.spending.budgets.Budgeted.observe``).

The caption is its own short call, made before the message is stored, rather than a line the reply writes: the
message is stored before the reply is asked for (ORCH-6, write-ahead), a photo in group talk nobody answers gets
a caption too, and a reply that failed or was withheld by the leak check leaves the caption intact. It costs one
call per image (at most ``per_message``, 4).
"""

from __future__ import annotations

import base64
import json
import logging
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import openai

import prompts
from memory import SightTrait

from ..model.client import LLMError
from ..model.quirks import server_words
from ..spending.attribution import charging, current
from ..spending.budgets import spent
from ..types import IncomingMessage
from .intake import ImageLimits, Picture, Refusal, fetch_all, solid_png

if TYPE_CHECKING:
    from memory import AsyncRunner, MemoryEngine, ModelTraits

    from ..model.client import ChatClient

log = logging.getLogger(__name__)

PROBE_PNG = solid_png((220, 20, 20))
CAPTION_CHARS = 200  # a caption is a line of memory, not a description of every pixel
# How servers refuse an image they cannot read: OpenAI "image_url is only supported by certain models", llama.cpp
# "image input is not supported - you may need to provide the mmproj", vLLM "not a multimodal model".
# what ``look`` writes into a message's text
NOTE = re.compile(r"\[photo(?: not read)?(?:: [^\]]*)?\]")
# a photo from a person or place whose day is spent: not looked at, nor later (no bytes are kept)
SPENT_NOTE = "[photo not read: the day's budget is spent]"
_NO_EYES = re.compile(r"image|vision|multi-?modal|mmproj|content part|content type", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class VisionOptions:
    mode: str = "auto"  # "auto" | "on" | "off"
    limits: ImageLimits = field(default_factory=ImageLimits)
    key: str = ""  # the server and model the probe's verdict is kept for (``vision_key``)


@dataclass(frozen=True, slots=True)
class Seen:
    """What a turn's images add to it: parts for the model, a note to the model, lines to the person."""

    parts: tuple[dict[str, Any], ...] = ()
    note: str = ""  # to the model, for this turn only (never stored)
    lines: tuple[str, ...] = ()  # to the person, after the reply: why an image was not looked at

    def content(self, text: str) -> str | list[dict[str, Any]]:
        """The user message's content: plain text, or text and image parts (OpenAI content parts)."""
        said = f"{text}\n\n{self.note}" if self.note else text
        return [{"type": "text", "text": said}, *self.parts] if self.parts else said

    def told(self) -> str:
        return "".join(f"\n\n({line})" for line in self.lines)


NOTHING = Seen()


def text_of(content: object) -> str:
    """A message's words, also when its content is a list of parts (an image part's data URL is not words)."""
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def vision_key(base_url: str, model: str) -> str:
    """The probe's verdict is kept per server and model (``ModelTraits``): a new model is asked afresh."""
    return f"{base_url.rstrip('/')}|{model}"


class Sight:
    """The images of incoming messages, for one chat model. ``traits`` keeps the probe's verdict (auto only)."""

    def __init__(
        self,
        llm: ChatClient,
        runner: AsyncRunner,
        traits: ModelTraits | None,
        options: VisionOptions,
    ) -> None:
        self.llm, self.runner, self.traits, self.options, self.key = (
            llm,
            runner,
            traits,
            options,
            options.key,
        )
        self._sees: bool | None = {"on": True, "off": False}.get(options.mode)

    async def look(self, message: IncomingMessage) -> tuple[IncomingMessage, Seen]:
        """The message with a note per image in its text (what is stored), and what the turn shows the model."""
        if not message.images:
            return message, NOTHING
        if spent():  # ORCH-14: no call for a person or place whose day is spent
            return _noted(message, [SPENT_NOTE] * len(message.images)), NOTHING
        if not await self.can_see():
            return _noted(message, ["[photo]"] * len(message.images)), _unseen(len(message.images))
        looked = await fetch_all(message.images, self.options.limits)
        notes, parts, lines = [], [], []
        for item in looked:
            if isinstance(item, Refusal):
                notes.append(f"[photo not read: {item.reason}]")
                lines.append(f"I couldn't look at {item.name}: {item.reason}.")
                continue
            caption = await self._caption(item, message.text)
            notes.append(f"[photo: {caption}]" if caption else "[photo]")
            parts.append(item.part())
        if (
            parts and self._sees is False
        ):  # the model refused an image while captioning: none go to the reply
            return _noted(message, notes), replace(_unseen(len(parts)), lines=tuple(lines))
        return _noted(message, notes), Seen(tuple(parts), "", tuple(lines))

    async def can_see(self) -> bool:
        """on/off as configured; auto: the verdict kept in the store, else the probe's (kept when it is certain)."""
        if self._sees is None:
            assert self.traits is not None, "auto needs the store to keep the probe's verdict in"
            kept = await self.runner.run(self.traits.sight, self.key)
            if kept is None:
                return await self._probe()
            self._sees = kept.sees
        return self._sees

    async def _probe(self) -> bool:
        """Ask the model what colour a red square is. A refusal of the image or a wrong answer: it cannot see
        (kept); no answer at all (the server is down): unknown for now, asked again at the next image."""
        question = [{"role": "user", "content": probe_content()}]
        try:
            answer = await self.llm.complete(question, temperature=0.0)
        except LLMError as exc:
            if not refuses_images(exc):
                log.warning(
                    "the vision probe got no answer (%s); this image is kept as [photo]", exc
                )
                return False  # for this turn only: nothing is kept, the next image asks again
            answer = ""
        await self._keep(sees_red(answer))
        return sees_red(answer)

    async def _keep(self, sees: bool) -> None:
        self._sees = sees
        if self.traits is not None:
            verdict = SightTrait(sees, datetime.now(UTC).isoformat(timespec="seconds"))
            await self.runner.run(self.traits.keep_sight, self.key, verdict)
        log.info(
            "the chat model %s images (probe kept as %s)",
            "sees" if sees else "does not see",
            self.key,
        )

    async def _caption(self, picture: Picture, said: str) -> str:
        """One line about the image from the chat model; "" when it failed (the photo is kept as [photo])."""
        ask = prompts.render("image_caption", said=json.dumps(said[:500], ensure_ascii=False))
        question = [{"role": "user", "content": [{"type": "text", "text": ask}, picture.part()]}]
        try:
            with charging(replace(current(), kind="caption")):
                return one_line(await self.llm.complete(question, temperature=0.0))
        except LLMError as exc:
            if refuses_images(exc) and self.options.mode == "auto":
                # the model changed since the probe, or the probe was fooled
                await self._keep(False)
            log.warning("no caption for an image (%s); kept as [photo]", exc)
            return ""


def probe_content() -> list[dict[str, Any]]:
    """The probe's user message (shared with ``companion doctor``)."""
    url = "data:image/png;base64," + base64.b64encode(PROBE_PNG).decode("ascii")
    return [
        {"type": "text", "text": prompts.render("image_probe")},
        {"type": "image_url", "image_url": {"url": url}},
    ]


def sees_red(answer: str) -> bool:
    return bool(re.search(r"\bred\b", answer, re.IGNORECASE))


def refuses_images(exc: BaseException) -> bool:
    """The server answered that it takes no images (rather than failing or being unreachable)."""
    cause = exc.__cause__
    if not isinstance(cause, openai.APIStatusError) or cause.status_code not in (
        400,
        415,
        422,
        500,
        501,
    ):
        return False
    return bool(_NO_EYES.search(f"{server_words(cause)} {cause.message}"))


def one_line(answer: str) -> str:
    """The caption as it is stored: one line, no brackets (the note's own), bounded."""
    line = next((part.strip() for part in answer.splitlines() if part.strip()), "")
    line = re.sub(r"[\[\]]", "", line).strip(" \"'")
    return line if len(line) <= CAPTION_CHARS else line[: CAPTION_CHARS - 1].rstrip() + "…"


def without_notes(text: str) -> str:
    """The person's own words of a message: a caption is the model's, and asks nothing (a photo of a sign reading
    "forget me not" is no forget)."""
    return NOTE.sub("", text).strip()


def with_notes(engine: MemoryEngine, message: IncomingMessage) -> IncomingMessage:
    """An edit of a message that came with photos: its new text, with the notes of the stored one (Discord sends
    the new words only; the photos are still there, and asking for captions again would cost a call each)."""
    ids = [message.message_id] if message.message_id else []
    stored = engine.messages.get_rids(
        engine.messages.rids_by_platform_id(message.platform, message.channel_id, ids)
    )
    notes = [note for m in stored for note in NOTE.findall(m.content) if note not in message.text]
    return _noted(message, notes) if notes else message


def _noted(message: IncomingMessage, notes: list[str]) -> IncomingMessage:
    text = " ".join(filter(None, [message.text, *notes]))
    return replace(message, text=text, images=())


def _unseen(count: int) -> Seen:
    return Seen(note=prompts.render("image_unseen", count=count))
