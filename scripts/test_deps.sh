#!/usr/bin/env bash
# What `make test` needs beyond the venv: OpenBLAS for MLX on Linux, Chromium for the dashboard's real-browser
# test, PgBouncer for the fleet's, and a Compose client to check compose.yaml (no Docker engine is needed). Installed where Debian's
# apt-get can (as root or through passwordless sudo); otherwise named, with the command that installs it, and
# `make test` stops: a fresh machine runs those tests instead of skipping them.
set -euo pipefail
say() { printf '\033[1m[test-deps]\033[0m %s\n' "$*" >&2; }

have_compose() { { docker compose version || command -v docker-compose; } >/dev/null 2>&1; }
have_chromium() { command -v chromium >/dev/null || command -v chromium-browser >/dev/null ||
                  [ -x "${SILICONBENCH_CHROMIUM:-/nonexistent}" ]; }

need=()
if [ "$(uname -s)" = Linux ]; then
  [ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ] || [ -e /usr/lib/aarch64-linux-gnu/openblas-pthread/libblas.so.3 ] ||
    need+=(libopenblas0-pthread)
fi
have_chromium || need+=(chromium chromium-driver)
# PgBouncer: the fleet's tests and benchmarks/fleet_scale.py put it in front of PostgreSQL (docs/fleet.md).
command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || need+=(pgbouncer)
have_compose || need+=(docker-compose)
[ ${#need[@]} -eq 0 ] && exit 0

if command -v apt-get >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || { sudo -n true 2>/dev/null && sudo="sudo -n"; }
  if [ "$(id -u)" -eq 0 ] || [ -n "$sudo" ]; then
    say "apt-get install ${need[*]}"
    $sudo apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
    exit 0
  fi
  say "missing: ${need[*]}. Install them with: sudo apt-get install ${need[*]}"
else
  # macOS: Homebrew's names for the same tools (Chromium as a cask; point SILICONBENCH_CHROMIUM at it).
  say "missing: ${need[*]}. On a Mac: brew install --cask chromium && brew install docker-compose," \
      "then export SILICONBENCH_CHROMIUM=/Applications/Chromium.app/Contents/MacOS/Chromium"
fi
exit 1
