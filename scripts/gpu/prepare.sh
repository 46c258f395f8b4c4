#!/usr/bin/env bash
# Here (a machine with the package index): everything a lent CUDA machine, which reaches no index, needs, in
# .gpu/ (ignored by git). Idempotent.
#   .gpu/llama.tgz       llama-cpp-python's sdist, slimmed (no .git, docs, models, media, CI, tests): ~12 MB
#   .gpu/wheels/         the project's Python dependencies the device image lacks (cp312 wheels)
#   .gpu/part-a, -b, -c  mlx-cuda-13 (90 MB) in three parts of at most 36 MiB: one call may carry 64 MiB in all
# Then: scripts/gpu/README.md says which call carries what.
set -euo pipefail
cd "$(dirname "$0")/../.."
LLAMA_VERSION=0.3.36 MLX_VERSION=0.32.4 MLX_LM_VERSION=0.32.2
OUT=.gpu
mkdir -p "$OUT/wheels"
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
PIP="python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_35_x86_64 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"

if [ ! -f "$OUT/llama.tgz" ]; then
  tmp=$(mktemp -d)
  sdist=${SILICONBENCH_TOOLS_CACHE:-$HOME/.cache/siliconbench/tools}/llama_cpp_python-$LLAMA_VERSION.tar.gz
  [ -f "$sdist" ] || python3 -m pip download -q --no-deps --no-binary :all: -d "$tmp" "llama-cpp-python==$LLAMA_VERSION"
  [ -f "$sdist" ] || sdist=$tmp/llama_cpp_python-$LLAMA_VERSION.tar.gz
  tar -xzf "$sdist" -C "$tmp"
  src=$tmp/llama_cpp_python-$LLAMA_VERSION
  rm -rf "$src"/{.git,docs,examples,tests,docker,.github}
  (cd "$src/vendor/llama.cpp" && rm -rf models docs media .github .devops ci benches skills .git)
  tar -czf "$OUT/llama.tgz" -C "$tmp" "llama_cpp_python-$LLAMA_VERSION"
  rm -rf "$tmp"
fi
# What the image lacks of what siliconbench imports (KINDS.md lists the image's packages), without their deps:
# each dependency is named here, so nothing else is pulled in.
$PIP --no-deps -d "$OUT/wheels" \
  "pydantic>=2.10,<3" pydantic-core annotated-types typing-inspection "pydantic-settings>=2.6,<3" python-dotenv \
  "sqlalchemy==2.1.9" "alembic>=1.14,<2" mako "celery==5.7.0" kombu billiard vine amqp redis click-didyoumean \
  click-plugins click-repl prompt-toolkit wcwidth tzlocal diskcache "gguf==0.19.0" \
  "mlx==$MLX_VERSION" "mlx-lm==$MLX_LM_VERSION" 2>&1 | grep -v "^WARNING: Location" >&2 || true
if [ ! -f "$OUT/part-c" ]; then
  tmp=$(mktemp -d)
  $PIP --no-deps -d "$tmp" "mlx-cuda-13==$MLX_VERSION" 2>&1 | grep -v "^WARNING: Location" >&2 || true
  whl=$(ls "$tmp"/mlx_cuda_13-*.whl)
  basename "$whl" > "$OUT/mlx-cuda.name"
  split -b 36M "$whl" "$OUT/part-"
  mv "$OUT/part-aa" "$OUT/part-a" && mv "$OUT/part-ab" "$OUT/part-b" && mv "$OUT/part-ac" "$OUT/part-c"
  sha256sum "$whl" | cut -d' ' -f1 > "$OUT/mlx-cuda.sha256"
  rm -rf "$tmp"
fi
du -sh "$OUT"/* >&2
