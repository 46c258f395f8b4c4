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
export PYTHONPATH="$G/llama:$REPO" LLAMA_CPP_LIB_PATH="$G/llama/build/bin" SILICONBENCH_LLAMA_TOOLS_DIR="$G/llama/build/bin"
export XDG_DATA_HOME="$G/xdg" SILICONBENCH_MODELS_DIR="$G/models" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
SB="python3 -m siliconbench.cli.main"
cd "$REPO"

step() {  # step NAME COMMAND...: run once; a failure is logged and marked, and the pipeline goes on
  local name=$1; shift
  [ -f "$G/done/$name" ] && return 0
  echo "== $(date +%T) $name" >> "$LOG"
  if "$@" >> "$LOG" 2>&1; then touch "$G/done/$name"; echo "== $(date +%T) $name: done" >> "$LOG"
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

build() {  # one CUDA build with shared libraries: the engine (LLAMA_CPP_LIB_PATH) and the tools alike
  cmake -S "$G/llama/vendor/llama.cpp" -B "$G/llama/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  && cmake --build "$G/llama/build" -j16 --target llama llama-bench llama-perplexity llama-quantize llama-imatrix
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

gpu_tests() {
  python3 -m pytest -m gpu tests/worker/test_gpu.py -p no:cacheprovider -q -o addopts="" -m gpu \
    --junitxml="$G/out/gpu-tests.xml" 2>&1 | tee "$G/out/gpu-tests.log"
  return "${PIPESTATUS[0]}"
}

fidelity() {  # fidelity QUANT ENGINES: ours / llama-bench and / mlx_lm.benchmark, interleaved, on the 1B shape
  python3 benchmarks/fidelity.py --models synthetic-llama-3.2-1b --quant "$1" --engines "$2" --rounds 3 --reps 5 \
    --prompt 512 --gen 128 --no-perplexity 2>&1 | tee "$G/out/fidelity-$1-${2//./}.log"
  return "${PIPESTATUS[0]}"
}

diagnose() {  # why a llama.cpp job's child crashed on CUDA (kept whatever it finds)
  python3 scripts/gpu/diagnose.py "$G/models/synthetic-llama-3.2-1b/gguf/synthetic-llama-3.2-1b-F16.gguf" "$G/out"
  bash scripts/gpu/backtrace.sh "$G/out/backtrace.txt"
  return 0
}

sweep() {  # sweep FILE: run embedded (SQLite), keep the printed tables and every record as JSON
  local name; name=$(basename "$1" .yaml)
  $SB run "$1" 2>&1 | tee "$G/out/$name.log" && $SB results --format json > "$G/out/$name.json"
}

shape_32b() {  # expected to be refused (disk): the refusal is the record
  $SB models make-synthetic --shape qwen2.5-32b 2>&1 | tee "$G/out/shape-32b.log"; return 0
}

step llama_src llama_src
( step build build ) & echo $! > "$G/build.pid"   # ~4 min on 16 cores, beside what follows
step wheels wheels
step mlx mlx
step nvml python3 scripts/gpu/record_nvml.py "$G/out/nvml.json"
# the models' files and MLX forms while llama.cpp builds (unmeasured work); their GGUF quantizations after it
step model_1b $SB models make-synthetic --shape llama-3.2-1b --n-ctx 40960 --gguf ""
step model_8b $SB models make-synthetic --shape llama-3-8b --n-ctx 40960 --gguf ""
step shape_32b shape_32b
step wait_build wait_build
step diagnose diagnose
step q4_1b $SB models quantize synthetic-llama-3.2-1b --gguf Q4_K_M
step q4_8b $SB models quantize synthetic-llama-3-8b --gguf Q4_K_M
step sizes sweep examples/gpu-sizes.yaml
step gpu_tests gpu_tests
step fidelity_q4_mlx fidelity q4 mlx
step fidelity_q4_llama fidelity q4 llama.cpp
step long_context sweep examples/gpu-long-context.yaml
step fidelity_full_mlx fidelity full mlx
step fidelity_full_llama fidelity full llama.cpp
touch "$G/done/ALL"
echo "== $(date +%T) pipeline finished" >> "$LOG"
