"""Property-based requests against the gateway's own OpenAPI document: no input earns a server error."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import TOKEN, Stack, new_world

pytestmark = pytest.mark.integration


async def test_no_generated_request_gets_a_server_error(stack: Stack) -> None:
    async with stack.http() as http:
        await new_world(http)  # some rows for the generated requests to find
    cli = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    assert cli is not None, "schemathesis is a dev dependency"
    process = await asyncio.create_subprocess_exec(
        cli,
        "run",
        f"{stack.gateway_url}/openapi.json",
        "--header",
        f"Authorization: Bearer {TOKEN}",
        "--checks",
        "not_a_server_error",
        "--max-examples",
        "25",
        "--exclude-path-regex",
        "/events$",  # an endless stream by design
        "--seed",
        "20261130",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode == 0, output.decode(errors="replace")[-4000:]
