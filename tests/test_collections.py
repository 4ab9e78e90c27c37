"""Collection requests end to end (create, edit, delete, the read tools) and the collection routes, against real
Kafka, PostgreSQL and Redis."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from assent.coach import CoachTurn
from edits.domain.collections import convert
from tests.conftest import OPERATOR, Stack, World, new_world
from tests.issuer import test_issuer
from tests.test_memory_edits import open_turn, wait_pending

pytestmark = pytest.mark.integration

W = "/api/workspace"


def at(world: World, collection_id: str = "") -> str:
    base = f"{W}/orgs/{world.org_id}/collections"
    return f"{base}/{collection_id}" if collection_id else base


def card_url(sid: str, seq: int) -> str:
    return f"/api/studio/sessions/{sid}/edits/{seq}"


def column(name: str, type_: str = "text", **more: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **more}


async def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def make(
    http: httpx.AsyncClient,
    world: World,
    name: str,
    columns: list[dict[str, Any]],
    records: list[dict[str, Any]] = (),  # type: ignore[assignment]
    *,
    scope: str = "guild",
    guild_id: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "purpose": f"Track {name}", "scope": scope, "columns": columns}
    if scope == "guild":
        body["guild_id"] = guild_id or world.guild_id
    made = await ok(await http.post(at(world), json=body), 201)
    if records:
        await ok(await http.post(f"{at(world, made['collection_id'])}/records", json={"records": list(records)}), 201)
    return await ok(await http.get(at(world, made["collection_id"])))


async def read(http: httpx.AsyncClient, world: World, collection_id: str) -> dict[str, Any]:
    return await ok(await http.get(at(world, collection_id), params={"limit": 500}))


async def changes(http: httpx.AsyncClient, world: World, collection_id: str) -> list[dict[str, Any]]:
    return await ok(await http.get(f"{at(world, collection_id)}/changes"))


async def set_row(http: httpx.AsyncClient, world: World, cid: str, kind: str, subject: str | None, mode: str) -> None:
    body: dict[str, Any] = {"kind": kind, "mode": mode} | ({"subject_id": subject} if subject else {})
    await ok(await http.put(f"{at(world, cid)}/access", json=body))


async def propose(turn: CoachTurn, args: dict[str, Any]) -> tuple[Any, int]:
    result = await turn.call("studio_edit_collection", {"reason": "why", **args})
    assert result.ok, result.error
    return result, turn.calls[result.tool_call_id].seq


async def refused(turn: CoachTurn, args: dict[str, Any]) -> tuple[int, str, str]:
    result = await turn.call("studio_edit_collection", {"reason": "why", **args})
    assert not result.ok and result.error is not None, result
    return result.error.status, result.error.code, result.error.message


def provenance(entry: dict[str, Any]) -> tuple[Any, ...]:
    return (entry["actor_user_id"], entry["tool_name"], entry["studio_session_id"], entry["studio_seq"])


async def test_a_retype_rename_and_removal_change_the_records_as_the_card_says(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        await ok(await http.patch(f"{W}/agents/{world.agent_id}", json={"task": "Log every refund in refunds."}))
        records = [
            {"order_id": "A1", "amount": "12", "note": "x", "code": "k"},
            {"order_id": "A2", "amount": "4.5", "note": "y", "code": "k"},
            {"order_id": "A3", "amount": "n/a", "code": "j"},
            {"order_id": "A4", "amount": "7"},
            {"order_id": "A5"},
            {"order_id": "A6", "amount": "-3", "note": "z", "code": "m"},
        ]
        columns = [column("order_id", required=True, unique=True), column("amount"), column("note"), column("code")]
        table = await make(http, world, "refunds", columns, records)
        cid = table["collection_id"]
        turn = await open_turn(coach, world)
        sid = turn.session.session_id

        listed = await turn.call("studio_list_collections", {})
        assert listed.ok and listed.output is not None
        (entry,) = listed.output["collections"]
        assert (entry["collection_id"], entry["updated_at"], entry["records"]) == (cid, table["updated_at"], 6)
        page = await turn.call("studio_read_collection", {"collection": "refunds", "offset": 4, "limit": 5})
        assert page.ok and page.output is not None
        assert page.output["updated_at"] == table["updated_at"] and page.output["hash"] == entry["hash"]
        assert page.output["page"]["total"] == 6
        assert [r["values"] for r in page.output["page"]["records"]] == records[4:]

        result, seq = await propose(
            turn,
            {
                "action": "edit",
                "collection": cid,
                "base_updated_at": page.output["updated_at"],
                "name": "returns",
                "columns": [
                    column("order_id", required=True, unique=True),
                    column("amount", "integer", required=True),
                    column("ref", rename_from="code", unique=True),
                ],
            },
        )
        widget = result.widget
        assert widget.kind == "collection" and widget.action == "edit" and widget.target.ref == cid
        assert widget.base.hash == entry["hash"] and widget.base.updated_at == table["updated_at"]
        await turn.end_step()
        await wait_pending(http, sid, 1)
        card = await ok(await http.get(card_url(sid, seq)))
        assert card["apply_label"] == "Apply edit" and card["stale"] is False
        assert card["effects"] == [
            "Column note leaves: its values in 3 records are deleted",
            "Column code moves to ref in 4 records",
            'Column amount becomes integer (was text): 3 records convert; 2 stored values stay as they are: "4.5", "n/a"',
            "Column amount becomes required: 1 record has no value",
            "Column ref becomes unique: 2 records share a value with another",
            "Renamed from refunds: the Task of Ada still names refunds",
            "No one outside the guild reaches it",
        ]
        assert card["live"]["text"].splitlines() == [
            "Table refunds, owned by guild Support",
            "Purpose: Track refunds",
            "Column order_id: text, required, unique",
            "Column amount: text",
            "Column note: text",
            "Column code: text",
            "Guild Support: write",
        ]
        assert card["proposal"]["text"].splitlines() == [
            "Table returns, owned by guild Support",
            "Purpose: Track refunds",
            "Column order_id: text, required, unique",
            "Column amount: integer, required",
            "Column ref: text, unique",
            "Guild Support: write",
        ]
        assert await read(http, world, cid) == {**table, "limit": 500}, "proposing wrote"

        applied = await http.post(card_url(sid, seq), json={"decision": "apply"})
        assert applied.status_code == 200, applied.text
        assert applied.json()["effects"]["records_changed"] == 5
        after = await read(http, world, cid)
        assert after["name"] == "returns" and [c["name"] for c in after["columns"]] == ["order_id", "amount", "ref"]
        expected = []
        for record in records:
            becomes = {"order_id": record["order_id"]}
            if "amount" in record:
                becomes["amount"] = convert(record["amount"], "integer")[1]
            if "code" in record:
                becomes["ref"] = record["code"]
            expected.append(becomes)
        assert [r["values"] for r in after["page"]] == expected
        assert [r["values"].get("amount") for r in after["page"]] == [12, "4.5", "n/a", 7, None, -3]
        (update,) = [c for c in await changes(http, world, cid) if c["change"] == "update"]
        assert provenance(update) == (OPERATOR, "studio_edit_collection", sid, seq)
        assert update["detail"]["records_changed"] == 5 and update["detail"]["renamed_from"] == "refunds"
        continuation = await turn.continuation()
        assert [(d.seq, d.outcome) for d in continuation.decisions] == [(seq, "applied")]


async def test_each_type_converts_in_postgresql_as_the_rules_say(stack: Stack) -> None:
    async with stack.http() as http:
        world = await new_world(http)
        texts = ["42", "-7", "4.5", "4.50", "n/a", "true", "false", "2026-02-28", "2026-13-01", "12\n", "1" * 19, ""]
        numbers = [4.0, 4.5, 3, -0.5, 123456789012345678, 0]
        text_columns = {f"s_{to}": to for to in ("integer", "number", "boolean", "date")}
        number_columns = {f"n_{to}": to for to in ("integer", "text", "boolean")}
        columns = [column(n) for n in text_columns] + [column(n, "number") for n in number_columns]
        columns += [column("b_text", "boolean")]
        rows = max(len(texts), len(numbers))
        records = [
            {
                **({n: texts[i] for n in text_columns} if i < len(texts) else {}),
                **({n: numbers[i] for n in number_columns} if i < len(numbers) else {}),
                **({"b_text": i % 2 == 0} if i < 2 else {}),
            }
            for i in range(rows)
        ]
        table = await make(http, world, "kinds", columns, records)
        retyped = [column(n, to) for n, to in text_columns.items()] + [
            column(n, to) for n, to in number_columns.items()
        ]
        patched = await http.patch(at(world, table["collection_id"]), json={"columns": [*retyped, column("b_text")]})
        assert patched.status_code == 200, patched.text
        after = [r["values"] for r in (await read(http, world, table["collection_id"]))["page"]]
        types = {**text_columns, **number_columns, "b_text": "text"}
        expected = [{k: convert(v, types[k])[1] for k, v in record.items()} for record in records]
        assert after == expected
        assert after[0]["s_integer"] == 42 and after[2]["s_integer"] == "4.5" and after[3]["s_number"] == 4.5
        assert after[0]["n_text"] == "4.0" and after[1]["n_integer"] == 4.5 and after[0]["b_text"] == "true"


async def test_every_refusal_of_a_request(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        own = await make(http, world, "refunds", [column("order_id")])
        org = await make(http, world, "catalog", [column("sku"), column("price", "number")], scope="org")
        other = await make(http, world, "leads", [column("lead")], guild_id=f"{world.guild_id}_b")
        turn = await open_turn(coach, world)

        def edit(table: dict[str, Any], **more: Any) -> dict[str, Any]:
            return {
                "action": "edit",
                "collection": table["collection_id"],
                "base_updated_at": table["updated_at"],
                **more,
            }

        create = {"action": "create", "name": "tickets", "purpose": "P", "columns": [column("t")]}
        org_columns = [column("sku"), column("price", "number")]
        cases: list[tuple[dict[str, Any], int, str]] = [
            ({**create, "name": "refunds"}, 422, "name_taken"),
            ({**create, "columns": [column("t"), column("t")]}, 422, "invalid_columns"),
            ({**create, "columns": [column("t", rename_from="x")]}, 422, "invalid_columns"),
            ({**create, "columns": [column("t", "money")]}, 422, "invalid_arguments"),
            (
                {**create, "access": {"agents": [{"agent_id": world.outsider_id, "mode": "read"}]}},
                422,
                "agent_out_of_reach",
            ),
            ({**create, "access": {"agents": [{"agent_id": "nobody", "mode": "read"}]}}, 404, "unknown_agent"),
            (edit(own, base_updated_at="2020-01-01T00:00:00+00:00", purpose="New"), 409, "stale_base_updated_at"),
            (edit(own, purpose=own["purpose"]), 422, "no_change"),
            (edit(own, access={"guild": "write"}), 422, "no_change"),
            (edit(own, name="catalog"), 422, "name_taken"),
            (edit(own, columns=[column("order_id", rename_from="nope")]), 422, "invalid_columns"),
            (edit(other, purpose="Mine now"), 422, "unknown_table"),
            ({"action": "delete", "collection": other["collection_id"]}, 422, "unknown_table"),
            ({"action": "delete", "collection": "leads"}, 422, "unknown_table"),
            ({"action": "delete", "collection": "col_unknown"}, 422, "unknown_table"),
            ({"action": "delete", "collection": org["collection_id"]}, 422, "org_table_fixed"),
            (edit(org, name="catalogue"), 422, "org_table_fixed"),
            (edit(org, purpose="Other"), 422, "org_table_fixed"),
            (edit(org, columns=org_columns[:1]), 422, "org_table_fixed"),
            (edit(org, columns=[org_columns[1], org_columns[0]]), 422, "org_table_fixed"),
            (edit(org, columns=[column("sku"), column("price", "integer")]), 422, "org_table_fixed"),
            (edit(org, columns=[column("code", rename_from="sku"), org_columns[1]]), 422, "org_table_fixed"),
        ]
        for args, status, code in cases:
            assert (await refused(turn, args))[:2] == (status, code), args
        for ref in (other["collection_id"], "leads"):
            read_other = await turn.call("studio_read_collection", {"collection": ref})
            assert read_other.error is not None and read_other.error.code == "unknown_table"
        listed = await turn.call("studio_list_collections", {})
        assert listed.output is not None
        assert sorted(c["name"] for c in listed.output["collections"]) == ["catalog", "refunds"]
        # What an organisation's table does take: added columns, and the source guild's rows.
        _, seq = await propose(
            turn, edit(org, columns=[*org_columns, column("stock", "integer")], access={"guild": "write"})
        )
        await turn.end_step()
        await wait_pending(http, turn.session.session_id, 1)
        applied = await http.post(card_url(turn.session.session_id, seq), json={"decision": "apply"})
        assert applied.status_code == 200, applied.text
        after = await read(http, world, org["collection_id"])
        assert [c["name"] for c in after["columns"]] == ["sku", "price", "stock"]
        assert {(r["kind"], r["mode"]) for r in after["access"]} == {("org", "read"), ("guild", "write")}


async def test_a_moved_target_makes_apply_409_and_another_guilds_row_does_not(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        table = await make(http, world, "refunds", [column("order_id")], [{"order_id": "A1"}])
        cid = table["collection_id"]
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        edit = {"action": "edit", "collection": cid, "base_updated_at": table["updated_at"]}
        _, edit_seq = await propose(turn, {**edit, "purpose": "Refunds, by order"})
        _, create_seq = await propose(
            turn, {"action": "create", "name": "tickets", "purpose": "P", "columns": [column("t")]}
        )
        _, delete_seq = await propose(turn, {"action": "delete", "collection": cid})
        await turn.end_step()
        await wait_pending(http, sid, 3)

        # Rows the request does not bind: another guild's, an agent outside the guild, the organisation's.
        await set_row(http, world, cid, "guild", f"{world.guild_id}_b", "read")
        await set_row(http, world, cid, "agent", world.outsider_id, "write")
        await set_row(http, world, cid, "org", None, "read")
        assert (await ok(await http.get(card_url(sid, edit_seq))))["stale"] is False
        # A row it binds: a live member's.
        await set_row(http, world, cid, "agent", world.agent_id, "read")
        for seq in (edit_seq, delete_seq):
            assert (await ok(await http.get(card_url(sid, seq))))["stale"] is True
            stale = await http.post(card_url(sid, seq), json={"decision": "apply"})
            assert stale.status_code == 409, stale.text
            assert stale.json()["outcome"] == "stale"
        await set_row(http, world, cid, "agent", world.agent_id, "remove")
        card = await ok(await http.get(card_url(sid, edit_seq)))  # the binding holds again (the card stays marked)
        assert card["live"]["hash"] == card["base"]["hash"]
        # The definition moved: the purpose changed directly.
        await ok(await http.patch(at(world, cid), json={"purpose": "Someone else's"}))
        stale = await http.post(card_url(sid, edit_seq), json={"decision": "apply"})
        assert stale.status_code == 409, stale.text
        # A create whose name was taken meanwhile.
        await make(http, world, "tickets", [column("x")])
        assert (await ok(await http.get(card_url(sid, create_seq))))["stale"] is True
        stale = await http.post(card_url(sid, create_seq), json={"decision": "apply"})
        assert stale.status_code == 409, stale.text
        after = await read(http, world, cid)
        assert (after["purpose"], after["records"]) == ("Someone else's", 1)
        board = await wait_pending(http, sid, 3)
        assert all(item["stale"] for item in board["items"])


async def test_create_with_access_then_delete_write_and_log_each_row_against_the_request(stack: Stack) -> None:
    async with stack.http() as http, stack.coach() as coach:
        world = await new_world(http)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        created, seq = await propose(
            turn,
            {
                "action": "create",
                "name": "tickets",
                "purpose": "Open tickets",
                "columns": [column("ticket", required=True, unique=True), column("opened", "date")],
                "access": {
                    "guild": "read",
                    "agents": [
                        {"agent_id": world.agent_id, "mode": "write"},
                        {"agent_id": world.other_agent_id, "mode": "none"},
                    ],
                },
            },
        )
        assert created.widget.target.ref is None and created.widget.base.hash is None
        await turn.end_step()
        await wait_pending(http, sid, 1)
        card = await ok(await http.get(card_url(sid, seq)))
        assert card["apply_label"] == "Create table" and card["live"]["text"] is None
        assert card["proposal"]["text"].splitlines()[-3:] == [
            "Guild Support: read",
            "Member Ada: write",
            "Member Bo: none",
        ]
        assert card["effects"] == [
            "Creates table tickets with 2 columns and no records",
            "Column ticket becomes required: 0 records have no value",
            "Column ticket becomes unique: 0 records share a value with another",
            "Access of guild Support: write → read",
            "Access of Ada: no row → write",
            "Access of Bo: no row → none",
            "No one outside the guild reaches it",
        ]
        applied = await http.post(card_url(sid, seq), json={"decision": "apply"})
        assert applied.status_code == 200, applied.text
        cid = applied.json()["effects"]["collection_id"]
        table = await read(http, world, cid)
        assert {(r["kind"], r["subject_id"], r["mode"]) for r in table["access"]} == {
            ("guild", world.guild_id, "read"),
            ("agent", world.agent_id, "write"),
            ("agent", world.other_agent_id, "none"),
        }
        log = await changes(http, world, cid)
        assert [(c["change"], c["kind"], c["subject_id"], c["mode"]) for c in log] == [
            ("create", None, None, None),
            ("access", "guild", world.guild_id, "read"),
            ("access", "agent", world.agent_id, "write"),
            ("access", "agent", world.other_agent_id, "none"),
        ]
        assert {provenance(c) for c in log} == {(OPERATOR, "studio_edit_collection", sid, seq)}
        await turn.continuation()

        await ok(
            await http.post(f"{at(world, cid)}/records", json={"records": [{"ticket": "T1"}, {"ticket": "T2"}]}), 201
        )
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        # inherit removes an agent's own row; the organisation's table rows outside are shown, never changed.
        await set_row(http, world, cid, "guild", f"{world.guild_id}_b", "read")
        now = await read(http, world, cid)
        _, access_seq = await propose(
            turn,
            {
                "action": "edit",
                "collection": "tickets",
                "base_updated_at": now["updated_at"],
                "access": {"agents": [{"agent_id": world.other_agent_id, "mode": "inherit"}]},
            },
        )
        _, delete_seq = await propose(turn, {"action": "delete", "collection": "tickets"})
        await turn.end_step()
        await wait_pending(http, sid, 2)
        access_card = await ok(await http.get(card_url(sid, access_seq)))
        assert access_card["effects"] == [
            "Access of Bo: none → no row",
            "Reached outside the guild by: guild Sales: read",
        ]
        assert "Outside the guild: guild Sales: read" in access_card["proposal"]["text"]
        delete_card = await ok(await http.get(card_url(sid, delete_seq)))
        assert delete_card["effects"] == ["Deletes table tickets and its 2 records"]
        assert delete_card["apply_label"] == "Delete table"
        applied = await http.post(card_url(sid, access_seq), json={"decision": "apply"})
        assert applied.status_code == 200, applied.text
        after = await read(http, world, cid)
        assert {(r["kind"], r["subject_id"]) for r in after["access"]} == {
            ("guild", world.guild_id),
            ("agent", world.agent_id),
            ("guild", f"{world.guild_id}_b"),
        }
        # The access edit moved the binding of the delete card, which is stale now.
        stale = await http.post(card_url(sid, delete_seq), json={"decision": "apply"})
        assert stale.status_code == 409, stale.text
        turn = await open_turn(coach, world)
        _, delete_seq = await propose(turn, {"action": "delete", "collection": cid})
        await turn.end_step()
        await wait_pending(http, turn.session.session_id, 1)
        applied = await http.post(card_url(turn.session.session_id, delete_seq), json={"decision": "apply"})
        assert applied.status_code == 200, applied.text
        assert (await http.get(at(world, cid))).status_code == 404
        last = (await changes(http, world, cid))[-1]
        assert (last["change"], last["detail"]["records"], last["studio_seq"]) == ("delete", 2, delete_seq)


async def test_the_collection_routes_refuse_bad_records_and_keep_to_their_organisation(stack: Stack) -> None:
    async with stack.http() as http:
        world = await new_world(http)
        table = await make(
            http, world, "refunds", [column("order_id", required=True, unique=True), column("amount", "number")]
        )
        cid = table["collection_id"]
        records = f"{at(world, cid)}/records"
        for body, status, code in [
            ({"records": [{"amount": 3}]}, 422, "missing_value"),
            ({"records": [{"order_id": "A1", "amount": "3"}]}, 422, "bad_value"),
            ({"records": [{"order_id": "A1", "colour": "red"}]}, 422, "unknown_column"),
            ({"records": [{"order_id": "A1"}, {"order_id": "A1"}]}, 409, None),
        ]:
            response = await http.post(records, json=body)
            assert response.status_code == status, (body, response.text)
            assert code is None or response.json()["code"] == code
        (rid,) = (await ok(await http.post(records, json={"records": [{"order_id": "A1"}]}), 201))["record_ids"]
        assert (await http.post(records, json={"records": [{"order_id": "A1"}]})).status_code == 409
        changed = await ok(await http.patch(records, json={"record_id": rid, "values": {"amount": 2.5}}))
        assert changed["values"] == {"order_id": "A1", "amount": 2.5}
        assert (await http.patch(records, json={"record_id": rid, "values": {"order_id": None}})).status_code == 422
        assert (await http.patch(records, json={"record_id": 999999999, "values": {"amount": 1}})).status_code == 404
        stale = await http.patch(at(world, cid), json={"purpose": "X", "expected_updated_at": "2020-01-01T00:00:00Z"})
        assert stale.status_code == 409, stale.text
        taken = {"name": "refunds", "purpose": "P", "scope": "org", "columns": [column("a")]}
        assert (await http.post(at(world), json=taken)).status_code == 409

        # Another organisation's admin: every route answers 404, and nothing changed.
        other = test_issuer().mint(OPERATOR, f"org_other_{uuid.uuid4().hex[:6]}", ("admin",))
        before = await read(http, world, cid)
        async with httpx.AsyncClient(
            base_url=stack.gateway_url, headers={"Authorization": f"Bearer {other}"}, timeout=30
        ) as outsider:
            calls = [
                ("GET", at(world), None),
                ("POST", at(world), {"name": "x", "purpose": "P", "scope": "org", "columns": [column("a")]}),
                ("GET", at(world, cid), None),
                ("PATCH", at(world, cid), {"purpose": "Theirs"}),
                ("DELETE", at(world, cid), None),
                ("POST", records, {"records": [{"order_id": "B1"}]}),
                ("PATCH", records, {"record_id": rid, "values": {"amount": 9}}),
                ("PUT", f"{at(world, cid)}/access", {"kind": "org", "mode": "write"}),
                ("GET", f"{at(world, cid)}/changes", None),
            ]
            for method, path, body in calls:
                response = await outsider.request(method, path, json=body)
                assert response.status_code == 404, (method, path, response.text)
                assert "refunds" not in response.text and "A1" not in response.text
        assert await read(http, world, cid) == before
        # Another organisation's collection under our own org's path: one that does not exist (names are per org).
        async with stack.http() as other_http:
            other_world = await new_world(other_http)
            theirs = (await make(other_http, other_world, "refunds", [column("a")]))["collection_id"]
        for method, body in (("GET", None), ("PATCH", {"purpose": "Ours"}), ("DELETE", None)):
            response = await http.request(method, at(world, theirs), json=body)
            assert response.status_code == 404, response.text
