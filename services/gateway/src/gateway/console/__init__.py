"""The operator's web console and the API docs, served by the gateway from files it ships (no CDN, no build step).

The console is one static page (``static/index.html``) and a module of plain JavaScript (``static/console.js``) that
reads and decides through the public API with the person's bearer token, kept in the tab's ``sessionStorage``. The
pages carry no data: every row a person sees comes from the API, walled by the token's organisation, so these routes
need no identity. ``/console/kinds.json`` is the kind registry as the console needs it (the endpoint and the
decisions of each kind), so that a kind added later is decided with no change here.

``/docs`` is Swagger UI from the bundled ``swagger-ui-dist`` files (``static/vendor/swagger-ui``, version in its
``VERSION`` file), reading ``/openapi.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from assent.kinds import KINDS, SECTIONS

STATIC = Path(__file__).parent / "static"
SWAGGER = "/console/static/vendor/swagger-ui"
CONSOLE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
"""The console's Content-Security-Policy: every script, style and request goes to the gateway itself."""


def kinds() -> dict[str, Any]:
    """The registry as the console decides with it: per kind its section, the endpoint that decides it, the decision
    that applies (the one that is not ``decline``), the one that declines, and whether Apply all skips it."""
    return {
        "sections": list(SECTIONS),
        "kinds": {
            name: {
                "section": spec.section,
                "endpoint": spec.endpoint,
                "apply": next(d for d in spec.decisions if d != spec.decline),
                "decline": spec.decline,
                "decline_label": spec.decline_label,
                "decided_alone": spec.decided_alone,
            }
            for name, spec in KINDS.items()
        },
    }


def mount(app: FastAPI) -> None:
    """Serve the console at ``/console``, its files at ``/console/static``, and ``/docs`` from bundled assets.

    None of these is in the OpenAPI document: they are pages and files, not the API.
    """
    registry = kinds()
    headers = {"Content-Security-Policy": CONSOLE_POLICY, "Cache-Control": "no-cache"}

    @app.get("/console", include_in_schema=False)
    async def console() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html", headers=headers)

    @app.get("/console/kinds.json", include_in_schema=False)
    async def console_kinds() -> dict[str, Any]:
        return registry

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/console")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{SWAGGER}/swagger-ui-bundle.js",
            swagger_css_url=f"{SWAGGER}/swagger-ui.css",
            swagger_favicon_url="/console/static/favicon.svg",
        )

    app.mount("/console/static", StaticFiles(directory=STATIC), name="console-static")
