"""The public OpenAPI document tells the truth: Schemathesis generates requests from the gateway's own document and
sends them to the running system, as an admin of a fresh organisation, with every check on (no server error, every
status and body as documented, schema-valid requests accepted and invalid ones refused, authentication enforced,
405 with ``Allow`` for a method a path does not serve, ...).

One allowance, declared where it holds: a route whose owner refuses more than its schema can say (a file's
contents, a remote that must answer, a byte cap that is a setting; ``PublicRoute.rules``, stated in its document's
422) may answer a schema-valid request 422; so may a route that takes an ``Idempotency-Key`` (a key the run already
sent with another request).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from assent.api import ROUTES
from tests.conftest import Stack, World
from tests.test_source_proposals import source_world

pytestmark = pytest.mark.integration

ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
"""Schemathesis' own default for a schema-valid request (a 5xx fails its own check, ``not_a_server_error``)."""


def keyed(document: dict[str, Any]) -> set[str]:
    """The operations that take an ``Idempotency-Key`` header, by name (``POST /api/...``)."""
    return {
        f"{method.upper()} {path}"
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if isinstance(operation, dict)
        and any(p.get("in") == "header" and p.get("name") == "Idempotency-Key" for p in operation.get("parameters", []))
    }


def ruled(document: dict[str, Any]) -> set[str]:
    """The gateway's own operations with rules their schema cannot say (``x-assent-rules``, stated in their 422)."""
    return {
        f"{method.upper()} {path}"
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if isinstance(operation, dict) and operation.get("x-assent-rules")
    }


def config(folder: Path, world: World | None, with_keys: set[str]) -> Path:
    """Schemathesis' configuration: 422 as an accepted answer to a schema-valid request of a route with rules, and,
    given ``world``, the organisation's own ids in paths (so requests reach the owners' rules, not only their 404)."""
    lines = []
    if world is not None:
        lines += [
            "[parameters]",
            f'"path.org_id" = "{world.org_id}"',
            f'"path.guild_id" = "{world.guild_id}"',
            f'"path.agent_id" = "{world.agent_id}"',
            "",
        ]
    with_rules = {f"{route.method} {route.public_path}" for route in ROUTES if route.rules}
    for name in sorted(with_rules | with_keys):
        lines += [
            "[[operations]]",
            f'include-name = "{name}"',
            f"checks.positive_data_acceptance.expected-statuses = {[*ACCEPTED, '422']!r}".replace("'", '"'),
            "",
        ]
    path = folder / f"schemathesis-{'world' if world else 'free'}.toml"
    path.write_text("\n".join(lines))
    return path


async def schemathesis(stack: Stack, token: str, settings: Path, phases: str) -> None:
    cli = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    assert cli is not None, "schemathesis is a dev dependency"
    process = await asyncio.create_subprocess_exec(
        cli,
        "--config-file",
        str(settings),
        "run",
        f"{stack.gateway_url}/openapi.json",
        "--header",
        f"Authorization: {token}",
        "--checks",
        "all",
        "--phases",
        phases,
        "--max-examples",
        os.environ.get("ASSENT_FUZZ_EXAMPLES", "5"),
        "--generation-deterministic",
        "--request-timeout",
        "60",  # a loaded machine (git reads on each builder-chat call) is slow, not gone
        "--exclude-path-regex",
        "[/-]events$",  # the live streams (a session's, a Proposals page's): endless by design
        "--no-color",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode == 0, output.decode(errors="replace")[-8000:]


@pytest.mark.timeout(
    900
)  # a bounded run (examples per operation, every route), 2-3 min here; far longer on a busy machine
async def test_the_public_document_tells_the_truth(stack: Stack, tmp_path: Path) -> None:
    async with stack.http() as http:
        world = await source_world(http)  # a fresh organisation with a hosted source; http acts as its admin
        token = str(http.headers["Authorization"])
        document = (await http.get("/openapi.json")).json()
        with_keys = keyed(document) | ruled(document)
    assert "POST /api/studio/sessions/{session_id}/apply-all" in with_keys
    await schemathesis(stack, token, config(tmp_path, world, with_keys), "examples,coverage,fuzzing")
    # The stateful phase finds its ids through the links it infers from the answers. (Given ids, it would also
    # count a request whose generated id breaks its pattern as valid once the given one replaced another id.)
    await schemathesis(stack, token, config(tmp_path, None, with_keys), "stateful")
