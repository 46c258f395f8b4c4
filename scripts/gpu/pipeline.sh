#!/usr/bin/env bash
# On the lent CUDA machine, in the background (started by start.sh with setsid): every step of the GPU run, in
# order, each leaving a marker in /tmp/gpu/done so a re-run skips what is done. Nothing waits on work that is not
# running: the CUDA build runs beside the MLX install, and the one wait (for the build) checks the build's pid.
# Outputs (logs, results, the NVML recording) go to /tmp/gpu/out, which wait.sh copies back.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
G=/tmp/gpu
mkdir -p "$G/done" "$G/failed" "$G/out"
LOG=$G/out/pipeline.log
# one bin/ for the engine's library and every tool (llama-bench for fidelity, llama-server for serve, llama-quantize)
export PYTHONPATH="$G/llama:$REPO" LLAMA_CPP_LIB_PATH="$G/tools/llama.cpp-0.3.36/bin" SILICONBENCH_LLAMA_TOOLS_DIR="$G/tools/llama.cpp-0.3.36/bin"
export SILICONBENCH_TOOLS_CACHE="$G/tools" SILICONBENCH_BUILDS_DIR="$G/builds" SILICONBENCH_ENVS_DIR="$G/envs"
export XDG_DATA_HOME="$G/xdg" SILICONBENCH_MODELS_DIR="$G/models" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
SB="python3 -m siliconbench.cli.main"
cd "$REPO"

STEP_LIMIT_S=${STEP_LIMIT_S:-420}  # a step that hangs (2026-12-06: the serve sweep printed nothing for 8 min) is
# stopped, so it cannot eat the pass; the build and the 8B model are given their own, longer limit

step() {  # step NAME COMMAND...: run once; a failure is logged and marked, and the pipeline goes on
  local name=$1; shift
  [ -f "$G/done/$name" ] && return 0
  # SKIP_STEPS (names, space-separated): steps an earlier pass already answered, left out to spare device time
  case " ${SKIP_STEPS:-} " in *" $name "*) echo "== $name: skipped (SKIP_STEPS)" >> "$LOG"; return 0 ;; esac
  echo "== $(date +%T) $name" >> "$LOG"
  local limit=$STEP_LIMIT_S
  case $name in build|model_8b|bisect|serve) limit=900 ;; esac  # serve: 14 jobs, each a server started
  # the steps are this script's functions: a child bash runs them (exported below) under the limit
  if timeout --kill-after=10 "$limit" bash -c '"$@"' step "$@" >> "$LOG" 2>&1; then touch "$G/done/$name"; echo "== $(date +%T) $name: done" >> "$LOG"
  else echo "== $(date +%T) $name: FAILED" >> "$LOG"; touch "$G/failed/$name"; return 1; fi
}

wheels() { python3 -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check .gpu/wheels/*.whl; }

llama_src() {
  rm -rf "$G/llama" && mkdir -p "$G/llama"
  tar -xzf .gpu/llama.tgz -C "$G/llama" --strip-components=1
  # the sdist's pure-Python llama_cpp on PYTHONPATH, with the metadata importlib asks for its version
  mkdir -p "$G/llama/llama_cpp_python-0.3.36.dist-info"
  printf 'Metadata-Version: 2.1\nName: llama-cpp-python\nVersion: 0.3.36\n' > "$G/llama/llama_cpp_python-0.3.36.dist-info/METADATA"
}

repo() {  # harness/llama_repo.py's history over the vendored tree: its first commit is the engine's own llama.cpp
  mkdir -p "$G/tools/llama.cpp-0.3.36"
  ln -sfn "$G/llama/vendor/llama.cpp" "$G/tools/llama.cpp-0.3.36/src"
  python3 harness/llama_repo.py
}

build() {  # the CUDA build by commit, as a user makes one: `env add llama.cpp --source` of the history's first
  # commit (backend recorded). Its bin/ is the engine's library (LLAMA_CPP_LIB_PATH) and the tools'; llama-quantize
  # is built after it in the same incremental tree. Without the history (no git here), the tree built directly.
  local bin="$G/tools/llama.cpp-0.3.36/bin" repo out tree
  mkdir -p "$bin"
  if [ -f "$G/done/repo" ]; then
    repo=$(python3 -c "from harness.llama_repo import REPO; print(REPO)")
    $SB env add llama.cpp --source "$repo" --ref b1 --name cuda-b1 --tools llama-bench,llama-server || return 1
    out=$(ls -d "$SILICONBENCH_BUILDS_DIR"/out/*/ | head -1); tree=$(ls -d "$SILICONBENCH_BUILDS_DIR"/trees/*/ | head -1)
    cat "$out/build.json"
    cmake --build "$tree/build" -j16 --target llama-quantize llama-imatrix || return 1
    cp -a "$out"/bin/. "$tree"/build/bin/llama-quantize "$tree"/build/bin/llama-imatrix "$bin/"
  else
    echo "no llama.cpp history: building the vendored tree directly (no build by commit, no bisection)"
    cmake -S "$G/llama/vendor/llama.cpp" -B "$G/llama/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=ON \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
    && cmake --build "$G/llama/build" -j16 --target llama llama-bench llama-perplexity llama-quantize llama-imatrix \
      llama-server && cp -a "$G/llama/build/bin"/. "$bin/"
  fi
}

mlx() {
  local deadline=$((SECONDS + 600))
  while [ ! -f "$G/part-b" ] || [ ! -f "$G/part-c" ]; do  # carried by the second call (wait.sh moves them here)
    [ $SECONDS -lt $deadline ] || { echo "mlx-cuda parts b/c never came"; return 1; }
    sleep 2
  done
  local whl=$G/$(cat .gpu/mlx-cuda.name 2>/dev/null || cat "$G/mlx-cuda.name")
  cat "$G/part-a" "$G/part-b" "$G/part-c" > "$whl"
  echo "$(cat "$G/mlx-cuda.sha256")  $whl" | sha256sum -c -
  # not --target: libmlx finds CUDA through the image's nvidia packages, relative to site-packages
  python3 -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check "$whl"
  python3 -c "import mlx.core as mx; print(mx.default_device(), 'cuda', mx.cuda.is_available()); assert mx.cuda.is_available()"
}

wait_build() {
  while [ ! -f "$G/done/build" ]; do
    [ -f "$G/failed/build" ] && { echo "the build failed"; return 1; }
    kill -0 "$(cat "$G/build.pid")" 2>/dev/null || { [ -f "$G/done/build" ] && break; echo "the build is not running"; return 1; }
    sleep 3
  done
  python3 -c "import llama_cpp; print('llama.cpp', llama_cpp.__version__, 'gpu offload', llama_cpp.llama_supports_gpu_offload())"
}

fidelity() {  # fidelity QUANT ENGINES ROUNDS [MODELS]: ours / llama-bench and / mlx_lm.benchmark, interleaved
  local name="fidelity-$1-${2//./}${4:+-${4#synthetic-}}"
  # FIDELITY_MODELS narrows the default pair (a short lease: the 1B shape alone, with model_8b and q4_8b skipped)
  python3 benchmarks/fidelity.py --models "${4:-${FIDELITY_MODELS:-synthetic-llama-3.2-1b,synthetic-llama-3-8b}}" --quant "$1" --engines "$2" \
    --rounds "$3" --reps 5 --prompt 512 --gen 128 --no-perplexity --json-out "$G/out/$name.json" 2>&1 | tee "$G/out/$name.log"
  return "${PIPESTATUS[0]}"
}

overhead() {  # per-token time outside the engine, before and after, on the GPU's fastest configuration
  for q in Q4_K_M F16; do
    python3 benchmarks/decode_overhead.py "$G/models/synthetic-llama-3.2-1b/gguf/synthetic-llama-3.2-1b-$q.gguf" \
      --rounds 7 --gen 256 || return 1
  done 2>&1 | tee "$G/out/decode-overhead.log"
}

mlx_prompt() {  # why n_prompt / ttft and mlx_lm's prompt_tps differ, region by region
  for d in "$G"/models/synthetic-llama-3.2-1b/mlx-*/; do
    python3 benchmarks/mlx_prompt_time.py "$d" --rounds 7 --prompt 512 || return 1
  done 2>&1 | tee "$G/out/mlx-prompt-time.log"
}

bisect() {  # a bisection on CUDA over the planted slowdown: each commit built incrementally in the same tree
  local repo; repo=$(python3 -c "from harness.llama_repo import REPO; print(REPO)")
  $SB regressions bisect examples/gpu-bisect.yaml --source "$repo" --good b1 --bad b4 2>&1 | tee "$G/out/bisect.log"
  $SB regressions bisections --format json > "$G/out/bisect.json"
  $SB env list --format json > "$G/out/envs.json"
  return "${PIPESTATUS[0]}"
}

sweep() {  # sweep FILE: run embedded (SQLite), keep the printed tables and every record as JSON
  local name; name=$(basename "$1" .yaml)
  $SB run "$1" 2>&1 | tee "$G/out/$name.log" && $SB results --format json > "$G/out/$name.json"
}

export G LOG SB FIDELITY_MODELS
export -f wheels llama_src repo build mlx wait_build fidelity overhead mlx_prompt bisect sweep
step llama_src llama_src
step wheels wheels
step repo repo
( step build build ) & echo $! > "$G/build.pid"   # ~5 min on 16 cores, beside what follows
step mlx mlx
step nvml python3 scripts/gpu/record_nvml.py "$G/out/nvml.json"
# the models' files and MLX forms while llama.cpp builds (unmeasured work); their GGUF quantizations after it
step model_1b $SB models make-synthetic --shape llama-3.2-1b --n-ctx 40960 --gguf ""
step model_8b $SB models make-synthetic --shape llama-3-8b --n-ctx 40960 --gguf ""
step wait_build wait_build
step q4_1b $SB models quantize synthetic-llama-3.2-1b --gguf Q4_K_M
step overhead overhead
step mlx_prompt mlx_prompt
step q4_8b $SB models quantize synthetic-llama-3-8b --gguf Q4_K_M
step fidelity_q4_llama fidelity q4 llama.cpp 6
step fidelity_q4_mlx fidelity q4 mlx 5 synthetic-llama-3.2-1b
step serve sweep examples/gpu-serve.yaml
step fidelity_full_llama fidelity full llama.cpp 6
step fidelity_full_mlx fidelity full mlx 5 synthetic-llama-3.2-1b
step bisect bisect
step fidelity_q4_mlx_8b fidelity q4 mlx 5 synthetic-llama-3-8b
touch "$G/done/ALL"
echo "== $(date +%T) pipeline finished" >> "$LOG"
