#!/usr/bin/env bash
# Start the local PostgreSQL and Redis the tests use, if they are not already running (127.0.0.1 only).
set -uo pipefail
if ! (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null; then
  echo "[services] starting PostgreSQL" >&2
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
fi
if ! (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null; then
  echo "[services] starting Redis" >&2
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no || true
fi
for i in $(seq 1 30); do
  (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null && (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && exit 0
  sleep 1
done
echo "[services] PostgreSQL or Redis did not come up on 127.0.0.1" >&2
exit 1
