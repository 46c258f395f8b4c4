"""Model manifests written by hand for the spec tests."""

from __future__ import annotations

from siliconbench.contract.manifest import Artifact, ModelManifest


def _manifest(name: str, n_ctx: int = 4096, escape: bool = False) -> ModelManifest:
    arts = [
        Artifact(format="gguf", quant="F16", level="full", path="gguf/m-F16.gguf", size_bytes=1, sha256="a" * 64),
        Artifact(
            format="gguf",
            quant="Q4_K_M",
            level="q4",
            path="../../outside.gguf" if escape else "gguf/m-Q4_K_M.gguf",
            size_bytes=1,
            sha256="b" * 64,
        ),
        Artifact(format="mlx", quant="f32", level="full", path="mlx-f32", size_bytes=1, sha256="c" * 64),
        Artifact(format="mlx", quant="4bit", level="q4", path="mlx-4bit", size_bytes=1, sha256="d" * 64),
    ]
    return ModelManifest(
        name=name,
        params=1000,
        n_ctx=n_ctx,
        hidden_size=8,
        n_layers=1,
        n_heads=1,
        n_kv_heads=1,
        vocab_size=10,
        source="test",
        artifacts=arts,
    )
