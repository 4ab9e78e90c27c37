"""The owners' internal APIs refuse every call without the deployment's service credential; the gateway's own
calls go through; no key shows in a log or an OpenAPI document. Real Kafka, PostgreSQL and Redis, services as
processes."""

from __future__ import annotations

import httpx
import pytest

from assent.service_auth import ServiceSigner
from assent_devstack.system import service_list
from tests.conftest import Stack, new_world
from tests.test_memory_edits import memory, open_turn, propose, wait_pending

pytestmark = pytest.mark.integration

OTHER_KEY = "not-the-deployment-key-" + "x" * 40
OWNERS = [spec.name for spec in service_list() if not spec.public]
PROBES = {"/livez", "/readyz", "/metrics"}


async def test_the_internal_api_refuses_calls_without_a_valid_service_credential(stack: Stack) -> None:
    key = stack.system.env["ASSENT_SERVICE_KEY"]
    edits = stack.system.edits.url
    routes = [f"{edits}/internal/agents/x", f"{edits}/internal/proposals/p_x/live"]
    refused_with = {
        "none": {},
        "garbage": {"Authorization": "Bearer garbage"},
        "basic": {"Authorization": "Basic Z2F0ZXdheTpzZWNyZXQ="},
        "another key": ServiceSigner("gateway", OTHER_KEY).headers("edits"),
        "another audience": ServiceSigner("gateway", key).headers("billing"),
        "another caller": ServiceSigner("stranger", key).headers("edits"),
    }
    async with httpx.AsyncClient(timeout=30) as http:
        for route in routes:
            for why, headers in refused_with.items():
                answer = await http.get(route, headers=headers)
                assert answer.status_code == 401, (route, why, answer.text)
                assert answer.headers["www-authenticate"].startswith("Bearer"), why
                assert set(answer.json()) == {"detail"} and key not in answer.text, why
            admitted = await http.get(route, headers=stack.service_headers())
            assert admitted.status_code == 404, admitted.text  # no such agent or proposal, but let in
        for probe in ("/livez", "/readyz", "/metrics"):
            assert (await http.get(f"{edits}{probe}")).status_code == 200, probe


async def test_the_gateway_presents_its_own_and_no_key_shows_in_logs_or_schemas(stack: Stack) -> None:
    key = stack.system.env["ASSENT_SERVICE_KEY"]
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)  # workspace writes through the gateway, on edits' internal API
        base = await memory(http, world.agent_id)
        turn = await open_turn(coach, world)
        result = await propose(turn, world.agent_id, "Cite the order.\n", base["version"])
        assert result.ok, result.error
        await turn.end_step()
        await wait_pending(http, turn.session.session_id, 1)
        seq = turn.calls[result.tool_call_id].seq
        card = await http.get(f"/api/studio/sessions/{turn.session.session_id}/edits/{seq}")  # the live view
        assert card.status_code == 200, card.text
        assert card.json()["live"]["text"] == base["content"] and card.json()["stale"] is False
    async with httpx.AsyncClient(timeout=30) as http:
        for name, process in stack.system.processes.items():
            if name in OWNERS:
                schema = await http.get(f"{process.url}/internal/openapi.json", headers=stack.service_headers(name))
            else:
                schema = await http.get(f"{process.url}/openapi.json")
            assert schema.status_code == 200 and key not in schema.text, process.module
            assert "ASSENT_SERVICE_KEY" not in schema.text, process.module
            log = process.log_path.read_text(errors="replace")
            assert key not in log, process.module


async def test_an_owner_opens_nothing_but_its_probes_and_metrics_without_the_credential(stack: Stack) -> None:
    """Every path of an owner's own OpenAPI document (read with the credential), with every method, and the pages
    a FastAPI app serves by default: without a credential, only the probes and the scraper's path answer 2xx;
    everything under /internal is 401. The gateway's public document and its page stay open."""
    async with httpx.AsyncClient(timeout=30) as http:
        for owner in OWNERS:
            url = stack.system.processes[owner].url
            document = await http.get(f"{url}/internal/openapi.json", headers=stack.service_headers(owner))
            assert document.status_code == 200, (owner, document.text)
            calls = {
                (method.upper(), path.replace("{", "").replace("}", ""))
                for path, item in document.json()["paths"].items()
                for method in item
            }
            assert calls and all(path.startswith("/internal/") for _, path in calls), (owner, calls)
            pages = {"/openapi.json", "/internal/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect"}
            calls |= {("GET", path) for path in pages | PROBES}
            answers = {
                (method, path): (await http.request(method, f"{url}{path}")).status_code for method, path in calls
            }
            assert {path for (_, path), status in answers.items() if status < 300} == PROBES, (owner, answers)
            assert {status for (_, path), status in answers.items() if path.startswith("/internal/")} == {401}, owner
        for page in ("/openapi.json", "/docs"):
            public = await http.get(f"{stack.gateway_url}{page}")
            assert public.status_code == 200, (page, public.text[:200])
