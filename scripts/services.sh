#!/usr/bin/env bash
# Start the local PostgreSQL and Redis the tests use, if they are not already running (127.0.0.1 only):
# Debian's cluster tools where they exist, Homebrew's services on a Mac.
set -uo pipefail
up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
say() { echo "[services] $*" >&2; }

if ! up 5432; then
  if command -v pg_ctlcluster >/dev/null; then
    say "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
  elif command -v brew >/dev/null; then
    pg=$(brew list --formula 2>/dev/null | grep -E '^postgresql(@[0-9]+)?$' | sort -V | tail -1)
    if [ -n "$pg" ]; then say "starting Homebrew's $pg"; brew services start "$pg" >/dev/null || true
    else say "no PostgreSQL: brew install postgresql@16 (the tests connect as SILICONBENCH_TEST_PG_URL," \
             "default postgresql://postgres@127.0.0.1:5432/postgres: createuser -s postgres)"; fi
  fi
fi
if ! up 6379; then
  if command -v redis-server >/dev/null && ! command -v brew >/dev/null; then
    say "starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no || true
  elif command -v brew >/dev/null && brew list --formula 2>/dev/null | grep -qx redis; then
    say "starting Homebrew's redis"; brew services start redis >/dev/null || true
  else
    say "no Redis: apt-get install redis-server, or on a Mac: brew install redis"
  fi
fi
for i in $(seq 1 30); do
  up 5432 && up 6379 && exit 0
  sleep 1
done
say "PostgreSQL or Redis did not come up on 127.0.0.1"
exit 1
