"""``make run``: the whole system on one machine, a demo workspace and a demo coach turn.

Starts Kafka, PostgreSQL and Redis from the devstack (or uses ``KAFKA_BOOTSTRAP_SERVERS``, ``DATABASE_URL``
and ``REDIS_URL`` when all three are set), then every service of ``services.toml``, each as its own process, and a
small real MCP server (:mod:`assent_devstack.mcp_demo`, an order desk with a read and a write tool).
It seeds an organisation with a guild, two agents and a login of the order desk, plays one coach turn that
proposes three changes and asks for read access to the login, prints the commands that show and decide them, and
prints the coach's continuation when it arrives, then what the coach read through the login when it was granted.
Ctrl-C, SIGTERM or SIGHUP stops everything it started, in order (services, then servers); further signals
do not cut that short. Should this process be killed outright, everything it started ends with it too
(each child is tied to it, see ``assent_devstack._service.start_tied``).

Every run starts from a fresh demo state. With the devstack, the servers' data from the previous run
(``<state-dir>/servers``) is deleted first; with your servers, the run uses a new database (dropped when
the run stops) and topics of its own (``assent_demo_<id>.*``). ``<state-dir>/logs`` holds the services'
logs of the latest run.

The gateway listens on ``ASSENT_GATEWAY_PORT`` (or ``--port``) when given, and refuses to start when that
port is taken; otherwise on 8100, or on a free port when 8100 is taken.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from assent.coach import CoachClient, CoachTurn
from assent.contracts.tool_results import ToolResult

from ._kafka import KafkaEngine
from ._postgres import running_postgres
from ._probes import asyncpg_dsn
from ._service import DevstackError, free_port, pick_port, port_open, run_async
from ._stack import read_record, write_record
from .mcp_demo import start_mcp_server
from .system import System, build_system

TOKEN = "dev-token"
OPERATOR = "operator"
LOGIN = "orders"
"""The demo's login: the order desk's MCP server, at the guild's scope."""
LOGIN_TOKEN = "demo-order-desk-token"
"""What the login sends the order desk (stored encrypted; no answer and no result shows it)."""
DEFAULT_GATEWAY_PORT = 8100
PORT_ENV = "ASSENT_GATEWAY_PORT"


class RunError(Exception):
    """``make run`` cannot go on; the message says why (printed without a traceback)."""


def gateway_port(requested: str | None) -> int:
    """The port the gateway is to listen on: ``requested`` (from ASSENT_GATEWAY_PORT or --port) when given,
    refused with RunError when something listens on it; otherwise 8100 when free, else a free port."""
    if requested is not None:
        try:
            port = int(requested)
        except ValueError:
            raise RunError(f"{PORT_ENV}={requested!r} is not a port number") from None
        if not 0 < port < 65536:
            raise RunError(f"{PORT_ENV}={port} is not a TCP port (1-65535)")
        if not _port_free(port):
            raise RunError(
                f"port {port} (from {PORT_ENV} or --port) is already in use on 127.0.0.1; "
                f"stop what listens there, or choose another port, or unset {PORT_ENV} to let make run pick one"
            )
        print(f"The gateway will listen on port {port} ({PORT_ENV}).", flush=True)
        return port
    if _port_free(DEFAULT_GATEWAY_PORT):
        print(f"The gateway will listen on port {DEFAULT_GATEWAY_PORT}.", flush=True)
        return DEFAULT_GATEWAY_PORT
    port = free_port()
    print(
        f"Port {DEFAULT_GATEWAY_PORT} is in use, so the gateway will listen on port {port} instead "
        f"(set {PORT_ENV} to choose the port).",
        flush=True,
    )
    return port


def _port_free(port: int) -> bool:
    try:
        pick_port(port)
    except DevstackError:
        return False
    return not port_open(port, timeout=0.5)


@contextlib.contextmanager
def _exclusive(state_dir: Path) -> Iterator[None]:
    """Hold ``<state_dir>/run.lock`` for the whole run, so that a second ``make run`` on the same state
    directory stops at once instead of wiping the first one's servers and logs."""
    state_dir.mkdir(parents=True, exist_ok=True)
    lock_path = state_dir / "run.lock"
    with open(lock_path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "?"
            raise RunError(
                f"another make run (pid {holder}) is using {state_dir}/; stop it first (Ctrl-C in its terminal)"
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        yield


def _discard_servers(servers: Path) -> None:
    """Stop whatever an earlier run left running on ``servers`` and delete its data, for a fresh start."""
    _, recorded = read_record(servers)
    leftovers = [service for service in recorded.values() if service.alive()]
    if postgres := running_postgres(servers):
        leftovers.append(postgres)
    for service in leftovers:
        print(f"Stopping {service.name} (pid {service.pid}) left running by an earlier run ...", flush=True)
        service.stop()
    try:
        shutil.rmtree(servers)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise RunError(f"cannot delete the previous run's server data in {servers}: {e}") from e


async def _create_database(admin_url: str, name: str) -> str:
    import asyncpg
    from sqlalchemy.engine import make_url

    conn = await asyncpg.connect(asyncpg_dsn(admin_url), timeout=10)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


async def _drop_database(admin_url: str, name: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(asyncpg_dsn(admin_url), timeout=10)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def _fresh_database(admin_url: str, name: str) -> str:
    try:
        return run_async(lambda: _create_database(admin_url, name))
    except Exception as e:
        raise RunError(
            f"cannot create the demo database {name} on the server of DATABASE_URL ({type(e).__name__}: {e}); "
            "make run with your servers needs a user that may CREATE DATABASE"
        ) from e


def _forget_database(admin_url: str, name: str) -> None:
    try:
        run_async(lambda: _drop_database(admin_url, name))
    except Exception as e:
        print(f"Could not drop the demo database {name}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)


async def _seed(gateway: str, logs: Path, mcp_url: str) -> None:
    async with httpx.AsyncClient(base_url=gateway, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        for path, body in (
            ("/api/workspace/orgs", {"org_id": "acme", "name": "Acme"}),
            ("/api/workspace/guilds", {"guild_id": "support", "org_id": "acme", "name": "Support"}),
            (
                "/api/workspace/agents",
                {
                    "agent_id": "ada",
                    "org_id": "acme",
                    "guild_id": "support",
                    "name": "Ada",
                    "memory": "Answer in two sentences or fewer.\nGreet customers by first name.\n",
                },
            ),
            (
                "/api/workspace/agents",
                {
                    "agent_id": "bo",
                    "org_id": "acme",
                    "guild_id": "support",
                    "name": "Bo",
                    "memory": "Escalate refunds over 100 EUR.\n",
                },
            ),
        ):
            response = await http.post(path, json=body)
            if response.status_code != 201:
                raise RunError(
                    f"seeding the demo workspace failed: POST {path} answered {response.status_code} "
                    f"{response.text[:500]} (logs in {logs}/)"
                )
        await _seed_login(http, logs, mcp_url)


async def _seed_login(http: httpx.AsyncClient, logs: Path, mcp_url: str) -> None:
    """The order desk's login, at the guild's scope, once the connections service has heard of the guild."""
    body = {
        "login_id": LOGIN,
        "name": "Order desk",
        "scope": "guild",
        "scope_id": "support",
        "server_url": mcp_url,
        "account": "support@acme.example",
        "credentials": {"token": LOGIN_TOKEN},
        "tools": {"list_orders": {"read_only_hint": True}, "refund_order": {}},
    }
    for _ in range(150):  # the connections service's copy of the workspace follows the edits service's
        response = await http.post("/api/workspace/logins", json=body)
        if response.status_code != 404:
            break
        await asyncio.sleep(0.1)
    if response.status_code != 201:
        raise RunError(
            f"seeding the demo's login failed: POST /api/workspace/logins answered {response.status_code} "
            f"{response.text[:500]} (logs in {logs}/)"
        )


async def _call(turn: CoachTurn, tool: str, arguments: dict[str, Any], logs: Path) -> ToolResult:
    """One tool call of the demo; RunError when it is refused or unanswered."""
    try:
        result = await turn.call(tool, arguments)
    except TimeoutError:
        raise RunError(f"the demo's {tool} call got no result within 15s (logs in {logs}/)") from None
    if not result.ok:
        error = result.error
        why = f"{error.status} {error.code}: {error.message}" if error is not None else "no error given"
        raise RunError(f"the demo's {tool} call was refused: {why} (logs in {logs}/)")
    return result


async def _demo_turn(system: System, kafka: str, prefix: str, idempotent: bool, mcp_url: str) -> None:
    gateway = system.gateway.url
    logs = system.gateway.log_path.parent
    await _seed(gateway, logs, mcp_url)
    async with CoachClient(kafka, topic_prefix=prefix, idempotent=idempotent) as coach:
        session = await coach.open_session(org_id="acme", source_guild_id="support", operator_user_id=OPERATOR)
        turn = session.begin_turn()
        read = await _call(turn, "studio_read_memory", {"agent_id": "ada"}, logs)
        if read.output is None:
            raise RunError(f"the demo's studio_read_memory call answered without output (logs in {logs}/)")
        proposed = read.output["content"] + "Always quote the order number when discussing a refund.\n"
        result = await _call(
            turn,
            "studio_edit_memory",
            {
                "agent_id": "ada",
                "content": proposed,
                "base_version": read.output["version"],
                "reason": "Two refund threads mixed up orders last week; quoting the number prevents it.",
            },
            logs,
        )
        note = await _call(
            turn,
            "studio_edit_note",
            {
                "action": "create",
                "level": "guild",
                "key": "refunds.md",
                "title": "Refunds",
                "content": "Quote the order number.\nRefunds over 100 EUR go to a person.\n",
                "reason": "Both agents answer refunds; one note keeps them consistent.",
            },
            logs,
        )
        guild = await _call(
            turn,
            "studio_edit_guild",
            {"about": "Answers customers about orders and refunds.", "reason": "The guild had no short description."},
            logs,
        )
        access = await _call(
            turn,
            "studio_request_connection_access",
            {"connection_id": LOGIN, "reason": "To check what customer c-1001 ordered before answering about refunds."},
            logs,
        )
        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq
        note_seq, guild_seq = turn.calls[note.tool_call_id].seq, turn.calls[guild.tool_call_id].seq
        login_seq = turn.calls[access.tool_call_id].seq
        sid = session.session_id
        auth = f"-H 'Authorization: Bearer {TOKEN}'"
        post = f"{auth} -X POST -H 'Content-Type: application/json'"
        pretty = "| python3 -m json.tool"  # the answers are JSON on one line; this indents them
        mcp_config = json.dumps(
            {"mcpServers": {"assent": {"url": f"{gateway}/mcp", "headers": {"Authorization": f"Bearer {TOKEN}"}}}}
        )
        studio = f"{gateway}/api/studio/sessions/{sid}"
        cards = f"{studio}/edits"
        print(
            f"""
Assent is running.  Gateway: {gateway}   Console: {gateway}/console   API docs: {gateway}/docs
Token: {TOKEN}   Logs: {logs}/

The coach proposed three changes (session {sid}): Ada's Memory (seq {seq}), a new note of the guild
(seq {note_seq}) and the guild's short description (seq {guild_seq}); and it asked for read access to the
order desk's login (seq {login_seq}). The turn now waits on you.

  See what waits:
    curl -s {auth} \\
      {studio}/pending {pretty}
  See a card (and {note_seq}, {guild_seq}):
    curl -s {auth} \\
      {cards}/{seq} {pretty}
  Apply one (or decline it: "decline"):
    curl -s {post} -d '{{"decision": "apply"}}' \\
      {cards}/{seq} {pretty}
  The Logins popover:
    curl -s {auth} \\
      {studio}/connections {pretty}
  Grant the login (or decline it):
    curl -s {post} -d '{{"decision": "grant"}}' \\
      {studio}/logins/{login_seq} {pretty}
  Ada's Memory now:
    curl -s {auth} \\
      {gateway}/api/workspace/agents/ada/memory {pretty}

When you have decided all four, the coach's turn resumes and its continuation is printed here; with the login
granted, the coach then reads the order desk through it, and what it read is printed too.

  Be a coach from an MCP client (streamable HTTP; first call studio_open_session with
  {{"source_guild_id": "support"}}), with this in its configuration:
    {mcp_config}

Ctrl-C stops everything.
""",
            flush=True,
        )
        continuation = await turn.continuation(timeout=24 * 3600)
        print(f"\nThe coach's turn resumed with:\n{continuation.text}\n", flush=True)
        await _read_through_the_login(session.begin_turn())
        await asyncio.Event().wait()


async def _read_through_the_login(turn: CoachTurn) -> None:
    """The coach's next turn reads the order desk through the login (refused when the login was declined)."""
    try:
        read = await turn.call(
            "studio_call_connection_tool",
            {"connection_id": LOGIN, "tool": "list_orders", "arguments": {"customer": "c-1001"}},
        )
    except TimeoutError:
        print("The coach's read through the login got no result within 15s.", flush=True)
        return
    if read.ok and read.output is not None:
        print(f"The coach read the order desk through the login:\n{read.output['evidence']}\n", flush=True)
    elif read.error is not None:
        print(f"The coach's read through the login was refused: {read.error.code}: {read.error.message}\n", flush=True)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, ``kill``/``timeout``/a supervisor, and a closed terminal: each stops the run the same way."""


def _run(args: argparse.Namespace) -> None:
    # The first stop signal interrupts the run (KeyboardInterrupt); any later one, and any signal once the clean-up
    # has begun, is only noted. GNU make passes a SIGTERM it receives on to the run, so a run whose process group
    # is sent SIGTERM gets it two or three times, the later ones while it stops the services; they must not cut
    # the clean-up short. (Whatever this process started also ends when it is killed: see `start_tied`.)
    stopping = False

    def interrupt(signum: int, _frame: object) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        raise KeyboardInterrupt

    for sig in STOP_SIGNALS:
        signal.signal(sig, interrupt)
    state_dir: Path = args.state_dir
    with _exclusive(state_dir):
        # Checked before anything starts, so that a taken port stops the run at once.
        port = gateway_port(args.port if args.port is not None else os.environ.get(PORT_ENV) or None)
        cleanup = contextlib.ExitStack()
        try:
            _start_and_play(args, state_dir, port, cleanup)
        finally:
            stopping = True  # first, before anything that a signal could interrupt
            print("Stopping ...", flush=True)
            cleanup.close()
            print("Stopped: every service and server this run started has ended.", flush=True)


def _start_and_play(args: argparse.Namespace, state_dir: Path, port: int, cleanup: contextlib.ExitStack) -> None:
    began = time.monotonic()
    logs = state_dir / "logs"
    shutil.rmtree(logs, ignore_errors=True)  # the previous run's logs

    given = [os.environ.get(k) for k in ("KAFKA_BOOTSTRAP_SERVERS", "DATABASE_URL", "REDIS_URL")]
    if all(given):
        kafka, admin_url, redis_url = (value or "" for value in given)
        idempotent = os.environ.get("KAFKA_IDEMPOTENCE", "true").lower() != "false"
        name = f"assent_demo_{uuid.uuid4().hex[:8]}"
        prefix = f"{name}."
        print(
            f"Using your servers, with a new database {name} (dropped when this run stops) and topics {prefix}* ...",
            flush=True,
        )
        database_url = _fresh_database(admin_url, name)
        cleanup.callback(_forget_database, admin_url, name)
        topics: dict[str, str] = {}
    else:
        from . import start_all

        servers = state_dir / "servers"
        _discard_servers(servers)
        brokers = args.kafka_brokers
        # A cluster is Apache Kafka's: Tansu runs as one broker only.
        engine: KafkaEngine = "kafka" if brokers > 1 else args.kafka
        what = f"{brokers} Kafka brokers (kafka)" if brokers > 1 else f"Kafka ({engine})"
        print(f"Starting {what}, PostgreSQL and Redis afresh under {servers}/ ...", flush=True)
        devstack = start_all(servers, kafka_engine=engine, kafka_brokers=brokers)
        cleanup.callback(devstack.stop)
        write_record(servers, devstack)  # lets the next run stop them should this one be killed
        env = devstack.env()
        kafka, database_url, redis_url = env["KAFKA_BOOTSTRAP_SERVERS"], env["DATABASE_URL"], env["REDIS_URL"]
        idempotent = env.get("KAFKA_IDEMPOTENCE", "true") != "false"
        prefix = ""
        topics = {key: value for key, value in env.items() if key.startswith("ASSENT_TOPIC_")}
    system = build_system(
        kafka_bootstrap_servers=kafka,
        database_url=database_url,
        redis_url=redis_url,
        log_dir=logs,
        topic_prefix=prefix,
        api_tokens=json.dumps({TOKEN: {"user": OPERATOR, "org": "acme", "roles": ["admin"]}}),
        kafka_idempotence=idempotent,
        gateway_port=port,
        # Read in a terminal; deployed services log JSON lines. On a cluster, topics are created replicated.
        extra_env={"ASSENT_LOG_FORMAT": "console", **topics},
    )
    cleanup.callback(system.stop)
    logs.mkdir(parents=True, exist_ok=True)
    print(f"Starting the services ({', '.join(system.processes)}) and the order desk's MCP server ...", flush=True)
    taken = tuple(process.port for process in system.processes.values())  # chosen, not bound yet
    mcp = start_mcp_server(free_port(exclude=taken), logs / "mcp-order-desk.log", wait=False)
    cleanup.callback(mcp.stop)
    try:
        system.start()
    except (RuntimeError, TimeoutError) as e:
        raise RunError(str(e)) from e
    mcp.wait_listening()
    ready = system.ready_seconds()
    print(
        f"Ready {time.monotonic() - began:.1f}s after start: "
        + ", ".join(f"{name} {seconds:.1f}s" for name, seconds in ready.items() if seconds is not None)
        + " from launch. Playing the demo's coach turn ...",
        flush=True,
    )
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a demo that runs fine ends
        asyncio.run(_demo_turn(system, kafka, prefix, idempotent, mcp.url))


def main(argv: list[str] | None = None) -> int:
    """Run the demo until Ctrl-C; returns the process exit code (non-zero, with the reason on stderr, on failure)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--state-dir", type=Path, default=Path(".run"))
    parser.add_argument(
        "--kafka",
        choices=("kafka", "tansu"),
        default=os.environ.get("ASSENT_KAFKA_ENGINE", "tansu"),
        help="tansu (embedded, no Java) or kafka (Apache Kafka 3.9 from Maven Central; needs Java 17+ and Maven)",
    )
    parser.add_argument(
        "--kafka-brokers",
        type=int,
        default=int(os.environ.get("KAFKA_BROKERS") or 1),
        metavar="N",
        help="Apache Kafka brokers to start (default: $KAFKA_BROKERS, else 1); more than one implies --kafka kafka",
    )
    parser.add_argument(
        "--port",
        default=None,
        help=f"the gateway's port (default: ${PORT_ENV}, else {DEFAULT_GATEWAY_PORT} when free, else a free port)",
    )
    args = parser.parse_args(argv)
    try:
        _run(args)
    except (RunError, DevstackError) as e:
        print(f"\nmake run failed: {e}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
