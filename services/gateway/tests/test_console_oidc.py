"""Signing in to the console with the OpenID Connect issuer, in process: what ``/console/config.json`` tells the
page (public data only), the policy that lets the page reach exactly the issuer's origin, and the issuer URLs that
cannot be written into a policy."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from gateway import console
from gateway.settings import GatewaySettings

ISSUER = "https://login.acme.example/realms/acme"


def settings(**values: object) -> GatewaySettings:
    return GatewaySettings.model_validate(
        {"api_tokens": {"t": {"user": "u", "org": "o", "roles": ["admin"]}}, **values}
    )


async def served(given: GatewaySettings) -> tuple[httpx.Response, httpx.Response]:
    app = FastAPI(docs_url=None, redoc_url=None)
    console.mount(app, given)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as http:
        return await http.get("/console/config.json"), await http.get("/console")


@pytest.mark.parametrize(
    ("issuer", "origin"),
    [
        ("https://login.acme.example/realms/acme", "https://login.acme.example"),
        ("https://LOGIN.acme.example:8443/", "https://login.acme.example:8443"),
        ("http://127.0.0.1:5556", "http://127.0.0.1:5556"),
    ],
)
def test_the_origin_of_an_issuer(issuer: str, origin: str) -> None:
    assert console.origin_of(issuer) == origin


@pytest.mark.parametrize(
    "issuer",
    [
        "login.acme.example",  # no scheme
        "ftp://login.acme.example",
        "https://",
        "https://user:secret@login.acme.example",
        "https://login.acme.example; script-src *",
        "https://login.acme.example'x",
    ],
)
def test_an_issuer_that_is_no_plain_url_is_refused(issuer: str) -> None:
    with pytest.raises(ValueError, match="http\\(s\\) URL"):
        console.origin_of(issuer)


def test_the_policy_names_the_issuer_for_requests_only() -> None:
    assert "connect-src 'self';" in console.policy()
    with_issuer = console.policy("https://login.acme.example")
    assert "connect-src 'self' https://login.acme.example;" in with_issuer
    assert with_issuer.replace(" https://login.acme.example", "") == console.CONSOLE_POLICY


async def test_with_a_console_client_the_page_learns_the_issuer_and_may_reach_it() -> None:
    config, page = await served(settings(oidc_issuer=ISSUER, oidc_console_client_id="assent-console"))
    assert config.status_code == 200
    assert config.json() == {
        "oidc": {"issuer": ISSUER, "name": "login.acme.example", "client_id": "assent-console", "scope": "openid"}
    }
    assert page.headers["content-security-policy"] == console.policy("https://login.acme.example")


async def test_without_a_console_client_the_page_offers_no_issuer_and_reaches_nothing_else() -> None:
    # An issuer whose tokens the API takes is not yet one the console signs in with: that needs its client id.
    config, page = await served(settings(oidc_issuer=ISSUER))
    assert config.json() == {"oidc": None}
    assert page.headers["content-security-policy"] == console.CONSOLE_POLICY


def test_a_console_client_with_no_issuer_stops_the_gateway_at_start() -> None:
    with pytest.raises(ValueError, match="ASSENT_OIDC_ISSUER"):
        console.mount(FastAPI(), settings(oidc_console_client_id="assent-console"))
