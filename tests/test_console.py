"""The web console in a real headless Chromium (Debian's, driven by Playwright) against the real services: sign in,
the tray and its counts, a card's diff, a decision that vanishes from a second page, the Logins popover, Apply all,
a decided card (who decided, the outcome, what the coach was told), Revert on an applied one, a source proposal approved onto a new branch, and the API docs, with no request leaving the gateway; signing in
with the suite's OpenID Connect issuer (the only other host the page reaches), and with a token where no issuer is
configured. axe-core checks each page (no serious or critical violation); each page's screenshot is saved
(:data:`SCREENSHOTS`)."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import re
import tempfile
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from assent.coach import CoachClient, CoachTurn
from tests.conftest import OPERATOR, TOKEN, Stack, World, as_admin_of, new_world, wait_for
from tests.issuer import AUDIENCE, CONSOLE_CLIENT_ID, TestIssuer, s256, test_issuer
from tests.test_history import TURN, WORLD, a_decided_turn, entries_of
from tests.test_memory_edits import memory as memory_of
from tests.test_memory_edits import open_turn, wait_pending
from tests.test_memory_edits import propose as propose_memory
from tests.test_source_proposals import (
    FILES,
    chat,
    decide,
    deploy,
    git,
    page,
    projected,
    proposal_id,
    propose,
    put_repository,
    source_world,
)

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
AXE = Path(__file__).parent / "assets" / "axe-core" / "axe.min.js"
AXE_SOURCE = AXE.read_text()
CHROMIUM_PRESENT = CHROMIUM.exists()
SCREENSHOTS = Path(os.environ.get("ASSENT_SCREENSHOTS") or tempfile.mkdtemp(prefix="assent-screenshots-")).resolve()
"""Where each page's screenshot goes: a folder of the run's own, or ``ASSENT_SCREENSHOTS`` (``make screenshots``
writes docs/screenshots/ so): a test run leaves the checkout as it found it."""
TOKEN_KEY = "assent.console.token"
UNREACHABLE = "http://127.0.0.1:9/mcp"
"""A login's server: nothing here calls it (granting a login in the popover does not reach its server)."""
RFC7636_VERIFIER, RFC7636_CHALLENGE = (
    "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk",
    "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
)
"""RFC 7636's example (appendix B): a code verifier and its S256 challenge."""


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    if not CHROMIUM_PRESENT:
        pytest.fail("Debian's chromium is missing: apt-get install -y chromium (.ci/system-packages does it)")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    # How long an expectation waits for the page to come true, not how fast it must: `make test` runs this file
    # beside another worker's tests on the same cores, where 5 s (Playwright's default) is sometimes too short.
    expect.set_options(timeout=20_000)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield launched
        await launched.close()


async def local_only(
    browser: Browser, stack: Stack, *also: str, gateway: str | None = None
) -> tuple[BrowserContext, list[str]]:
    """A browser context whose every request must go to the gateway (the stack's, or the one at ``gateway``) or the
    hosts ``also`` names: any other is aborted and listed."""
    base = gateway or stack.gateway_url
    context = await browser.new_context(base_url=base, viewport={"width": 1280, "height": 900})
    allowed, elsewhere = {urlsplit(base).netloc, *(urlsplit(url).netloc for url in also)}, []

    async def guard(route: Any) -> None:
        if urlsplit(route.request.url).netloc in allowed:
            await route.continue_()
        else:
            elsewhere.append(route.request.url)
            await route.abort()

    await context.route("**/*", guard)
    return context, elsewhere


async def axe(page: Page) -> None:
    """Run axe-core on the page as it is now; no serious or critical violation. (Evaluated through the debugging
    protocol, which the console's Content-Security-Policy does not govern.)"""
    await page.evaluate(AXE_SOURCE)
    violations = await page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' '))}))"
    )
    bad = [v for v in violations if v["impact"] in ("serious", "critical")]
    assert bad == [], json.dumps(bad, indent=1)


async def shot(page: Page, name: str, full_page: bool = True) -> None:
    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=full_page)


async def sign_in(page: Page, token: str, check: bool = False) -> None:
    await page.goto("/console")
    await expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    if check:
        await page.get_by_label("Access token").fill("not-a-token")
        await page.get_by_role("button", name="Sign in", exact=True).click()
        await expect(page.get_by_role("alert")).to_contain_text("(401)")
        await axe(page)
        await shot(page, "sign-in")
    await page.get_by_label("Access token").fill(token)
    await page.get_by_role("button", name="Sign in", exact=True).click()
    await expect(page.get_by_role("heading", name="Sessions", exact=True)).to_be_visible()


async def create_login(
    http: httpx.AsyncClient, login_id: str, name: str, tools: dict[str, dict[str, Any]] | None = None
) -> None:
    body: dict[str, Any] = {
        "login_id": login_id,
        "name": name,
        "scope": "org",
        "server_url": UNREACHABLE,
        "account": "desk@acme.example",
        **({"tools": tools} if tools is not None else {}),
    }
    response = await http.post("/api/workspace/logins", json=body)
    assert response.status_code == 201, response.text


async def public_route(http: httpx.AsyncClient, method: str, path: str) -> bool:
    document = (await http.get("/openapi.json")).json()
    return method in document["paths"].get(path, {})


async def test_the_desk_shows_the_tray_decides_live_and_grants_a_login(stack: Stack, browser: Browser) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        token = http.headers["Authorization"].removeprefix("Bearer ")
        suffix = world.org_id.removeprefix("org_")
        await create_login(http, f"desk_{suffix}", "Desk")
        await create_login(http, f"crm_{suffix}", "CRM", {"list_orders": {}, "close_ticket": {"mutating": True}})
        sid, seqs, _ = await four_requests(coach, http, world, f"desk_{suffix}")
        can_apply_all = await public_route(http, "post", "/api/studio/sessions/{session_id}/apply-all")

        context, elsewhere = await local_only(browser, stack)
        one = await context.new_page()
        await sign_in(one, token, check=True)
        sessions = one.get_by_role("region", name="Recent sessions")
        await expect(sessions.get_by_role("row")).to_have_count(2)
        await expect(sessions.get_by_role("row").nth(1)).to_contain_text(f"{OPERATOR}{world.guild_id}open4")
        waiting = one.get_by_role("region", name="Waiting across sessions")
        await expect(waiting.get_by_role("row")).to_have_count(5)
        await waiting.get_by_label("Section").select_option("Logins")
        await expect(waiting.get_by_role("row")).to_have_count(2)
        await expect(waiting.get_by_role("row").nth(1)).to_contain_text("Read access to Desk")
        # Each row links to where it is decided; its time is relative, the absolute one in its title.
        row = waiting.get_by_role("row").nth(1)
        await expect(row.get_by_role("link", name=f"Decide request #{seqs[2]}")).to_be_visible()
        proposed = row.locator("time")
        await expect(proposed).to_have_text(re.compile("ago$|^now$"))
        await expect(proposed).to_have_attribute("title", re.compile(r"\d"))
        await expect(proposed).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT"))
        await axe(one)
        await shot(one, "sessions")
        await one.reload()
        await expect(one.get_by_role("heading", name="Sessions", exact=True)).to_be_visible()
        await one.keyboard.press("Tab")
        await expect(one.get_by_role("link", name="Skip to content")).to_be_focused()
        await one.keyboard.press("Enter")
        await expect(one.locator("#main")).to_be_focused()
        await expect(one.get_by_role("heading", name="Sessions", exact=True)).to_be_visible()

        await one.goto(f"/console#/sessions/{sid}")
        await expect(one.locator("#summary")).to_have_text("Waiting on 4 decisions")
        # The login request's grant offers a lifetime (until the session closes by default); no other item does.
        await expect(one.locator("#items select.lifetime")).to_have_count(1)
        await expect(one.locator("#items select.lifetime")).to_have_value("")
        await expect(one.locator("#items .actions").first).not_to_contain_text("null")
        sections = one.get_by_role("list", name="Waiting per section")
        for section, n in (("Agents", 2), ("State", 0), ("Tools", 0), ("Guild", 1), ("Logins", 1)):
            await expect(sections.get_by_role("listitem").filter(has_text=section)).to_have_text(f"{section} {n}")
        agents = one.get_by_role("list", name="Waiting per agent")
        await expect(agents.get_by_role("button", name=world.agent_id)).to_have_text(f"{world.agent_id} 1")
        await expect(agents.get_by_role("button", name=world.other_agent_id)).to_have_text(f"{world.other_agent_id} 1")
        memory, guild, login, draft = (one.locator(f"#item-{seq}") for seq in seqs)
        await expect(memory.get_by_role("button", name="Apply edit")).to_be_visible()
        await expect(login.get_by_role("button", name="Grant read access")).to_be_visible()
        await expect(login.get_by_role("button", name="Decline")).to_be_visible()

        # The guild card: one diff per changed field, the added lines marked; the tray counts its fields' lines
        # added up (an empty field filled removes none), as the API's pending item and card do.
        await guild.get_by_role("button", name="Show changes").click()
        diffs = guild.locator("pre.diff")
        await expect(diffs).to_have_count(2)
        await expect(guild.get_by_role("heading", name="about +1 \u22120")).to_be_visible()
        await expect(guild.locator("h4 .count")).to_have_text(["+1 \u22120", "+2 \u22120"])
        await expect(guild.locator(".meta")).to_contain_text("guild \u00b7 edit \u00b7 +3 \u22120 \u00b7 ")
        await expect(diffs.first.locator(".line.add")).to_have_text(["added: +We answer within a day."])
        tray = next(
            i for i in (await http.get(f"/api/studio/sessions/{sid}/pending")).json()["items"] if i["seq"] == seqs[1]
        )
        card = (await http.get(f"/api/studio/sessions/{sid}/edits/{seqs[1]}")).json()
        assert [(f["name"], f["lines"]) for f in card["fields"]] == [
            ("about", {"added": 1, "removed": 0}),
            ("description", {"added": 2, "removed": 0}),
        ]
        assert tray["lines"] == {"added": 3, "removed": 0}  # the card's fields' added up
        # The outline of its changed fields, each with its counts linking to its section; the total is the tray's.
        outline = guild.get_by_role("navigation", name="Changed fields")
        await expect(outline.get_by_role("listitem")).to_have_text(["about +1 \u22120", "description +2 \u22120"])
        total = outline.locator(".outline-total")
        await expect(total).to_have_attribute("data-added", str(tray["lines"]["added"]))
        await expect(total).to_have_attribute("data-removed", str(tray["lines"]["removed"]))
        await outline.get_by_role("link", name="description").click()
        await expect(guild.locator("section:focus h4")).to_have_text("description +2 \u22120")
        await axe(one)
        await shot(one, "desk")

        # The Draft: its diff, and the operator's own version (the next one), published by Apply all below.
        await expect(draft.get_by_role("button", name="Publish")).to_be_visible()
        await expect(draft.get_by_role("button", name="Discard")).to_be_visible()
        await draft.get_by_role("button", name="Show changes").click()
        await expect(draft.locator(".line.add")).to_have_text(["added: +Ask how we can help."])
        await draft.get_by_role("button", name="Edit").click()
        await expect(draft.get_by_label("Your version")).to_be_focused()
        await draft.get_by_label("Your version").fill("Greet by name.\nAsk how we can help today.\n")
        await draft.get_by_role("button", name="Save as the next version").click()
        await expect(draft.locator(".version")).to_contain_text("Version 2 of 2")
        await expect(draft.locator(".version")).to_be_focused()
        await expect(draft.get_by_label("Your version")).to_be_hidden()
        await expect(draft.locator(".line.add")).to_have_text(["added: +Ask how we can help today."])
        await axe(one)
        await shot(one, "draft")

        # A decision here vanishes from a second page, through its live stream.
        two = await context.new_page()
        await two.goto("/console")
        await two.evaluate(f"sessionStorage.setItem({TOKEN_KEY!r}, {token!r})")
        await two.goto(f"/console#/sessions/{sid}")
        await two.reload()  # a whole load of the page, with the token in the tab
        await expect(two.locator(f"#item-{seqs[0]}")).to_be_visible()
        await expect(two.locator("#summary")).to_have_text("Waiting on 4 decisions")
        await memory.get_by_role("button", name="Apply edit").focus()
        await one.keyboard.press("Enter")  # a real button: the keyboard decides as the mouse does
        await expect(one.locator(f"#item-{seqs[0]}")).to_have_count(0)
        await expect(one.locator("#summary")).to_be_focused()  # the focus is not lost with the item
        await expect(two.locator(f"#item-{seqs[0]}")).to_have_count(0)
        await expect(two.locator("#summary")).to_have_text("Waiting on 3 decisions")
        assert (
            (await http.get(f"/api/workspace/agents/{world.agent_id}/memory"))
            .json()["content"]
            .endswith("Quote the order.\n")
        )

        # The Logins popover: grant another login than the one asked for, for 8 hours; the request stays.
        await one.get_by_role("button", name="Logins").click()
        grant = one.get_by_role("button", name="Grant read access to CRM (desk@acme.example)")
        await expect(grant).to_be_focused()
        await expect(one.locator('[data-connection^="crm_"] .tools')).to_have_text(
            "Readable once granted: list_orders. Stays blocked: close_ticket (changes data)."
        )
        await one.get_by_label("Lifetime of CRM (desk@acme.example)").select_option(label="8 hours")
        await grant.click()
        await expect(one.get_by_role("button", name="Revoke read access to CRM (desk@acme.example)")).to_be_focused()
        await expect(one.locator('[data-connection^="crm_"]')).to_contain_text("expires in 8 hours")
        held = (await http.get(f"/api/studio/sessions/{sid}/connections")).json()["connections"]
        assert [(c["connection_id"], c["granted_by"]) for c in held if c["granted"]] == [(f"crm_{suffix}", OPERATOR)]
        [crm] = [c for c in held if c["granted"]]
        lasts = datetime.fromisoformat(crm["expires_at"]) - datetime.fromisoformat(crm["granted_at"])
        assert lasts == timedelta(hours=8)
        await axe(one)
        await shot(one, "logins")
        await one.get_by_role("button", name="Revoke read access to CRM (desk@acme.example)").click()
        await expect(one.get_by_role("button", name="Grant read access to CRM (desk@acme.example)")).to_be_focused()
        await expect(one.locator('[data-connection^="crm_"]')).to_contain_text(f"Revoked by {OPERATOR}")
        held = (await http.get(f"/api/studio/sessions/{sid}/connections")).json()["connections"]
        assert [c["connection_id"] for c in held if c["granted"]] == []
        await one.keyboard.press("Escape")
        await expect(one.get_by_role("button", name="Logins")).to_be_focused()

        if can_apply_all:
            # Apply all applies the guild text, publishes the draft and leaves the login request (decided alone):
            # its plan says so first, in a dialog, and nothing is sent until it is confirmed.
            await one.get_by_role("button", name="Apply all").click()
            dialog = one.get_by_role("dialog", name="Apply all: what it will do")
            await expect(dialog.get_by_role("list", name="Plan").get_by_role("listitem")).to_have_text(
                [
                    re.compile(f"^request #{seqs[1]} \\(guild\\): apply$"),
                    re.compile(f"^request #{seqs[2]} \\(login\\): skip — .*decided on its own"),
                    re.compile(f"^request #{seqs[3]} \\(draft\\): publish$"),
                ]
            )
            await expect(dialog.get_by_role("button", name="Apply all: 2 requests")).to_be_focused()
            await axe(one)
            await shot(one, "apply-all-plan")
            await one.keyboard.press("Escape")
            await expect(dialog).to_have_count(0)
            await expect(one.get_by_role("button", name="Apply all")).to_be_focused()
            await expect(one.locator("#summary")).to_have_text("Waiting on 3 decisions")
            await one.get_by_role("button", name="Apply all").click()
            await dialog.get_by_role("button", name="Apply all: 2 requests").click()
            await expect(one.locator("#skipped-count")).to_have_text("Skipped: 1")
            await expect(one.locator(f"#item-{seqs[1]}")).to_have_count(0)
            await expect(two.locator(f"#item-{seqs[1]}")).to_have_count(0)
            await expect(one.locator(f"#item-{seqs[3]}")).to_have_count(0)
            await expect(one.locator("#summary")).to_have_text("Waiting on 1 decision")
            agent = (await http.get(f"/api/workspace/agents/{world.other_agent_id}")).json()
            assert agent["task"] == "Greet by name.\nAsk how we can help today.\n"
            await axe(one)
            await shot(one, "apply-all")
        # The login request's grant, for the lifetime chosen beside its button.
        login = one.locator(f"#item-{seqs[2]}")
        await login.get_by_label(re.compile("^Lifetime of the grant: Read access to Desk")).select_option(
            label="1 hour"
        )
        await login.get_by_role("button", name="Grant read access").click()
        await expect(login).to_have_count(0)
        held = (await http.get(f"/api/studio/sessions/{sid}/connections")).json()["connections"]
        [desk] = [c for c in held if c["granted"]]
        lasts = datetime.fromisoformat(desk["expires_at"]) - datetime.fromisoformat(desk["granted_at"])
        assert (desk["connection_id"], lasts) == (f"desk_{suffix}", timedelta(hours=1))
        assert elsewhere == []
        await context.close()


async def four_requests(
    coach: CoachClient, http: httpx.AsyncClient, world: World, login_id: str
) -> tuple[str, list[int], CoachTurn]:
    """A memory edit, a guild text edit, a login request and a Task draft in one step; the session id, their seqs
    and the turn that waits on them."""
    response = await http.patch(f"/api/workspace/agents/{world.other_agent_id}", json={"task": "Greet by name.\n"})
    assert response.status_code == 200, response.text
    session = await coach.open_session(org_id=world.org_id, source_guild_id=world.guild_id, operator_user_id=OPERATOR)
    turn = session.begin_turn()
    memory = await turn.call("studio_read_memory", {"agent_id": world.agent_id})
    assert memory.ok and memory.output is not None, memory.error
    read = await turn.call("studio_read_task", {"agent_id": world.other_agent_id})
    assert read.ok and read.output is not None, read.error
    task = read.output
    results = [
        await turn.call(
            "studio_edit_memory",
            {
                "agent_id": world.agent_id,
                "content": memory.output["content"] + "Quote the order.\n",
                "base_version": memory.output["version"],
                "reason": "orders come up often",
            },
        ),
        await turn.call(
            "studio_edit_guild",
            {"about": "We answer within a day.", "description": "Support.\nRefunds.\n", "reason": "clearer"},
        ),
        await turn.call("studio_request_connection_access", {"connection_id": login_id, "reason": "check orders"}),
        await turn.call(
            "studio_create_task_draft",
            {
                "agent_id": world.other_agent_id,
                "content": "Greet by name.\nAsk how we can help.\n",
                "base_hash": task["hash"],
                "rationale": "warmer",
            },
        ),
    ]
    assert all(r.ok for r in results), results
    await turn.end_step()

    async def waiting() -> bool:
        response = await http.get(f"/api/studio/sessions/{session.session_id}/pending")
        return response.status_code == 200 and response.json()["waiting_on"] == 4

    await wait_for(waiting)
    return session.session_id, [turn.calls[r.tool_call_id].seq for r in results], turn


async def test_decline_all_declines_every_request_with_its_kinds_word(stack: Stack, browser: Browser) -> None:
    """Decline all in the browser: the four requests (a login request among them, which Apply all leaves alone)
    declined, each with its kind's word (a draft is discarded); the tray is empty and the turn continues once."""
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        token = http.headers["Authorization"].removeprefix("Bearer ")
        login = f"desk_{world.org_id.removeprefix('org_')}"
        tools = {"list_orders": {}, "refund_order": {}, "close_ticket": {"mutating": True}}
        await create_login(http, login, "Desk", tools)
        sid, seqs, turn = await four_requests(coach, http, world, login)

        context, elsewhere = await local_only(browser, stack)
        tab = await context.new_page()
        await sign_in(tab, token)
        await tab.goto(f"/console#/sessions/{sid}")
        await expect(tab.locator("#summary")).to_have_text("Waiting on 4 decisions")
        login_item = tab.locator(f"#item-{seqs[2]}")
        await expect(login_item.get_by_role("button", name="Grant read access")).to_be_visible()
        # The login request's card: the server, the account, what a grant makes readable and what stays blocked.
        await login_item.get_by_role("button", name="Show changes").click()
        notes = login_item.locator(".notes li")
        await expect(notes.filter(has_text="Becomes readable:")).to_have_text("Becomes readable: list_orders")
        await expect(notes.filter(has_text="Stays blocked:")).to_contain_text("refund_order (the name refund_order")
        await expect(notes.filter(has_text="Stays blocked:")).to_contain_text("close_ticket (the connector's manifest")
        await axe(tab)
        await shot(tab, "login-card")
        await tab.get_by_role("button", name="Decline all").click()
        plan = tab.get_by_role("dialog", name="Decline all: what it will do")
        await expect(plan.get_by_role("list", name="Plan").get_by_role("listitem")).to_have_count(4)
        await plan.get_by_role("button", name="Cancel").click()  # Cancel sends nothing
        await expect(plan).to_have_count(0)
        assert (await http.get(f"/api/studio/sessions/{sid}/pending")).json()["waiting_on"] == 4
        await expect(tab.locator("#summary")).to_have_text("Waiting on 4 decisions")
        await tab.get_by_role("button", name="Decline all").click()
        await plan.get_by_role("button", name="Decline all: 4 requests").click()
        await expect(tab.locator("#summary")).to_have_text("Waiting on 0 decisions")
        memory, guild, access, draft = seqs
        await expect(tab.get_by_role("list", name="Resolved").get_by_role("listitem")).to_have_text(
            [
                f"request #{memory} (memory): declined",
                f"request #{guild} (guild): declined",
                f"request #{access} (login): declined",
                f"request #{draft} (draft): discarded",
            ]
        )
        await expect(tab.locator("#skipped-count")).to_have_text("Skipped: 0")
        await expect(tab.locator("#items .item")).to_have_count(0)
        await expect(tab.locator("#items")).to_have_text("Nothing waits on a decision.")
        continuation = await turn.continuation()
        assert [(d.seq, d.outcome, d.resolved_by) for d in continuation.decisions] == [
            (memory, "declined", OPERATOR),
            (guild, "declined", OPERATOR),
            (access, "declined", OPERATOR),
            (draft, "discarded", OPERATOR),
        ]
        pending = (await http.get(f"/api/studio/sessions/{sid}/pending")).json()
        assert (pending["waiting_on"], pending["items"]) == (0, [])
        await axe(tab)

        # A decided card: who decided and the outcome, what the coach was told, and no button to decide it again.
        await tab.get_by_role("link", name=f"request #{memory} (memory): declined").click()
        happened = tab.get_by_role("region", name="What happened")
        await expect(happened.locator(".outcome")).to_contain_text(f"Declined by {OPERATOR}")
        await expect(happened.get_by_role("list", name="Decisions").get_by_role("listitem")).to_have_text(
            [re.compile(f"^decline by {re.escape(OPERATOR)} \\(decline_all\\) · .*: declined")]
        )
        await expect(happened.get_by_label("What the coach was told")).to_have_text(continuation.text)
        await expect(tab.get_by_role("button", name=re.compile("Apply|Decline"))).to_have_count(0)
        await axe(tab)
        await tab.goto(f"/console#/sessions/{sid}/logins/{access}")  # a login request's card, read at …/logins/
        await expect(tab.get_by_role("region", name="What happened").locator(".outcome")).to_contain_text(
            f"Declined by {OPERATOR}"
        )
        await expect(tab.get_by_role("button", name=re.compile("Grant|Decline"))).to_have_count(0)
        assert elsewhere == []
        await context.close()


async def test_revert_on_an_applied_cards_page_proposes_the_inverse_and_links_to_it(
    stack: Stack, browser: Browser
) -> None:
    """An applied Memory edit's own page offers Revert; it proposes the inverse as a new request, linked, whose card
    shows what it would change and is decided as any other."""
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http, memory="Be brief.\n")
        token = http.headers["Authorization"].removeprefix("Bearer ")
        session = await coach.open_session(
            org_id=world.org_id, source_guild_id=world.guild_id, operator_user_id=OPERATOR
        )
        turn = session.begin_turn()
        version = (await memory_of(http, world.agent_id))["version"]
        result = await turn.call(
            "studio_edit_memory",
            {
                "agent_id": world.agent_id,
                "content": "Be brief.\nCite orders.\n",
                "base_version": version,
                "reason": "r",
            },
        )
        assert result.ok, result.error
        await turn.end_step()
        sid, seq = turn.session.session_id, turn.calls[result.tool_call_id].seq

        async def projected() -> bool | None:
            return (await http.get(f"/api/studio/sessions/{sid}/edits/{seq}")).status_code == 200 or None

        await wait_for(projected)
        applied = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
        assert applied.status_code == 200, applied.text

        context, elsewhere = await local_only(browser, stack)
        tab = await context.new_page()
        await sign_in(tab, token)
        await tab.goto(f"/console#/sessions/{sid}/edits/{seq}")
        await expect(tab.get_by_role("region", name="What happened").locator(".outcome")).to_contain_text("Applied")
        await tab.get_by_role("button", name="Revert").click()
        result_line = tab.locator("#revert-result")
        await expect(result_line).to_contain_text("Its revert is proposed as request 1 of session ")
        await axe(tab)
        await shot(tab, "revert")
        await result_line.get_by_role("link").click()
        await expect(tab.locator(".reason")).to_have_text(f"Revert of request #{seq} of session {sid}")
        await expect(tab.get_by_label("Changes to memory.md")).to_contain_text("removed: -Cite orders.")
        await tab.get_by_role("button", name="Apply edit").click()
        await expect(tab.get_by_role("region", name="What happened").locator(".outcome")).to_contain_text("Applied")
        await axe(tab)
        assert (await memory_of(http, world.agent_id))["content"] == "Be brief.\n"
        assert elsewhere == []
        await context.close()


async def test_the_proposals_page_is_live(stack: Stack, browser: Browser) -> None:
    """The Proposals page follows the agent's own stream: a proposal made in a chat appears on the open page, and
    one discarded through the API shows as decided there, without a reload; one stream, closed on leaving."""
    async with stack.http() as http, stack.coach() as coach:
        world = await source_world(http)
        token = http.headers["Authorization"].removeprefix("Bearer ")

        context, elsewhere = await local_only(browser, stack)
        tab = await context.new_page()
        streams: list[str] = []
        tab.on("request", lambda r: streams.append(r.url) if r.url.endswith("/proposal-events") else None)
        await sign_in(tab, token)
        await tab.goto(f"/console#/agents/{world.agent_id}/proposals")
        await expect(tab.get_by_role("heading", name="Waiting (0)")).to_be_visible()
        await wait_for(lambda: len(streams) == 1)  # the page opens its stream once it has read the page

        session = await chat(coach, world)
        pid = proposal_id(await propose(session, world.agent_id, {"knowledge/policy.md": "Refunds take 2 days.\n"}))
        card = tab.locator(f"#proposal-{pid}")
        await expect(card.locator(".line.add")).to_have_text(["added: +Refunds take 2 days."])
        await expect(tab.get_by_role("heading", name="Waiting (1)")).to_be_visible()
        await axe(tab)

        await projected(http, session.session_id, pid)
        discarded = await decide(http, world.agent_id, pid, "discard")
        assert discarded.status_code == 200 and discarded.json()["outcome"] == "discarded", discarded.text
        await expect(tab.get_by_role("heading", name="Decided (1)")).to_be_visible()
        await expect(tab.get_by_role("heading", name="Waiting (0)")).to_be_visible()
        await expect(card).to_contain_text(f"discarded · by {OPERATOR}")
        await expect(card.get_by_role("button")).to_have_count(0)
        await axe(tab)
        assert streams == [f"{stack.gateway_url}/api/agents/{world.agent_id}/proposal-events"]

        # Leaving the page closes its stream (the request is aborted).
        async with tab.expect_event("requestfailed", lambda r: r.url.endswith("/proposal-events")):
            await tab.get_by_role("link", name="Sessions", exact=True).click()
        await expect(tab.get_by_role("heading", name="Sessions", exact=True)).to_be_visible()
        assert len(streams) == 1
        assert elsewhere == []
        await context.close()


async def test_the_history_page_filters_pages_exports_verifies_and_shows_each_timeline(
    stack: Stack, browser: Browser
) -> None:
    """The History page of an organisation made by six direct writes (the organisation, two guilds, three agents)
    whose turn proposed two memory edits (one applied, one declined) and continued: its thirteen entries newest
    first, a filter that narrows them (and names them in the address), Load more, the CSV export (downloaded with
    the token), Verify; the session's timeline (each proposal proposed, decided, applied or declined in order, the
    continuation in full at its place), the agent's timeline (its creation, then its proposal) and the agent's page
    listing its decided item, linked to its card. A direct write (no session, no seq) shows as such, with no empty
    link."""
    n = WORLD + TURN
    async with stack.http() as http:
        world, sid, first, second = await a_decided_turn(http, stack)
        linked = await entries_of(http, n)
        told = next(e for e in linked if e["type"] == "continued")["detail"]
        assert f"seq {first}: Memory of Ada: applied by {OPERATOR}" in told
        token = http.headers["Authorization"].removeprefix("Bearer ")

        context, elsewhere = await local_only(browser, stack)
        tab = await context.new_page()
        await sign_in(tab, token)
        await tab.get_by_role("link", name="History", exact=True).click()
        await expect(tab.get_by_role("heading", name="History", exact=True)).to_be_visible()
        await expect(tab.get_by_role("link", name="History", exact=True)).to_have_attribute("aria-current", "page")
        rows = tab.locator("#history-table tbody tr")
        await expect(rows).to_have_count(n)
        assert [int(p) for p in await rows.evaluate_all("rs => rs.map(r => r.dataset.position)")] == list(
            range(n - 1, -1, -1)
        )
        await expect(rows.first).to_contain_text("Continued")
        await expect(rows.first.get_by_role("link")).to_have_text([sid])  # a session, no seq: no link to a card
        applied = rows.filter(has_text="Outcome: applied")
        await expect(applied.get_by_role("link", name=f"request #{first}")).to_have_attribute(
            "href", f"#/sessions/{sid}/edits/{first}"
        )
        await expect(applied).to_contain_text(f"{OPERATOR}")
        await expect(applied.locator("time .ago")).to_have_text(re.compile("ago|now"))
        await axe(tab)
        await shot(tab, "history")

        # A filter narrows the entries, and the address names it (a filtered view can be linked to).
        await tab.get_by_label("Outcome").fill("declined")
        await tab.get_by_role("button", name="Filter").click()
        await expect(rows).to_have_count(1)
        await expect(rows.first).to_contain_text("Outcome: declined")
        await expect(rows.first.get_by_role("link", name=world.other_agent_id)).to_be_visible()
        assert tab.url.endswith("#/history?outcome=declined")
        await tab.get_by_label("Type").select_option("proposed")
        await tab.get_by_role("button", name="Filter").click()
        await expect(tab.locator("#history-count")).to_have_text("No entry matches these filters.")
        await expect(rows).to_have_count(0)
        # A window that ends before it begins holds nothing (the times are typed in the reader's zone, sent in UTC).
        await tab.get_by_label("Type").select_option("")
        await tab.get_by_label("Since (inclusive)").fill("2030-01-02T00:00:00")
        await tab.get_by_label("Until (exclusive)").fill("2030-01-01T00:00:00")
        await tab.get_by_role("button", name="Filter").click()
        await expect(tab.locator("#history-count")).to_have_text("No entry matches these filters.")

        # Load more follows the cursor, five entries a page.
        await tab.get_by_role("button", name="Clear").click()
        await expect(rows).to_have_count(n)
        await tab.get_by_label("Per page").fill("5")
        await tab.get_by_role("button", name="Filter").click()
        await expect(rows).to_have_count(5)
        more = tab.get_by_role("button", name="Load more")
        await more.click()
        await expect(rows).to_have_count(10)
        await more.click()
        await expect(rows).to_have_count(n)
        await expect(more).to_be_hidden()
        await expect(tab.locator("#history-count")).to_be_focused()
        assert [int(p) for p in await rows.evaluate_all("rs => rs.map(r => r.dataset.position)")] == list(
            range(n - 1, -1, -1)
        )

        # The export, fetched with the token and handed to the browser: JSON Lines, a line per entry; CSV, a header
        # and a record per entry (the continuation's record spans lines: its text is quoted as it is).
        exported = {}
        for name, suffix in (("Download JSON Lines", "jsonl"), ("Download CSV", "csv")):
            async with tab.expect_download() as downloading:
                await tab.get_by_role("link", name=name).click()
            downloaded = await downloading.value
            assert downloaded.suggested_filename == f"history-{world.org_id}.{suffix}"
            exported[suffix] = await asyncio.to_thread(Path(await downloaded.path()).read_text)
            await expect(tab.locator("#history-report")).to_contain_text(f"Downloaded history-{world.org_id}.{suffix}")
        lines = exported["jsonl"].splitlines()
        assert [json.loads(line)["position"] for line in lines] == list(range(n))
        records = list(csv.reader(io.StringIO(exported["csv"])))
        assert len(records) == n + 1 and records[0][:4] == ["org_id", "position", "at", "type"], records[:2]
        assert [r[records[0].index("hash")] for r in records[1:]] == [json.loads(line)["hash"] for line in lines]
        await tab.get_by_role("button", name="Verify").click()
        await expect(tab.locator("#history-report")).to_have_text(
            f"The chain holds: {n} entries checked, 0 to {n - 1}."
        )
        await axe(tab)

        # The session's timeline: per proposal, proposed, decided and what it did, in order; then the continuation.
        await rows.first.get_by_role("link", name=sid).click()
        await expect(tab.get_by_role("heading", name=f"Timeline of session {sid}")).to_be_visible()
        moments = tab.locator("#timeline > li")
        await expect(moments).to_have_count(3)
        for moment, seq, agent, decision, outcome in (
            (moments.nth(0), first, world.agent_id, "apply", "Applied"),
            (moments.nth(1), second, world.other_agent_id, "decline", "Declined"),
        ):
            await expect(moment.get_by_role("heading")).to_contain_text(f"(request #{seq})")
            await expect(moment.locator("li.step > strong")).to_have_text(
                [
                    "Proposed by coach (studio_edit_memory)",
                    f"Decided: {decision} by {OPERATOR} (card)",
                    f"{outcome} by {OPERATOR}",
                ]
            )
            await expect(moment.get_by_role("link", name=f"agent {agent}")).to_be_visible()
        await expect(moments.nth(0).locator("li.step").first).to_contain_text("Reason: mixups")
        await expect(moments.nth(2).get_by_role("heading")).to_have_text("The continuation the coach got")
        await expect(moments.nth(2).locator("pre.told")).to_have_text(told)
        await axe(tab)
        await shot(tab, "history-timeline")
        await moments.nth(0).get_by_role("heading").get_by_role("link").click()
        await expect(tab.get_by_role("region", name="What happened").locator(".outcome")).to_contain_text(
            f"Applied by {OPERATOR}"
        )
        await tab.go_back()
        await expect(moments).to_have_count(3)

        # The agent's timeline (its creation, a direct write; then its proposal), and its page: its decided item,
        # linked to its card.
        await moments.nth(0).get_by_role("link", name=f"agent {world.agent_id}").click()
        await expect(tab.get_by_role("heading", name=f"Timeline of agent {world.agent_id}")).to_be_visible()
        await expect(moments).to_have_count(2)
        await expect(moments.nth(0).get_by_role("heading")).to_have_text(
            f"Written by {OPERATOR} (POST /api/workspace/agents), outside any proposal"
        )
        await expect(moments.nth(1).locator("li.step")).to_have_count(3)
        await tab.get_by_role("link", name="The agent's page").click()
        decided = tab.get_by_role("region", name="Decided items")
        await expect(decided.get_by_role("listitem")).to_have_count(1)
        await expect(decided.get_by_role("listitem")).to_contain_text(
            f"Memory of Ada (request #{first}): applied by {OPERATOR}"
        )
        await axe(tab)
        assert "null" not in await tab.locator("main").inner_text()
        await decided.get_by_role("link", name=f"Memory of Ada (request #{first})").click()
        await expect(tab.get_by_role("heading", name="Memory of Ada")).to_be_visible()
        await expect(tab).to_have_url(re.compile(f"#/sessions/{sid}/edits/{first}$"))

        # A direct write (no session, no seq, no proposal) as a page of the API shows it: in the table with no link
        # to a session or a card, and in the agent's timeline as written outside any proposal.
        written = {
            **linked[0],
            "position": n,
            "type": "written",
            "session_id": None,
            "seq": None,
            "proposal_id": None,
            "decision": None,
            "outcome": None,
            "kind": "memory",
            "action": "edit",
            "agent_id": world.agent_id,
            "target": "Memory of Ada",
            "actor": OPERATOR,
            "via": "page",
            "detail": None,
            "link": None,
        }

        async def with_a_write(route: Any) -> None:
            answer = await route.fetch()
            page = await answer.json()
            if "cursor" not in route.request.url:
                page["entries"].insert(0, written)
            await route.fulfill(response=answer, json=page)

        await tab.route(lambda url: "/api/history?" in url, with_a_write)
        await tab.goto("/console#/history")
        await expect(rows).to_have_count(n + 1)
        await expect(rows.first).to_contain_text("Written")
        await expect(rows.first.locator("td.session")).to_have_text("none")
        await expect(rows.first.get_by_role("link")).to_have_text([world.agent_id])
        await axe(tab)
        await tab.goto(f"/console#/history/agent/{world.agent_id}")
        await expect(moments).to_have_count(3)
        await expect(moments.nth(2).get_by_role("heading")).to_have_text(
            f"Written by {OPERATOR} (page), outside any proposal"
        )
        await axe(tab)
        assert elsewhere == []
        await context.close()


def external_remote(tmp_path: Path) -> Path:
    """A bare repository with the agent's files on ``trunk``, reached as ``file://`` (an external source)."""
    remote, work = tmp_path / "remote.git", tmp_path / "work"
    git("init", "--quiet", "--bare", "--initial-branch", "trunk", str(remote))
    git("clone", "--quiet", str(remote), str(work))
    for path, text in FILES.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    who = ("-c", "user.name=t", "-c", "user.email=t@example.com")
    git(*who, "add", "-A", cwd=work)
    git(*who, "commit", "--quiet", "-m", "first", cwd=work)
    git("push", "--quiet", "origin", "HEAD:trunk", cwd=work)
    return remote


async def test_the_proposals_page_approves_onto_a_new_branch_and_the_docs_need_no_internet(
    stack: Stack, browser: Browser, tmp_path: Path
) -> None:
    remote = external_remote(tmp_path)
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        await put_repository(
            http, world.agent_id, {"mode": "external", "url": f"file://{remote}", "provider": "github"}
        )
        await deploy(http, world.agent_id)
        token = http.headers["Authorization"].removeprefix("Bearer ")
        session = await chat(coach, world)
        result = await propose(session, world.agent_id, {"knowledge/policy.md": "Refunds take 3 days.\n"}, "faster")
        pid = proposal_id(result)
        await projected(http, session.session_id, pid)

        context, elsewhere = await local_only(browser, stack)
        tab = await context.new_page()
        await sign_in(tab, token)
        await tab.goto(f"/console#/agents/{world.agent_id}/proposals")
        await expect(tab.get_by_role("heading", name="Waiting (1)")).to_be_visible()
        await expect(tab.get_by_role("heading", name="Decided (0)")).to_be_visible()
        card = tab.locator(f"#proposal-{pid}")
        await expect(card.locator(".line.del")).to_have_text(["removed: -Refunds take 5 days."])
        await expect(card.locator(".line.add")).to_have_text(["added: +Refunds take 3 days."])
        await axe(tab)
        await shot(tab, "proposals")

        await card.get_by_label("A new branch").check()
        await card.get_by_label("Branch name").fill("faster-refunds")
        await card.get_by_label("Commit message (the reason when empty)").fill("Refunds take 3 days")
        await card.get_by_role("button", name="Approve").click()
        # The answer comes once the deployer has committed and pushed: allow a loaded machine its time.
        await expect(tab.get_by_role("heading", name="Decided (1)")).to_be_visible(timeout=30_000)
        await expect(tab.get_by_role("heading", name="Waiting (0)")).to_be_visible()
        await expect(tab.get_by_role("region", name="Activity").get_by_role("listitem")).to_have_count(1)
        await expect(tab.get_by_role("region", name="Activity").get_by_role("listitem")).to_contain_text("approved by")
        decided = (await page(http, world.agent_id))["decided"]
        assert [(p["proposal_id"], p["status"], p["branch"]) for p in decided] == [(pid, "approved", "faster-refunds")]
        branch = git("--git-dir", str(remote), "log", "-1", "--format=%s", "refs/heads/faster-refunds").strip()
        assert branch == "Refunds take 3 days"
        await expect(tab.locator(f"#proposal-{pid}")).to_contain_text("branch faster-refunds")
        await axe(tab)
        await shot(tab, "proposals-decided")

        await tab.goto("/docs")
        await expect(tab.get_by_role("heading", name="Assent")).to_be_visible()
        await expect(tab.locator(".opblock-summary-path").first).to_be_visible()
        await axe(tab)
        await shot(tab, "api-docs", full_page=False)  # the page is long: its top is the point
        assert elsewhere == []
        await context.close()


async def test_a_card_reviews_unified_or_side_by_side_with_the_changed_words_marked(
    stack: Stack, browser: Browser
) -> None:
    """A changed line: its changed word marked in the unified view and in the side-by-side one; the choice is
    remembered; the item's counts are the tray's."""
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        token = http.headers["Authorization"].removeprefix("Bearer ")
        moved = await http.put(
            f"/api/workspace/agents/{world.agent_id}/memory", json={"content": "Prefer short answers.\nQuote.\n"}
        )
        assert moved.status_code == 200, moved.text
        version = (await memory_of(http, world.agent_id))["version"]
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        called = await propose_memory(turn, world.agent_id, "Prefer very short answers.\nQuote.\n", version)
        assert called.ok, called.error
        await turn.end_step()
        seq = turn.calls[called.tool_call_id].seq
        [item] = (await wait_pending(http, sid, 1))["items"]
        assert item["lines"] == {"added": 1, "removed": 1}

        context, elsewhere = await local_only(browser, stack)
        tab = await context.new_page()
        await sign_in(tab, token)
        await tab.goto(f"/console#/sessions/{sid}")
        card = tab.locator(f"#item-{seq}")
        await expect(card.locator(".meta")).to_contain_text("+1 \u22121 \u00b7 ")
        await expect(card.locator(".meta time")).to_have_attribute("title", re.compile(r"\d"))
        await card.get_by_role("button", name="Show changes").click()
        views = card.get_by_role("group", name="Diff view")
        await expect(views.get_by_role("button", name="Unified")).to_have_attribute("aria-pressed", "true")
        await expect(card.locator("pre.diff .line.add mark.word-add")).to_have_text(["very"])
        await expect(card.locator("pre.diff .line.del mark")).to_have_count(0)
        await expect(card.locator("pre.diff .line.add")).to_have_count(item["lines"]["added"])
        await expect(card.locator("pre.diff .line.del")).to_have_count(item["lines"]["removed"])
        await axe(tab)
        await views.get_by_role("button", name="Side by side").click()
        split = card.locator("table.diff.split")
        await expect(split.locator("td.del")).to_have_text(["removed: Prefer short answers."])
        await expect(split.locator("td.add")).to_have_text(["added: Prefer very short answers."])
        await expect(split.locator("td.add mark.word-add")).to_have_text(["very"])
        await axe(tab)
        await shot(tab, "side-by-side")
        await tab.reload()  # the choice is remembered
        await tab.locator(f"#item-{seq}").get_by_role("button", name="Show changes").click()
        await expect(tab.locator(f"#item-{seq} table.diff.split")).to_be_visible()
        await tab.get_by_role("button", name="Unified").click()
        await expect(tab.locator(f"#item-{seq} pre.diff")).to_be_visible()
        assert elsewhere == []
        await context.close()


def test_the_vendored_files_are_the_pinned_ones() -> None:
    """The bundled front-end files are the versions their VERSION files name (a replaced file is noticed)."""
    swagger = Path(__file__).resolve().parents[1] / "services/gateway/src/gateway/console/static/vendor/swagger-ui"
    assert (swagger / "VERSION").read_text().startswith("swagger-ui-dist 5.35.0 ")
    assert '"5.35.0"' in (swagger / "swagger-ui-bundle.js").read_text()
    assert (AXE.parent / "VERSION").read_text().startswith("axe-core 4.14.1 ")
    assert AXE_SOURCE.startswith("/*! axe v4.14.1")


async def test_signing_in_with_the_issuer_comes_back_signed_in_and_a_forged_answer_is_refused(
    stack: Stack, browser: Browser
) -> None:
    issuer = test_issuer()
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        session = await coach.open_session(
            org_id=world.org_id, source_guild_id=world.guild_id, operator_user_id=OPERATOR
        )

        async def listed() -> bool:
            return (await http.get("/api/studio/sessions")).json()["total"] == 1

        await wait_for(listed)
        issuer.approve_as(OPERATOR, world.org_id, ("admin",))
        exchanges = len(issuer.exchanges)

        context, elsewhere = await local_only(browser, stack, issuer.url)
        tab = await context.new_page()
        await tab.goto("/console#/sessions")
        await expect(tab.get_by_role("heading", name="Sign in")).to_be_visible()
        # The page's own helpers: RFC 7636's example challenge, the authorization request, the answer read back.
        helpers = await tab.evaluate(
            """async (v) => {
                const oidc = await import("/console/static/oidc.js");
                return [
                    await oidc.challengeOf(v),
                    oidc.authorizeUrl("http://i.example/auth?x=1", {clientId: "c", redirectUri: "http://g/console",
                        scope: "openid", state: "s", challenge: "h"}),
                    oidc.returned("?code=a%2Bb&state=s"), oidc.returned("?error=access_denied&state=s"),
                    oidc.returned(""), oidc.randomString().length];
            }""",
            RFC7636_VERIFIER,
        )
        assert helpers == [
            RFC7636_CHALLENGE,
            "http://i.example/auth?x=1&response_type=code&client_id=c&redirect_uri=http%3A%2F%2Fg%2Fconsole"
            "&scope=openid&state=s&code_challenge=h&code_challenge_method=S256",
            {"code": "a+b", "state": "s"},
            {"error": "access_denied", "description": "", "state": "s"},
            None,
            43,
        ]
        button = tab.get_by_role("button", name=f"Sign in with {urlsplit(issuer.url).netloc}")
        await button.click()
        # Back from the issuer, on the page asked for, with the code out of the address bar and the history.
        await expect(tab.get_by_role("heading", name="Sessions", exact=True)).to_be_visible()
        assert tab.url == f"{stack.gateway_url}/console#/sessions"
        assert issuer.exchanges[exchanges:] == ["ok"]
        sessions = tab.get_by_role("region", name="Recent sessions")
        await expect(sessions.get_by_role("row")).to_have_count(2)
        await expect(sessions.get_by_role("row").nth(1)).to_contain_text(f"{session.session_id}{OPERATOR}")
        kept = await tab.evaluate(f"sessionStorage.getItem({TOKEN_KEY!r})")
        assert kept == issuer.minted[-1]
        assert jwt.decode(kept, options={"verify_signature": False})["org_id"] == world.org_id
        assert await tab.evaluate("sessionStorage.getItem('assent.console.oidc')") is None

        # An answer carrying another state than the one this tab sent is refused before any exchange.
        await tab.get_by_role("button", name="Sign out").click()

        async def forged(route: Any) -> None:
            query = parse_qs(urlsplit(route.request.url).query)
            back = f"{query['redirect_uri'][0]}?code=stolen&state=not-the-one-sent"
            await route.fulfill(status=302, headers={"Location": back})

        await context.route(f"{issuer.url}/authorize*", forged)
        await button.click()
        await expect(tab.get_by_role("alert")).to_contain_text("its state differs")
        assert tab.url == f"{stack.gateway_url}/console#/sign-in"
        assert await tab.evaluate(f"sessionStorage.getItem({TOKEN_KEY!r})") is None
        assert issuer.exchanges[exchanges:] == ["ok"]
        await axe(tab)
        await shot(tab, "sign-in-issuer")
        assert elsewhere == []
        await context.close()


async def test_the_sign_in_page_without_an_issuer_offers_the_token_box_alone(
    stack: Stack, browser: Browser, tmp_path: Path
) -> None:
    """As ``make run`` serves it (no ``ASSENT_OIDC_*`` setting, so ``/console/config.json`` names no issuer): the
    sign-in page is its heading, the place for a refusal and the token form, with no other text (the issuer's
    absent part once showed as "null"); the token signs in. A second gateway of the stack, without the issuer."""
    from assent_devstack.system import ServiceProcess, free_port

    env = {name: value for name, value in stack.system.env.items() if not name.startswith("ASSENT_OIDC_")}
    plain = ServiceProcess("gateway", free_port(), env, tmp_path / "gateway-no-issuer.log")
    await asyncio.to_thread(plain.start)
    try:
        async with httpx.AsyncClient(base_url=plain.url) as http:
            assert (await http.get("/console/config.json")).json() == {"oidc": None}
        context, elsewhere = await local_only(browser, stack, gateway=plain.url)
        tab = await context.new_page()
        await tab.goto("/console")
        await expect(tab.get_by_role("heading", name="Sign in")).to_be_visible()
        main = tab.locator("#main")
        parts = await main.evaluate(
            "m => [...m.childNodes].map(n => n.nodeType === Node.ELEMENT_NODE ? n.tagName : `text ${n.textContent}`)"
        )
        assert parts == ["H1", "P", "FORM"]
        await expect(main).to_have_text(
            "Sign in"
            "Access token"
            "Paste a bearer token (an access token of the organisation's identity provider). "
            "It is kept in this tab only."
            "Sign in"
        )
        assert "null" not in await tab.locator("body").inner_text()
        await expect(tab.get_by_role("button", name="Sign in", exact=True)).to_have_class("primary")
        await expect(tab.get_by_role("button")).to_have_count(1)  # no "Sign in with ...", and Sign out hidden
        await axe(tab)
        await tab.get_by_label("Access token").fill(TOKEN)
        await tab.get_by_role("button", name="Sign in", exact=True).click()
        await expect(tab.get_by_role("heading", name="Sessions", exact=True)).to_be_visible()
        assert await tab.evaluate(f"sessionStorage.getItem({TOKEN_KEY!r})") == TOKEN
        await expect(tab.get_by_role("button", name="Sign out")).to_be_visible()
        assert elsewhere == []
        await context.close()
    finally:
        await asyncio.to_thread(plain.stop)


def test_the_issuer_exchanges_a_code_once_for_its_redirect_and_verifier() -> None:
    """The test issuer's own rules, as a real issuer's: RFC 7636's example challenge, a code that works once, for
    its redirect URI and verifier, and a client or redirect URI that is wrong is not redirected to."""
    assert s256(RFC7636_VERIFIER) == RFC7636_CHALLENGE
    issuer = TestIssuer()
    back = "http://127.0.0.1:8100/console"
    verifier = "v" * 43
    asked = {
        "response_type": "code",
        "client_id": CONSOLE_CLIENT_ID,
        "redirect_uri": back,
        "state": "s1",
        "code_challenge": s256(verifier),
        "code_challenge_method": "S256",
    }
    assert issuer.authorize(asked) == (
        302,
        f"{back}?error=access_denied&error_description=nobody+signs+in+here&state=s1",
    )
    issuer.approve_as("olga@acme.example", "acme", ("reviewer",))
    assert issuer.authorize({**asked, "client_id": "another"}) == (400, "unknown client_id")
    assert issuer.authorize({**asked, "code_challenge_method": "plain"})[1].startswith(f"{back}?error=invalid_request&")

    def code() -> str:
        status, where = issuer.authorize(asked)
        assert status == 302 and where.startswith(f"{back}?code=") and where.endswith("&state=s1")
        return parse_qs(urlsplit(where).query)["code"][0]

    form = {"grant_type": "authorization_code", "redirect_uri": back, "client_id": CONSOLE_CLIENT_ID}
    first = code()
    assert issuer.exchange({**form, "code": first, "code_verifier": "w" * 43}) == (
        400,
        {"error": "invalid_grant"},
        "http://127.0.0.1:8100",
    )
    assert issuer.exchange({**form, "code": first, "code_verifier": verifier})[:2] == (400, {"error": "invalid_grant"})
    second = code()
    assert (
        issuer.exchange({**form, "code": second, "redirect_uri": f"{back}/other", "code_verifier": verifier})[0] == 400
    )
    third = code()
    status, body, allowed = issuer.exchange({**form, "code": third, "code_verifier": verifier})
    assert (status, body["token_type"], allowed) == (200, "Bearer", "http://127.0.0.1:8100")
    claims = jwt.decode(body["access_token"], issuer.keys[-1][1].public_key(), algorithms=["RS256"], audience=AUDIENCE)
    assert (claims["sub"], claims["org_id"], claims["roles"], claims["iss"]) == (
        "olga@acme.example",
        "acme",
        ["reviewer"],
        issuer.url,
    )
    assert issuer.exchange({**form, "code": third, "code_verifier": verifier})[:2] == (400, {"error": "invalid_grant"})
    assert issuer.exchanges == ["invalid_grant", "invalid_grant", "invalid_grant", "ok", "invalid_grant"]
    issuer.server.shutdown()


async def test_the_desk_says_what_a_request_waits_for_and_counts_one_approval(stack: Stack, browser: Browser) -> None:
    """Under a policy that requires two admins, the item says what it waits for; an admin's apply in the browser is
    counted as one approval (the request stays, the line moves on), and the second admin's applies it."""
    async with stack.http() as http, stack.http() as ben, stack.coach() as coach:
        world = await new_world(http)  # ``http`` runs the session (its operator's approval never counts)
        policy = {"rules": [{"name": "two admins", "require": {"approvals": 2, "roles": ["admin"]}}]}
        assert (await http.put("/api/policy", json={"policy": policy, "expected_version": 0})).status_code == 200
        ann = as_admin_of(httpx.AsyncClient(), world.org_id, user="ann@example.com")
        as_admin_of(ben, world.org_id, user="ben@example.com")
        before = await memory_of(http, world.agent_id)
        session = await coach.open_session(
            org_id=world.org_id, source_guild_id=world.guild_id, operator_user_id=OPERATOR
        )
        turn = session.begin_turn()
        result = await turn.call(
            "studio_edit_memory",
            {
                "agent_id": world.agent_id,
                "content": before["content"] + "Two admins agree.\n",
                "base_version": before["version"],
                "reason": "why",
            },
        )
        assert result.ok, result.error
        await turn.end_step()
        sid, seq = session.session_id, turn.calls[result.tool_call_id].seq

        async def judged() -> bool:
            answer = await http.get(f"/api/studio/sessions/{sid}/pending")
            if answer.status_code == 404:  # the gateway has not heard of the session yet
                return False
            items = answer.json()["items"]
            return bool(items) and items[0]["waiting_for"] is not None

        await wait_for(judged)
        context, elsewhere = await local_only(browser, stack)
        tab = await context.new_page()
        await sign_in(tab, ann)
        await tab.goto(f"/console#/sessions/{sid}")
        item = tab.locator(f"#item-{seq}")
        await expect(item.locator(".waiting")).to_have_text("0 of 2 approvals: needs two admins")
        await item.get_by_role("button", name="Apply edit").click()
        await expect(item.locator(".message")).to_have_text(
            "Your approval was counted. 1 of 2 approvals: needs one more admin"
        )
        await expect(item.locator(".waiting")).to_have_text("1 of 2 approvals: needs one more admin")
        await expect(item.get_by_role("button", name="Apply edit")).to_be_disabled()
        await expect(item.get_by_role("button", name="Decline")).to_be_enabled()
        await axe(tab)
        await shot(tab, "desk-approvals")

        done = await ben.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
        assert done.status_code == 200 and done.json()["outcome"] == "applied", done.text
        await expect(tab.locator("#summary")).to_have_text("Waiting on 0 decisions")
        continuation = await turn.continuation()
        assert [(d.seq, d.outcome, d.resolved_by) for d in continuation.decisions] == [
            (seq, "applied", "ben@example.com")
        ]
        assert elsewhere == []
        await context.close()


async def test_an_admin_tries_and_sets_the_policy_and_a_change_made_meanwhile_is_refused(
    stack: Stack, browser: Browser
) -> None:
    async with stack.http() as http:
        await a_decided_turn(http, stack)
        token = http.headers["Authorization"].removeprefix("Bearer ")
        context, elsewhere = await local_only(browser, stack)
        tab = await context.new_page()
        await sign_in(tab, token)
        await tab.get_by_role("link", name="Policy").click()
        await expect(tab.locator("#policy-status")).to_have_text(
            "No policy is set: every request waits for one person's decision."
        )
        policy = {"rules": [{"name": "memory by rule", "match": {"kind": ["memory"]}, "decide": "apply"}]}
        await tab.get_by_label("Rules").fill(json.dumps(policy))
        await tab.get_by_role("button", name="Try over the last 100 requests").click()
        # The turn's two edits: one applied by people (the rule agrees), one declined (the rule differs).
        await expect(tab.locator("#trial-summary")).to_contain_text(
            "Of 2 requests: the rules would have applied 2 and declined 0 (1 unlike what people did)"
        )
        await expect(tab.locator("tr.differs")).to_have_count(1)
        await axe(tab)
        await shot(tab, "policy")

        await tab.get_by_role("button", name="Save as the next version").click()
        await expect(tab.locator("#policy-status")).to_contain_text("Version 1, set by ")
        await expect(tab.get_by_role("list", name="Versions, newest first").get_by_role("listitem")).to_have_count(1)
        set_now = (await http.get("/api/policy")).json()
        assert (set_now["version"], [r["name"] for r in set_now["policy"]["rules"]]) == (1, ["memory by rule"])

        # Someone else sets version 2 meanwhile: saving against version 1 is refused, and nothing is written.
        assert (await http.put("/api/policy", json={"policy": {"rules": []}, "expected_version": 1})).status_code == 200
        await tab.get_by_role("button", name="Save as the next version").click()
        await expect(tab.get_by_role("alert")).to_contain_text("someone changed it meanwhile")
        assert (await http.get("/api/policy")).json()["version"] == 2
        await tab.get_by_label("Rules").fill("{not json")
        await tab.get_by_role("button", name="Try over the last 100 requests").click()
        await expect(tab.get_by_role("alert")).to_contain_text("Not JSON")
        assert elsewhere == []
        await context.close()


async def test_sessions_go_by_their_names_and_the_desk_by_keyboard(stack: Stack, browser: Browser) -> None:
    """Signed out, no navigation; signed in, who and where. A session shows by its agents, its coach and its first
    request, its id one click away (copied) and in the title. An unknown session is a page with no actions. The
    desk's keys: j and k move the focus, o opens the changes, d declines, a applies, ? lists them (a dialog)."""
    from assent.contracts import CoachInfo
    from tests.test_memory_edits import propose as propose_memory

    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        token = http.headers["Authorization"].removeprefix("Bearer ")
        session = await coach.open_session(
            org_id=world.org_id,
            source_guild_id=world.guild_id,
            operator_user_id=OPERATOR,
            coach=CoachInfo(name="Support coach", model="model-1"),
        )
        sid, turn = session.session_id, session.begin_turn()
        calls = []
        for agent_id, reason in ((world.agent_id, "orders come up often"), (world.other_agent_id, "shorter")):
            version = (await memory_of(http, agent_id))["version"]
            calls.append(await propose_memory(turn, agent_id, "Quote the order.\n", version, reason))
        assert all(c.ok for c in calls), [c.error for c in calls]
        await turn.end_step()
        first, second = (turn.calls[c.tool_call_id].seq for c in calls)

        async def waiting() -> bool:
            response = await http.get(f"/api/studio/sessions/{sid}/pending")
            return response.status_code == 200 and response.json()["waiting_on"] == 2

        await wait_for(waiting)
        name = f"{', '.join(sorted([world.agent_id, world.other_agent_id]))} \u00b7 Support coach"

        context, elsewhere = await local_only(browser, stack)
        await context.grant_permissions(["clipboard-read", "clipboard-write"], origin=stack.gateway_url)
        tab = await context.new_page()
        await tab.goto("/console")
        await expect(tab.get_by_role("heading", name="Sign in")).to_be_visible()
        await expect(tab.get_by_role("navigation", name="Console")).to_be_hidden()
        await expect(tab.locator("#identity")).to_be_hidden()
        await sign_in(tab, token)
        await expect(tab.get_by_role("navigation", name="Console")).to_be_visible()
        await expect(tab.locator("#identity")).to_have_text(re.compile(rf"^Signed in as {OPERATOR} \({world.org_id}, "))
        row = tab.get_by_role("region", name="Recent sessions").get_by_role("row").nth(1)
        await expect(row.get_by_role("link", name=name)).to_be_visible()
        await expect(row).to_contain_text("orders come up often")
        await expect(row.get_by_role("button", name=f"Copy session id {sid}")).to_have_attribute("data-copy", sid)
        await axe(tab)
        await shot(tab, "sessions-named")

        await row.get_by_role("link", name=name).click()
        await expect(tab.get_by_role("heading", name=name, level=1)).to_be_visible()
        await expect(tab).to_have_title(f"{name} \u00b7 {sid} \u00b7 Assent console")
        await expect(tab.locator(".about")).to_contain_text("orders come up often")
        await tab.locator(".about").get_by_role("button", name=f"Copy session id {sid}").click()
        await expect(tab.locator(".about .copy")).to_have_text(f"Copied session id {sid}")
        assert await tab.evaluate("navigator.clipboard.readText()") == sid

        items = [tab.locator(f"#item-{seq}") for seq in (first, second)]
        await tab.keyboard.press("j")
        await expect(items[0]).to_be_focused()
        await tab.keyboard.press("j")
        await expect(items[1]).to_be_focused()
        await tab.keyboard.press("k")
        await expect(items[0]).to_be_focused()
        await tab.keyboard.press("o")
        await expect(items[0].get_by_role("button", name="Hide changes")).to_have_attribute("aria-expanded", "true")
        await expect(items[0].locator("pre.diff")).to_be_visible()
        await axe(tab)
        await shot(tab, "desk-keyboard")
        await tab.keyboard.press("?")
        dialog = tab.get_by_role("dialog", name="Keyboard shortcuts")
        await expect(dialog).to_be_visible()
        await expect(dialog).to_contain_text("Decline the current request")
        await tab.keyboard.press("Tab")
        await expect(dialog.get_by_role("button", name="Close")).to_be_focused()
        await axe(tab)
        await shot(tab, "desk-shortcuts")
        await tab.keyboard.press("Escape")
        await expect(dialog).to_be_hidden()
        await tab.evaluate(
            "document.getElementById('summary').after(Object.assign(document.createElement('input'),"
            " {id: 'probe', 'aria-label': 'probe'}))"
        )
        await tab.locator("#probe").press("d")  # typing: no shortcut
        await expect(items[0]).to_be_visible()
        await items[0].focus()
        await tab.keyboard.press("d")
        await expect(items[0]).to_have_count(0)
        await tab.keyboard.press("j")
        await expect(items[1]).to_be_focused()
        await tab.keyboard.press("a")
        await expect(tab.locator("#items")).to_have_text("Nothing waits on a decision.")
        assert (await memory_of(http, world.other_agent_id))["content"] == "Quote the order.\n"

        await tab.goto(f"/console#/sessions/ses_{'0' * 32}")
        await expect(tab.get_by_role("heading", name="No such session", level=1)).to_be_visible()
        for action in ("Apply all", "Decline all", "Logins", "Continue"):
            await expect(tab.get_by_role("button", name=action)).to_have_count(0)
        await axe(tab)
        await shot(tab, "no-such-session")
        assert elsewhere == []
        await context.close()


async def test_an_access_change_that_widens_is_marked_and_shows_the_access_before_and_after(
    stack: Stack, browser: Browser
) -> None:
    """A widening access change is marked "Widens access" on its tray item and its card, a narrowing one is not;
    its changes are the agent's effective access before and after, the changed binding's line among them."""
    from tests.test_access import setting_up

    async with stack.http() as http, stack.coach() as coach:
        world, login = await setting_up(http)
        guild = await http.put(f"/api/workspace/guilds/{world.guild_id}/access", json={"connections": {login: "off"}})
        assert guild.status_code == 200, guild.text
        token = http.headers["Authorization"].removeprefix("Bearer ")
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        calls = [
            await turn.call(
                "studio_edit_access", {"agent_id": world.agent_id, "connections": {login: "on"}, "reason": "Refunds."}
            ),
            await turn.call(
                "studio_edit_access",
                {"agent_id": world.agent_id, "native_tools": {"fetch_url": "off"}, "reason": "No fetching."},
            ),
        ]
        assert all(c.ok for c in calls), [c.error for c in calls]
        await turn.end_step()
        wider, narrower = (turn.calls[c.tool_call_id].seq for c in calls)
        await wait_pending(http, sid, 2)

        context, elsewhere = await local_only(browser, stack)
        tab = await context.new_page()
        await sign_in(tab, token)
        await tab.goto(f"/console#/sessions/{sid}")
        widening, narrowing = tab.locator(f"#item-{wider}"), tab.locator(f"#item-{narrower}")
        await expect(widening.locator(".badge.warn")).to_have_text("Widens access")
        await expect(narrowing).to_be_visible()
        await expect(narrowing.locator(".badge.warn")).to_have_count(0)
        await widening.get_by_role("button", name="Show changes").click()
        await expect(widening.locator(".line.del").first).to_have_text(
            re.compile(rf"^removed: -Connection .*\({login}\).*: off; ")
        )
        await expect(widening.locator(".line.add").first).to_have_text(
            re.compile(rf"^added: \+Connection .*\({login}\).*: on; ")
        )
        await axe(tab)
        await shot(tab, "access-widens")

        await tab.goto(f"/console#/sessions/{sid}/edits/{wider}")
        await expect(tab.locator("p.badge.warn")).to_contain_text("Widens access: applying it lets an agent do more")
        await axe(tab)
        assert elsewhere == []
        await context.close()
