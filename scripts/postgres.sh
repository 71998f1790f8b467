#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on a unix socket, for tests and benchmarks (no TCP port, no password):
#   bash scripts/postgres.sh start DIR   # initdb in DIR/data, start it; prints its URL (postgresql://...)
#   bash scripts/postgres.sh stop DIR
# Uses Debian's postgresql package (scripts/install.sh --tests installs it where apt-get can); as root, the
# server runs as the `postgres` user, which must be able to enter DIR. fsync is off (tests); benchmarks
# that report write speed set MEMLM_PG_FSYNC=on.
set -euo pipefail
cmd=${1:?start|stop} dir=${2:?a directory}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bin/initdb" ] || { echo "no PostgreSQL server found (apt-get install postgresql)" >&2; exit 3; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case $cmd in
  start)
    mkdir -p "$dir"
    chmod 755 "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    as_pg "$bin/initdb" -D "$dir/data" -A trust -U memlm -E UTF8 --no-sync >"$dir/initdb.log"
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start \
      -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c fsync=${MEMLM_PG_FSYNC:-off} -c max_connections=100" >/dev/null
    echo "postgresql://memlm@/postgres?host=$dir"
    ;;
  stop)
    as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
    ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
