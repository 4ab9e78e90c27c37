"""The operator's web console and the API docs, served by the gateway from files it ships (no CDN, no build step).

The console is one static page (``static/index.html``) and a module of plain JavaScript (``static/console.js``) that
reads and decides through the public API with the person's bearer token, kept in the tab's ``sessionStorage``. The
pages carry no data: every row a person sees comes from the API, walled by the token's organisation, so these routes
need no identity. ``/console/kinds.json`` is the kind registry as the console needs it (the endpoint and the
decisions of each kind), so that a kind added later is decided with no change here.

Signing in: a pasted bearer token, or, when ``ASSENT_OIDC_CONSOLE_CLIENT_ID`` is set, the issuer's authorization
code flow with PKCE (S256) as a public client (no secret). ``/console/config.json`` tells the page the issuer, the
client id and the scope (public data only); the page reads the endpoints from the issuer's
``/.well-known/openid-configuration``, and the console's policy lets it reach exactly that issuer's origin.

``/docs`` is Swagger UI from the bundled ``swagger-ui-dist`` files (``static/vendor/swagger-ui``, version in its
``VERSION`` file), reading ``/openapi.json``, with ``static/swagger-contrast.css`` over its colours (see
``swagger_page``).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from urllib.parse import urlsplit

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict

from assent.kinds import KINDS, SECTIONS, Addressed

from ..settings import GatewaySettings

STATIC = Path(__file__).parent / "static"
SWAGGER = "/console/static/vendor/swagger-ui"


def swagger_page(title: str) -> HTMLResponse:
    """Swagger UI's page, made to pass axe-core: the page's language declared, deep links off (they put a link inside
    each operation's toggle button, a control within a control) and ``swagger-contrast.css`` over Swagger's colours
    that fail WCAG AA contrast."""
    page = get_swagger_ui_html(
        openapi_url="/openapi.json",
        title=f"{title} API",
        swagger_js_url=f"{SWAGGER}/swagger-ui-bundle.js",
        swagger_css_url=f"{SWAGGER}/swagger-ui.css",
        swagger_favicon_url="/console/static/favicon.svg",
        swagger_ui_parameters={"deepLinking": False},
    )
    html = bytes(page.body).decode()
    html = html.replace("<html>", '<html lang="en">', 1)
    html = html.replace("</head>", '<link rel="stylesheet" href="/console/static/swagger-contrast.css">\n</head>', 1)
    return HTMLResponse(html)


def policy(issuer_origin: str | None = None) -> str:
    """The console's Content-Security-Policy: every script, style and request goes to the gateway itself, and
    requests (the discovery document, the code exchange) to the issuer's origin too when one signs people in."""
    connect = f"'self' {issuer_origin}" if issuer_origin else "'self'"
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src {connect}; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
    )


CONSOLE_POLICY = policy()
"""The policy with no issuer: nothing leaves the gateway."""


def origin_of(issuer: str) -> str:
    """``scheme://host[:port]`` of an issuer URL, as a policy names it; ValueError for anything that is not a plain
    http(s) URL (a space or ``;`` would otherwise write into the policy)."""
    parts = urlsplit(issuer)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        raise ValueError(f"the OIDC issuer must be an http(s) URL with a host, not {issuer!r}")
    origin = f"{parts.scheme}://{parts.netloc}".lower()
    if any(c in origin for c in " ;,'\"\\") or not origin.isascii() or not origin.isprintable():
        raise ValueError(f"the OIDC issuer must be an http(s) URL with a host, not {issuer!r}")
    return origin


class Issuer(BaseModel):
    """The issuer the console signs people in with: its URL, its name as the button shows it, the console's client id
    there and the scope it asks for."""

    model_config = ConfigDict(frozen=True)

    issuer: str
    name: str
    client_id: str
    scope: str


class ConsoleConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    oidc: Issuer | None


class ConsoleKind(BaseModel):
    """A kind as the console decides it."""

    model_config = ConfigDict(frozen=True)

    section: str
    endpoint: str
    addressed_by: Addressed
    apply: str
    decline: str
    decline_label: str
    decided_alone: bool
    options: list[str]
    """The choices its apply decision takes besides the decision (fields of the decision's body: a login grant's
    ``lifetime``)."""
    revertible: bool = False
    """Whether an applied request of it offers Revert (``POST …/{endpoint}/{seq}/revert``)."""
    applied: str = "applied"
    """The outcome of its apply decision (applied, granted, published): the status of an applied request."""
    deployed: bool = True
    """Whether its owner service is deployed beside this gateway (named in ``owner_urls``): a section none of whose
    kinds is deployed never has a request, and the console hides its zero count."""


class ConsoleKinds(BaseModel):
    model_config = ConfigDict(frozen=True)

    sections: list[str]
    kinds: dict[str, ConsoleKind]


def config(settings: GatewaySettings | None) -> ConsoleConfig:
    """What the page needs to offer signing in with the issuer (``oidc`` null when the console has no client id):
    public data only, served without a token."""
    if settings is None or not settings.oidc_console_client_id:
        return ConsoleConfig(oidc=None)
    if not settings.oidc_issuer:
        raise ValueError("ASSENT_OIDC_CONSOLE_CLIENT_ID needs ASSENT_OIDC_ISSUER")
    origin = origin_of(settings.oidc_issuer)
    return ConsoleConfig(
        oidc=Issuer(
            issuer=settings.oidc_issuer,
            name=urlsplit(origin).netloc,
            client_id=settings.oidc_console_client_id,
            scope=settings.oidc_console_scope,
        )
    )


def kinds(owners: Collection[str] | None = None) -> ConsoleKinds:
    """The registry as the console decides with it: per kind its section, the endpoint that decides it and whether
    by session or on the agent's page, the decision that applies (the one that is not ``decline``), the one that
    declines, whether Apply all skips it, whether an applied request of it offers Revert, and whether its owner is
    among the deployed ``owners`` (None: all are)."""
    return ConsoleKinds(
        sections=list(SECTIONS),
        kinds={
            name: ConsoleKind(
                section=spec.section,
                endpoint=spec.endpoint,
                addressed_by=spec.addressed_by,
                apply=next(d for d in spec.decisions if d != spec.decline),
                decline=spec.decline,
                decline_label=spec.decline_label,
                decided_alone=spec.decided_alone,
                options=list(spec.options.model.model_fields) if spec.options is not None else [],
                revertible=spec.revertible,
                applied=spec.decisions[next(d for d in spec.decisions if d != spec.decline)],
                deployed=owners is None or spec.owner in owners,
            )
            for name, spec in KINDS.items()
        },
    )


def mount(app: FastAPI, settings: GatewaySettings | None = None) -> None:
    """Serve the console at ``/console``, its files at ``/console/static``, and ``/docs`` from bundled assets.

    None of these is in the OpenAPI document: they are pages and files, not the API. A console client id without a
    usable issuer is a ValueError here, when the gateway starts.
    """
    registry = kinds(None if settings is None else set(settings.owner_urls))
    public = config(settings)
    issuer = public.oidc.issuer if public.oidc else None
    headers = {
        "Content-Security-Policy": policy(origin_of(issuer) if issuer else None),
        "Cache-Control": "no-cache",
    }

    @app.get("/console", include_in_schema=False)
    async def console() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html", headers=headers)

    @app.get("/console/kinds.json", include_in_schema=False)
    async def console_kinds() -> ConsoleKinds:
        return registry

    @app.get("/console/config.json", include_in_schema=False)
    async def console_config() -> ConsoleConfig:
        return public

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/console")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return swagger_page(app.title)

    app.mount("/console/static", StaticFiles(directory=STATIC), name="console-static")
