"""``make run``: the whole system on one machine, a demo workspace and a demo coach turn.

Starts Kafka, PostgreSQL and Redis from the devstack (or uses ``KAFKA_BOOTSTRAP_SERVERS``, ``DATABASE_URL``
and ``REDIS_URL`` when all three are set), then the edits service and the gateway, each as its own process.
It seeds an organisation with a guild and two agents, plays one coach turn that proposes a Memory edit,
prints the commands that show and decide it, and prints the coach's continuation when it arrives.
Ctrl-C stops everything it started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
from pathlib import Path

import httpx

from assent.coach import CoachClient

from .system import System, build_system

TOKEN = "dev-token"
OPERATOR = "operator"


async def _seed(gateway: str) -> None:
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
            if response.status_code not in (201, 409):  # 409: seeded by an earlier run
                response.raise_for_status()


async def _demo_turn(system: System, kafka: str, prefix: str, idempotent: bool) -> None:
    gateway = system.gateway.url
    await _seed(gateway)
    async with CoachClient(kafka, topic_prefix=prefix, idempotent=idempotent) as coach:
        session = await coach.open_session(org_id="acme", source_guild_id="support", operator_user_id=OPERATOR)
        turn = session.begin_turn()
        read = await turn.call("studio_read_memory", {"agent_id": "ada"})
        assert read.output is not None
        proposed = read.output["content"] + "Always quote the order number when discussing a refund.\n"
        result = await turn.call(
            "studio_edit_memory",
            {
                "agent_id": "ada",
                "content": proposed,
                "base_version": read.output["version"],
                "reason": "Two refund threads mixed up orders last week; quoting the number prevents it.",
            },
        )
        await turn.end_step()
        seq = turn.calls[result.tool_call_id].seq
        sid = session.session_id
        auth = f"-H 'Authorization: Bearer {TOKEN}'"
        print(
            f"""
Assent is running.  Gateway: {gateway}   API docs: {gateway}/docs   Logs: {system.gateway.log_path.parent}

The coach proposed a change to Ada's Memory (session {sid}, seq {seq}). The turn now waits on you.

  See what waits:     curl -s {auth} {gateway}/api/studio/sessions/{sid}/pending
  See the card:       curl -s {auth} {gateway}/api/studio/sessions/{sid}/edits/{seq}
  Apply it:           curl -s {auth} -X POST -H 'Content-Type: application/json' \\
                           -d '{{"decision": "apply"}}' {gateway}/api/studio/sessions/{sid}/edits/{seq}
  (or decline it:     ... -d '{{"decision": "decline"}}' ...)
  Ada's Memory now:   curl -s {auth} {gateway}/api/workspace/agents/ada/memory

When you decide, the coach's turn resumes and its continuation is printed here. Ctrl-C stops everything.
""",
            flush=True,
        )
        continuation = await turn.continuation(timeout=24 * 3600)
        print(f"\nThe coach's turn resumed with:\n{continuation.text}\n", flush=True)
        await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--state-dir", type=Path, default=Path(".run"))
    parser.add_argument(
        "--kafka",
        choices=("kafka", "tansu"),
        default=os.environ.get("ASSENT_KAFKA_ENGINE", "tansu"),
        help="tansu (embedded, no Java) or kafka (Apache Kafka 3.9 from Maven Central; needs Java 17+ and Maven)",
    )
    parser.add_argument("--port", type=int, default=int(os.environ.get("ASSENT_GATEWAY_PORT", "8100")))
    args = parser.parse_args()

    devstack = None
    given = [os.environ.get(k) for k in ("KAFKA_BOOTSTRAP_SERVERS", "DATABASE_URL", "REDIS_URL")]
    if all(given):
        kafka, database_url, redis_url = (value or "" for value in given)
        idempotent = os.environ.get("KAFKA_IDEMPOTENCE", "true").lower() != "false"
    else:
        from . import start_all

        engine = args.kafka
        print(f"Starting Kafka ({engine}), PostgreSQL and Redis under {args.state_dir}/ ...", flush=True)
        devstack = start_all(args.state_dir / "servers", kafka_engine=engine)  # type: ignore[arg-type]
        env = devstack.env()
        kafka, database_url, redis_url = env["KAFKA_BOOTSTRAP_SERVERS"], env["DATABASE_URL"], env["REDIS_URL"]
        idempotent = env.get("KAFKA_IDEMPOTENCE", "true") != "false"
    system = build_system(
        kafka_bootstrap_servers=kafka,
        database_url=database_url,
        redis_url=redis_url,
        log_dir=args.state_dir / "logs",
        api_tokens=f'{{"{TOKEN}": "{OPERATOR}"}}',
        kafka_idempotence=idempotent,
        gateway_port=args.port,
    )
    try:
        print("Starting the edits service and the gateway ...", flush=True)
        system.start()
        with contextlib.suppress(KeyboardInterrupt):
            signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
            asyncio.run(_demo_turn(system, kafka, "", idempotent))
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        print("Stopping ...", flush=True)
        system.stop()
        if devstack is not None:
            devstack.stop()


if __name__ == "__main__":
    main()
