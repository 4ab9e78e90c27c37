"""Webhooks against the real services and a receiver of the test's own: an admin makes them (the secret answered
once, never read back); each event is delivered once, signed with the secret; a receiver that fails is tried again
and one that hangs delays no other webhook; a delivery that keeps failing is dead, listed, and replayed by an admin;
a ``notify`` rule limits the webhooks it names to the proposals it matches; an ``escalate`` rule tells its webhooks
once of a request that waited too long; another organisation sees none of it."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from gateway.domain.webhooks import verify
from tests.conftest import SECRETS, Endpoints, Stack, as_admin_of, new_world, running_stack, wait_for
from tests.test_cli import assent, token_of
from tests.test_memory_edits import memory, open_turn, propose, wait_pending

pytestmark = pytest.mark.integration


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Receiver:
    """An HTTP server of the test's: ``/ok/...`` answers 200, ``/flaky/...`` 500 the first time then 200,
    ``/down/...`` 500 until ``up`` holds its path, ``/hang/...`` never answers."""

    port: int = 0
    received: list[Received] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    up: set[str] = field(default_factory=set)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def of(self, path: str) -> list[Received]:
        return [r for r in self.received if r.path == path]

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.received.append(Received(path, headers, body, time.monotonic()))
            if path.startswith("/hang/"):
                await asyncio.sleep(3600)
            status = 200
            if (path.startswith("/flaky/") and path not in self.seen) or (
                path.startswith("/down/") and path not in self.up
            ):
                status = 500
            self.seen.add(path)
            writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture(scope="module")
async def receiver() -> AsyncIterator[Receiver]:
    found = Receiver()
    server = await asyncio.start_server(found.handle, "127.0.0.1", 0)
    found.port = server.sockets[0].getsockname()[1]
    try:
        yield found
    finally:
        server.close()


@pytest.fixture(scope="module")
async def hstack(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """The module's stack: short retries, a short time before a delivery is given up, a console address."""
    env = {
        "ASSENT_WEBHOOK_RETRY_SECONDS": "0.5",
        "ASSENT_WEBHOOK_GIVE_UP_SECONDS": "3",
        "ASSENT_WEBHOOK_TIMEOUT_SECONDS": "2",
        "ASSENT_CONSOLE_URL": "https://assent.example.com",
    }
    async with running_stack(endpoints, tmp_path_factory.mktemp("webhooks"), env) as running:
        yield running


async def add_hook(http: httpx.AsyncClient, name: str, url: str, **more: Any) -> str:
    made = await http.post("/api/notifications/webhooks", json={"name": name, "url": url, **more})
    assert made.status_code == 200, made.text
    secret: str = made.json()["secret"]
    SECRETS.add(secret)  # never in a service's log
    return secret


async def _all_delivered(http: httpx.AsyncClient, name: str) -> list[dict[str, Any]] | None:
    """The webhook's deliveries once there is one and every one was delivered."""
    log = await deliveries(http, name)
    return log if log and all(d["status"] == "delivered" for d in log) else None


async def deliveries(http: httpx.AsyncClient, name: str, **query: str) -> list[dict[str, Any]]:
    found = await http.get(f"/api/notifications/webhooks/{name}/deliveries", params=query)
    assert found.status_code == 200, found.text
    listed: list[dict[str, Any]] = found.json()["deliveries"]
    return listed


async def test_each_event_is_delivered_once_signed_and_a_failing_receiver_is_tried_again(
    hstack: Stack, receiver: Receiver
) -> None:
    n = uuid.uuid4().hex[:8]
    async with hstack.http() as http, hstack.http() as stranger, hstack.coach() as coach:
        world = await new_world(http)
        ops = await add_hook(http, "ops", receiver.url(f"/ok/{n}"))
        await add_hook(http, "flaky", receiver.url(f"/flaky/{n}"), events=["proposed"])
        await add_hook(http, "chat", receiver.url(f"/ok/slack-{n}"), events=["decided"], format="slack")

        # Made once: the secret is in the create answer only; a second of the name is 409; only http(s) is taken.
        listed = (await http.get("/api/notifications/webhooks")).json()["webhooks"]
        assert [(w["name"], w["format"]) for w in listed] == [("chat", "slack"), ("flaky", "json"), ("ops", "json")]
        assert all("secret" not in w for w in listed) and ops not in json.dumps(listed)
        again = await http.post("/api/notifications/webhooks", json={"name": "ops", "url": receiver.url("/ok/x")})
        assert again.status_code == 409, again.text
        ftp = await http.post("/api/notifications/webhooks", json={"name": "ftp", "url": "ftp://example.com/hook"})
        assert ftp.status_code == 422, ftp.text

        ada = await memory(http, world.agent_id)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        result = await propose(turn, world.agent_id, ada["content"] + "Told by webhook.\n", ada["version"])
        assert result.ok, result.error
        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq
        await wait_pending(http, sid, 1)
        decided = await http.post(f"/api/studio/sessions/{sid}/edits/{seq}", json={"decision": "apply"})
        assert decided.status_code == 200, decided.text

        async def told() -> bool:
            # Each event is written as one delivery per webhook, marked delivered once its receiver answered 2xx:
            # when ops has both and flaky its one, delivered, nothing more is sent to either.
            ops_log, flaky_log = await _all_delivered(http, "ops"), await _all_delivered(http, "flaky")
            chat_log = await _all_delivered(http, "chat")
            return ops_log is not None and len(ops_log) == 2 and flaky_log is not None and chat_log is not None

        await wait_for(told, timeout=30)

        # ops: the proposal, then the decision, once each, signed with its secret.
        got = receiver.of(f"/ok/{n}")
        bodies = {json.loads(r.body)["event"]: json.loads(r.body) for r in got}  # sent at once, in any order
        assert len(got) == 2 and sorted(bodies) == ["decided", "proposed"], got
        assert {b["proposal"]["seq"] for b in bodies.values()} == {seq} and bodies["decided"]["decision"] == "apply"
        assert bodies["proposed"]["link"] == f"https://assent.example.com/console/#/sessions/{sid}/edits/{seq}"
        for r in got:
            assert verify(ops, r.headers["assent-timestamp"], r.body, r.headers["assent-signature"], int(time.time()))
            assert not verify("another", r.headers["assent-timestamp"], r.body, r.headers["assent-signature"], 0)
        log = await deliveries(http, "ops")
        assert sorted((d["event"], d["status"], d["attempts"], d["last_status"]) for d in log) == [
            ("decided", "delivered", 1, 200),
            ("proposed", "delivered", 1, 200),
        ]
        assert {r.headers["assent-delivery"] for r in got} == {d["delivery_id"] for d in log}

        # flaky: 500, then 200 on the next attempt; told of the proposal only (its one event).
        flaky = receiver.of(f"/flaky/{n}")
        assert len(flaky) == 2 and flaky[0].body == flaky[1].body
        (delivery,) = await deliveries(http, "flaky")
        assert (delivery["event"], delivery["status"], delivery["attempts"]) == ("proposed", "delivered", 2)

        # chat: a Slack message of the decision, with the title, the diff's summary and a link.
        (slack,) = [json.loads(r.body) for r in receiver.of(f"/ok/slack-{n}")]
        assert slack["text"].startswith("Decided: ") and "+1 \u22120 line" in json.dumps(slack, ensure_ascii=False)
        assert f"/console/#/sessions/{sid}/edits/{seq}|Open in the console>" in json.dumps(slack)

        # Another organisation sees none of it.
        as_admin_of(stranger, f"org_other_{n}")
        assert (await stranger.get("/api/notifications/webhooks")).json()["webhooks"] == []
        assert (await stranger.get("/api/notifications/deliveries")).json()["deliveries"] == []
        assert (await stranger.get("/api/notifications/webhooks/ops/deliveries")).status_code == 404
        assert (
            await stranger.post(f"/api/notifications/deliveries/{delivery['delivery_id']}/replay")
        ).status_code == 404
        assert (await stranger.delete("/api/notifications/webhooks/ops")).status_code == 404
        # Nor does a developer of the organisation: webhooks are an admin's.
        as_admin_of(stranger, world.org_id, user="dev@example.com", roles=("developer",))
        assert (await stranger.get("/api/notifications/webhooks")).status_code == 403

        # Removed, a webhook is told nothing more.
        assert (await http.delete("/api/notifications/webhooks/ops")).status_code == 200
        assert (await http.get("/api/notifications/webhooks/ops/deliveries")).status_code == 404


async def test_a_hanging_receiver_delays_no_other_and_a_dead_delivery_is_replayed(
    hstack: Stack, receiver: Receiver
) -> None:
    n = uuid.uuid4().hex[:8]
    async with hstack.http() as http, hstack.coach() as coach:
        world = await new_world(http)
        await add_hook(http, "hangs", receiver.url(f"/hang/{n}"), events=["proposed"])
        await add_hook(http, "down", receiver.url(f"/down/{n}"), events=["proposed"])
        await add_hook(http, "fine", receiver.url(f"/ok/{n}"), events=["proposed"])
        ada = await memory(http, world.agent_id)
        turn = await open_turn(coach, world)
        result = await propose(turn, world.agent_id, ada["content"] + "One more line.\n", ada["version"])
        assert result.ok, result.error
        await turn.end_step()

        # The hanging receiver holds its delivery for the whole timeout; the others are sent meanwhile.
        await wait_for(lambda: receiver.of(f"/hang/{n}") and receiver.of(f"/ok/{n}"), timeout=30)
        fine, hung = receiver.of(f"/ok/{n}")[0], receiver.of(f"/hang/{n}")[0]
        assert abs(fine.at - hung.at) < 1.5, (fine.at, hung.at)
        assert [d["status"] for d in await deliveries(http, "fine")] == ["delivered"]

        # down answers 500 until it is given up (3 s here): dead, in the dead-letter list.
        async def dead() -> list[dict[str, Any]] | None:
            found = (await http.get("/api/notifications/deliveries", params={"status": "dead"})).json()["deliveries"]
            return [d for d in found if d["webhook"] == "down"] or None

        (gone,) = await wait_for(dead, timeout=30)
        assert gone["attempts"] >= 2 and gone["last_status"] == 500 and gone["last_error"] == "answered 500"
        assert (await http.post(f"/api/notifications/deliveries/{gone['delivery_id']}/replay")).status_code == 200
        again = await http.post(f"/api/notifications/deliveries/{gone['delivery_id']}/replay")
        assert again.status_code in (200, 409)  # pending or delivered by now: only a dead one is replayed
        receiver.up.add(f"/down/{n}")

        async def delivered() -> dict[str, Any] | None:
            (found,) = await deliveries(http, "down")
            return found if found["status"] == "delivered" else None

        done = await wait_for(delivered, timeout=30)
        assert done["delivery_id"] == gone["delivery_id"] and done["last_status"] == 200
        bodies = {r.body for r in receiver.of(f"/down/{n}")}
        assert len(bodies) == 1  # the same body on every attempt, replayed or not
        fresh = await http.post(f"/api/notifications/deliveries/{gone['delivery_id']}/replay")
        assert fresh.status_code == 409 and "not dead" in fresh.text, fresh.text


async def test_notify_rules_limit_the_webhooks_they_name_and_an_escalation_is_told_once(
    hstack: Stack, receiver: Receiver
) -> None:
    n = uuid.uuid4().hex[:8]
    async with hstack.http() as http, hstack.http() as dev, hstack.coach() as coach:
        world = await new_world(http)
        as_admin_of(dev, world.org_id, user="dev@example.com", roles=("developer",))
        await add_hook(http, "on-call", receiver.url(f"/ok/oncall-{n}"))
        await add_hook(http, "notes-only", receiver.url(f"/ok/notes-{n}"), events=["proposed"])
        await add_hook(http, "everything", receiver.url(f"/ok/all-{n}"), events=["proposed"])
        policy = {
            "rules": [
                {
                    "name": "memory waits",
                    "match": {"kind": ["memory"]},
                    "escalate": {"after": "PT2S", "webhooks": ["on-call"], "roles": ["admin"]},
                },
                {"name": "tell about notes", "match": {"kind": ["note"]}, "notify": ["notes-only", "on-call"]},
            ]
        }
        assert (await http.put("/api/policy", json={"policy": policy, "expected_version": 0})).status_code == 200
        ada = await memory(http, world.agent_id)
        turn = await open_turn(coach, world)
        sid = turn.session.session_id
        result = await propose(turn, world.agent_id, ada["content"] + "Waits.\n", ada["version"])
        assert result.ok, result.error
        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq

        # Nobody decides: after two seconds, on-call is told it waits, once, and the admins see it escalated to them.
        async def escalated_to_admins() -> dict[str, Any] | None:
            page = (await http.get("/api/studio/pending", params={"escalated_to_me": "true"})).json()
            return page if page["items"] else None

        page = await wait_for(escalated_to_admins, timeout=30)
        assert [(i["seq"], i["escalated_by"], i["escalated_to"]) for i in page["items"]] == [
            (seq, "memory waits", ["admin"])
        ]
        assert (await dev.get("/api/studio/pending", params={"escalated_to_me": "true"})).json()["items"] == []
        # The escalation is marked sent in the transaction that wrote its one delivery: once delivered, that is all.
        delivered = await wait_for(lambda: _all_delivered(http, "on-call"), timeout=30)
        assert [d["event"] for d in delivered] == ["escalated"]
        (escalated,) = [json.loads(r.body) for r in receiver.of(f"/ok/oncall-{n}")]
        assert (escalated["event"], escalated["rule"], escalated["proposal"]["seq"]) == (
            "escalated",
            "memory waits",
            seq,
        )
        # A webhook a notify rule names is told only of what such a rule matches (notes, not this memory edit);
        # one no notify rule names is told of every event it subscribes to.
        assert receiver.of(f"/ok/notes-{n}") == []
        assert [json.loads(r.body)["event"] for r in receiver.of(f"/ok/all-{n}")] == ["proposed"]
        await wait_pending(http, sid, 1)  # an escalation decides nothing


@pytest.mark.parametrize(
    "crash_at",
    [
        "gateway.webhooks.collect.before_commit",
        "gateway.webhooks.escalate.before_commit",
        "gateway.webhooks.after_send",
    ],
)
async def test_kill_9_while_delivering_loses_nothing_and_counts_every_attempt(
    endpoints: Endpoints, tmp_path: Any, receiver: Receiver, crash_at: str
) -> None:
    """The gateway dies as it writes an event's deliveries (before the commit; a proposal's, or an escalation's), or
    once a receiver answered and before the answer is recorded: once back, the event is delivered; in the first case once, in the second once more, with
    the same delivery id and body (a receiver drops a delivery id it already handled), each attempt counted."""
    n = uuid.uuid4().hex[:8]
    env = {"ASSENT_WEBHOOK_TIMEOUT_SECONDS": "1", "ASSENT_WEBHOOK_RETRY_SECONDS": "0.5"}
    async with running_stack(endpoints, tmp_path, extra_env=env) as stack:
        async with stack.http() as http, stack.coach() as coach:
            world = await new_world(http)
            escalating = "escalate" in crash_at
            await add_hook(
                http, "ops", receiver.url(f"/ok/crash-{n}"), events=["escalated" if escalating else "proposed"]
            )
            if escalating:
                rule = {"name": "waits", "escalate": {"after": "PT1S", "webhooks": ["ops"]}}
                assert (
                    await http.put("/api/policy", json={"policy": {"rules": [rule]}, "expected_version": 0})
                ).is_success
            gateway = stack.system.gateway
            await asyncio.to_thread(gateway.stop)
            await asyncio.to_thread(gateway.start, {"ASSENT_CRASH_AT": crash_at})
            ada = await memory(http, world.agent_id)
            turn = await open_turn(coach, world)
            result = await propose(turn, world.agent_id, ada["content"] + "Survives a crash.\n", ada["version"])
            assert result.ok, result.error
            await turn.end_step()
            assert await asyncio.to_thread(gateway.wait_exit, 60) == -9
            await asyncio.to_thread(gateway.start)

            async def delivered() -> list[dict[str, Any]] | None:
                found = await deliveries(http, "ops")
                return found if found and all(d["status"] == "delivered" for d in found) else None

            (done,) = await wait_for(delivered, timeout=60)
            # Marked delivered once the receiver answered, so what it got is all it gets.
            got = receiver.of(f"/ok/crash-{n}")
            assert {r.headers["assent-delivery"] for r in got} == {done["delivery_id"]}
            assert len({r.body for r in got}) == 1
            sent = 1 if crash_at.endswith("before_commit") else 2
            assert (len(got), done["attempts"]) == (sent, sent)
            assert done["event"] == ("escalated" if escalating else "proposed")


async def test_the_cli_adds_lists_and_removes_webhooks(hstack: Stack, receiver: Receiver) -> None:
    async with hstack.http() as http:
        await new_world(http)
        env = {"ASSENT_URL": hstack.gateway_url, "ASSENT_TOKEN": token_of(http), "COLUMNS": "200"}
        added = await assent("webhook", "add", "on call", receiver.url("/ok/cli"), "--event", "escalated", env=env)
        assert added.code == 0 and "webhook on call made: escalated" in added.out, (added.out, added.err)
        secret = added.out.split("secret (shown once): ")[1].strip()
        SECRETS.add(secret)
        listed = await assent("webhook", "list", env=env)
        assert listed.code == 0 and "on call" in listed.out and secret not in listed.out, listed.out
        assert (await assent("webhook", "deliveries", "on call", "--status", "dead", env=env)).code == 0
        removed = await assent("webhook", "remove", "on call", env=env)
        assert removed.code == 0 and "webhook on call removed" in removed.out, removed.out
        gone = await assent("webhook", "remove", "on call", env=env)
        assert gone.code != 0 and "no webhook named" in gone.err, gone.err
