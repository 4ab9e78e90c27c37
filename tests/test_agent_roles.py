"""Per agent, owners and editors may change it and decide its requests whatever their organisation role; an
organisation admin says who they are."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import OPERATOR, Stack, new_world, wait_for
from tests.issuer import test_issuer
from tests.test_memory_edits import memory, open_turn, propose, wait_pending

pytestmark = pytest.mark.integration

VIC = "vic@example.com"


async def test_an_editor_of_an_agent_may_change_it_and_decide_its_requests_and_only_an_admin_names_editors(
    stack: Stack,
) -> None:
    async with stack.http() as admin, stack.coach() as coach:
        world = await new_world(admin)
        created = (await admin.get(f"/api/workspace/agents/{world.agent_id}")).json()
        assert created["owners"] == [OPERATOR] and created["editors"] == []  # whoever creates an agent owns it

        issuer = test_issuer()
        viewer = {"Authorization": f"Bearer {issuer.mint(VIC, world.org_id, ('viewer',))}"}
        developer = {"Authorization": f"Bearer {issuer.mint('dev@example.com', world.org_id, ('developer',))}"}
        async with httpx.AsyncClient(base_url=stack.gateway_url, headers=viewer, timeout=30) as vic:
            refused = await vic.put(f"/api/workspace/agents/{world.agent_id}/memory", json={"content": "Vic's.\n"})
            assert refused.status_code == 403, refused.text
            assert (await memory(admin, world.agent_id))["content"] == "Prefer short answers.\n"

            roles_url = f"/api/workspace/agents/{world.agent_id}/roles"
            body = {"owners": [OPERATOR], "editors": [VIC]}
            by_developer = await admin.put(roles_url, json=body, headers=developer)
            assert by_developer.status_code == 403, by_developer.text
            by_viewer = await vic.put(roles_url, json=body)
            assert by_viewer.status_code == 403, by_viewer.text
            named = await admin.put(roles_url, json=body)
            assert named.status_code == 200, named.text
            assert named.json()["editors"] == [VIC]

            async def written() -> Any:  # the gateway learns the change from workspace.events
                response = await vic.put(f"/api/workspace/agents/{world.agent_id}/memory", json={"content": "Vic's.\n"})
                return response if response.status_code == 200 else None

            assert (await wait_for(written)).json()["content"] == "Vic's.\n"
            assert (
                await vic.put(f"/api/workspace/agents/{world.other_agent_id}/memory", json={"content": "x"})
            ).status_code == 403

            turn = await open_turn(coach, world)
            mine = await propose(
                turn, world.agent_id, "Decided by its editor.\n", (await memory(admin, world.agent_id))["version"]
            )
            not_mine = await propose(
                turn, world.other_agent_id, "Not Vic's.\n", (await memory(admin, world.other_agent_id))["version"]
            )
            await turn.end_step()
            sid = turn.session.session_id
            await wait_pending(admin, sid, 2)
            denied = await vic.post(
                f"/api/studio/sessions/{sid}/edits/{turn.calls[not_mine.tool_call_id].seq}", json={"decision": "apply"}
            )
            assert denied.status_code == 403, denied.text
            applied = await vic.post(
                f"/api/studio/sessions/{sid}/edits/{turn.calls[mine.tool_call_id].seq}", json={"decision": "apply"}
            )
            assert applied.status_code == 200, applied.text
            assert applied.json()["resolved_by"] == VIC
            board = await wait_pending(admin, sid, 1)
            assert [item["agent_id"] for item in board["items"]] == [world.other_agent_id]

        other = {"Authorization": f"Bearer {issuer.mint(OPERATOR, 'org_elsewhere', ('admin',))}"}
        assert (await admin.put(roles_url, json=body, headers=other)).status_code == 404
