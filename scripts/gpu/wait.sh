#!/usr/bin/env bash
# Every later call (the second carries .gpu/part-b and .gpu/part-c): hands over what it carried, follows the
# pipeline for up to N seconds (default 540: a call may run 600), and copies its outputs to $OUT. Returns early
# when the pipeline has finished or is no longer running. Safe to call again and again.
set -u
cd "$(dirname "$0")/../.."
G=/tmp/gpu
for p in part-b part-c; do [ -f ".gpu/$p" ] && [ ! -f "$G/$p" ] && cp ".gpu/$p" "$G/$p.tmp" && mv "$G/$p.tmp" "$G/$p"; done
deadline=$((SECONDS + ${1:-540}))
while [ $SECONDS -lt "$deadline" ] && [ ! -f "$G/done/ALL" ]; do
  kill -0 "$(cat "$G/pipeline.pid" 2>/dev/null)" 2>/dev/null || { echo "pipeline not running"; break; }
  sleep 5
done
echo "done: $(ls "$G/done" 2>/dev/null | tr '\n' ' ')"
echo "failed: $(ls "$G/failed" 2>/dev/null | tr '\n' ' ')"
tail -n 60 "$G/out/pipeline.log" 2>/dev/null
# one archive of every output (a call brings back at most 8 files), and the log beside it
[ -n "${OUT:-}" ] && tar -czf "$OUT/gpu-out.tgz" -C "$G" out 2>/dev/null && cp "$G/out/pipeline.log" "$OUT/" 2>/dev/null
true
