"""A build served through its own llama-server: what the server workloads (serve, concurrent, restart) run on any
commit, whatever its ``llama.h``.

Those workloads need of the engine only a tokenizer (to cut corpus prompts, count a prompt against the context, ban
special tokens) and the build's ``llama-server`` (``siliconbench.worker.serving.servers``). The tokenizer is the
pinned llama-cpp-python's own library, loaded vocabulary-only: the build's library is never loaded into this process,
so no binding meets a header it does not match. The figures are the server's, and the result says so
(``engine_build.measured_by`` = ``llama-server``), keeping them apart from the binding's and llama-bench's.
"""

from __future__ import annotations

from pathlib import Path

from siliconbench.worker.builds.compile import Build
from siliconbench.worker.engines import get_engine

MEASURED_BY = "llama-server"


class ServedBuild:
    """Stands where an engine adapter stands for a server workload on a build: the wheel's vocabulary for the
    client's tokens, the build's facts for the result's Environment."""

    def __init__(self, build: Build, options: dict) -> None:
        self.build, self.options = build, dict(options)
        self.vocab = get_engine("llama.cpp")  # the wheel's own library: LLAMA_CPP_LIB_PATH is never set for it
        self.vocab.options = dict(options)

    def load_vocab(self, path: Path) -> None:
        self.vocab.load_vocab(path)

    def tokenize(self, text: str) -> list[int]:
        return self.vocab.tokenize(text)

    def detokenize(self, tokens: list[int]) -> str:
        return self.vocab.detokenize(tokens)

    def chat_template(self) -> str | None:
        return self.vocab.chat_template()

    def special_token_ids(self) -> set[int]:
        return self.vocab.special_token_ids()

    def vocab_size(self) -> int:
        return self.vocab.vocab_size()

    def describe(self) -> dict:
        offload = int(self.options.get("n_gpu_layers", -1)) != 0 and self.build.backend != "CPU"
        return {
            "packages": {},
            "engine_build": {"system_info": ""},
            "backend": self.build.backend if offload else "CPU",
            "engine_options": self.options,
            "dtypes": self.dtypes(),
        }

    def dtypes(self) -> dict[str, str]:
        return {"weights": "?", "activations": "f32", "kv_cache": self.options.get("type_k", "f16")}

    def memory_facts(self) -> dict:
        return {}

    def close(self) -> None:
        pass
