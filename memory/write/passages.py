"""Reading a file as passages (WRITE-7): text, Markdown and PDF, streamed so a large file is never held whole.

A passage is a run of paragraphs under one heading (the heading becomes its subject, not part of its
text: a Markdown heading, or in a PDF a line that looks like one, ``pdf_headings``), at most
``PASSAGE_CHARS`` long, with the lines it came from (for a PDF, its page and the lines of that page's
extracted text). Text files are read line by line (a very long line in pieces of
``MAX_READ`` characters), PDFs page by page from an open file, so memory stays bounded by one passage
and one page whatever the file's size.

A file that cannot be read as asked raises ``BadFile`` with a one-line reason.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
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
# "2.3 Results", "4. Methods", "IV. Costs"
_NUMBERED = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[IVX]+\.)\s+(?=\S)")
_SMALL_WORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "as",
        "at",
        "but",
        "by",
        "for",
        "from",
        "in",
        "into",
        "of",
        "on",
        "or",
        "the",
        "to",
        "vs",
    }
)
_ENDS_SENTENCE = tuple(".!?:;\"'”’)")
HEADING_CHARS = 80
HEADING_WORDS = 10
BODY_WORDS = 6


@dataclass(frozen=True, slots=True)
class _Line:
    page: int | None
    number: int
    text: str
    heading: str = ""  # set when the line is a heading: it names the passages under it and is not one of their lines


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


def markdown_heading(text: str) -> str:
    found = _HEADING.match(text)
    return found.group(1)[:120] if found else ""


def pdf_headings(lines: list[str]) -> list[str]:
    """For each line of a page's text, the heading it is, or "". A PDF's text has no markup, so a line counts
    as a heading only when it looks like one (short, no final punctuation, Title Case, ALL CAPS or numbered)
    and stands where one stands: after the end of a sentence (or at the top of the page) and before body text
    on the same page. Conservative on purpose: a missed heading costs a subject, a false one mislabels passages."""
    filled = [i for i, line in enumerate(lines) if line.strip()]
    out = [""] * len(lines)
    for at, i in enumerate(filled):
        before = lines[filled[at - 1]].strip() if at else ""
        after = lines[filled[at + 1]].strip() if at + 1 < len(filled) else ""
        text = " ".join(lines[i].split())
        out[i] = markdown_heading(text)
        if (
            not out[i]
            and _looks_like_heading(text)
            and (not before or before.endswith(_ENDS_SENTENCE))
            and _is_body(after, text)
        ):
            out[i] = text[:120]
    return out


def _looks_like_heading(text: str) -> bool:
    if (
        not 3 <= len(text) <= HEADING_CHARS
        or len(text.split()) > HEADING_WORDS
        or text.endswith(_ENDS_SENTENCE + (",",))
    ):
        return False
    words = _NUMBERED.sub("", text).split()
    letters = [c for c in "".join(words) if c.isalpha()]
    if len(letters) < 3:
        return False
    if all(c.isupper() for c in letters):
        return True
    return words[0][0].isupper() and all(
        w[0].isupper() or w.lower() in _SMALL_WORDS or not w[0].isalpha() for w in words
    )


def _is_body(after: str, heading: str) -> bool:
    """Body text: a line of several words, longer than the heading above it."""
    return len(after.split()) >= BODY_WORDS and len(after) > len(heading)


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
def _text_lines(path: Path) -> Iterator[_Line]:
    try:
        with path.open("rb") as raw:
            head = raw.read(SNIFF)
        _check_text(head)
        with path.open(encoding="utf-8", errors="replace", newline=None) as source:
            number = 1
            while piece := source.readline(MAX_READ):
                text = piece.rstrip("\n")
                yield _Line(None, number, text, markdown_heading(text))
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


def _pdf_lines(path: Path) -> Iterator[_Line]:
    """Each page's extracted text, line by line, headings found by their look (``pdf_headings``). The reader
    is given the open file, not the path (given a path, pypdf reads the whole file into memory first)."""
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
            except (
                Exception
            ) as exc:  # pypdf raises many kinds on a damaged file; each is one bad file
                raise BadFile(f"not a readable PDF ({_short(exc)})") from None
            for number in range(pages):
                # NFKC: a PDF's ligatures ("ﬀ" in "Staﬀ") become plain letters, or the words cannot be searched
                lines = unicodedata.normalize("NFKC", _page_text(reader, number)).splitlines()
                for line_no, (line, heading) in enumerate(
                    zip(lines, pdf_headings(lines), strict=True), 1
                ):
                    yield _Line(number + 1, line_no, line, heading)
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
        passage = (
            Passage(text, self.start, self.end, self.page, self.heading) if len(text) >= 3 else None
        )
        self.lines, self.size = [], 0
        return passage


def _chunk(lines: Iterator[_Line]) -> Iterator[Passage]:
    """Paragraphs joined up to ``PASSAGE_CHARS``; a heading or a new page starts a passage."""
    built = _Builder()
    for line in lines:
        page, number, text = line.page, line.number, line.text
        starts = bool(line.heading) or page != built.page
        if (starts and built.lines) or (not text.strip() and built.size >= PARAGRAPHS_FROM):
            yield from _taken(built)
        if (
            line.heading
        ):  # the heading names the passages under it (their subject), it is not one of their lines
            built.heading = line.heading
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
