"""llama-perplexity's KL-divergence arithmetic (tools/perplexity/perplexity.cpp), row by row in numpy.

The base's log-probabilities are kept as llama.cpp keeps them in a ``--kl-divergence-base`` file: per position a
float scale, the float minimum log-prob (logits more than 16 below the maximum are clamped), and one uint16 per
vocabulary entry. Keeping the same quantization (not float32 log-probs) is what makes our mean KLD agree with
the tool's and the same-top-token count equal it: the base's top token is the argmax of those uint16 values.
Float32 where the tool computes in float, float64 where it accumulates in double.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PERCENTILES = (0.9, 0.99, 0.999)


@dataclass
class BaseRows:
    """The base model's log-probs of ``n`` positions, as llama-perplexity --kl-divergence-base writes them."""

    scale: np.ndarray  # (n,) float32
    min_log_prob: np.ndarray  # (n,) float32
    q: np.ndarray  # (n, vocab) uint16

    def __len__(self) -> int:
        return len(self.scale)

    def log_probs(self) -> np.ndarray:
        """(n, vocab) float32 log-probabilities as the tool decodes them: scale * q + min_log_prob."""
        return self.scale[:, None] * self.q.astype(np.float32) + self.min_log_prob[:, None]

    @staticmethod
    def concat(parts: list[BaseRows]) -> BaseRows:
        return BaseRows(
            np.concatenate([p.scale for p in parts]),
            np.concatenate([p.min_log_prob for p in parts]),
            np.concatenate([p.q for p in parts]),
        )


def _log_sum_exp(logits: np.ndarray, top: np.ndarray) -> np.ndarray:
    """float(log(double sum of expf(logit - max))), per row."""
    return np.log(np.exp(logits - top[:, None]).sum(axis=1, dtype=np.float64)).astype(np.float32)


def base_rows(logits: np.ndarray) -> BaseRows:
    """Encode (n, vocab) float32 logits as the tool's base file does (log_softmax with a uint16 output)."""
    logits = np.asarray(logits, dtype=np.float32)
    top = logits.max(axis=1)
    low = np.maximum(logits.min(axis=1), top - np.float32(16))
    lse = _log_sum_exp(logits, top)
    min_log_prob = (low - top - lse).astype(np.float32)
    scale = ((top - low) / np.float32(65535)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(scale > 0, np.float32(1) / scale, np.float32(0)).astype(np.float32)
    # nearest_int rounds half to even, as np.rint; logits at or below the clamp are 0
    q = np.rint(inv[:, None] * (logits - low[:, None]))
    q = np.where(logits > low[:, None], q, 0)
    return BaseRows(scale, min_log_prob, np.clip(q, 0, 65535).astype(np.uint16))


@dataclass
class RowStats:
    """Per scored position: KLD(base || model), whether both put the same token on top, and both NLLs."""

    kld: np.ndarray  # float64
    same_top: np.ndarray  # bool
    nll: np.ndarray  # float32, the model's NLL of the actual next token
    nll_base: np.ndarray  # float32, the base's


def compare(logits: np.ndarray, base: BaseRows, targets: np.ndarray) -> RowStats:
    """The tool's kl-divergence log_softmax for every row of ``logits`` against the same rows of ``base``."""
    logits = np.asarray(logits, dtype=np.float32)
    if logits.shape != base.q.shape:
        raise ValueError(f"logits {logits.shape} and the base's rows {base.q.shape} differ: not the same tokens")
    rows = np.arange(len(logits))
    imax = logits.argmax(axis=1)
    top = logits[rows, imax]
    lse = _log_sum_exp(logits, top)
    nll = (top + lse - logits[rows, targets]).astype(np.float32)
    p_log_base = base.log_probs()
    nll_base = -p_log_base[rows, targets]
    norm = (top + lse).astype(np.float32)
    terms = np.exp(p_log_base) * (p_log_base - logits + norm[:, None])  # float products, as the tool
    kld = np.where(p_log_base > np.float32(-16), terms, np.float32(0)).sum(axis=1, dtype=np.float64)
    return RowStats(kld, imax == p_log_base.argmax(axis=1), nll, nll_base)


def summary(stats: list[RowStats]) -> dict[str, float]:
    """The tool's 'KL divergence statistics' and 'Same top p', over every scored position."""
    kld = np.concatenate([s.kld for s in stats]).astype(np.float32)  # the tool keeps kld_values as float
    same = np.concatenate([s.same_top for s in stats])
    ordered = np.sort(kld)
    out = {
        "kld_mean": float(np.concatenate([s.kld for s in stats]).mean()),
        "kld_median": float(np.median(ordered)),
        "kld_max": float(ordered[-1]),
        "same_top_pct": 100.0 * float(same.mean()),
        "kld_positions": float(len(kld)),
        "same_top_count": float(same.sum()),
    }
    for f in PERCENTILES:
        out[f"kld_p{str(f)[2:].ljust(2, '0')}"] = percentile(ordered, f)
    return out


def percentile(ordered: np.ndarray, fraction: float) -> float:
    """llama-perplexity's percentile: linear between the two nearest of the sorted values (float fraction)."""
    p = float(np.float32(fraction)) * (len(ordered) - 1)
    i = int(p)
    p -= i
    return float((1 - p) * ordered[i] + p * ordered[min(i + 1, len(ordered) - 1)])
