#!/bin/sh
# Starts one Kafka 3.9.1 node in KRaft combined mode; formats its storage at the first start.
# The settings are the devstack broker's (deploy/devstack/src/assent_devstack/_kafka.py) with container
# listeners: clients use PLAINTEXT on 9092, advertised as $KAFKA_ADVERTISED_LISTENERS; the broker talks to
# itself over BROKER on 127.0.0.1:9094, because the transaction coordinator sends its commit markers to the
# inter-broker listener's advertised address, and the clients' one (a host port) is not reachable from inside.
set -eu

: "${KAFKA_ADVERTISED_LISTENERS:?set KAFKA_ADVERTISED_LISTENERS, e.g. PLAINTEXT://127.0.0.1:49152 (where clients reach port 9092)}"
case "$KAFKA_ADVERTISED_LISTENERS" in
  PLAINTEXT://*:[0-9]*) ;;
  *)
    echo "KAFKA_ADVERTISED_LISTENERS must be one PLAINTEXT://<host>:<port>, not '$KAFKA_ADVERTISED_LISTENERS'" >&2
    exit 2
    ;;
esac

home=/var/lib/kafka
data=$home/data
config=$home/server.properties
libs=/opt/kafka/libs
mkdir -p "$data"

cat >"$config" <<PROPERTIES
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:9093
listeners=PLAINTEXT://0.0.0.0:9092,BROKER://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093
advertised.listeners=$KAFKA_ADVERTISED_LISTENERS,BROKER://127.0.0.1:9094
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=BROKER
log.dirs=$data
# Only CreateTopics makes a topic, as on production clusters.
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=1
# Internal topics: replication factor 1 (one node), 5 partitions instead of 50 so the first consumer group
# and the first transaction are set up quickly.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=5
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=5
group.initial.rebalance.delay.ms=0
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=5000
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
log.retention.hours=24
PROPERTIES

# The devstack broker's JVM flags (SerialGC and C1 only: quicker to start, less CPU on two cores).
heap=${KAFKA_HEAP_OPTS:--Xmx512m -Xms256m}
# shellcheck disable=SC2086 # the heap options are words to split
set -- java $heap -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
  -Djava.net.preferIPv4Stack=true -Dlog4j.configuration=file:/opt/kafka/config/log4j.properties \
  -cp "$libs/*"

if [ ! -f "$data/meta.properties" ]; then
  cluster_id=${KAFKA_CLUSTER_ID:-}
  # Kafka's ids are 16 random bytes in unpadded base64url that never start with "-".
  while [ -z "$cluster_id" ] || [ "${cluster_id#-}" != "$cluster_id" ]; do
    cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
  done
  "$@" kafka.tools.StorageTool format --ignore-formatted -t "$cluster_id" -c "$config"
fi

exec "$@" kafka.Kafka "$config"
