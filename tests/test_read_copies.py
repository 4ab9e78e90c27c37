"""Services that keep a read copy of the workspace directory read its writes: an org, guild or agent answered as
created by the workspace owner is found at once by the access, connections and routines services (each of which
learns of it from ``workspace.events``), with no waiting in between, and one that does not exist is still 404."""

from __future__ import annotations

import uuid

from tests.conftest import Stack, as_admin_of

W = "/api/workspace"


async def test_a_created_guild_and_agent_are_found_by_every_copy_in_the_next_call(stack: Stack) -> None:
    async with stack.http() as http:
        n = uuid.uuid4().hex[:8]
        org = f"org_{n}"
        as_admin_of(http, org)
        assert (await http.post(f"{W}/orgs", json={"org_id": org, "name": "Acme"})).status_code == 201
        for i in range(4):  # several, each read in the call right after its answer
            guild, agent = f"guild_{n}_{i}", f"agent_{n}_{i}"
            made = await http.post(f"{W}/guilds", json={"guild_id": guild, "org_id": org, "name": "Support"})
            assert made.status_code == 201, made.text
            access = await http.get(f"{W}/guilds/{guild}/access")
            assert access.status_code == 200, access.text  # the access service's copy
            login = await http.post(
                f"{W}/logins",
                json={
                    "login_id": f"desk_{n}_{i}",
                    "name": "Desk",
                    "scope": "guild",
                    "scope_id": guild,
                    "server_url": "https://mcp.example/mcp",
                    "account": "support@acme.example",
                },
            )
            assert login.status_code == 201, login.text  # the connections service's copy
            body = {"agent_id": agent, "org_id": org, "guild_id": guild, "name": "Ada", "memory": "Be brief.\n"}
            assert (await http.post(f"{W}/agents", json=body)).status_code == 201
            routines = await http.get(f"{W}/agents/{agent}/routines")
            assert routines.status_code == 200, routines.text  # the routines service's copy
            assert (await http.get(f"{W}/agents/{agent}/access")).status_code == 200
        missing = await http.get(f"{W}/guilds/guild_{n}_none/access")
        assert (missing.status_code, missing.json()["detail"]) == (404, f"guild 'guild_{n}_none' does not exist")
