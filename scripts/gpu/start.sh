#!/usr/bin/env bash
# First call on a fresh lent machine (carry: .gpu/llama.tgz .gpu/wheels .gpu/part-a .gpu/mlx-cuda.name
# .gpu/mlx-cuda.sha256): puts part-a aside, starts pipeline.sh in its own session, and follows it briefly.
set -u
cd "$(dirname "$0")/../.."
G=/tmp/gpu
mkdir -p "$G"
cp .gpu/part-a .gpu/mlx-cuda.name .gpu/mlx-cuda.sha256 "$G/"
if ! kill -0 "$(cat "$G/pipeline.pid" 2>/dev/null)" 2>/dev/null; then
  setsid nohup bash scripts/gpu/pipeline.sh > "$G/pipeline.out" 2>&1 < /dev/null &
  echo $! > "$G/pipeline.pid"
fi
exec bash scripts/gpu/wait.sh "${1:-40}"
