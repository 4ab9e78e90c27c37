#!/usr/bin/env bash
# make test-containers: the integration suite with everything in containers. Starts Debian's Docker engine on a
# private socket (deploy/containers/engine.sh), builds the base and the servers' images from Debian's packages
# (base-images.sh: no registry is pulled from), builds each service's image from a wheelhouse made here
# (deploy/images/build.py), then runs tests/ with testcontainers: Kafka, PostgreSQL and Redis are containers of
# those images, and the services containers of their own images (assent_devstack.containers). The engine is
# stopped when the run ends, however it ends; the images stay in its data root for the next run.
#
# Arguments go to pytest (e.g. `make test-containers ARGS="-x tests/test_memory.py"`).
set -euo pipefail
cd "$(dirname "$0")/../.."
UV=${UV:-$(command -v uv || echo "python3 -m uv")}
started=$(date +%s)

docker_host=$(bash deploy/containers/engine.sh start)
export "${docker_host?}"
trap 'bash deploy/containers/engine.sh stop >&2' EXIT
bash deploy/containers/base-images.sh >&2
$UV run --frozen python deploy/images/build.py --base-image assent/python:3.11-bookworm --tag test >&2
echo "engine and images ready in $(( $(date +%s) - started )) s" >&2

# Ryuk (testcontainers' reaper) is an image no registry here serves: each container is stopped by its fixture.
export ASSENT_SERVICE_IMAGES=test TESTCONTAINERS_RYUK_DISABLED=true TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1
unset KAFKA_BOOTSTRAP_SERVERS DATABASE_URL REDIS_URL
status=0
$UV run --frozen pytest "${@:-tests}" || status=$?
echo "make test-containers: $(( $(date +%s) - started )) s in all" >&2
exit "$status"
