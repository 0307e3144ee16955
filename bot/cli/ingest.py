"""``companion ingest PATH...``: text, Markdown and PDF files into memory (WRITE-7).

The same scope choices as ``companion memory add`` (``--scope``, ``--scope-id``, ``--private``); without
them the files go to the owner's private memory. With a model configured (and no ``--no-llm``) each
passage becomes typed memories through the extraction model, otherwise each passage is one memory.
A folder stands for the text, Markdown and PDF files in it. A file that cannot be read is reported in
one line and the others go on; the exit code is 1 when any failed.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.models import Scope, Visibility

from .. import composition
from .memories import SCOPES, command, engine_for, nonempty
from .output import UsageError, counted, err, note, print_json, rate_columns, say

if TYPE_CHECKING:
    from memory import FileReport, Ingester, IngestTarget

    from ..config import Settings


def register(subparsers: argparse._SubParsersAction) -> None:
    p = command(
        subparsers,
        "ingest",
        ingest_files,
        "remember what text, Markdown and PDF files say (with their file and lines)",
        json_flag=True,
    )
    p.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="files, or folders of .txt, .md and .pdf files",
    )
    p.add_argument(
        "--no-llm",
        action="store_true",
        help="store each passage as one memory instead of asking the extraction model",
    )
    p.add_argument(
        "--scope", choices=SCOPES, help="whose memory (default: the owner's private memory)"
    )
    p.add_argument("--scope-id", type=nonempty, help="the person, guild or owner id (with --scope)")
    p.add_argument(
        "--private", action="store_true", help="a user memory recalled only in DMs with that person"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="read unchanged files again, for the passages that gave no memory before",
    )
    p.add_argument(
        "--forget",
        action="store_true",
        help="forget everything that was learned from these files instead",
    )
    p.set_defaults(uses_model=lambda args: not (args.no_llm or args.forget))


def target_of(args: argparse.Namespace, settings: Settings) -> IngestTarget:
    from memory import IngestTarget

    if (args.scope is None) != (args.scope_id is None):
        raise UsageError(
            "--scope and --scope-id go together (without both, files go to the owner's private memory)"
        )
    if args.private and args.scope != "user":
        raise UsageError(
            "--private applies to user memories; guild memories are public within their guild, owner ones private"
        )
    if args.scope is None:
        return composition.ingest_target(settings)
    scope = Scope(args.scope)
    private = args.private or scope is Scope.OWNER
    return IngestTarget(scope, args.scope_id, Visibility.PRIVATE if private else Visibility.PUBLIC)


def files_of(paths: list[Path]) -> list[Path]:
    """Each file as given; each folder as its supported files (hidden ones, and links that lead out of the folder,
    aside), sorted; missing ones kept (they are reported)."""
    from memory import SUFFIXES, within

    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = (
                p for p in sorted(path.rglob("*")) if p.suffix.lower() in SUFFIXES and p.is_file()
            )
            out += [
                p
                for p in found
                if not any(part.startswith(".") for part in p.relative_to(path).parts)
                and within(path, p)
            ]
        else:
            out.append(path)
    return list(dict.fromkeys(out))


def ingest_files(args: argparse.Namespace, settings: Settings) -> int:
    if args.forget:
        return forget_ingested_files(args, settings)
    target = target_of(args, settings)
    files = files_of(args.paths)
    if not files:
        raise UsageError("no .txt, .md or .pdf files in " + ", ".join(str(p) for p in args.paths))
    from memory import Ingester

    with engine_for(settings, embed=True) as engine:
        complete = (
            None
            if args.no_llm or not composition.has_model(settings)
            else composition.build_completer(settings, engine, "ingest")
        )
        ingester = Ingester(engine, target, complete, force=args.force)
        reports = _run(ingester, files, show=not args.json)
    failed = sum(r.status == "failed" for r in reports)
    if args.json:
        print_json({"files": [r.as_dict() for r in reports], "failed": failed})
    else:
        for report in reports:
            say(_line(report))
            if report.status == "ingested" and not (report.memories or report.kept):
                note(
                    f"warning: nothing was remembered from {Path(report.path).name}; `companion ingest --force` reads it again"
                )
    return 1 if failed else 0


def forget_ingested_files(args: argparse.Namespace, settings: Settings) -> int:
    """``--forget``: each file's memories forgotten completely (a file may be gone from the disk by now)."""
    from memory import StoreTools

    with engine_for(settings) as engine:
        tools = StoreTools(engine)
        results = {str(path): tools.forget_file(path) for path in args.paths}
    if args.json:
        print_json(results)
    else:
        for path, counts in results.items():
            known = counts["files"] > 0
            say(
                f"{Path(path).name}: forgot {counted(counts['memories'], 'memory')}"
                if known
                else f"{Path(path).name}: was never ingested"
            )
    return 0 if all(c["files"] for c in results.values()) else 1


def _run(ingester: Ingester, files: list[Path], *, show: bool) -> list[FileReport]:
    """Each file in turn under a progress bar (on a terminal, never with --json)."""
    from rich.progress import Progress

    console = err()
    reports = []
    with Progress(
        *rate_columns(), console=console, transient=True, disable=not (show and console.is_terminal)
    ) as bar:
        task = bar.add_task("ingesting", total=len(files), rate="")
        for path in files:
            bar.update(task, description=f"{path.name}")
            reports.append(_one(ingester, path, _passages_shown(bar, task, path.name)))
            bar.advance(task)
    return reports


def _passages_shown(bar: Any, task: Any, name: str) -> Callable[[int], None]:
    """The file's passages so far and their rate (the bar itself counts files; a file's passage count is not
    known before it has been read)."""
    start = time.perf_counter()

    def shown(n: int) -> None:
        rate = n / max(time.perf_counter() - start, 1e-9)
        bar.update(task, description=f"{name}: {n} passages", rate=f"{rate:,.1f} passages/s")

    return shown


def _one(ingester: Ingester, path: Path, progress: Any) -> FileReport:
    from memory import FileReport

    try:
        return ingester.ingest(path, progress)
    except Exception as exc:  # the model server failing is one file's failure, not the command's
        if type(exc).__module__.split(".")[0] != "openai":
            raise
        return FileReport(
            str(path), "failed", error=f"the extraction model failed ({type(exc).__name__})"
        )


def _line(report: FileReport) -> str:
    name = Path(report.path).name
    if report.status == "failed":
        return f"{name}: failed: {report.error}"
    if report.status == "unchanged":
        return f"{name}: unchanged since it was last ingested"
    text = f"{name}: {counted(report.passages, 'passage')}, {counted(report.memories, 'memory')} stored, {report.kept} unchanged"
    text += f", {report.superseded} superseded" if report.superseded else ""
    text += (
        f", {report.gone} no longer in the file (their memories are kept)" if report.gone else ""
    )
    if report.rejected:
        text += (
            f"; {len(report.rejected)} not stored: "
            + "; ".join(report.rejected[:3])
            + ("; …" if len(report.rejected) > 3 else "")
        )
    return text
