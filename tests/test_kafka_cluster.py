"""Nothing is lost or doubled when brokers of a three-broker Kafka cluster die, pause or restart under load.

Every service of ``services.toml`` runs as its own process on a cluster of three Apache Kafka nodes of this module's
own (``assent_devstack._kafka_cluster``: combined broker and controller, a three-voter KRaft quorum), with every
topic created with three replicas and ``min.insync.replicas`` 2; PostgreSQL and Redis are the shared
``endpoints``'. ``SESSIONS`` coach sessions (a hundred in ``make test-cluster``) run approval rounds without pause
while a fault hits the cluster: a memory edit, a new note, a request for read access to a login and (in one session of
ten) a source change proposed in one step, each seen and decided over HTTP (applied, granted, approved), the turn
continued, the grant revoked. A client does what the API asks of it: a decision carries an ``Idempotency-Key``, and a
``503`` or ``409`` with ``"retry": true``, a ``504`` or a dropped connection is tried again with it.

Afterwards a round begun after the cluster is whole again completes in every session, and what the rounds wrote is
exact: each agent's Memory moved by one version per round, its history holds each round's tool call once, each
note proposed was made once by its round's tool call, each source proposal approved is one commit, the audit history
holds every request proposed, decided and resolved once and every turn continued once, the continuations topic holds
one continuation per turn, and no service logged an unhandled error. With two brokers down, a write the gateway takes
once its oldest message has waited past ``ASSENT_KAFKA_STALL_SECONDS`` is refused with 503 and ``retry``.

Each scenario prints how long the rounds caught by the fault took (per session, the longest round in flight while
the fault lasted: p50, p99 and longest across sessions) beside the rounds before it. The broker that leads most
partitions killed and the rolling restart run in ``make test``; the active controller killed, a broker paused for
30 s and two brokers down for 20 s are marked ``kafka_cluster`` and run by ``make test-cluster``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from aiokafka.admin import AIOKafkaAdminClient

from assent.coach import CoachClient
from assent.contracts import Requester
from assent.settings import ServiceSettings
from assent.topics import TopicPolicy
from assent_devstack._kafka_cluster import KafkaCluster, KafkaNode, start_kafka_cluster
from assent_devstack._stack import topic_env
from assent_devstack.system import System, build_system
from tests.conftest import API_TOKENS, LOG_DIRS, SECRETS, Endpoints, as_admin_of, create_database, wait_for
from tests.issuer import test_issuer
from tests.test_postgres_restarts import Operator, continuations, retried

pytestmark = [
    pytest.mark.integration,
    # A scenario's first test also starts the cluster and sets up every session; on two cores shared with other
    # work that, the rounds through the fault and the checks afterwards outlast the suite's 300 s.
    pytest.mark.timeout(900),
]

SESSIONS = int(os.environ.get("ASSENT_CLUSTER_SESSIONS", "30"))
"""Coach sessions running rounds through each fault: 30 in ``make test`` (its two scenarios bounded to a few
minutes), 100 in ``make test-cluster``."""
BROKERS = 3
WHOLE_WITHIN_SECONDS = 120.0
"""How soon after the fault ends every partition must be back on all three replicas."""


@dataclass
class Cluster:
    """Every service on a Kafka cluster of its own, which the tests hurt."""

    kafka: KafkaCluster
    system: System
    prefix: str

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap_servers

    async def partitions(self) -> list[dict[str, object]]:
        """Every partition of the system's topics and of the consumer offsets: its topic, leader and in-sync
        replicas."""
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10_000)
        await admin.start()
        try:
            names = [t for t in await admin.list_topics() if t.startswith(self.prefix) or t == "__consumer_offsets"]
            found = []
            for described in await admin.describe_topics(names):
                for partition in described["partitions"]:
                    found.append(
                        {"topic": described["topic"], "leader": partition["leader"], "isr": list(partition["isr"])}
                    )
            return found
        finally:
            await admin.close()

    async def leader_of_most(self) -> int:
        """The node that leads most of the system's partitions."""
        leaders = collections.Counter(
            int(str(p["leader"])) for p in await self.partitions() if str(p["topic"]).startswith(self.prefix)
        )
        return leaders.most_common(1)[0][0]

    async def whole(self) -> bool:
        """Every node runs, and every partition has a leader and all three replicas in sync."""
        if any(node.pid is None for node in self.kafka.nodes):
            return False
        try:
            found = await self.partitions()
        except Exception:
            return False
        return bool(found) and all(int(str(p["leader"])) >= 0 and len(p["isr"]) == len(self.kafka.nodes) for p in found)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def running_cluster(
    endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory, brokers: int
) -> AsyncIterator[Cluster]:
    """Every service on a Kafka of ``brokers`` nodes of its own (1: the single-broker figures to compare with)."""
    kafka = await asyncio.to_thread(start_kafka_cluster, tmp_path_factory.mktemp("kafka-cluster"), brokers)
    log_dir = tmp_path_factory.mktemp("cluster-logs")
    name = uuid.uuid4().hex[:10]
    database_url = await create_database(endpoints.database_url, f"assent_{name}")
    prefix = f"kc{name}."
    system = build_system(
        kafka_bootstrap_servers=kafka.bootstrap_servers,
        database_url=database_url,
        redis_url=endpoints.redis_url,
        log_dir=log_dir,
        topic_prefix=prefix,
        api_tokens=API_TOKENS,
        # A decision waits out an election rather than answering 504 while the owner catches up.
        extra_env={**test_issuer().env(), **topic_env(brokers), "ASSENT_DECISION_TIMEOUT_SECONDS": "120"},
    )
    SECRETS.add(system.env["ASSENT_SERVICE_KEY"])
    LOG_DIRS.append(log_dir)
    try:
        await asyncio.to_thread(system.start)
        yield Cluster(kafka, system, prefix)
    finally:
        await asyncio.to_thread(system.stop)
        await asyncio.to_thread(kafka.stop)


@pytest.fixture(scope="module")
async def cluster(endpoints: Endpoints, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Cluster]:
    async with running_cluster(endpoints, tmp_path_factory, BROKERS) as running:
        yield running


SOURCE_SESSIONS = int(os.environ.get("ASSENT_CLUSTER_SOURCE_SESSIONS", str(max(1, SESSIONS // 10))))
"""How many of the sessions propose a change of their agent's source in every round (the first ones): one in ten (10
in ``make test-cluster``, 3 in ``make test``). Each approval is a git commit in the agent's hosted repository and a
deploy, run by the deployer one job at a time beside everything else: in every round of every session that would make
the deployer the rounds' bottleneck on two cores, and they would measure its queue, not the cluster's faults."""
LOGIN_TOOLS = {"list_orders": {"read_only_hint": True}}
"""The tools of the organisation's one login. Its server is never called: a round asks for read access, has it
granted and revokes it."""
SOURCE_FILES = {
    "agents/main/AGENT.md": "You answer refund questions.\n",
    "amodal.json": '{"name": "cluster"}\n',
    "knowledge/policy.md": "Refunds take 5 days.\n",
}
REQUESTS = {"studio_edit_memory", "studio_edit_note", "studio_request_connection_access", "propose_source_change"}


@dataclass(frozen=True)
class Request:
    """One request of a round: its message's seq, its tool, and the outcome its decision must have."""

    seq: int
    tool: str
    outcome: str


async def answered(
    http: httpx.AsyncClient, method: str, url: str, body: dict[str, object], *, what: str
) -> httpx.Response:
    """A decision (or any write) sent as a client must: under an ``Idempotency-Key`` of its own, and again with the
    same key while the answer is a 503 with ``retry`` (nothing was recorded), a 409 with ``retry`` (the first try is
    still being answered), a 504 (the decision stands; the same key answers its outcome once known) or a dropped
    connection. Returns the first other answer."""
    key = uuid.uuid4().hex
    deadline = time.monotonic() + 300
    while True:
        try:
            response: httpx.Response | None = await http.request(
                method, url, json=body, headers={"Idempotency-Key": key}
            )
        except httpx.TransportError:
            response = None
        if response is not None:
            retry = response.status_code in (409, 503) and response.json().get("retry") is True
            if not retry and response.status_code != 504:
                return response
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: no answer after 300 s ({response and response.text})")
        await asyncio.sleep(0.5)


@dataclass
class TimedOperator(Operator):
    """An operator whose every round proposes in one step its agent's Memory edited, a new note of the guild, a
    request for read access to the organisation's login and (for the first ``SOURCE_SESSIONS``) a change of its
    agent's source; it decides each over HTTP (apply, grant, approve), waits for the turn's one continuation, and
    revokes the grant, so that the next round may ask for it again. It notes when each round began and ended."""

    guild_id: str = ""
    login_id: str = ""
    source: bool = False
    spans: list[tuple[float, float]] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)
    """Each note it proposed (path: the tool call's id)."""
    requests: list[Request] = field(default_factory=list)
    """Every request of every round it completed."""
    source_proposals: list[str] = field(default_factory=list)
    """The id of each source proposal it approved."""

    async def round(self, http: httpx.AsyncClient) -> None:
        began = time.monotonic()
        turn = self.session.begin_turn()
        memory = {
            "agent_id": self.agent_id,
            "content": f"round {self.rounds}\n",
            "base_version": self.rounds + 1,
            "reason": "cluster",
        }
        key = f"{self.agent_id}-{self.rounds}.md"
        note = {"action": "create", "level": "guild", "key": key, "content": f"# Round {self.rounds}\n", "reason": "cl"}
        login = {"connection_id": self.login_id, "reason": "read the orders"}
        calls = [
            await turn.send("studio_edit_memory", memory),
            await turn.send("studio_edit_note", note),
            await turn.send("studio_request_connection_access", login),
        ]
        if self.source:
            files = [{"path": f"knowledge/round-{self.rounds}.md", "content": f"# Round {self.rounds}\n"}]
            change = {"agent_id": self.agent_id, "files": files, "reason": "cluster"}
            calls.append(await turn.send("propose_source_change", change))
        results = [await turn.result(call, timeout=180) for call in calls]
        for result in results:
            assert result.ok, result.error
        await turn.end_step()
        sid = self.session.session_id
        seqs = {call.seq for call in calls}

        async def seen() -> bool:  # the operator sees every request first
            pending = await retried(lambda: http.get(f"/api/studio/sessions/{sid}/pending"), what=sid)
            return pending.status_code == 200 and seqs <= {item["seq"] for item in pending.json()["items"]}

        await wait_for(seen, timeout=180, interval=0.2)
        requests = []
        for call, result in zip(calls, results, strict=True):
            if call.tool == "propose_source_change":
                assert result.widget is not None
                pid = result.widget.proposal_id
                url, body, outcome = f"/api/agents/{self.agent_id}/proposals/{pid}", {"decision": "approve"}, "approved"
                self.source_proposals.append(pid)
            elif call.tool == "studio_request_connection_access":
                url, body, outcome = f"/api/studio/sessions/{sid}/logins/{call.seq}", {"decision": "grant"}, "granted"
            else:
                url, body, outcome = f"/api/studio/sessions/{sid}/edits/{call.seq}", {"decision": "apply"}, "applied"
            answer = await answered(http, "POST", url, body, what=url)
            assert answer.status_code == 200, answer.text
            assert answer.json()["outcome"] == outcome, answer.text
            requests.append(Request(call.seq, call.tool, outcome))
        continued = await turn.continuation(timeout=180)
        assert sorted(d.outcome for d in continued.decisions) == sorted(r.outcome for r in requests), continued
        revoked = await answered(
            http, "PUT", f"/api/studio/sessions/{sid}/connections/{self.login_id}", {"granted": False}, what=sid
        )
        assert revoked.status_code == 200, revoked.text
        self.tool_call_ids.append(calls[0].tool_call_id)
        self.notes[f"guild/{self.guild_id}/{key}"] = calls[1].tool_call_id
        self.requests += requests
        self.rounds += 1
        self.spans.append((began, time.monotonic()))


@dataclass(frozen=True)
class Unavailable:
    """A 503 answer the sessions had (and tried again)."""

    at: float
    method: str
    path: str
    body: dict[str, object]
    retry_after: str | None


@dataclass
class Load:
    http: httpx.AsyncClient
    operators: list[TimedOperator]
    org_id: str = ""
    unavailable: list[Unavailable] = field(default_factory=list)
    """Every 503 answer (each tried again) the sessions have had so far."""


@pytest.fixture(scope="module")
async def load(cluster: Cluster) -> AsyncIterator[Load]:
    async with sessions(cluster) as running:
        yield running


@contextlib.asynccontextmanager
async def sessions(cluster: Cluster) -> AsyncIterator[Load]:
    """``SESSIONS`` coach sessions of one organisation, each on an agent of its own."""
    gateway = cluster.system.gateway.url
    unavailable: list[Unavailable] = []

    async def count_unavailable(response: httpx.Response) -> None:
        if response.status_code == 503:
            await response.aread()
            request = response.request
            body = response.json()
            retry_after = response.headers.get("Retry-After")
            unavailable.append(Unavailable(time.monotonic(), request.method, request.url.path, body, retry_after))

    async with (
        httpx.AsyncClient(
            base_url=gateway,
            timeout=60,
            limits=httpx.Limits(max_connections=SESSIONS),
            event_hooks={"response": [count_unavailable]},
        ) as http,
        CoachClient(cluster.bootstrap, topic_prefix=cluster.prefix) as coach,
    ):
        n = uuid.uuid4().hex[:8]
        org_id, guild_id = f"org_{n}", f"guild_{n}"
        as_admin_of(http, org_id)
        for path, body in (
            ("/api/workspace/orgs", {"org_id": org_id, "name": "Cluster"}),
            ("/api/workspace/guilds", {"guild_id": guild_id, "org_id": org_id, "name": "Support"}),
        ):
            assert (await http.post(path, json=body)).status_code == 201

        login_id = f"login_{n}"
        created = await retried(
            lambda: http.post(
                "/api/workspace/logins",
                json={
                    "login_id": login_id,
                    "name": "Orders",
                    "scope": "org",
                    "server_url": "http://127.0.0.1:9/mcp",  # never called: the rounds only ask for access
                    "account": "support@acme.example",
                    "tools": LOGIN_TOOLS,
                },
            ),
            what=login_id,
        )
        assert created.status_code == 201, created.text

        async def operator(i: int) -> TimedOperator:
            agent_id = f"agent_{n}_{i}"
            body = {"agent_id": agent_id, "org_id": org_id, "guild_id": guild_id, "name": f"A{i}", "memory": "-\n"}
            # A hundred creates at once on two cores: an owner slow to answer is a 503 that asks to try again (and
            # a try whose answer was lost finds the agent made: 409).
            created = await retried(lambda: http.post("/api/workspace/agents", json=body), what=agent_id)
            assert created.status_code in (201, 409), created.text
            session = await coach.open_session(
                org_id=org_id,
                source_guild_id=guild_id,
                operator_user_id="olga",
                channel="web",  # where source tools exist (the edits' and the login's exist everywhere)
                requester=Requester(user_id="user_sam", email="sam@acme.example", org_id=org_id),
            )
            return TimedOperator(session, agent_id, guild_id=guild_id, login_id=login_id, source=i < SOURCE_SESSIONS)

        operators = list(await asyncio.gather(*(operator(i) for i in range(SESSIONS))))
        # A hosted repository for each agent whose session proposes source, deployed once (source tools need a
        # deployment that recorded its version): one after the other, as the deployer writes each with git while
        # holding a database connection (all at once, on two cores, they outlast the gateway's wait and are sent
        # again).
        repository = {"mode": "hosted", "files": SOURCE_FILES}
        for operator_ in operators[:SOURCE_SESSIONS]:
            agent_id = operator_.agent_id
            put = await wait_for(
                lambda agent_id=agent_id: has_repository(http, agent_id, repository), timeout=180, interval=0.5
            )
            assert put.status_code == 200, put.text
            deployed = await retried(
                lambda agent_id=agent_id: http.post(f"/api/workspace/agents/{agent_id}/deployments", json={}),
                what=agent_id,
            )
            assert deployed.status_code == 201, deployed.text
        yield Load(http, operators, org_id, unavailable)


async def has_repository(http: httpx.AsyncClient, agent_id: str, body: dict[str, object]) -> httpx.Response | None:
    """Give ``agent_id`` a repository (None while the deployer has not heard of the agent, or asks to try again)."""
    response = await http.put(f"/api/workspace/agents/{agent_id}/repository", json=body)
    if response.status_code == 404 and "does not exist" in response.text:
        return None
    if response.status_code == 503 and response.json().get("retry"):
        return None
    return response


@dataclass(frozen=True)
class Pause:
    """How long the rounds caught by a fault took, per session, in seconds."""

    p50: float
    p99: float
    longest: float

    def __str__(self) -> str:
        return f"p50 {self.p50:.2f} s, p99 {self.p99:.2f} s, longest {self.longest:.2f} s"


def pause(durations: list[float]) -> Pause:
    ordered = sorted(durations)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return Pause(statistics.median(ordered), p99, ordered[-1])


def caught(operators: list[TimedOperator], began: float, ended: float) -> list[float]:
    """Per session, the longest of its rounds in flight at some moment of [began, ended]."""
    return [
        max((end - start for start, end in operator.spans if start <= ended and end >= began), default=0.0)
        for operator in operators
    ]


def longest_stall(operators: list[TimedOperator], began: float, ended: float) -> float:
    """The longest time, from ``began`` until the first round completed after ``ended``, in which no session
    completed a round: how long the system as a whole stood still."""
    ends = sorted(end for operator in operators for _, end in operator.spans)
    after = next((end for end in ends if end > ended), ended)
    marks = [began, *(end for end in ends if began < end < after), after]
    return max(b - a for a, b in itertools.pairwise(marks))


def before(operators: list[TimedOperator], since: float, moment: float) -> list[float]:
    """Every round that began after ``since`` and ended before ``moment``: the rounds of a healthy cluster."""
    return [end - start for operator in operators for start, end in operator.spans if start >= since and end < moment]


async def under_load(
    cluster: Cluster,
    load: Load,
    fault: Callable[[], Awaitable[None]],
    scenario: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Run ``fault`` while every session runs rounds; then check that everything is exact, and print the pause."""
    http = load.http
    stop = asyncio.Event()

    async def run(operator: TimedOperator) -> None:
        while not stop.is_set():
            await operator.round(http)

    running = asyncio.gather(*(run(operator) for operator in load.operators))
    try:
        warm, refused = time.monotonic(), len(load.unavailable)
        start = sum(operator.rounds for operator in load.operators)
        await wait_for(lambda: sum(o.rounds for o in load.operators) >= start + SESSIONS, timeout=180)
        sizes = {p.module: p.log_path.stat().st_size for p in cluster.system.processes.values()}
        began = time.monotonic()
        await fault()
        ended = time.monotonic()
        await wait_for(cluster.whole, timeout=WHOLE_WITHIN_SECONDS, interval=0.5)
        # A new round, begun once the cluster is whole again, completes in every session.
        after = {id(operator): operator.rounds + 1 for operator in load.operators}
        await wait_for(lambda: all(o.rounds >= after[id(o)] for o in load.operators), timeout=180, interval=0.2)
    finally:
        stop.set()
        await running

    stalls = sum("Kafka has not taken" in str(u.body.get("detail")) for u in load.unavailable[refused:])
    healthy = pause(before(load.operators, warm, began))
    hit = pause(caught(load.operators, began, ended))
    stall = longest_stall(load.operators, began, ended)
    with capsys.disabled():
        print(
            f"\n{scenario}: {SESSIONS} sessions; rounds before: {healthy}; rounds caught by it: {hit}; "
            f"the fault lasted {ended - began:.1f} s, the longest time no round completed {stall:.2f} s; "
            f"503 answers tried again: {len(load.unavailable) - refused} ({stalls} of them: Kafka took no writes)"
        )

    for process in cluster.system.processes.values():
        grown = process.log_path.read_bytes()[sizes[process.module] :].decode(errors="replace")
        assert "unhandled" not in grown, (process.module, [line for line in grown.splitlines() if "unhandled" in line])

    for operator in load.operators:
        memory = (await http.get(f"/api/workspace/agents/{operator.agent_id}/memory")).json()
        assert memory["version"] == operator.rounds + 1, (operator.agent_id, memory, operator.rounds)
        history = (await http.get(f"/api/workspace/agents/{operator.agent_id}/memory/history")).json()
        written = [revision["tool_call_id"] for revision in history if revision["tool_call_id"] is not None]
        assert sorted(written) == sorted(operator.tool_call_ids), operator.agent_id

    # Each note proposed exists, made once, by its round's tool call.
    org_id = load.org_id
    for operator in load.operators:
        for path, tool_call_id in operator.notes.items():
            log = await http.get(f"/api/workspace/orgs/{org_id}/note/history", params={"path": path})
            assert log.status_code == 200, log.text
            revisions = log.json()["revisions"]
            assert [(r["version"], r["tool_call_id"]) for r in revisions] == [(1, tool_call_id)], (path, revisions)

    # Every request proposed once, decided once and its outcome (applied, granted, approved) once, as the history
    # holds them; and each turn continued there once.
    for operator in load.operators:
        await wait_for(lambda operator=operator: decided_once(http, operator), timeout=60, interval=0.5)

    # Each source proposal approved is one commit of its agent's repository, after the one it was made with.
    repos = Path(tempfile.gettempdir()) / "assent-deployer" / cluster.prefix.strip(".")
    for operator in load.operators:
        if not operator.source:
            continue
        log = git("--git-dir", str(repos / f"{operator.agent_id}.git"), "log", "--format=%x1e%B", "refs/heads/main")
        approved = [m for m in log.split("\x1e") if "Assent-Proposal: " in m]  # (not the set-up's own commits)
        assert len(approved) == len(operator.source_proposals), (operator.agent_id, approved)
        for pid in operator.source_proposals:
            assert sum(f"Assent-Proposal: {pid}" in m for m in approved) == 1, (operator.agent_id, pid)

    counts = await continuations(cluster.bootstrap, f"{cluster.prefix}studio.continuations")
    ours = {operator.session.session_id for operator in load.operators}
    mine = {key: n for key, n in counts.items() if key[0] in ours}
    assert set(mine.values()) == {1}, "a turn was continued more than once"
    assert len(mine) == sum(operator.rounds for operator in load.operators)


async def decided_once(http: httpx.AsyncClient, operator: TimedOperator) -> bool:
    """Whether the history holds every request of ``operator`` proposed, decided and resolved, and every turn
    continued (False while the linker has not chained them yet); asserts that it holds each exactly once, with the
    outcome its decision had."""
    exported = await retried(
        lambda: http.get("/api/history/export", params={"format": "jsonl", "session": operator.session.session_id}),
        what=operator.session.session_id,
    )
    assert exported.status_code == 200, exported.text
    entries = [json.loads(line) for line in exported.text.splitlines() if line.strip()]
    seen = collections.Counter((e["type"], e["seq"], e["outcome"]) for e in entries if e["type"] != "continued")
    expected = collections.Counter(
        (kind, request.seq, request.outcome if kind == "outcome" else None)
        for request in operator.requests
        for kind in ("proposed", "decided", "outcome")
    )
    turns = sum(e["type"] == "continued" for e in entries)
    if seen != expected or turns != operator.rounds:
        extra = seen - expected
        assert not extra, (operator.session.session_id, extra)  # never more than once
        assert turns <= operator.rounds, (operator.session.session_id, turns, operator.rounds)
        return False
    kinds = collections.Counter(request.tool for request in operator.requests)
    assert set(kinds) <= REQUESTS and kinds["studio_request_connection_access"] == operator.rounds
    return True


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


async def restart(cluster: Cluster, node_id: int) -> None:
    await asyncio.to_thread(cluster.kafka.start_node, node_id)


async def test_kill_9_of_the_broker_that_leads_most_partitions(
    cluster: Cluster, load: Load, capsys: pytest.CaptureFixture[str]
) -> None:
    async def fault() -> None:
        victim = await cluster.leader_of_most()
        await asyncio.to_thread(cluster.kafka.signal_node, victim, signal.SIGKILL)
        # Its partitions get new leaders among the two left: the rounds go on before it is back.
        done = sum(operator.rounds for operator in load.operators)
        await wait_for(lambda: sum(o.rounds for o in load.operators) >= done + SESSIONS, timeout=120, interval=0.2)
        await restart(cluster, victim)

    await under_load(cluster, load, fault, "kill -9 of the broker leading most partitions", capsys)


async def test_rolling_restart_of_all_three_brokers_with_sigterm(
    cluster: Cluster, load: Load, capsys: pytest.CaptureFixture[str]
) -> None:
    async def fault() -> None:
        for node in cluster.kafka.nodes:
            await asyncio.to_thread(cluster.kafka.stop_node, node.node_id)
            await restart(cluster, node.node_id)
            # The next one goes only once this one has caught up: two replicas must stay in sync for acks=all.
            await wait_for(cluster.whole, timeout=WHOLE_WITHIN_SECONDS, interval=0.5)

    await under_load(cluster, load, fault, "rolling SIGTERM restart of all three brokers", capsys)


@pytest.mark.kafka_cluster
async def test_kill_9_of_the_active_controller(
    cluster: Cluster, load: Load, capsys: pytest.CaptureFixture[str]
) -> None:
    async def fault() -> None:
        controller = cluster.kafka.active_controller()
        assert controller is not None
        await asyncio.to_thread(cluster.kafka.signal_node, controller, signal.SIGKILL)
        # The two voters left elect a new controller (a later epoch), and the rounds go on before it is back.
        await wait_for(lambda: cluster.kafka.active_controller() not in (None, controller), timeout=60)
        done = sum(operator.rounds for operator in load.operators)
        await wait_for(lambda: sum(o.rounds for o in load.operators) >= done + SESSIONS, timeout=120, interval=0.2)
        await restart(cluster, controller)

    await under_load(cluster, load, fault, "kill -9 of the active controller", capsys)


@pytest.mark.kafka_cluster
async def test_a_broker_paused_for_30_seconds_then_resumed(
    cluster: Cluster, load: Load, capsys: pytest.CaptureFixture[str]
) -> None:
    async def fault() -> None:
        victim = await cluster.leader_of_most()
        cluster.kafka.signal_node(victim, signal.SIGSTOP)
        try:
            # Slow, not dead: the controller fences it after its session (5 s) and moves its leaderships, but its
            # connections stay open, and what the clients had sent it waits for their request timeout.
            await asyncio.sleep(30.0)
        finally:
            cluster.kafka.signal_node(victim, signal.SIGCONT)

    await under_load(cluster, load, fault, "a broker paused 30 s (SIGSTOP, SIGCONT)", capsys)


STALL_SECONDS = 10.0
"""The gateway's ``ASSENT_KAFKA_STALL_SECONDS`` (its default): past it, Kafka having taken none of its messages, the
writes that would send one are refused with 503 and ``retry``."""


async def oldest_waiting(http: httpx.AsyncClient, gateway: str) -> float:
    """How long the gateway's oldest outbox row has waited for Kafka (``assent_outbox_oldest_seconds``)."""
    scraped = await http.get(f"{gateway}/metrics")
    assert scraped.status_code == 200, scraped.text
    for line in scraped.text.splitlines():
        if line.startswith("assent_outbox_oldest_seconds "):
            return float(line.split()[1])
    raise AssertionError("the gateway serves no assent_outbox_oldest_seconds")


@pytest.mark.kafka_cluster
async def test_two_brokers_down_for_20_seconds(
    cluster: Cluster, load: Load, capsys: pytest.CaptureFixture[str]
) -> None:
    http, gateway = load.http, cluster.system.gateway.url
    # Two requests of a session of their own, pending before the fault, by which the outage's writes are judged: the
    # first is decided as the outage begins (recorded, it waits), the second once the gateway's oldest message has
    # waited past the bound (refused).
    async with CoachClient(cluster.bootstrap, topic_prefix=cluster.prefix) as coach, httpx.AsyncClient() as scraper:
        guild_id = load.operators[0].guild_id
        probe_agent = f"probe_{uuid.uuid4().hex[:8]}"
        body = {"agent_id": probe_agent, "org_id": load.org_id, "guild_id": guild_id, "name": "P", "memory": "-\n"}
        created = await retried(lambda: http.post("/api/workspace/agents", json=body), what=probe_agent)
        assert created.status_code == 201, created.text
        session = await coach.open_session(org_id=load.org_id, source_guild_id=guild_id, operator_user_id="olga")
        turn = session.begin_turn()
        note = {"action": "create", "level": "guild", "key": f"{probe_agent}.md", "content": "# P\n", "reason": "p"}
        edit = {"agent_id": probe_agent, "content": "probed\n", "base_version": 1, "reason": "probe"}
        calls = [await turn.send("studio_edit_note", note), await turn.send("studio_edit_memory", edit)]
        for call in calls:
            assert (await turn.result(call, timeout=180)).ok
        await turn.end_step()
        early, late = (f"/api/studio/sessions/{session.session_id}/edits/{call.seq}" for call in calls)
        for url in (early, late):
            card = await retried(lambda url=url: http.get(url), what=url, until_found=True)
            assert card.status_code == 200 and card.json()["status"] == "pending", card.text
        key = {"Idempotency-Key": uuid.uuid4().hex}

        async def oldest_over() -> bool:
            return await oldest_waiting(scraper, gateway) > STALL_SECONDS

        async def fault() -> None:
            survivor = await cluster.leader_of_most()
            victims = [node.node_id for node in cluster.kafka.nodes if node.node_id != survivor]
            for victim in victims:
                await asyncio.to_thread(cluster.kafka.signal_node, victim, signal.SIGKILL)
            down = time.monotonic()
            back: list[int] = []
            # One replica of three is below min.insync.replicas: Kafka acknowledges nothing, so nothing
            # acknowledged can be lost. A write recorded now waits for Kafka; once the gateway's oldest message has
            # waited STALL_SECONDS, a write that would send one is refused before anything of it is recorded.
            waiting = asyncio.create_task(answered(http, "POST", early, {"decision": "apply"}, what=early))
            try:
                await wait_for(oldest_over, timeout=STALL_SECONDS + 8.0, interval=0.25)
                refused = await http.post(late, json={"decision": "apply"}, headers=key)
                assert refused.status_code == 503, refused.text
                assert refused.headers["Retry-After"] == "5"
                assert refused.json()["retry"] is True and "Kafka has not taken" in refused.json()["detail"]
                still = await retried(lambda: http.get(late), what=late)
                assert still.json()["status"] == "pending", still.text  # nothing of it was recorded
                assert not waiting.done()  # the early one is recorded, and waits
                await asyncio.sleep(max(0.0, down + 20.0 - time.monotonic()))  # the outage lasts its 20 s
                again = await http.post(late, json={"decision": "apply"}, headers=key)
                assert again.status_code == 503 and again.json()["retry"] is True, again.text
                stalled = sum(operator.rounds for operator in load.operators)
                await restart(cluster, victims[0])
                back.append(victims[0])
                with_two = time.monotonic()
                # Two replicas again: the relay's backlog goes, the early decision's outcome arrives, and writes
                # are taken again: the refused one sent again with its key, and every session's rounds.
                applied = await answered(http, "POST", late, {"decision": "apply"}, what=late)
                assert applied.status_code == 200 and applied.json()["outcome"] == "applied", applied.text
                waited = await waiting
                assert waited.status_code == 200 and waited.json()["outcome"] == "applied", waited.text
                await wait_for(
                    lambda: sum(o.rounds for o in load.operators) >= stalled + SESSIONS, timeout=120, interval=0.2
                )
                await restart(cluster, victims[1])
                back.append(victims[1])
                assert with_two - down >= 20.0
            finally:
                waiting.cancel()
                for victim in victims:
                    if victim not in back:  # a failed check leaves no session waiting for a cluster that stays down
                        await restart(cluster, victim)

        refused_before = len(load.unavailable)
        await under_load(cluster, load, fault, "two brokers down 20 s", capsys)
        continued = await turn.continuation(timeout=180)
        assert [d.outcome for d in continued.decisions] == ["applied", "applied"], continued

    # Every 503 of the outage asked to try again, in the API's shape; each probe was decided once.
    stalls = [u for u in load.unavailable[refused_before:] if "Kafka has not taken" in str(u.body.get("detail"))]
    assert stalls, "no write was refused while Kafka took none of the gateway's messages"
    for refusal in stalls:
        assert refusal.method == "POST" and refusal.body["retry"] is True and refusal.retry_after == "5", refusal

    async def probes_decided_once() -> bool:
        exported = await http.get("/api/history/export", params={"format": "jsonl", "session": session.session_id})
        entries = [json.loads(line) for line in exported.text.splitlines() if line.strip()]
        found = collections.Counter((e["type"], e["seq"], e["outcome"]) for e in entries if e["type"] != "continued")
        wanted = collections.Counter(
            (kind, call.seq, "applied" if kind == "outcome" else None)
            for call in calls
            for kind in ("proposed", "decided", "outcome")
        )
        assert not found - wanted, entries
        return found == wanted

    await wait_for(probes_decided_once, timeout=60, interval=0.5)


def test_a_cluster_of_three_has_topics_made_with_three_replicas_two_in_sync(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert topic_env(1) == {}
    for key, value in topic_env(3).items():
        monkeypatch.setenv(key, value)
    assert ServiceSettings().topic_policy() == TopicPolicy(replication_factor=3, min_insync_replicas=2)
    # The active controller is read from the nodes' logs: the newest epoch's leader, as a leader or a follower saw it.
    logs = tmp_path / "node-1" / "logs"
    logs.mkdir(parents=True)
    (logs / "server.log").write_text(
        "[t] INFO [RaftManager id=1] Completed transition to FollowerState(fetchTimeoutMs=2000, epoch=1, leader=2, "
        "leaderEndpoints=...) from Unattached (org.apache.kafka.raft.QuorumState)\n"
        "[t] INFO [RaftManager id=1] Completed transition to Leader(localReplicaKey=ReplicaKey(id=1, "
        "directoryId=Optional[x]), epoch=2, epochStartOffset=9, highWatermark=Optional.empty) (org.apache...)\n"
    )
    node = KafkaNode(1, 1, 2, tmp_path / "node-1")
    assert KafkaCluster([node]).active_controller() == 1
