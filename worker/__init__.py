"""The worker: runs benchmark jobs on this machine, each in a fresh child process."""

from .engines.native import preload_cxx_runtime

# Before any module of this package can load an engine's native library (llama.cpp through llama-cpp-python):
# see worker/engines/native.py for the crash this prevents on CUDA builds.
preload_cxx_runtime()
