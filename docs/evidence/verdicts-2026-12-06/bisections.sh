#!/usr/bin/env bash
# Bisections over the planted range (three runs) and an A/A range at --min-effect 0.01, as a user runs them:
# `siliconbench regressions bisect` (examples/bisect.yaml at short lengths: bisect-small.yaml) on the llama.cpp history the tests plant a 20 ms slowdown
# in (harness/llama_repo.py: b1, a comment, the slowdown, b4), builds from the tests' kept builds folder.
# Run from the repository root on an otherwise idle machine; prints one line a bisection and keeps each JSON.
set -euo pipefail
out=docs/evidence/verdicts-2026-12-06
work=$(mktemp -d /tmp/sb-evidence-XXXX)
export XDG_DATA_HOME=$work/data XDG_CONFIG_HOME=$work/config
export SILICONBENCH_BUILDS_DIR=${SILICONBENCH_BUILDS_DIR:-$HOME/.cache/siliconbench/test-llama-builds}
sb=.venv/bin/siliconbench
repo=$(.venv/bin/python -c "from harness.llama_repo import make_repo; print(make_repo())")
comment=$(.venv/bin/python -c "from harness.llama_repo import make_repo, shas; print(shas(make_repo())[1])")
$sb models make-tiny --if-missing >/dev/null
one() {  # name, then the bisect arguments
  local name=$1; shift
  local t0=$SECONDS rc=0
  $sb regressions bisect "$out/bisect-small.yaml" --source "$repo" --format json "$@" > "$out/$name.json" || rc=$?
  .venv/bin/python - "$out/$name.json" "$rc" "$((SECONDS - t0))" <<'PY'
import json, sys
rec, rc, wall = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
fb, eff = rec.get("first_bad") or {}, rec.get("effect") or {}
steps = " ".join(f"{s['kind'][0]}:{(s['commit'] or {}).get('number', '?')}={s['verdict']}/{s['processes']}" for s in rec["steps"])
eq = f" eq90 [{eff['eq_low']:.3f}, {eff['eq_high']:.3f}]" if eff.get("eq_low") is not None else ""
print(f"{sys.argv[1].split('/')[-1]:<16} exit {rc} {rec['outcome']:<12} first bad b{fb.get('number', '-')} "
      f"ratio {eff.get('ratio') or float('nan'):.3f} [{eff.get('ci_low') or float('nan'):.3f}, {eff.get('ci_high') or float('nan'):.3f}]{eq} "
      f"processes {rec['processes_run']} wall {wall} s | {steps}")
PY
}
for i in 1 2 3; do one "planted-$i" --good b1 --bad b4; done
one "aa-min-effect-1pct" --good b1 --bad "$comment" --min-effect 0.01
rm -rf "$work"
