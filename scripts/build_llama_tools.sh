#!/usr/bin/env bash
# Build llama.cpp's own tools (llama-bench, llama-perplexity, llama-imatrix, llama-quantize, llama-server) from the very llama.cpp tree that the pinned
# llama-cpp-python sdist vendors, once, into a cache beside the wheel cache. These are the yardstick of
# benchmarks/fidelity.py and of the registry's equivalence tests: same commit as the engine we measure.
#
#   scripts/build_llama_tools.sh            # prints the bin folder; builds only if it is not there yet
#
# ~7 min on 2 cores, then instant. CPU build here (GGML_NATIVE=OFF, as the wheel); on a Mac, Metal is
# llama.cpp's default and the same command builds it with Metal.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_VERSION=${LLAMA_VERSION:-0.3.36}
CACHE=${SILICONBENCH_TOOLS_CACHE:-$HOME/.cache/siliconbench/tools}
OUT="$CACHE/llama.cpp-$LLAMA_VERSION"
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3

say() { printf '\033[1m[llama-tools]\033[0m %s\n' "$*" >&2; }

TOOLS=(llama-bench llama-perplexity llama-imatrix llama-quantize llama-server)
have=1; for t in "${TOOLS[@]}"; do [ -x "$OUT/bin/$t" ] || have=0; done
if [ "$have" = 1 ]; then
  echo "$OUT/bin"; exit 0
fi

mkdir -p "$CACHE"
SDIST=$(ls "$CACHE"/llama_cpp_python-"$LLAMA_VERSION".tar.gz 2>/dev/null || true)
if [ -z "$SDIST" ]; then
  say "downloading the llama-cpp-python $LLAMA_VERSION sdist (it vendors llama.cpp)"
  "$PY" -m pip download --disable-pip-version-check -q --no-deps --no-binary :all: \
    -d "$CACHE" "llama-cpp-python==$LLAMA_VERSION" 2>&1 | grep -v '^WARNING: Location' >&2 || true
  SDIST=$(ls "$CACHE"/llama_cpp_python-"$LLAMA_VERSION".tar.gz)
fi

SRC="$CACHE/src-$LLAMA_VERSION"
rm -rf "$SRC" && mkdir -p "$SRC"
tar -xzf "$SDIST" -C "$SRC" --strip-components=1
TREE="$SRC/vendor/llama.cpp"
say "building ${TOOLS[*]} from $TREE (~8 min on 2 cores, once)"
ARGS=(-DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
      -DLLAMA_BUILD_SERVER=ON -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF -DCMAKE_BUILD_TYPE=Release)
cmake -S "$TREE" -B "$SRC/build" "${ARGS[@]}" >/dev/null
cmake --build "$SRC/build" --target "${TOOLS[@]}" -j"$(nproc)" >/dev/null
mkdir -p "$OUT/bin"
for t in "${TOOLS[@]}"; do cp "$SRC/build/bin/$t" "$OUT/bin/"; done
# Keep the vendored source (what a timed region contains is read there); drop the build tree.
rm -rf "$OUT/src" && mv "$TREE" "$OUT/src"
rm -rf "$SRC"
say "built into $OUT/bin"
echo "$OUT/bin"
