"""ShareGPT sampled as vLLM's ``bench serve`` samples it (vllm/benchmarks/datasets.py ``ShareGPTDataset``): each
conversation's first turn is the prompt and its second the reply whose token count is the request's output length;
a conversation of fewer than two turns is left out, and so is a pair ``is_valid_sequence`` refuses (a prompt or reply
under 4 tokens, a prompt over 1,024, prompt and reply over 2,048). A fixed output length (vLLM
``--sharegpt-output-len``; here an explicit ``max_tokens``) replaces the reply's and lifts the reply's minimum.
The file's order is kept (vLLM shuffles with its seed): the prompt file's digest already names the requests."""

from __future__ import annotations

from dataclasses import dataclass, field

MIN_LEN, MAX_PROMPT_LEN, MAX_TOTAL_LEN = 4, 1024, 2048  # vLLM's is_valid_sequence defaults


@dataclass(frozen=True)
class Ask:
    """One request: its messages and the output tokens it asks for."""

    messages: list[dict]
    max_tokens: int


@dataclass
class Sampled:
    asks: list[Ask] = field(default_factory=list)
    one_turn: int = 0
    too_short: int = 0
    too_long: int = 0

    def facts(self) -> dict:
        return {
            "sampling": "vllm sharegpt: first turn, output tokens of the first reply",
            "kept": len(self.asks),
            "left_out": {"fewer_than_two_turns": self.one_turn, "too_short": self.too_short, "too_long": self.too_long},
        }


def first_turns(conversations: list[list[dict]], tokenize, fixed_output: int | None, limit: int) -> Sampled:
    """The first ``limit`` requests vLLM would send from these conversations (see the module docstring): as vLLM,
    reading no further once that many are kept."""
    out = Sampled()
    for conv in conversations:
        if len(out.asks) >= limit:
            break
        if len(conv) < 2:
            out.one_turn += 1
            continue
        prompt, reply = conv[0]["content"], conv[1]["content"]
        n_prompt = len(tokenize(prompt))
        n_out = fixed_output if fixed_output is not None else len(tokenize(reply))
        if n_prompt < MIN_LEN or (fixed_output is None and n_out < MIN_LEN):
            out.too_short += 1
        elif n_prompt > MAX_PROMPT_LEN or n_prompt + n_out > MAX_TOTAL_LEN:
            out.too_long += 1
        else:
            out.asks.append(Ask([{"role": "user", "content": prompt}], n_out))
    return out
