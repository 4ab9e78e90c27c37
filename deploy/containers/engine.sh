#!/usr/bin/env bash
# Debian's Docker engine (docker.io 20.10) on a socket of its own, for the container images and tests.
#
#   engine.sh start    install docker.io and debootstrap when missing, start dockerd (or reuse the one running),
#                      wait until it answers, and print exactly one line on stdout: DOCKER_HOST=unix://<socket>
#   engine.sh stop     stop that dockerd (SIGTERM, then SIGKILL) and the containerd it started; images are kept
#   engine.sh status   exit 0 when the engine answers on its socket, 1 otherwise
#
# The engine never listens on the default /var/run/docker.sock: a Docker engine found there changes how other
# runs of the suite behave (testcontainers would pick it up). Paths:
#   ASSENT_DOCKER_RUN   sockets, pid files, container state and dockerd.log (default /run/assent-docker)
#   ASSENT_DOCKER_DATA  images and layers, kept between runs so images are built once per machine
#                       (default ~/.cache/assent/docker)
# Everything but the DOCKER_HOST line goes to stderr, so `export "$(deploy/containers/engine.sh start)"` works.
set -euo pipefail

RUN=${ASSENT_DOCKER_RUN:-/run/assent-docker}
DATA=${ASSENT_DOCKER_DATA:-$HOME/.cache/assent/docker}
SOCKET=$RUN/docker.sock
HOST=unix://$SOCKET
PIDFILE=$RUN/dockerd.pid
LOG=$RUN/dockerd.log
# dockerd 20.10 starts a containerd of its own when none runs at /run/containerd/containerd.sock; its state
# (and pid file) then lives under the exec root.
CONTAINERD_PIDFILE=$RUN/exec/containerd/containerd.pid
START_TIMEOUT=${ASSENT_DOCKER_START_TIMEOUT:-60}
STOP_TIMEOUT=20

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

say() { echo "engine: $*" >&2; }

# Any docker CLI will do (Debian's, or a newer one in /usr/local/bin: it talks to a 20.10 daemon fine).
answers() {
  command -v docker >/dev/null 2>&1 && docker -H "$HOST" version >/dev/null 2>&1
}

pid_of() { # pid_of FILE: the live process named in FILE, or nothing
  local pid
  pid=$($SUDO cat "$1" 2>/dev/null || true)
  if [[ $pid =~ ^[0-9]+$ ]] && $SUDO kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi
}

install_packages() {
  local missing=()
  command -v dockerd >/dev/null 2>&1 || [ -x /usr/sbin/dockerd ] || missing+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing ${missing[*]} with apt"
  # docker.io's maintainer scripts would start the packaged service on the default socket through
  # invoke-rc.d: a policy-rc.d that refuses (exit 101) stops that. One already present is left as it is.
  local policy=/usr/sbin/policy-rc.d added_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    added_policy=1
  fi
  local status=0 log
  log=$(mktemp)
  {
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      # Recommends would bring needrestart, apparmor and git: nothing the engine needs here.
      $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  } >"$log" 2>&1 || status=$?
  [ -z "$added_policy" ] || $SUDO rm -f "$policy"
  # dpkg talks even with -qq: its output is shown only when the install failed.
  [ "$status" -eq 0 ] || tail -n 30 "$log" >&2
  rm -f "$log"
  return "$status"
}

start() {
  $SUDO mkdir -p "$RUN"
  mkdir -p "$DATA" 2>/dev/null || $SUDO mkdir -p "$DATA"
  # One start at a time: a second caller waits, then finds the engine the first one started.
  local lock=$RUN/engine.lock
  [ -w "$lock" ] || { $SUDO touch "$lock" && $SUDO chown "$(id -u)" "$lock"; }
  exec 9>>"$lock"
  flock 9
  if answers; then
    say "reusing the engine on $SOCKET"
    echo "DOCKER_HOST=$HOST"
    return 0
  fi
  install_packages
  answers && { echo "DOCKER_HOST=$HOST"; return 0; }

  local pid
  pid=$(pid_of "$PIDFILE")
  if [ -n "$pid" ]; then
    say "dockerd $pid runs but does not answer on $SOCKET; waiting for it"
  else
    # The engine's bridge carries the containers' traffic out through the host's default route: a bridge
    # MTU larger than that link's (1500 against 1400 on some virtual machines) stalls downloads inside
    # containers and builds, so the bridge takes the route's MTU.
    local dev mtu=1500
    dev=$(ip route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i + 1); exit}}')
    [ -z "$dev" ] || mtu=$(cat "/sys/class/net/$dev/mtu" 2>/dev/null || echo 1500)
    local args=(
      --host "$HOST" --exec-root "$RUN/exec" --pidfile "$PIDFILE" --data-root "$DATA" --mtu "$mtu"
    )
    # A caller without root reaches the socket through its own group.
    [ -z "$SUDO" ] || args+=(--group "$(id -gn)")
    say "starting dockerd (data in $DATA, log in $LOG)"
    # setsid and closed stdio: the engine outlives this script, and `$(engine.sh start)` returns at once
    # (a command substitution waits for every writer of its pipe). Nor may it keep the lock (fd 9) open.
    $SUDO setsid dockerd "${args[@]}" </dev/null >>"$LOG" 2>&1 9>&- &
    pid=$!
  fi
  local deadline=$((SECONDS + START_TIMEOUT))
  until answers; do
    if [ $SECONDS -ge $deadline ] || ! $SUDO kill -0 "$pid" 2>/dev/null; then
      say "dockerd did not answer on $SOCKET within ${START_TIMEOUT}s; the end of $LOG:"
      $SUDO tail -n 40 "$LOG" >&2 || true
      return 1
    fi
    sleep 0.2
  done
  say "dockerd $(pid_of "$PIDFILE") answers on $SOCKET"
  echo "DOCKER_HOST=$HOST"
}

stop_pid() { # stop_pid PID NAME: SIGTERM, wait up to STOP_TIMEOUT s, then SIGKILL
  local pid=$1 name=$2 deadline=$((SECONDS + STOP_TIMEOUT))
  $SUDO kill -TERM "$pid" 2>/dev/null || return 0
  while $SUDO kill -0 "$pid" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      say "$name $pid still runs after ${STOP_TIMEOUT}s; killing it"
      $SUDO kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.2
  done
}

stop() {
  local dockerd containerd
  dockerd=$(pid_of "$PIDFILE")
  # Read before dockerd goes: it stops its containerd on a clean exit, but not when it has to be killed.
  containerd=$(pid_of "$CONTAINERD_PIDFILE")
  if [ -z "$dockerd" ] && [ -z "$containerd" ] &&
    ! pgrep -f -- "containerd-shim.* -address $RUN/exec/containerd/containerd.sock" >/dev/null; then
    say "no engine runs on $SOCKET"
    return 0
  fi
  # dockerd stops its running containers before it exits (it runs without live-restore).
  [ -z "$dockerd" ] || stop_pid "$dockerd" dockerd
  [ -z "$containerd" ] || ! $SUDO kill -0 "$containerd" 2>/dev/null || stop_pid "$containerd" containerd
  # A dockerd that had to be killed (or died) leaves its containers running under their shims, which name
  # this engine's containerd socket: they go too, each container's first process (which takes the rest of
  # its PID namespace with it), then its shim.
  local shim child
  for shim in $(pgrep -f -- "containerd-shim.* -address $RUN/exec/containerd/containerd.sock" || true); do
    for child in $(pgrep -P "$shim" || true); do $SUDO kill -KILL "$child" 2>/dev/null || true; done
    $SUDO kill -KILL "$shim" 2>/dev/null || true
  done
  say "engine stopped (images kept in $DATA)"
}

status() {
  if answers; then
    say "the engine answers on $SOCKET"
    return 0
  fi
  say "no engine answers on $SOCKET"
  return 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *)
    echo "usage: $0 start|stop|status" >&2
    exit 2
    ;;
esac
