"""Take the README's pictures of the dashboard: docs/dashboard.png (memories) and docs/dashboard-graph.png.

    .venv/bin/python scripts/dashboard_screenshot.py [OUT_DIR]      (default: docs/)

The real server over the browser tests' seeded store (tests/dashboard_support.py), with a few more people
and memories so the table and the graph look like a store in use; logged in through the form in Debian's
headless Chromium (tests/browser_support.py), 1280x800. Nothing leaves 127.0.0.1, no model is asked.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser_support import CHROMIUM, VIEWPORT, launch  # noqa: E402
from dashboard_support import GUILD, Dashboard, running_dashboard  # noqa: E402
from playwright.async_api import async_playwright, expect  # noqa: E402

from memory.clock import DAY  # noqa: E402
from memory.engine import MemoryEngine  # noqa: E402
from memory.models import EntityRef, FactKind, MemoryType, NewMemory, Scope, Visibility  # noqa: E402
from memory.storage.people import People  # noqa: E402

MORE = [
    # (who, content, subject, type, kind, importance, tags, entities)
    (
        "carol",
        "Carol is training for the Lisbon half marathon in March",
        "Carol",
        "semantic",
        "goal",
        7,
        ("running",),
        (("Lisbon half marathon", "event", "trains for"),),
    ),
    (
        "carol",
        "Carol's sister Dana moved to Porto last spring",
        "Carol",
        "semantic",
        "relationship",
        6,
        ("family",),
        (("Dana", "person", "sister of"), ("Porto", "place", "lives in")),
    ),
    (
        "alice",
        "Alice asked for a reminder to repot the basil on Saturday",
        "basil",
        "episodic",
        "todo",
        4,
        ("garden",),
        (("basil", "plant", "grows"),),
    ),
    (
        "bob",
        "Bob's cat is called Miso and hates the vacuum cleaner",
        "Bob",
        "semantic",
        "profile",
        5,
        ("pets",),
        (("Miso", "animal", "owns"),),
    ),
    (
        "bob",
        "When Bob shares code, review it before answering the question",
        "code review",
        "procedural",
        "guidance",
        7,
        ("code",),
        (),
    ),
    (
        "carol",
        "Carol prefers short answers in the morning",
        "Carol",
        "semantic",
        "preference",
        3,
        ("style",),
        (),
    ),
]


def add_more(engine: MemoryEngine, ids: dict[str, str]) -> None:
    people = People(engine)
    ids["carol"] = people.resolve("discord", "444", "Carol")
    for who, content, subject, mtype, kind, importance, tags, entities in MORE:
        engine.clock.advance(DAY * 2.5)  # type: ignore[attr-defined]  # a FakeClock: spread the dates
        name = subject.split()[0]
        person = EntityRef(
            who.capitalize(), "person", tuple((rel, target) for target, _, rel in entities)
        )
        refs = (person, *(EntityRef(target, kind_) for target, kind_, _ in entities))
        engine.memories.add(
            NewMemory(
                content=content,
                subject=name,
                scope=Scope.USER,
                scope_id=ids[who],
                type=MemoryType(mtype),
                kind=FactKind(kind),
                visibility=Visibility.PUBLIC if who == "carol" else Visibility.PRIVATE,
                tags=tags,
                importance=importance,
                guild_id=GUILD if who == "carol" else None,
                entities=refs if entities else (),
            )
        )


async def shoot(dash: Dashboard, out: Path) -> None:
    await dash.store(add_more, dash.engine, {"alice": dash.seeded.alice, "bob": dash.seeded.bob})
    async with async_playwright() as pw:
        browser = await launch(pw)
        page = await browser.new_page(viewport=VIEWPORT, base_url=dash.url)
        await page.goto("/login")
        await page.fill('input[name="token"]', dash.token)
        await page.press('input[name="token"]', "Enter")
        await expect(page.locator("tr.memory-row").first).to_be_visible()
        await page.screenshot(path=out / "dashboard.png")
        await page.get_by_role("button", name="Graph", exact=True).click()
        await expect(page.locator("svg.graph .node").first).to_be_visible()
        await page.screenshot(path=out / "dashboard-graph.png")
        await browser.close()


async def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        async with running_dashboard(Path(tmp)) as dash:
            await shoot(dash, out)
    print(f"wrote {out / 'dashboard.png'} and {out / 'dashboard-graph.png'}")


if __name__ == "__main__":
    if not CHROMIUM.exists():
        sys.exit(f"{CHROMIUM} is absent: install Debian's chromium (scripts/install does)")
    asyncio.run(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs"))
