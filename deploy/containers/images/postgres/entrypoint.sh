#!/bin/sh
# Makes the cluster at the first start (superuser $POSTGRES_USER with $POSTGRES_PASSWORD, database
# $POSTGRES_DB), then runs the command: `postgres` (the default) gets the data directory.
set -eu

user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD (the password of $user over TCP)}"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb --pgdata="$PGDATA" --username="$user" --pwfile="$pwfile" --encoding=UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  cat >>"$PGDATA/postgresql.conf" <<CONF
# --- assent container ---
listen_addresses = '*'
unix_socket_directories = '/var/run/postgresql'
# As the devstack's server: the suite opens many databases, each with its own pools, at once.
max_connections = 200
CONF
  # Any address, with the password (initdb's own lines only cover 127.0.0.1 and ::1).
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    # Single-user mode: no server to start and stop, and nothing listens before the cluster is ready.
    escaped=$(printf '%s' "$db" | sed 's/"/""/g')
    echo "CREATE DATABASE \"$escaped\"" | postgres --single -D "$PGDATA" postgres >/dev/null
  fi
  echo "postgres-entrypoint: cluster made in $PGDATA (superuser $user, database $db)"
fi

if [ "${1:-}" = postgres ]; then
  shift
  exec postgres -D "$PGDATA" "$@"
fi
exec "$@"
