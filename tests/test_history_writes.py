"""Direct writes in the history, against the real services: a person's Memory put is one ``written`` entry with who,
what, the route and the Memory's hashes before and after; every declared route that writes, of every owner, leaves
exactly one entry per write (the list of routes is the registry's, so a route added without its record fails here);
another organisation sees none of them."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from assent.hashing import content_hash
from assent.runtime.writes import via, write_route, write_routes
from tests.conftest import OPERATOR, Stack, as_admin_of, new_world, wait_for
from tests.test_deploys import SECRET, TargetServer, approved, deploy_state, github_push, remote_repo, signed
from tests.test_history import entries_of
from tests.test_memory_edits import memory, open_turn, wait_pending
from tests.test_source_proposals import FILES, git
from tests.test_task_drafts import draft, draft_url, read_task

pytestmark = pytest.mark.integration

W = "/api/workspace"
WORLD_WRITES = ("create_org", "create_guild", "create_guild", "create_agent", "create_agent", "create_agent")
"""The direct writes :func:`tests.conftest.new_world` makes, in order."""


async def written(http: httpx.AsyncClient, n: int, **filters: Any) -> list[dict[str, Any]]:
    """The organisation's ``written`` entries that ``filters`` select, newest first, once there are exactly ``n``."""
    return await entries_of(http, n, type="written", **filters)


class Writes:
    """Makes direct writes through the gateway and counts them by route, as the history should name them."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self.made: Counter[str] = Counter(via(write_route(name)) for name in WORLD_WRITES)

    async def __call__(self, route: str, method: str, path: str, **request: Any) -> dict[str, Any]:
        """Call ``path`` for the declared route ``route`` until the owner's copy of the workspace knows what it names
        (a 404 writes nothing), expecting the route's success status; answers the body."""
        declared = write_route(route)
        assert declared.method == method, (route, declared.method)

        async def attempt() -> httpx.Response | None:
            response = await self.http.request(method, path, **request)
            return None if response.status_code == 404 and "does not exist" in response.text else response

        response = await wait_for(attempt, timeout=30)
        assert response.status_code == declared.status, (route, response.text)
        self.made[via(declared)] += 1
        return response.json() if response.content else {}


async def test_a_persons_memory_write_is_one_written_entry_with_its_hashes(stack: Stack) -> None:
    async with stack.http() as http, stack.http() as stranger:
        world = await new_world(http, memory="Prefer short answers.\n")
        created = await written(http, len(WORLD_WRITES))
        assert [e["via"] for e in reversed(created)] == [via(write_route(name)) for name in WORLD_WRITES]
        before = await memory(http, world.agent_id)
        content = "Prefer short answers.\nQuote the order number.\n"
        put = await http.put(
            f"{W}/agents/{world.agent_id}/memory", json={"content": content, "expected_version": before["version"]}
        )
        assert put.status_code == 200, put.text
        after = await memory(http, world.agent_id)
        assert after["hash"] == content_hash(content) != before["hash"]

        (entry,) = await written(http, 1, kind="memory")
        assert (entry["type"], entry["kind"], entry["action"], entry["target"]) == (
            "written",
            "memory",
            "edit",
            "Memory of Ada",
        )
        assert (entry["actor"], entry["via"]) == (OPERATOR, "PUT /api/workspace/agents/{agent_id}/memory")
        assert (entry["hash_before"], entry["hash_after"]) == (before["hash"], after["hash"])
        assert (entry["org_id"], entry["agent_id"], entry["guild_id"]) == (world.org_id, world.agent_id, world.guild_id)
        assert (entry["session_id"], entry["seq"], entry["proposal_id"], entry["link"]) == (None, None, None, None)
        assert entry["detail"] == f"version {after['version']}"
        # Exactly one: the world's six and the put, and nothing else of the organisation.
        everything = await entries_of(http, len(WORLD_WRITES) + 1)
        assert everything[0] == entry and {e["type"] for e in everything} == {"written"}
        assert [e["position"] for e in everything] == list(range(len(WORLD_WRITES), -1, -1))
        verified = (await http.get("/api/history/verify")).json()
        assert (verified["ok"], verified["checked"]) == (True, len(WORLD_WRITES) + 1)

        # A write that fails writes no entry: a stale version, another organisation's agent.
        stale = await http.put(f"{W}/agents/{world.agent_id}/memory", json={"content": "x", "expected_version": 0})
        assert stale.status_code == 409, stale.text
        as_admin_of(stranger, f"org_other_{uuid.uuid4().hex[:8]}")
        walled = await stranger.put(f"{W}/agents/{world.agent_id}/memory", json={"content": "Mine now.\n"})
        assert walled.status_code == 404, walled.text
        # The other organisation's history holds none of it, by any filter.
        for params in ({"type": "written"}, {"agent": world.agent_id}, {"actor": OPERATOR}, {"kind": "memory"}):
            other = await stranger.get("/api/history", params=params)
            assert other.status_code == 200 and other.json()["entries"] == [], other.text
        assert (await written(http, 1, kind="memory"))[0] == entry


async def test_every_declared_write_route_of_every_owner_leaves_its_entry(stack: Stack, tmp_path: Path) -> None:
    with TargetServer([503, 200]) as target:
        async with stack.http() as http, stack.coach() as coach, stack.http() as stranger:
            world = await new_world(http)
            write = Writes(http)
            agent, guild, org = (
                f"{W}/agents/{world.agent_id}",
                f"{W}/guilds/{world.guild_id}",
                f"{W}/orgs/{world.org_id}",
            )

            # edits: the directory, Memory, notes, collections, a Task draft's edit.
            await write("update_guild_text", "PATCH", guild, json={"about": "Refunds and returns."})
            await write("update_agent", "PATCH", agent, json={"task": "Answer refund questions.\n"})
            await write("set_agent_roles", "PUT", f"{agent}/roles", json={"owners": [OPERATOR], "editors": ["ben"]})
            await write("write_memory", "PUT", f"{agent}/memory", json={"content": "Quote the order.\n"})
            note = {"path": "org/refunds.md"}
            await write("write_note", "PUT", f"{org}/note", params=note, json={"content": "# Refunds\n"})
            await write("write_note", "PUT", f"{org}/note", params=note, json={"content": "# Refunds\nIn 5 days.\n"})
            await write("delete_note", "DELETE", f"{org}/note", params=note)
            table = {
                "name": "refunds",
                "purpose": "Track refunds",
                "scope": "org",
                "columns": [{"name": "order_id", "type": "text"}],
            }
            made = await write("create_collection", "POST", f"{org}/collections", json=table)
            collection = f"{org}/collections/{made['collection_id']}"
            records = {"records": [{"order_id": "A0"}]}
            added = await write("add_collection_records", "POST", f"{collection}/records", json=records)
            change = {"record_id": added["record_ids"][0], "values": {"order_id": "A1"}}
            await write("update_collection_record", "PATCH", f"{collection}/records", json=change)
            await write("update_collection", "PATCH", collection, json={"purpose": "Track every refund"})
            row = {"kind": "guild", "subject_id": world.guild_id, "mode": "read"}
            await write("set_collection_access", "PUT", f"{collection}/access", json=row)
            await write("delete_collection", "DELETE", collection)
            turn = await open_turn(coach, world)
            sid = turn.session.session_id
            drafted = await draft(
                turn, world.agent_id, "Answer refunds.\n", (await read_task(turn, world.agent_id))["hash"]
            )
            assert drafted.ok, drafted.error
            await turn.end_step()
            await wait_pending(http, sid, 1)
            seq = turn.calls[drafted.tool_call_id].seq
            await write("edit_draft", "PUT", draft_url(sid, seq), json={"content": "Refunds.\n"})

            # access: an agent's, a guild's and the organisation's bindings.
            await write("set_agent_access", "PUT", f"{agent}/access", json={"native_tools": {"send_email": "on"}})
            await write("set_guild_access", "PUT", f"{guild}/access", json={"native_tools": {"send_email": "on"}})
            await write("set_org_access", "PUT", f"{org}/access", json={"native_tools": {"web_search": "off"}})

            # connections: a guild's login, changed, granted to a session, deleted.
            login_id = f"desk_{uuid.uuid4().hex[:8]}"
            login = {
                "login_id": login_id,
                "name": "Desk",
                "scope": "guild",
                "scope_id": world.guild_id,
                "server_url": "https://mcp.example/mcp",
                "account": "support@acme.example",
                "tools": {"list_orders": {"read_only_hint": True}},
            }
            await write("create_login", "POST", f"{W}/logins", json=login)
            await write("update_login", "PATCH", f"{W}/logins/{login_id}", json={"account": "desk@acme.example"})
            grant = f"/api/studio/sessions/{sid}/connections/{login_id}"
            await write("set_connection_grant", "PUT", grant, json={"granted": True})
            await write("delete_login", "DELETE", f"{W}/logins/{login_id}")

            # routines: one created, changed, the guild's switch, deleted.
            routine = {"description": "Sweep", "instruction": "Answer the oldest thread.", "cron": "0 9 * * *"}
            schedule = (await write("create_routine", "POST", f"{agent}/routines", json=routine))["schedule_id"]
            await write(
                "change_routine", "PATCH", f"{agent}/routines/{schedule}", json={"instruction": "Oldest first."}
            )
            await write("set_routines_switch", "PUT", f"{guild}/routines-switch", json={"routines_on": False})
            await write("delete_routine", "DELETE", f"{agent}/routines/{schedule}")

            # deployer: a hosted source, a commit, a deployment, an issue, the settings, a build, a deploy that did
            # not start retried and then promoted; an external source's signed push.
            await write("set_repository", "PUT", f"{agent}/repository", json={"mode": "hosted", "files": FILES})
            await write("record_deployment", "POST", f"{agent}/deployments", json={})
            commit = {"files": {"knowledge/policy.md": "Refunds take 3 days.\n"}, "message": "Faster refunds"}
            committed = await write("commit_directly", "POST", f"{agent}/repository/commits", json=commit)
            issue = await write("create_issue", "POST", f"{agent}/issues", json={"title": "Too slow"})
            await write("change_issue", "PATCH", f"{agent}/issues/{issue['issue_id']}", json={"status": "closed"})
            settings = {"auto_promote": False, "target": {"kind": "webhook", "url": target.url}}
            await write("set_deploy_settings", "PUT", f"{agent}/deploy-settings", json=settings)
            await write("start_build", "POST", f"/api/agents/{world.agent_id}/builds", json={})
            outcome = await approved(http, stack, world, {"skills/refunds.md": "# Refunds\nConfirm first.\n"})
            deploy_id = outcome["effects"]["deploy_id"]
            await deploy_state(http, world.agent_id, deploy_id, "failed")
            deploys = f"/api/agents/{world.agent_id}/deploys/{deploy_id}"
            await write("retry", "POST", f"{deploys}/retry")
            await deploy_state(http, world.agent_id, deploy_id, "started")
            await write("promote", "POST", f"{deploys}/promote")
            remote, _ = remote_repo(tmp_path)
            external = {"mode": "external", "url": f"file://{remote}", "provider": "github"}
            other = f"{W}/agents/{world.other_agent_id}"
            await write("set_repository", "PUT", f"{other}/repository", json=external)
            pushes = {"builds_on_push": True, "webhook_secret": SECRET}
            await write("set_deploy_settings", "PUT", f"{other}/deploy-settings", json=pushes)
            body = github_push(remote, git("--git-dir", str(remote), "rev-parse", "trunk").strip())
            async with httpx.AsyncClient(base_url=stack.gateway_url) as anonymous:
                write.http = anonymous
                await write("push", "POST", "/api/webhooks/github", content=body, headers=signed(body))
                write.http = http

            # Every declared route that writes was called, and each write is one entry of the organisation.
            assert {via(route) for route in write_routes()} == set(write.made)
            total = sum(write.made.values())
            entries = await written(http, total)
            assert Counter(e["via"] for e in entries) == write.made
            assert {e["org_id"] for e in entries} == {world.org_id}
            by_route = {e["via"]: e for e in entries}
            pushed = by_route.pop(via(write_route("push")))
            assert (pushed["actor"], pushed["kind"], pushed["agent_id"]) == ("github", "build", world.other_agent_id)
            assert {e["actor"] for e in by_route.values()} == {OPERATOR}
            assert {e["kind"] for e in entries} == {
                *("org", "guild", "agent", "memory", "note", "collection", "draft", "access", "login", "routine"),
                *("source", "deployment", "issue", "deploy_settings", "build", "deploy"),
            }
            source = by_route[via(write_route("commit_directly"))]
            assert (source["kind"], source["action"], source["hash_after"]) == ("source", "commit", committed["commit"])
            edited = by_route[via(write_route("edit_draft"))]
            assert (edited["hash_before"], edited["hash_after"]) == (
                content_hash("Answer refunds.\n"),
                content_hash("Refunds.\n"),
            )
            notes = [e for e in entries if e["kind"] == "note"]
            assert [e["action"] for e in notes] == ["delete", "edit", "create"]
            assert notes[0]["hash_before"] == notes[1]["hash_after"] == content_hash("# Refunds\nIn 5 days.\n")
            assert (notes[2]["hash_before"], notes[0]["hash_after"]) == (None, None)
            accessed = [e for e in entries if e["kind"] == "access"]
            assert len(accessed) == 3 and all(e["hash_before"] and e["hash_after"] for e in accessed)
            assert all(e["hash_before"] != e["hash_after"] for e in accessed)
            assert all(e["session_id"] is None and e["proposal_id"] is None for e in entries)

            # Another organisation sees none of them.
            as_admin_of(stranger, f"org_other_{uuid.uuid4().hex[:8]}")
            other_org = await stranger.get("/api/history", params={"type": "written", "limit": 500})
            assert other_org.status_code == 200 and other_org.json()["entries"] == []
