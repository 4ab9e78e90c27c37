"""The console's pages and files, in process: every asset from the gateway itself (no CDN), the console's
Content-Security-Policy, the kind registry as the console decides with it, and no data without a token."""

from __future__ import annotations

import re

import httpx
from fastapi import FastAPI

from assent.kinds import KINDS, SECTIONS
from gateway import console


def app() -> FastAPI:
    served = FastAPI(docs_url=None, redoc_url=None)
    console.mount(served)
    return served


async def get(path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app()), base_url="http://gateway") as http:
        return await http.get(path)


def assets(html: str) -> list[str]:
    return re.findall(r'(?:src|href)=["\']([^"\']+)["\']', html)


async def test_the_docs_page_loads_only_bundled_files() -> None:
    page = await get("/docs")
    assert page.status_code == 200
    urls = [url for url in assets(page.text) if not url.startswith("#")]
    assert sorted(urls) == [
        "/console/static/favicon.svg",
        "/console/static/swagger-contrast.css",
        "/console/static/vendor/swagger-ui/swagger-ui-bundle.js",
        "/console/static/vendor/swagger-ui/swagger-ui.css",
    ]
    assert "/openapi.json" in page.text and '<html lang="en">' in page.text
    for url in urls:
        served = await get(url)
        assert served.status_code == 200 and len(served.content) > 100, url


async def test_the_console_page_loads_only_its_own_files_under_its_policy() -> None:
    page = await get("/console")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == console.CONSOLE_POLICY
    assert "default-src 'self'" in console.CONSOLE_POLICY and "https:" not in console.CONSOLE_POLICY
    urls = [url for url in assets(page.text) if url.startswith("/")]
    assert sorted(urls) == [
        "/console/static/console.css",
        "/console/static/console.js",
        "/console/static/favicon.svg",
        "/docs",
        "/docs",
    ]
    assert [url for url in assets(page.text) if "://" in url] == []
    script = (await get("/console/static/console.js")).text
    assert "://" not in script.replace("http://", "").replace("https://", "") or "//" in script
    assert not re.search(r"https?://", script), "the console's script names no other host"
    assert (await get("/")).headers.get("location") == "/console"


async def test_the_registry_as_the_console_decides_with_it() -> None:
    registry = (await get("/console/kinds.json")).json()
    assert registry["sections"] == list(SECTIONS)
    assert set(registry["kinds"]) == set(KINDS)
    for name, spec in KINDS.items():
        kind = registry["kinds"][name]
        assert (kind["endpoint"], kind["addressed_by"], kind["decline"], kind["decided_alone"]) == (
            spec.endpoint,
            spec.addressed_by,
            spec.decline,
            spec.decided_alone,
        )
        assert kind["apply"] in spec.decisions and kind["apply"] != spec.decline
    assert registry["kinds"]["login"]["apply"] == "grant" and registry["kinds"]["draft"]["apply"] == "publish"


def test_a_kind_whose_owner_is_not_deployed_is_marked_so_for_the_section_counts() -> None:
    everywhere = console.kinds()
    assert all(kind.deployed for kind in everywhere.kinds.values())
    edits_only = console.kinds({"edits"})
    deployed = {name for name, kind in edits_only.kinds.items() if kind.deployed}
    assert deployed == {name for name, spec in KINDS.items() if spec.owner == "edits"}
    assert "login" not in deployed and "memory" in deployed
