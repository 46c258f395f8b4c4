#!/usr/bin/env bash
# The real job child (python -m siliconbench.worker.job.child_main) of one llama.cpp job under cuda-gdb: a native backtrace of a
# crash. scripts/gpu/backtrace.sh OUT_FILE
set -u
job=$(python3 - <<'PY'
from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.settings import load_settings
from siliconbench.contract.spec import parse_sweep
spec = parse_sweep({"name": "bt", "models": ["synthetic-llama-3.2-1b"], "engines": ["llama.cpp"],
                    "quantizations": ["F16"], "repetitions": 1, "warmup": 0,
                    "workloads": [{"kind": "generate", "prompt_tokens": [64], "gen_tokens": [8], "depth": [0]}]})
print(expand(spec, ModelCatalog(load_settings().resolved_models_dir))[0].model_dump_json())
PY
)
echo "$job" > /tmp/gpu/job.json
timeout 150 cuda-gdb -q -batch -ex "set pagination off" -ex run -ex bt -ex "info threads" \
  --args python3 -m siliconbench.worker.job.child_main 3 < /tmp/gpu/job.json 3> /tmp/gpu/events.txt > "$1" 2>&1
echo "rc=$?" >> "$1"; tail -c 3000 /tmp/gpu/events.txt >> "$1"
