"""Byte-level BPE vocabularies that both engines read the same way.

One `BpeVocab` is written both as a Hugging Face ``tokenizer.json`` (what mlx-lm loads) and as GGUF
tokenizer metadata (what llama.cpp loads). It comes either from training on the shipped corpus
(`BpeVocab.train`, for the tiny models) or from a GGUF file's metadata (`BpeVocab.from_gguf`, for
SmolLM2), so the two engines always see one vocabulary, one merge list and one pre-tokenizer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from siliconbench.contract.errors import UserError

CORPUS_PATH = Path(__file__).resolve().parents[1] / "data" / "corpus.txt"
BOS, EOS = "<|bos|>", "<|eos|>"
# Plain role-prefixed template: llama-cpp-python renders GGUF templates with Jinja2 as mlx-lm does.
TINY_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] + ': ' + message['content'] + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'assistant: ' }}{% endif %}"
)
# llama.cpp pre-tokenizer names we can mirror exactly with `tokenizers` (see llama-vocab.cpp):
# "gpt-2" is the GPT-2 regex; "smollm" splits digits one by one first, then applies the same regex.
SUPPORTED_PRE = ("gpt-2", "smollm")
TOKEN_TYPE_NORMAL, TOKEN_TYPE_CONTROL = 1, 3


@dataclass
class BpeVocab:
    """Everything that defines a GPT-2-style byte-level BPE tokenizer, engine-neutral."""

    tokens: list[str]  # byte-level token strings ("Ġthe"), indexed by id
    merges: list[str]  # "a b", highest priority first
    control_ids: list[int]  # special tokens, never produced by splitting text
    bos_id: int
    eos_id: int
    pre: str = "gpt-2"
    add_bos: bool = True
    pad_id: int | None = None
    unk_id: int | None = None
    chat_template: str | None = None

    @classmethod
    def train(cls, vocab_size: int = 4096, corpus: Path = CORPUS_PATH) -> BpeVocab:
        """Train on `corpus` (deterministic: same corpus and size give the same vocabulary)."""
        from tokenizers import (  # optional (comes with mlx-lm): only making a model needs it
            Tokenizer,
            models,
            pre_tokenizers,
            trainers,
        )

        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=1,  # the ~130 KB corpus supports ~6,900 tokens at most
            special_tokens=[BOS, EOS],  # ids 0 and 1
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte encodable
            show_progress=False,
        )
        tok.train([str(corpus)], trainer)
        model = json.loads(tok.to_str())["model"]
        tokens = [t for t, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])]
        if len(tokens) < vocab_size:
            raise UserError(
                "vocab_size", f"the corpus {corpus} supports at most {len(tokens)} tokens, not {vocab_size}."
            )
        merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
        return cls(
            tokens=tokens, merges=merges, control_ids=[0, 1], bos_id=0, eos_id=1, chat_template=TINY_CHAT_TEMPLATE
        )

    @classmethod
    def from_gguf(cls, reader) -> BpeVocab:
        """Rebuild from a `gguf.GGUFReader`'s ``tokenizer.ggml.*`` metadata (gpt2-type models only)."""

        def field(key: str, default=None):
            f = reader.fields.get(key)
            return default if f is None else f.contents()

        model, pre = field("tokenizer.ggml.model"), field("tokenizer.ggml.pre", "default")
        if model != "gpt2" or pre not in SUPPORTED_PRE:
            raise UserError(
                "model",
                f"GGUF tokenizer {model!r}/{pre!r} is not supported; "
                f"only gpt2 with pre-tokenizer {' or '.join(SUPPORTED_PRE)}.",
            )
        types = field("tokenizer.ggml.token_type")
        return cls(
            tokens=list(field("tokenizer.ggml.tokens")),
            merges=list(field("tokenizer.ggml.merges")),
            control_ids=[i for i, t in enumerate(types) if t == TOKEN_TYPE_CONTROL],
            bos_id=int(field("tokenizer.ggml.bos_token_id")),
            eos_id=int(field("tokenizer.ggml.eos_token_id")),
            pre=pre,
            add_bos=bool(field("tokenizer.ggml.add_bos_token", False)),
            pad_id=field("tokenizer.ggml.padding_token_id"),
            unk_id=field("tokenizer.ggml.unknown_token_id"),
            chat_template=field("tokenizer.chat_template"),
        )

    @classmethod
    def from_hf_dir(cls, folder: Path) -> BpeVocab:
        """Rebuild from a Hugging Face folder's ``tokenizer.json`` (byte-level BPE with the GPT-2 or SmolLM
        pre-tokenizer only: the two llama.cpp pre-tokenizers `to_hf` mirrors exactly)."""
        path = folder / "tokenizer.json"
        if not path.is_file():
            raise UserError(
                "--convert",
                f"{folder} has no tokenizer.json (a sentencepiece tokenizer.model is not "
                "supported here: convert with llama.cpp's convert_hf_to_gguf.py).",
            )
        tj = json.loads(path.read_text(encoding="utf-8"))
        model = tj.get("model") or {}
        pre = _pre_name(tj.get("pre_tokenizer"))
        if model.get("type") != "BPE" or pre is None:
            raise UserError(
                "--convert",
                f"{folder}: tokenizer {model.get('type')!r} with pre-tokenizer "
                f"{(tj.get('pre_tokenizer') or {}).get('type')!r} is not one this converter writes "
                f"(byte-level BPE, pre-tokenizer {' or '.join(SUPPORTED_PRE)}); convert with "
                "llama.cpp's convert_hf_to_gguf.py and add the GGUF.",
            )
        vocab = model["vocab"]
        tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
        for added in tj.get("added_tokens") or []:
            while len(tokens) <= added["id"]:
                tokens.append(f"<|unused{len(tokens)}|>")
            tokens[added["id"]] = added["content"]
        control = sorted(a["id"] for a in tj.get("added_tokens") or [] if a.get("special"))
        cfg_path, tcfg_path = folder / "config.json", folder / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}
        tcfg = json.loads(tcfg_path.read_text()) if tcfg_path.is_file() else {}
        ids = {t: i for i, t in enumerate(tokens)}

        def special(name: str) -> int | None:
            tok = tcfg.get(f"{name}_token")
            tok = tok.get("content") if isinstance(tok, dict) else tok
            return ids.get(tok) if tok is not None else cfg.get(f"{name}_token_id")

        bos, eos = special("bos"), special("eos")
        if bos is None or eos is None:
            raise UserError("--convert", f"{folder}: no BOS/EOS token in tokenizer_config.json or config.json.")
        merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
        return cls(
            tokens=tokens,
            merges=merges,
            control_ids=control,
            bos_id=int(bos),
            eos_id=int(eos),
            pre=pre,
            add_bos=bool(tcfg.get("add_bos_token", False)),
            pad_id=special("pad"),
            unk_id=special("unk"),
            chat_template=tcfg.get("chat_template") if isinstance(tcfg.get("chat_template"), str) else None,
        )

    def __len__(self) -> int:
        return len(self.tokens)

    def to_hf(self):
        """A `tokenizers.Tokenizer` equivalent to llama.cpp's reading of the same vocabulary."""
        from tokenizers import (  # optional (comes with mlx-lm): only making a model needs it
            AddedToken,
            Tokenizer,
            decoders,
            models,
            pre_tokenizers,
            processors,
        )

        vocab = {t: i for i, t in enumerate(self.tokens)}
        merges = [tuple(m.split(" ", 1)) for m in self.merges]
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        if self.pre == "smollm":
            tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        else:
            tok.pre_tokenizer = byte_level
        tok.decoder = decoders.ByteLevel()
        post = [processors.ByteLevel(trim_offsets=False)]
        if self.add_bos:  # llama.cpp prepends BOS when add_bos_token is set; mirror it
            bos = self.tokens[self.bos_id]
            post.append(
                processors.TemplateProcessing(
                    single=f"{bos} $A", pair=f"{bos} $A $B:1", special_tokens=[(bos, self.bos_id)]
                )
            )
        tok.post_processor = processors.Sequence(post)
        tok.add_special_tokens([AddedToken(self.tokens[i], special=True, normalized=False) for i in self.control_ids])
        return tok

    def write_hf(self, out_dir: Path, *, model_max_length: int) -> None:
        """Write ``tokenizer.json`` and ``tokenizer_config.json`` into an HF/MLX model directory."""
        out_dir.mkdir(parents=True, exist_ok=True)
        self.to_hf().save(str(out_dir / "tokenizer.json"))
        name = lambda i: None if i is None else self.tokens[i]  # noqa: E731
        config = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": name(self.bos_id),
            "eos_token": name(self.eos_id),
            "pad_token": name(self.pad_id),
            "unk_token": name(self.unk_id),
            "add_bos_token": self.add_bos,
            "add_eos_token": False,
            # llama-cpp-python detokenizes piece by piece with no clean-up; match it
            "clean_up_tokenization_spaces": False,
            "model_max_length": model_max_length,
        }
        if self.chat_template:
            config["chat_template"] = self.chat_template
        config = {k: v for k, v in config.items() if v is not None}
        (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")

    def add_to_gguf(self, writer) -> None:
        """Add the ``tokenizer.ggml.*`` keys to a `gguf.GGUFWriter`."""
        control = set(self.control_ids)
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre(self.pre)
        writer.add_token_list(self.tokens)
        writer.add_token_types(
            [TOKEN_TYPE_CONTROL if i in control else TOKEN_TYPE_NORMAL for i in range(len(self.tokens))]
        )
        writer.add_token_merges(self.merges)
        writer.add_bos_token_id(self.bos_id)
        writer.add_eos_token_id(self.eos_id)
        if self.pad_id is not None:
            writer.add_pad_token_id(self.pad_id)
        if self.unk_id is not None:
            writer.add_unk_token_id(self.unk_id)
        writer.add_add_bos_token(self.add_bos)
        writer.add_add_eos_token(False)
        if self.chat_template:
            writer.add_chat_template(self.chat_template)


# The split regex of Qwen2's (and Qwen3's) tokenizer.json, which llama.cpp knows as pre-tokenizer "qwen2".
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _pre_name(pre: dict | None) -> str | None:
    """llama.cpp's name for a tokenizer.json pre-tokenizer: one `to_hf` writes back the same way (gpt-2, smollm), or
    Qwen2's split-then-bytes (qwen2: read for a GGUF's metadata, where llama.cpp applies its own copy of the regex)."""
    if not pre:
        return None
    parts = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else []
    if [p.get("type") for p in parts] == ["Split", "ByteLevel"]:
        split, level = parts
        if (split.get("pattern") or {}).get("Regex") == QWEN2_SPLIT and not level.get("use_regex", True):
            return "qwen2"
    if pre.get("type") == "ByteLevel":
        return "gpt-2"
    if pre.get("type") == "Sequence":
        kinds = [(p.get("type"), p.get("individual_digits")) for p in pre.get("pretokenizers", [])]
        if kinds == [("Digits", True), ("ByteLevel", None)]:
            return "smollm"
    return None
