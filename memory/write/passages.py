"""Reading a file as passages (WRITE-7): text, Markdown and PDF, streamed so a large file is never held whole.

A passage is a run of paragraphs under one Markdown heading (the heading becomes its subject, not part
of its text), at most ``PASSAGE_CHARS`` long, with the lines it came from (for a PDF, its page and the
lines of that page's extracted text). Text files are read line by line (a very long line in pieces of
``MAX_READ`` characters), PDFs page by page from an open file, so memory stays bounded by one passage
and one page whatever the file's size.

A file that cannot be read as asked raises ``BadFile`` with a one-line reason.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInput

PASSAGE_CHARS = 1_000  # within MiniLM's 256-token window, and below the store's 2,000-character limit with room for redaction
PARAGRAPHS_FROM = 400  # shorter paragraphs are joined with the next ones under the same heading
MAX_READ = 16_384
SNIFF = 8_192
TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown", ".text"})
SUFFIXES = TEXT_SUFFIXES | {".pdf"}
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")


class BadFile(InvalidInput):
    """A file that cannot be ingested; the message is one line saying why."""


@dataclass(frozen=True, slots=True)
class Passage:
    text: str
    start: int  # first line (1-based; within the page for a PDF)
    end: int
    page: int | None = None
    heading: str = ""

    @property
    def digest(self) -> str:
        """What says whether a passage changed: its words and heading, whitespace aside (not where it sits)."""
        return hashlib.sha256(f"{self.heading}\n{' '.join(self.text.split())}".encode()).hexdigest()

    @property
    def where(self) -> str:
        lines = f"L{self.start}" if self.start == self.end else f"L{self.start}-L{self.end}"
        return f"p{self.page}:{lines}" if self.page is not None else lines


def read_passages(path: Path) -> Iterator[Passage]:
    """The passages of a .txt, .md or .pdf file, in order."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise BadFile(f"not a text, Markdown or PDF file ({suffix or 'no extension'})")
    lines = _pdf_lines(path) if suffix == ".pdf" else _text_lines(path)
    return _chunk(lines)


def file_digest(path: Path) -> tuple[str, int]:
    """(sha256, size) of a file, read in 1 MB blocks."""
    digest, size = hashlib.sha256(), 0
    try:
        with path.open("rb") as source:
            while block := source.read(1 << 20):
                digest.update(block)
                size += len(block)
    except OSError as exc:
        raise BadFile(_os_reason(exc)) from None
    return digest.hexdigest(), size


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, IsADirectoryError):
        return "a folder, not a file"
    return f"cannot read it ({exc.strerror or exc})"


# -- lines --------------------------------------------------------------------------------------------------
def _text_lines(path: Path) -> Iterator[tuple[int | None, int, str]]:
    try:
        with path.open("rb") as raw:
            head = raw.read(SNIFF)
        _check_text(head)
        with path.open(encoding="utf-8", errors="replace", newline=None) as source:
            number = 1
            while piece := source.readline(MAX_READ):
                yield None, number, piece.rstrip("\n")
                number += piece.endswith("\n")
    except OSError as exc:
        raise BadFile(_os_reason(exc)) from None


def _check_text(head: bytes) -> None:
    if b"\0" in head:
        raise BadFile("a binary file, not text (it contains NUL bytes)")
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the end of the sample
            raise BadFile("not UTF-8 text") from None


def _pdf_lines(path: Path) -> Iterator[tuple[int | None, int, str]]:
    """Each page's extracted text, line by line. The reader is given the open file, not the path (given a path,
    pypdf reads the whole file into memory first)."""
    from pypdf import PdfReader

    try:
        with path.open("rb") as source:
            try:
                reader = PdfReader(source)
                if reader.is_encrypted and not reader.decrypt(""):
                    raise BadFile("an encrypted PDF")
                pages = len(reader.pages)
            except BadFile:
                raise
            except Exception as exc:  # pypdf raises many kinds on a damaged file; each is one bad file
                raise BadFile(f"not a readable PDF ({_short(exc)})") from None
            for number in range(pages):
                for line_no, line in enumerate(_page_text(reader, number).splitlines(), 1):
                    yield number + 1, line_no, line
    except OSError as exc:
        raise BadFile(_os_reason(exc)) from None


def _page_text(reader: object, number: int) -> str:
    try:
        return reader.pages[number].extract_text() or ""  # type: ignore[attr-defined]
    except Exception as exc:  # a damaged page: the file is reported bad, the other files go on
        raise BadFile(f"page {number + 1} of the PDF cannot be read ({_short(exc)})") from None


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:120]


# -- passages -----------------------------------------------------------------------------------------------
class _Builder:
    """Lines gathered into the passage being built."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.size = 0
        self.start = self.end = 0
        self.page: int | None = None
        self.heading = ""

    def add(self, page: int | None, number: int, text: str) -> None:
        if not self.lines:
            self.start, self.page = number, page
        self.lines.append(text)
        self.size += len(text) + 1
        self.end = number

    def take(self) -> Passage | None:
        text = "\n".join(self.lines).strip()
        passage = Passage(text, self.start, self.end, self.page, self.heading) if len(text) >= 3 else None
        self.lines, self.size = [], 0
        return passage


def _chunk(lines: Iterator[tuple[int | None, int, str]]) -> Iterator[Passage]:
    """Paragraphs joined up to ``PASSAGE_CHARS``; a heading or a new page starts a passage."""
    built = _Builder()
    for page, number, text in lines:
        heading = _HEADING.match(text)
        starts = bool(heading) or page != built.page
        if (starts and built.lines) or (not text.strip() and built.size >= PARAGRAPHS_FROM):
            yield from _taken(built)
        if heading:  # the heading names the passages under it (their subject), it is not one of their lines
            built.heading = heading.group(1)[:120]
            continue
        if not text.strip():
            continue
        for piece in _pieces(text):
            if built.lines and built.size + len(piece) > PASSAGE_CHARS:
                yield from _taken(built)
            built.add(page, number, piece)
    yield from _taken(built)


def _taken(built: _Builder) -> Iterator[Passage]:
    passage = built.take()
    if passage is not None:
        yield passage


def _pieces(text: str) -> Iterator[str]:
    """A line longer than a passage, cut at spaces where it can be."""
    while len(text) > PASSAGE_CHARS:
        cut = text.rfind(" ", PASSAGE_CHARS // 2, PASSAGE_CHARS)
        cut = cut if cut > 0 else PASSAGE_CHARS
        yield text[:cut]
        text = text[cut:].lstrip()
    if text:
        yield text
