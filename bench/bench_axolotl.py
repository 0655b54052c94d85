"""Benchmark: Axolotl 0.21 with and without fastaxo's plugin, on one tokenized dataset, in one run.

    cd / && /work/venv-bench/bin/python /work/main/bench/bench_axolotl.py            # 100k rows
    cd / && /work/venv-bench/bin/python /work/main/bench/bench_axolotl.py --quick    # smoke run
    ... --rows 200000 --reps 7 --skip-e2e

Run it with cwd=/ (or anywhere outside the repo root) so `import fastaxo` is the installed
package with its compiled extension (checked: FASTAXO_REQUIRE_EXTENSION=1, and fastaxo.__file__
must not be in the source tree). Needs real axolotl (bench/setup_env.sh). Fully offline; every
file (data, tokenizer, model, HF caches, Axolotl's prepared datasets) lives in a temp dir.

Data: N rows (--rows) of generated tokenized chat-like rows, seeded: lengths lognormal (mean
~300 tokens, sigma 0.8) clipped to [8, sequence_len], token ids within the tiny tokenizer's
vocabulary, labels = input_ids with a prompt prefix (20-60%) set to -100, attention_mask ones,
and round(0.1 N) planted exact duplicates (copies of random unique rows, every column equal).
Written to one Parquet file (list<int64> columns input_ids, attention_mask, labels), which
Axolotl loads as already tokenized. In-process the dataset goes through Axolotl's own steps
in Axolotl's order (utils/data/sft.py _load_raw_datasets): datasets.load_dataset("parquet"),
Dataset.shuffle(seed=42) (merge_datasets), handle_long_seq_in_dataset,
process_datasets_for_packing (adds position_ids, length). That is the dataset Axolotl dedupes.

Sections:
  e2e      (first, unless --skip-e2e) real `axolotl preprocess` then `axolotl train
           --launcher python` (max_steps --max-steps), tiny random Llama on CPU, the CPU config of
           Axolotl on CPU (sdpa, sample_packing, dataset_exact_deduplication,
           sequence_len 2048, micro_batch_size 2, dataset_num_proc 1, ...), twice: Axolotl alone
           (with a recording plugin, written into the temp dir, that wraps pack_parallel and
           _deduplicate_dataset: it saves every call's lengths array and arguments and times
           Axolotl's own calls) and with `plugins: [fastaxo.integrations.axolotl.FastaxoPlugin]`
           + fastaxo_report. --e2e-reps runs of both (default 3), interleaved (preprocess A,
           preprocess B, train B, train A; B first in odd runs), each with its own HF cache and
           prepared path. Wall time per subprocess; dedupe and pack seconds from the report; their
           share of preprocess + train wall time, median over the runs. Checks: every prepared
           dataset is identical (rows and order) to the in-process Axolotl dedupe output below;
           the logged training losses of each pair are identical.
  dedupe   `axolotl.utils.data.utils.deduplicate_and_log_datasets(dataset=ds)` as Axolotl calls it,
           without and with `fastaxo.integrations.axolotl.patched(parts=("dedupe",))`,
           interleaved (Axolotl in the first --ax-dedupe-reps rounds only: it is slow), medians;
           outputs compared as Arrow tables (same rows, same order). Two inputs: the
           sample-packing dataset above (Axolotl's map() has flattened the shuffle's indices
           mapping by then) and the shuffled + length-filtered dataset before the packing columns
           (what dedupe sees with sample_packing off: it still has an indices mapping). Where the
           time goes: Axolotl's per-row costs (Arrow -> dict iteration, str(row), sha256) on the
           first --breakdown-rows rows, fastaxo's column check / hash / select.
  pack     every pack_parallel call of a real train start (the recorded calls of the e2e train
           run; with --skip-e2e an in-process simulation of the same sampler constructions:
           calculate_total_num_steps' sampler len(), the trainer's sampler len() and first
           epoch), replayed with Axolotl's own pack_parallel (numba; its JIT compile measured
           on its own, first call, and excluded) and with
           `fastaxo.integrations.axolotl.make_pack_parallel(original)`, same arguments,
           interleaved per call, --reps rounds, Python's cyclic GC paused in the timed calls;
           outputs compared as lists. fastaxo's time split
           into the kernel (fastaxo.pack_bins) and Bins.to_list() (the list[list[int]] the
           pack_parallel contract requires).
  collate  one epoch of micro-batches from Axolotl's MultipackBatchSampler built as the trainer
           builds it for sdpa (multipack_real_batches: micro_batch_size bins per batch, bins of
           sequence_len; parameters read from the e2e trainer where it ran), rows fetched as
           Axolotl's patched DataLoader fetcher does (Dataset.__getitems__(bin) per bin; timed on
           its own, same for both), then each micro-batch collated by
           V2BatchSamplerDataCollatorForSeq2Seq and by FastaxoCollator with the same arguments
           (tokenizer, padding=True, pad_to_multiple_of=ceil64(sequence_len), return_tensors="pt"),
           --collate-reps times each, interleaved per batch (order alternating); epoch time =
           sum of per-batch medians; every tensor compared (torch.equal, dtype, shape). Two
           cases: attention_mask dropped (Axolotl 0.21's sdpa default) and kept (segment ids).
  chat     Axolotl's ChatTemplateStrategy.tokenize_prompt without and with
           `patched(parts=("chat_template",))` on the same batches of generated conversations,
           template x turns (Qwen3's own, chatml, llama3; 2 to 256 turns), interleaved, rows
           compared; --chat-e2e adds real `axolotl preprocess` runs of a 64-turn chat dataset
           with and without the plugin (bench/_bench_chat.py has the details).
           `--sections chat` runs it alone (no tokenized dataset, no e2e train runs).
  text     Axolotl's completion / pretrain strategies (through Dataset.map, as
           TokenizedPromptDataset runs them) and encode_streaming without and with
           `patched(parts=("completion",))`, on --text-mb MB each of English, code and
           multilingual text, Qwen3's and Llama 3.2's tokenizers, interleaved, CPU time and wall
           medians, outputs compared (bench/_bench_text.py has the details). `--sections text`
           (or `chat,text`) runs it alone like chat.

Output: a text report (stdout and <--out>.txt) and one JSON record per result (<--out>.jsonl),
default bench/results/bench_axolotl.{txt,jsonl}. Peak memory = VmHWM over the RSS before the
call (reset through /proc/self/clear_refs, after gc + malloc_trim).
"""

from __future__ import annotations

import argparse
import contextlib
import filecmp
import gc
import hashlib
import importlib.metadata as md
import json
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from _common import JsonRecorder, fmt_table, machine, release_freed_memory, reset_peak, status_kib  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
import axolotl_harness as H  # noqa: E402  (the tests' tokenizer, model and offline env)

OFFLINE_ENV = {
    **H.OFFLINE_ENV,
    "TOKENIZERS_PARALLELISM": "false",
    "TRL_EXPERIMENTAL_SILENCE": "1",
    "FASTAXO_REQUIRE_EXTENSION": "1",
}
PLUGIN = "fastaxo.integrations.axolotl.FastaxoPlugin"
RECORDER = "_fastaxo_bench_recorder.PackRecorder"
TARGETS = {"dedupe": 300.0, "pack": 100.0, "collate": 5.0, "share_pct": 2.0}
PAD = H.PAD

NOTES: list[str] = []
SECTIONS: list[tuple[str, float, float, float]] = []  # (name, seconds, loadavg at start, at end)


class section:
    """Times a section and records the 1-minute load average at its start and end (shared machine)."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.t0, self.l0 = time.perf_counter(), os.getloadavg()[0]
        log(f"== {self.name} (loadavg {self.l0:.2f})")
        return self

    def __exit__(self, *exc):
        SECTIONS.append((self.name, time.perf_counter() - self.t0, self.l0, os.getloadavg()[0]))
        return False


def log(msg: str) -> None:
    print(f"[bench_axolotl {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def note(msg: str) -> None:
    NOTES.append(msg)
    log("NOTE: " + msg)


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def fs(t: float) -> str:
    """seconds, 3 significant-ish digits"""
    if t != t:
        return "-"
    if t >= 100:
        return f"{t:,.0f} s"
    if t >= 10:
        return f"{t:.1f} s"
    if t >= 1:
        return f"{t:.2f} s"
    if t >= 0.01:
        return f"{t * 1e3:.0f} ms"
    return f"{t * 1e3:.2f} ms"


def fx_(r: float | None) -> str:
    return "-" if r is None or r != r else (f"{r:,.0f}x" if r >= 100 else f"{r:.1f}x")


def yesno(b: bool | None) -> str:
    return "-" if b is None else ("yes" if b else "NO")


# ------------------------------------------------------------------------------------ context


def git_info() -> dict[str, Any]:
    def run(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True, timeout=30).stdout
        except Exception as exc:  # pragma: no cover
            return f"? ({exc})"

    status = [l for l in run("status", "--porcelain").splitlines() if l.strip()]  # "XY path": keep the columns
    return {"commit": run("rev-parse", "--short", "HEAD").strip(), "dirty": bool(status), "dirty_paths": status}


def installed_vs_tree(fastaxo_mod: Any) -> list[str]:
    """Python files of the installed fastaxo that differ from the working tree (or are missing)."""
    inst = Path(fastaxo_mod.__file__).parent
    tree = REPO / "fastaxo"
    out = []
    for p in sorted(tree.rglob("*.py")):
        rel = p.relative_to(tree)
        q = inst / rel
        if not q.exists():
            out.append(f"{rel} (not installed)")
        elif not filecmp.cmp(p, q, shallow=False):
            out.append(str(rel))
    return out


def versions() -> dict[str, str]:
    out = {}
    for name in ("axolotl", "fastaxo", "torch", "transformers", "datasets", "accelerate", "numba", "numpy",
                 "pyarrow", "tokenizers"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "-"
    return out


# ------------------------------------------------------------------------------------ data


def make_table(n: int, seq_len: int, vocab: int, seed: int, dup_fraction: float = 0.1, mean: float = 300.0,
               sigma: float = 0.8, min_len: int = 8):
    """The generated tokenized rows as a pyarrow Table (see the module docstring)."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    n_dup = int(round(n * dup_fraction))
    n_unique = n - n_dup
    base = vocab - 4
    if n_unique > base ** 3:
        raise ValueError("too many unique rows for the 3-token row number")
    mu = math.log(mean) - sigma ** 2 / 2
    lens = np.clip(np.round(rng.lognormal(mu, sigma, n_unique)), min_len, seq_len).astype(np.int64)
    off = np.zeros(n_unique + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    ids = rng.integers(4, vocab, size=int(off[-1]), dtype=np.int64)
    i = np.arange(n_unique, dtype=np.int64)
    ids[off[:-1]] = 1  # BOS
    ids[off[:-1] + 1] = 4 + (i // (base * base)) % base  # the row number: unique rows differ
    ids[off[:-1] + 2] = 4 + (i // base) % base
    ids[off[:-1] + 3] = 4 + i % base
    ids[off[1:] - 1] = 2  # EOS
    n_prompt = np.clip(np.round(lens * rng.uniform(0.2, 0.6, n_unique)).astype(np.int64), 1, lens - 1)
    labels = ids.copy()
    pos = np.arange(int(off[-1]), dtype=np.int64) - np.repeat(off[:-1], lens)
    labels[pos < np.repeat(n_prompt, lens)] = -100
    src = rng.integers(0, n_unique, size=n_dup)
    order = rng.permutation(np.concatenate([i, src]))
    olens = lens[order]
    ooff = np.zeros(n + 1, np.int64)
    np.cumsum(olens, out=ooff[1:])
    take = np.repeat(off[:-1][order], olens) + (np.arange(int(ooff[-1]), dtype=np.int64) - np.repeat(ooff[:-1], olens))
    offs = pa.array(ooff.astype(np.int32))

    def col(values):
        return pa.ListArray.from_arrays(offs, pa.array(values))

    table = pa.table({"input_ids": col(ids[take]), "attention_mask": col(np.ones(len(take), np.int64)),
                      "labels": col(labels[take])})
    return table, {"rows": n, "unique": n_unique, "duplicates": n_dup, "tokens": int(ooff[-1]),
                   "mean_len": float(olens.mean()), "median_len": float(np.median(olens)),
                   "max_len": int(olens.max()), "min_len": int(olens.min())}


def make_tokenizer_and_model(dir: Path, seq_len: int) -> tuple[Any, str]:
    """The tests' tiny byte-level BPE and random Llama (tests/axolotl_harness.py)."""
    tok = H.make_tokenizer(dir)
    H.make_model(dir, tok, max_position_embeddings=seq_len)
    return tok, "tests/axolotl_harness.py make_tokenizer/make_model"


# ------------------------------------------------------------------------------------ e2e

RECORDER_SRC = r'''"""Written by bench/bench_axolotl.py into its temp dir: records Axolotl's own pack_parallel and
_deduplicate_dataset calls in a real run (arguments, wall time, caller) and the trainer's packing
parameters; changes nothing else."""
import functools, json, os, time, traceback
import numpy as np
from axolotl.integrations.base import BasePlugin

OUT = os.environ["FASTAXO_BENCH_RECORD_DIR"]
_KEEP = {"calculate_total_num_steps", "_create_multipack_sampler", "_get_train_sampler", "get_train_dataloader",
         "__len__", "__iter__", "efficiency", "generate_batches", "_inner_training_loop", "load_datasets",
         "_prepare_standard_dataset", "_load_raw_datasets", "set_epoch"}


def _log(rec):
    with open(os.path.join(OUT, "calls.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")


def _caller():
    return [f"{os.path.basename(f.filename)}:{f.name}" for f in traceback.extract_stack()[:-2] if f.name in _KEEP]


class PackRecorder(BasePlugin):
    def register(self, cfg):
        import axolotl.utils.data.utils as du
        import axolotl.utils.samplers.multipack as mp

        pp, dd = mp.pack_parallel, du._deduplicate_dataset
        n = [0]

        @functools.wraps(pp)
        def pack_parallel(sequence_lengths, bin_capacity, group_size, bin_size, num_processes=None,
                          safe_mode=True, mp_start_method="fork"):
            t0 = time.perf_counter()
            out = pp(sequence_lengths, bin_capacity, group_size, bin_size, num_processes, safe_mode, mp_start_method)
            dt = time.perf_counter() - t0
            k = n[0]
            n[0] += 1
            arr = np.asarray(sequence_lengths)
            name = f"pack_{os.getpid()}_{k:03d}.npy"
            np.save(os.path.join(OUT, name), arr)
            _log({"event": "pack_parallel", "pid": os.getpid(), "k": k, "file": name, "n": int(arr.size),
                  "dtype": str(arr.dtype), "bin_capacity": int(bin_capacity), "group_size": int(group_size),
                  "bin_size": int(bin_size), "num_processes": num_processes, "safe_mode": bool(safe_mode),
                  "mp_start_method": mp_start_method, "bins": len(out), "seconds": dt, "time": time.time(),
                  "caller": _caller()})
            return out

        @functools.wraps(dd)
        def _deduplicate_dataset(dataset, seen_hashes=None):
            t0 = time.perf_counter()
            out = dd(dataset, seen_hashes)
            _log({"event": "dedupe", "pid": os.getpid(), "rows_in": len(dataset), "rows_kept": len(out[0]),
                  "seconds": time.perf_counter() - t0, "time": time.time(), "caller": _caller()})
            return out

        gb = mp.MultipackBatchSampler.generate_batches

        @functools.wraps(gb)
        def generate_batches(self, set_stats=False):
            cached = self._batches is not None
            t0 = time.perf_counter()
            out = gb(self, set_stats)
            if not cached:
                _log({"event": "generate_batches", "pid": os.getpid(), "seconds": time.perf_counter() - t0,
                      "batches": len(out), "time": time.time(), "caller": _caller()})
            return out

        mp.pack_parallel = pack_parallel
        mp.MultipackBatchSampler.generate_batches = generate_batches
        du._deduplicate_dataset = _deduplicate_dataset
        _log({"event": "register", "pid": os.getpid(), "time": time.time()})

    def post_trainer_create(self, cfg, trainer):
        a, dc, ds = trainer.args, trainer.data_collator, trainer.train_dataset
        _log({"event": "trainer", "pid": os.getpid(), "time": time.time(),
              "multipack_real_batches": getattr(a, "multipack_real_batches", None),
              "sample_packing_drop_attention_mask": getattr(a, "sample_packing_drop_attention_mask", None),
              "train_batch_size": getattr(trainer, "_train_batch_size", None),
              "max_seq_length": getattr(a, "max_seq_length", None),
              "group_size": getattr(a, "sample_packing_group_size", None),
              "bin_size": getattr(a, "sample_packing_bin_size", None),
              "collator": type(dc).__name__, "pad_to_multiple_of": getattr(dc, "pad_to_multiple_of", None),
              "padding": str(getattr(dc, "padding", None)), "return_tensors": getattr(dc, "return_tensors", None),
              "train_rows": len(ds) if ds is not None else None,
              "columns": list(ds.column_names) if ds is not None else None,
              "dataloader_num_workers": a.dataloader_num_workers, "seed": a.seed})
'''


def axolotl_config(run_dir: Path, model_dir: Path, data: Path, a: argparse.Namespace, extra: dict) -> Path:
    import yaml

    cfg = {
        "base_model": str(model_dir), "tokenizer_config": str(model_dir), "model_type": "LlamaForCausalLM",
        "tokenizer_type": "AutoTokenizer",
        "datasets": [{"path": str(data), "ds_type": "parquet"}],
        "dataset_prepared_path": str(run_dir / "prepared"), "output_dir": str(run_dir / "out"),
        "val_set_size": 0, "sequence_len": a.seq_len, "sample_packing": True, "pad_to_sequence_len": True,
        "micro_batch_size": a.micro_batch_size, "gradient_accumulation_steps": 1, "num_epochs": 1,
        "max_steps": a.max_steps, "learning_rate": 1.0e-3, "optimizer": "adamw_torch", "lr_scheduler": "constant",
        "warmup_steps": 0, "weight_decay": 0.0, "logging_steps": 1, "save_strategy": "no",
        "bf16": False, "fp16": False, "tf32": False, "attn_implementation": "sdpa", "gradient_checkpointing": False,
        "dataset_num_proc": 1, "dataset_exact_deduplication": True, "dataloader_num_workers": 0,
        "dataloader_pin_memory": False, "seed": a.seed, "use_wandb": False, "special_tokens": {"pad_token": PAD},
        **extra,
    }
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "config.yml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def run_axolotl(cmd: str, config: Path, env_extra: dict[str, str], timeout: float) -> dict[str, Any]:
    bin_dir = Path(sys.executable).parent
    exe = bin_dir / "axolotl"
    argv = [str(exe) if exe.exists() else "axolotl", cmd, str(config)]
    if cmd == "train":
        argv += ["--launcher", "python"]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(OFFLINE_ENV)
    env["PATH"] = str(bin_dir) + os.pathsep + env.get("PATH", "")
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    hf = config.parent / "hf_home"
    env.update(HF_HOME=str(hf), HF_DATASETS_CACHE=str(hf / "datasets"))
    env.update(env_extra)
    log(f"running `{' '.join(argv[1:])}` ({config.parent.name})")
    t0 = time.perf_counter()
    try:
        p = subprocess.run(argv, cwd=str(config.parent), env=env, capture_output=True, text=True, errors="replace",
                           timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as exc:
        rc = "timeout"
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    wall = time.perf_counter() - t0
    (config.parent / f"{cmd}.stdout").write_text(out)
    (config.parent / f"{cmd}.stderr").write_text(err)
    log(f"  -> exit {rc} in {wall:.1f} s")
    res = {"cmd": cmd, "argv": argv, "rc": rc, "wall_s": wall, "losses": parse_losses(out + "\n" + err)}
    if rc != 0:
        tail = "\n".join((out + "\n" + err).strip().splitlines()[-25:])
        res["error"] = tail
    return res


_LOSS = re.compile(r"\{[^{}\n]*'loss': '?([-+0-9.eEnaif]+)'?[^{}\n]*\}")


def parse_losses(text: str) -> list[float]:
    return [float(m.group(1)) for m in _LOSS.finditer(text)]


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def prepared_dataset(root: Path):
    from datasets import load_from_disk

    dirs = sorted({p.parent for p in root.rglob("state.json") if (p.parent / "dataset_info.json").exists()})
    if len(dirs) != 1:
        raise RuntimeError(f"expected one saved dataset under {root}, found {[str(d) for d in dirs]}")
    return load_from_disk(str(dirs[0]))


def e2e_section(tmp: Path, model_dir: Path, data: Path, a: argparse.Namespace) -> dict[str, Any]:
    """--e2e-reps repetitions; each: fresh run dirs (HF cache, prepared path), Axolotl alone (recording
    plugin) and with the plugin, ABBA in even repetitions, BAAB in odd ones."""
    rec_dir = tmp / "recorder_module"
    rec_dir.mkdir(exist_ok=True)
    (rec_dir / "_fastaxo_bench_recorder.py").write_text(RECORDER_SRC)
    reps = []
    for k in range(a.e2e_reps):
        base_dir, plug_dir = tmp / f"e2e{k}_axolotl", tmp / f"e2e{k}_fastaxo"
        calls_dir = base_dir / "record"
        calls_dir.mkdir(parents=True, exist_ok=True)
        report = plug_dir / "fastaxo_report.jsonl"
        cfg_base = axolotl_config(base_dir, model_dir, data, a, {"plugins": [RECORDER]})
        cfg_plug = axolotl_config(plug_dir, model_dir, data, a, {"plugins": [PLUGIN], "fastaxo_report": str(report)})
        env_base = {"PYTHONPATH": str(rec_dir), "FASTAXO_BENCH_RECORD_DIR": str(calls_dir)}
        runs: dict[tuple[str, str], dict] = {}
        A, B = ("axolotl", "fastaxo") if k % 2 == 0 else ("fastaxo", "axolotl")
        for who, cmd in ((A, "preprocess"), (B, "preprocess"), (B, "train"), (A, "train")):
            if cmd == "train" and runs[(who, "preprocess")]["rc"] != 0:
                runs[(who, cmd)] = {"cmd": cmd, "rc": "skipped", "wall_s": float("nan"), "losses": [],
                                    "error": "preprocess failed"}
                continue
            runs[(who, cmd)] = run_axolotl(cmd, cfg_base if who == "axolotl" else cfg_plug,
                                           env_base if who == "axolotl" else {}, a.timeout)
            if cmd == "train":  # the HF datasets cache of the Parquet file is no longer needed
                shutil.rmtree((cfg_base if who == "axolotl" else cfg_plug).parent / "hf_home", ignore_errors=True)
        reps.append({"k": k, "order": f"{A}, {B}, {B}, {A}", "runs": runs,
                     "calls": read_jsonl(calls_dir / "calls.jsonl"), "calls_dir": calls_dir,
                     "report": read_jsonl(report), "base_dir": base_dir, "plug_dir": plug_dir})
    return {**reps[0], "reps": reps}


# ------------------------------------------------------------------------------------ in-process


class Ctx:
    """Imports and the in-process dataset (built once)."""

    def __init__(self, a: argparse.Namespace, tmp: Path, data: Path):
        import logging

        import datasets

        datasets.disable_progress_bars()
        datasets.logging.set_verbosity_error()
        for name in ("axolotl", "fastaxo", "datasets", "transformers"):
            logging.getLogger(name).setLevel(logging.WARNING)
        from axolotl.utils.data.utils import handle_long_seq_in_dataset
        from axolotl.utils.dict import DictDefault
        from axolotl.utils.trainer import process_datasets_for_packing

        self.a = a
        cfg = DictDefault(sequence_len=a.seq_len, sample_packing=True, dataset_num_proc=1, is_preprocess=True,
                          model_config_type="llama", seed=a.seed)
        t0 = time.perf_counter()
        ds = datasets.load_dataset("parquet", data_files=str(data), split="train", cache_dir=str(tmp / "hf_inproc"))
        ds = ds.shuffle(seed=a.seed)  # merge_datasets, one dataset
        self.shuffled_has_indices = ds._indices is not None
        ds = handle_long_seq_in_dataset(ds, a.seq_len, cfg)
        self.ds_nopack = ds  # what dedupe sees with sample_packing off
        ds, _ = process_datasets_for_packing(cfg, ds, None)
        self.ds = ds
        self.build_s = time.perf_counter() - t0
        for name in ("axolotl", "fastaxo"):
            logging.getLogger(name).setLevel(logging.WARNING)


def peak_call(fn: Callable[[], Any]) -> tuple[Any, float, float | None]:
    """(result, seconds, extra peak MiB) with VmHWM reset just before (untimed prep)."""
    gc.collect()
    release_freed_memory()
    base = status_kib("VmRSS")
    ok = reset_peak()
    c0 = time.process_time()
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    LAST_CPU[0] = time.process_time() - c0
    peak = (status_kib("VmHWM") - base) / 1024 if ok else None
    return out, dt, peak


LAST_CPU = [0.0]  # CPU seconds (all threads of this process) of the last peak_call


def table_of(ds):
    return ds.with_format("arrow")[:]


def dedupe_section(ctx: Ctx, a: argparse.Namespace, rec: JsonRecorder, e2e: dict | None) -> dict[str, Any]:
    import pyarrow.compute as pc
    from axolotl.utils.data import utils as du

    import fastaxo
    from fastaxo.integrations.axolotl import patched, select_rows

    results = {}
    inputs = [("packing", "sample-packing dataset (+position_ids, length; map() flattened the shuffle)", ctx.ds),
              ("nopack", "shuffled + length filter, no packing columns (has an indices mapping)", ctx.ds_nopack)]
    if a.quick_dedupe_main_only:
        inputs = inputs[:1]
    for key, desc, ds in inputs:
        n = len(ds)
        log(f"dedupe [{key}]: {n:,} rows, indices mapping: {ds._indices is not None}")
        outs: dict[str, Any] = {}
        times: dict[str, list[float]] = {"axolotl": [], "fastaxo": []}
        cpu: dict[str, list[float]] = {"axolotl": [], "fastaxo": []}
        peaks: dict[str, list[float]] = {"axolotl": [], "fastaxo": []}

        def run_ax():
            return du.deduplicate_and_log_datasets(dataset=ds)[0]

        def run_fx():
            with patched(parts=("dedupe",)):
                return du.deduplicate_and_log_datasets(dataset=ds)[0]

        # one untimed fastaxo warm-up (first-call imports, Seen allocation paths)
        run_fx()
        for r in range(a.reps):
            order = ["fastaxo", "axolotl"] if r % 2 == 0 else ["axolotl", "fastaxo"]
            for who in order:
                if who == "axolotl" and r >= a.ax_dedupe_reps:
                    continue
                for _ in range(1 if who == "axolotl" else 3):  # fastaxo's calls are short: 3 per round
                    out, dt, pk = peak_call(run_ax if who == "axolotl" else run_fx)
                    times[who].append(dt)
                    cpu[who].append(LAST_CPU[0])
                    if pk is not None:
                        peaks[who].append(pk)
                    if who not in outs:
                        outs[who] = out
                    log(f"  rep {r}: {who} {dt:.3f} s (cpu {LAST_CPU[0]:.3f} s)")
        ta, tb = table_of(outs["axolotl"]), table_of(outs["fastaxo"])
        same = ta.equals(tb)
        kept = len(outs["axolotl"])
        res = {"key": key, "desc": desc, "rows": n, "kept": kept, "kept_fastaxo": len(outs["fastaxo"]),
               "indices_mapping": ds._indices is not None, "identical": bool(same),
               "ax_s": med(times["axolotl"]), "fx_s": med(times["fastaxo"]), "ax_times": times["axolotl"],
               "fx_times": times["fastaxo"], "ax_cpu_s": med(cpu["axolotl"]), "fx_cpu_s": med(cpu["fastaxo"]),
               "ax_peak_mib": max(peaks["axolotl"]) if peaks["axolotl"] else None,
               "fx_peak_mib": max(peaks["fastaxo"]) if peaks["fastaxo"] else None}
        res["ratio"] = res["ax_s"] / res["fx_s"]
        # --- where the time goes: fastaxo
        cs, ss, shas = [], [], []
        for _ in range(3):
            t0 = time.perf_counter()
            r_ = fastaxo.dedupe(ds, seen=fastaxo.RowSet())
            t1 = time.perf_counter()
            select_rows(ds, r_.keep)
            t2 = time.perf_counter()
            fastaxo.dedupe(ds)  # the SHA-256 path (fastaxo.Seen): every byte of every row hashed
            t3 = time.perf_counter()
            cs.append(t1 - t0), ss.append(t2 - t1), shas.append(t3 - t2)
        res.update(fx_compare_s=med(cs), fx_select_s=med(ss), fx_sha_s=med(shas), fx_rowset_stats=r_.seen.stats)
        if ds._indices is None:
            tbl = ds.data.table
            nbytes = 0
            for name in tbl.column_names:
                col = tbl.column(name)
                if hasattr(col.type, "value_type"):
                    nbytes += int(pc.sum(pc.list_value_length(col)).as_py() or 0) * col.type.value_type.bit_width // 8
                    nbytes += 9 * n  # presence byte + u64 count (+ layout byte) per row and column
                else:
                    nbytes += (col.type.bit_width // 8 + 1) * n
            res["fx_bytes_hashed"] = nbytes
            res["fx_sha_gbps"] = nbytes / res["fx_sha_s"] / 1e9
        # --- where the time goes: Axolotl, per row on a prefix
        m = min(n, a.breakdown_rows)
        it = iter(ds)
        ti = tst = tsh = 0.0
        chars = 0
        for _ in range(m):
            t0 = time.perf_counter()
            row = next(it)
            t1 = time.perf_counter()
            s = str(row)
            t2 = time.perf_counter()
            hashlib.sha256(s.encode("utf-8")).hexdigest()
            t3 = time.perf_counter()
            ti += t1 - t0
            tst += t2 - t1
            tsh += t3 - t2
            chars += len(s)
        del it
        res.update(bd_rows=m, ax_iter_us=ti / m * 1e6, ax_str_us=tst / m * 1e6, ax_sha_us=tsh / m * 1e6,
                   ax_chars_per_row=chars / m, ax_total_us_per_row=res["ax_s"] / n * 1e6,
                   fx_us_per_row=res["fx_s"] / n * 1e6)
        # --- the real runs kept the same rows in the same order
        if key == "packing" and e2e is not None:
            for who, dkey in (("axolotl", "base_dir"), ("fastaxo", "plug_dir")):
                eq = []
                for rp in e2e["reps"]:
                    try:
                        eq.append(bool(table_of(prepared_dataset(rp[dkey] / "prepared")).equals(ta)))
                    except Exception as exc:
                        note(f"e2e rep {rp['k']} {who}: prepared dataset not compared ({type(exc).__name__}: {exc})")
                res[f"e2e_{who}_prepared_equal"] = all(eq) if eq else None
                res[f"e2e_{who}_prepared_compared"] = len(eq)
        if key == "packing":
            results["dedup_out"] = outs["axolotl"]
        del ta, tb, outs
        gc.collect()
        rec.append({"bench": "axolotl", "section": "dedupe", **res})
        results[key] = res
    return results


# ------------------------------------------------------------------------------------ packer


def caller_label(chain: list[str]) -> str:
    names = [c.split(":")[1] for c in chain]
    if "calculate_total_num_steps" in names:
        return "calculate_total_num_steps: len(sampler)"
    if "_create_multipack_sampler" in names:
        return "trainer sampler: len(sampler)"
    if "__iter__" in names:
        return "trainer sampler: 1st epoch iter"
    return " > ".join(names[-2:]) or "?"


def simulate_calls(ds, a: argparse.Namespace, tmp: Path) -> list[dict]:
    """--skip-e2e: the sampler constructions of a train start, in-process, recording pack_parallel."""
    import axolotl.utils.samplers.multipack as mp
    import numpy as np
    import torch
    from axolotl.utils.samplers.utils import get_dataset_lengths

    orig = mp.pack_parallel
    calls: list[dict] = []
    stage = ["?"]

    def rec(sequence_lengths, bin_capacity, group_size, bin_size, num_processes=None, safe_mode=True,
            mp_start_method="fork"):
        calls.append({"lengths": np.array(sequence_lengths), "bin_capacity": int(bin_capacity),
                      "group_size": int(group_size), "bin_size": int(bin_size), "num_processes": num_processes,
                      "safe_mode": safe_mode, "mp_start_method": mp_start_method, "label": stage[0],
                      "run_s": None})
        return orig(sequence_lengths, bin_capacity, group_size, bin_size, num_processes, safe_mode, mp_start_method)

    mp.pack_parallel = rec
    try:
        lengths = get_dataset_lengths(ds)
        kw = dict(batch_size=a.micro_batch_size, batch_max_len=a.seq_len, lengths=lengths, group_size=100_000,
                  bin_size=200, drop_last=True, num_processes=1, mp_start_method="fork")
        stage[0] = "calculate_total_num_steps: len(sampler)"
        s1 = mp.MultipackBatchSampler(torch.utils.data.RandomSampler(ds), **kw)
        len(s1)
        s1.efficiency()
        stage[0] = "trainer sampler: len(sampler)"
        s2 = mp.MultipackBatchSampler(torch.utils.data.RandomSampler(ds), seed=a.seed, padding_multiple=a.seq_len, **kw)
        len(s2)
        stage[0] = "trainer sampler: 1st epoch iter"
        s2.set_epoch(0)
        next(iter(s2))
    finally:
        mp.pack_parallel = orig
    return calls


def pack_section(ctx: Ctx, a: argparse.Namespace, rec: JsonRecorder, e2e: dict | None, train_ds) -> dict[str, Any]:
    import axolotl.utils.samplers.multipack as mp
    import numpy as np

    import fastaxo
    from fastaxo.integrations.axolotl import make_pack_parallel

    orig = mp.pack_parallel
    assert not getattr(orig, "__fastaxo__", False)
    source = "recorded"
    calls: list[dict] = []
    if e2e is not None:
        for c in e2e["calls"]:
            if c["event"] != "pack_parallel":
                continue
            calls.append({**{k: c[k] for k in ("bin_capacity", "group_size", "bin_size", "num_processes",
                                               "safe_mode", "mp_start_method")},
                          "lengths": np.load(e2e["calls_dir"] / c["file"]), "label": caller_label(c["caller"]),
                          "run_s": c["seconds"], "pid": c["pid"], "run_bins": c["bins"]})
    if not calls:
        source = "simulated in-process"
        calls = simulate_calls(train_ds, a, Path("."))
    log(f"pack: {len(calls)} pack_parallel calls ({source})")
    fxpp = make_pack_parallel(orig)

    def args_of(c):
        return (c["lengths"], c["bin_capacity"], c["group_size"], c["bin_size"], c["num_processes"],
                c["safe_mode"], c["mp_start_method"])

    # numba JIT compile of pack_group: first call in this process vs the second
    warm = calls[0]["lengths"][:2000].copy()
    t0 = time.perf_counter()
    orig(warm, calls[0]["bin_capacity"], calls[0]["group_size"], calls[0]["bin_size"], 1)
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    orig(warm, calls[0]["bin_capacity"], calls[0]["group_size"], calls[0]["bin_size"], 1)
    t_second = time.perf_counter() - t0
    fxpp(warm, calls[0]["bin_capacity"], calls[0]["group_size"], calls[0]["bin_size"], 1)  # fastaxo warm-up
    jit = {"first_call_s": t_first, "second_call_s": t_second, "compile_s": t_first - t_second, "rows": len(warm)}

    per = [{"ax": [], "fx": [], "kernel": [], "to_list": []} for _ in calls]
    same = [None] * len(calls)
    for r in range(a.reps):
        for i, c in enumerate(calls):
            order = ["ax", "fx"] if (r + i) % 2 == 0 else ["fx", "ax"]
            outs = {}
            for who in order:
                fn = orig if who == "ax" else fxpp
                gc.disable()
                t0 = time.perf_counter()
                outs[who] = fn(*args_of(c))
                per[i][who].append(time.perf_counter() - t0)
                gc.enable()
            if same[i] is None:
                same[i] = outs["ax"] == outs["fx"]
                c.setdefault("run_bins", len(outs["ax"]))
            del outs
            gc.disable()
            t0 = time.perf_counter()
            bins = fastaxo.pack_bins(c["lengths"], c["bin_capacity"], strategy="ff", group_size=c["group_size"],
                                     max_rows_per_bin=c["bin_size"], overflow="isolate")
            t1 = time.perf_counter()
            lst = bins.to_list()
            t2 = time.perf_counter()
            gc.enable()
            per[i]["kernel"].append(t1 - t0)
            per[i]["to_list"].append(t2 - t1)
            del bins, lst
        gc.collect()  # once per round, untimed (a full collection of this heap takes ~0.5 s)
        log(f"  rep {r}: Axolotl {sum(p['ax'][-1] for p in per):.3f} s, fastaxo {sum(p['fx'][-1] for p in per):.4f} s")
    rows = []
    for i, c in enumerate(calls):
        p = per[i]
        row = {"i": i, "label": c["label"], "n": int(len(c["lengths"])), "bin_capacity": c["bin_capacity"],
               "group_size": c["group_size"], "bin_size": c["bin_size"], "num_processes": c["num_processes"],
               "run_s": c.get("run_s"), "ax_s": med(p["ax"]), "fx_s": med(p["fx"]), "kernel_s": med(p["kernel"]),
               "to_list_s": med(p["to_list"]), "identical": bool(same[i]), "bins": c.get("run_bins")}
        row["ratio"] = row["ax_s"] / row["fx_s"]
        rows.append(row)
        rec.append({"bench": "axolotl", "section": "pack_call", "source": source, **row,
                    "ax_times": p["ax"], "fx_times": p["fx"]})
    tot = {k: sum(r[k] for r in rows) for k in ("ax_s", "fx_s", "kernel_s", "to_list_s")}
    rep_tot_ax = [sum(per[i]["ax"][r] for i in range(len(calls))) for r in range(a.reps)]
    rep_tot_fx = [sum(per[i]["fx"][r] for i in range(len(calls))) for r in range(a.reps)]
    run_tot = sum(r["run_s"] for r in rows if r["run_s"] is not None) if rows[0]["run_s"] is not None else None
    # peak memory of one call (the largest), untimed
    big = max(range(len(calls)), key=lambda i: len(calls[i]["lengths"]))
    o1, _, pk_ax = peak_call(lambda: orig(*args_of(calls[big])))
    del o1
    o2, _, pk_fx = peak_call(lambda: fxpp(*args_of(calls[big])))
    del o2
    summary = {"source": source, "calls": len(calls), "ax_total_s": tot["ax_s"], "fx_total_s": tot["fx_s"],
               "kernel_total_s": tot["kernel_s"], "to_list_total_s": tot["to_list_s"],
               "ax_per_call_median_s": med([r["ax_s"] for r in rows]),
               "fx_per_call_median_s": med([r["fx_s"] for r in rows]),
               "ratio": tot["ax_s"] / tot["fx_s"], "kernel_only_ratio": tot["ax_s"] / tot["kernel_s"],
               "ax_rep_totals": rep_tot_ax, "fx_rep_totals": rep_tot_fx,
               "ratio_of_rep_total_medians": med(rep_tot_ax) / med(rep_tot_fx),
               "identical_all": all(r["identical"] for r in rows), "jit": jit, "run_total_s": run_tot,
               "run_first_call_s": rows[0]["run_s"], "ax_peak_mib": pk_ax, "fx_peak_mib": pk_fx,
               "largest_call_rows": len(calls[big]["lengths"])}
    rec.append({"bench": "axolotl", "section": "pack", **summary})
    return {"rows": rows, **summary}


def sampler_section(ctx: Ctx, a: argparse.Namespace, rec: JsonRecorder, e2e: dict | None, train_ds) -> dict[str, Any]:
    """The packer as a train start runs it: MultipackBatchSampler.generate_batches, all its calls."""
    import types
    from unittest import mock

    import axolotl.utils.samplers.multipack as mp
    import torch
    from axolotl.utils.samplers.utils import get_dataset_lengths

    from fastaxo.integrations.axolotl import patched

    tr = next((ev for ev in (e2e or {}).get("calls", []) if ev.get("event") == "trainer"), {})
    group_size = int(tr.get("group_size") or 100_000)
    bin_size = int(tr.get("bin_size") or 200)
    batch_size = int(tr.get("train_batch_size") or a.micro_batch_size)
    seq_len = int(tr.get("max_seq_length") or a.seq_len)
    lengths = get_dataset_lengths(train_ds)
    kw = dict(batch_size=batch_size, batch_max_len=seq_len, lengths=lengths, group_size=group_size,
              bin_size=bin_size, drop_last=True, num_processes=1, mp_start_method="fork")
    calls = [0]
    state: dict[str, Any] = {}

    def start():
        """What a train start asks of the samplers (calculate_total_num_steps, the trainer's
        sampler, the first batch of the first epoch); the sampler is kept for the epoch."""
        torch.manual_seed(a.seed)
        s1 = mp.MultipackBatchSampler(torch.utils.data.RandomSampler(train_ds), **kw)
        n1 = len(s1)
        e1 = s1.efficiency()
        s2 = mp.MultipackBatchSampler(torch.utils.data.RandomSampler(train_ds), seed=a.seed,
                                      padding_multiple=seq_len, **kw)
        n2 = len(s2)
        s2.set_epoch(0)
        it = iter(s2)
        first = next(it)
        state["it"], state["first"] = it, first
        return n1, e1, n2, first

    def epoch():
        return [state["first"], *state["it"]]

    nogc = types.SimpleNamespace(collect=lambda *args: 0)
    variants = {
        "axolotl": contextlib.nullcontext,
        "axolotl_nogc": lambda: mock.patch.object(mp, "gc", nogc),
        "fastaxo": lambda: patched(parts=("packing",)),
    }
    # count the generate_batches calls of one start (untimed)
    orig_gb = mp.MultipackBatchSampler.generate_batches

    def counting(self, set_stats=False):
        calls[0] += 1
        return orig_gb(self, set_stats)

    with mock.patch.object(mp.MultipackBatchSampler, "generate_batches", counting), variants["axolotl_nogc"]():
        start()
    n_calls = calls[0]
    times: dict[str, list[float]] = {k: [] for k in variants}
    etimes: dict[str, list[float]] = {k: [] for k in variants}
    outs: dict[str, Any] = {}
    names = list(variants)
    for r in range(a.reps):
        order = names[r % 3:] + names[: r % 3]
        for who in order:
            with variants[who]():
                gc.collect()
                gc.disable()
                t0 = time.perf_counter()
                out = start()
                t1 = time.perf_counter()
                batches = epoch()
                t2 = time.perf_counter()
                gc.enable()
            times[who].append(t1 - t0)
            etimes[who].append(t2 - t1)
            if who not in outs:
                outs[who] = (out[0], out[1], out[2], batches)
            log(f"  rep {r}: {who} start {t1 - t0:.3f} s, rest of the epoch's batches {t2 - t1:.3f} s")
            del out, batches
            state.clear()
    identical = outs["fastaxo"] == outs["axolotl"] == outs["axolotl_nogc"]
    res = {"calls": n_calls, "rows": len(lengths), "batches": outs["axolotl"][2], "batch_size": batch_size,
           "bin_size": bin_size, "group_size": group_size, "seq_len": seq_len, "identical": bool(identical),
           **{f"{k}_s": med(v) for k, v in times.items()}, **{f"{k}_epoch_s": med(v) for k, v in etimes.items()},
           "times": times, "epoch_times": etimes}
    res["ratio"] = res["axolotl_nogc_s"] / res["fastaxo_s"]
    res["ratio_as_run"] = res["axolotl_s"] / res["fastaxo_s"]
    # Axolotl's generate_batches timed inside the real runs (recording plugin)
    if e2e is not None:
        per_rep = [sum(ev["seconds"] for ev in rp["calls"] if ev.get("event") == "generate_batches")
                   for rp in e2e["reps"]]
        n_rep = [sum(1 for ev in rp["calls"] if ev.get("event") == "generate_batches") for rp in e2e["reps"]]
        res.update(run_ax_total_s=med(per_rep) if per_rep else None, run_ax_calls=max(n_rep) if n_rep else 0)
    rec.append({"bench": "axolotl", "section": "sampler", **res})
    return res


# ------------------------------------------------------------------------------------ collation


def collate_section(ctx: Ctx, a: argparse.Namespace, rec: JsonRecorder, e2e: dict | None, train_ds,
                    tokenizer) -> dict[str, Any]:
    import torch
    from axolotl.utils.collators.batching import V2BatchSamplerDataCollatorForSeq2Seq
    from axolotl.utils.samplers.multipack import MultipackBatchSampler
    from axolotl.utils.samplers.utils import get_dataset_lengths

    from fastaxo.integrations.axolotl import FastaxoCollator

    # the trainer's packing parameters (read from the real run where it ran)
    tr = next((c for c in (e2e or {}).get("calls", []) if c["event"] == "trainer"), None)
    mrb = tr["multipack_real_batches"] if tr else True  # sdpa: not attn_supports_packing
    pad_mult = (tr or {}).get("pad_to_multiple_of") or 64 * math.ceil(a.seq_len / 64)
    drop_mask = tr["sample_packing_drop_attention_mask"] if tr else True
    batch_size = (tr or {}).get("train_batch_size") or a.micro_batch_size
    if tr and tr["collator"] != "V2BatchSamplerDataCollatorForSeq2Seq":
        note(f"the e2e trainer used {tr['collator']}, not the V2 collator")
    params_src = "read from the e2e trainer" if tr else "derived (sdpa defaults)"
    if mrb:
        sb, cap = batch_size, a.seq_len
    else:
        sb, cap = 1, batch_size * a.seq_len
    sampler = MultipackBatchSampler(torch.utils.data.RandomSampler(train_ds, generator=torch.Generator().manual_seed(a.seed)),
                                    batch_size=sb, batch_max_len=cap, lengths=get_dataset_lengths(train_ds),
                                    group_size=(tr or {}).get("group_size") or 100_000,
                                    bin_size=(tr or {}).get("bin_size") or 200, drop_last=True, num_processes=1)
    batches = sampler.generate_batches(set_stats=True)
    if a.collate_max_batches:
        batches = batches[: a.collate_max_batches]
    fetch_ds = train_ds.remove_columns(["length"])
    kw = dict(padding=True, pad_to_multiple_of=pad_mult, return_tensors="pt")
    ax = V2BatchSamplerDataCollatorForSeq2Seq(tokenizer, **kw)
    fx = FastaxoCollator(tokenizer, **kw)
    cases = [("mask dropped", True), ("mask kept", False)]
    if not drop_mask:
        cases = [("mask kept", False)]
    log(f"collate: {len(batches):,} micro-batches of {sb} bins (capacity {cap}), pad_to_multiple_of {pad_mult}; "
        f"{a.collate_reps} reps per batch")
    st = {c: {"ax": [], "fx": [], "same": True, "bad": None, "tokens": 0, "rows": 0} for c, _ in cases}
    fetch_s = 0.0
    mutated = False
    t_start = time.perf_counter()
    for bi, batch in enumerate(batches):
        t0 = time.perf_counter()
        feats_full = [fetch_ds.__getitems__(b) for b in batch]  # Axolotl's patched fetcher, per bin
        fetch_s += time.perf_counter() - t0
        for cname, drop in cases:
            feats = [[{k: v for k, v in row.items() if k != "attention_mask"} for row in b] for b in feats_full] \
                if drop else feats_full
            snap = json.dumps(feats) if bi == 0 else None
            ta, tf = [], []
            oa = of = None
            for r in range(a.collate_reps):
                for who in (("ax", "fx") if (r + bi) % 2 == 0 else ("fx", "ax")):
                    c = ax if who == "ax" else fx
                    t0 = time.perf_counter()
                    o = c(feats)
                    dt = time.perf_counter() - t0
                    if who == "ax":
                        ta.append(dt)
                        oa = oa if oa is not None else o
                    else:
                        tf.append(dt)
                        of = of if of is not None else o
            s = st[cname]
            s["ax"].append(med(ta))
            s["fx"].append(med(tf))
            s["rows"] += sum(len(b) for b in feats)
            s["tokens"] += int(oa["input_ids"].numel())
            ok = set(oa.keys()) == set(of.keys()) and all(
                oa[k].dtype == of[k].dtype and oa[k].shape == of[k].shape and torch.equal(oa[k], of[k]) for k in oa)
            if not ok and s["same"]:
                s["same"] = False
                s["bad"] = bi
            if snap is not None and json.dumps(feats) != snap:
                mutated = True
        if bi % 1000 == 999:
            el = time.perf_counter() - t_start
            log(f"  {bi + 1:,}/{len(batches):,} batches, {el:.0f} s")
    out = {"batches": len(batches), "bins_per_batch": sb, "capacity": cap, "pad_to_multiple_of": pad_mult,
           "params": params_src, "fetch_s": fetch_s, "inputs_mutated": mutated, "cases": {}}
    if mutated:
        note("a collator changed its input rows (checked on the first batch)")
    for cname, _ in cases:
        s = st[cname]
        r = {"case": cname, "batches": len(batches), "rows": s["rows"], "positions": s["tokens"],
             "ax_epoch_s": sum(s["ax"]), "fx_epoch_s": sum(s["fx"]), "ax_batch_median_ms": med(s["ax"]) * 1e3,
             "fx_batch_median_ms": med(s["fx"]) * 1e3, "identical": s["same"], "first_mismatch_batch": s["bad"],
             "fetch_s": fetch_s}
        r["ratio"] = r["ax_epoch_s"] / r["fx_epoch_s"]
        out["cases"][cname] = r
        rec.append({"bench": "axolotl", "section": "collate", **{k: v for k, v in out.items() if k != "cases"}, **r})
    return out


# ------------------------------------------------------------------------------------ report


def build_report(hdr: list[str], res: dict[str, Any], a: argparse.Namespace) -> str:
    parts = ["\n".join(hdr)]
    # ---------------- summary
    rows = []
    d = res.get("dedupe", {}).get("packing")
    if d:
        rows.append(["dedupe step (deduplicate_and_log_datasets)", fs(d["ax_s"]), fs(d["fx_s"]), fx_(d["ratio"]),
                     f">= {TARGETS['dedupe']:.0f}x", yesno(d["ratio"] >= TARGETS["dedupe"]), yesno(d["identical"])])
    sm = res.get("sampler")
    if sm:
        rows.append([f"packer at train start ({sm['calls']} generate_batches calls + 1st batch; Axolotl's "
                     "gc.collect() calls excluded)", fs(sm["axolotl_nogc_s"]), fs(sm["fastaxo_s"]), fx_(sm["ratio"]),
                     f">= {TARGETS['pack']:.0f}x", yesno(sm["ratio"] >= TARGETS["pack"]), yesno(sm["identical"])])
        rows.append([f"packer at train start, as Axolotl runs it (with its {sm['calls']} gc.collect() calls)",
                     fs(sm["axolotl_s"]), fs(sm["fastaxo_s"]), fx_(sm["ratio_as_run"]), f">= {TARGETS['pack']:.0f}x",
                     yesno(sm["ratio_as_run"] >= TARGETS["pack"]), yesno(sm["identical"])])
    p = res.get("pack")
    if p:
        rows.append([f"bin assignment alone ({p['calls']} pack_parallel calls, {p['source']}; list of lists out)",
                     fs(p["ax_total_s"]), fs(p["fx_total_s"]), fx_(p["ratio"]), "-", "-", yesno(p["identical_all"])])
    c = res.get("collate")
    if c:
        cm = c["cases"].get("mask dropped") or next(iter(c["cases"].values()))
        rows.append([f"collation of an epoch ({c['batches']:,} micro-batches, {cm['case']})", fs(cm["ax_epoch_s"]),
                     fs(cm["fx_epoch_s"]), fx_(cm["ratio"]), f">= {TARGETS['collate']:.0f}x",
                     yesno(cm["ratio"] >= TARGETS["collate"]), yesno(cm["identical"])])
    e = res.get("e2e_summary")
    if e and e.get("share_pct") is not None:
        rows.append([f"dedupe + pack, % of preprocess + train-start wall (plugin on; median of {e['n_ok']} runs)",
                     f"{e['ax_share_pct']:.1f}%" if e.get("ax_share_pct") is not None else "-",
                     f"{e['share_pct']:.2f}%", "-", f"< {TARGETS['share_pct']:.0f}%",
                     yesno(e["share_pct"] < TARGETS["share_pct"]), yesno(e.get("prepared_equal"))])
    elif e:
        rows.append(["dedupe + pack, % of preprocess + train-start wall (plugin on)", "-", "-", "-",
                     f"< {TARGETS['share_pct']:.0f}%", "not measured (e2e failed)", "-"])
    parts.append("## Summary (targets from the issue)\n\n"
                 + fmt_table(["step", "Axolotl", "with fastaxo", "speed-up", "target", "met", "identical output"], rows))
    # ---------------- dedupe
    if res.get("dedupe"):
        tr = []
        lines = []
        for key in ("packing", "nopack"):
            d = res["dedupe"].get(key)
            if not d:
                continue
            tr.append([d["desc"], f"{d['rows']:,}", f"{d['kept']:,}", "Axolotl", f"{len(d['ax_times'])}", fs(d["ax_s"]),
                       fs(d["ax_cpu_s"]), f"{d['rows'] / d['ax_s']:,.0f}", "-",
                       f"{d['ax_peak_mib']:.0f}" if d["ax_peak_mib"] is not None else "-", ""])
            tr.append(["", "", f"{d['kept_fastaxo']:,}", "with plugin (patched)", f"{len(d['fx_times'])}",
                       fs(d["fx_s"]), fs(d["fx_cpu_s"]), f"{d['rows'] / d['fx_s']:,.0f}", fx_(d["ratio"]),
                       f"{d['fx_peak_mib']:.0f}" if d["fx_peak_mib"] is not None else "-",
                       f"same rows, same order: {yesno(d['identical'])}"])
            lines.append(
                f"- {key}: Axolotl {d['ax_total_us_per_row']:.1f} us/row in the timed calls; on the first "
                f"{d['bd_rows']:,} rows (one separate pass): iterating the Dataset (Arrow -> dict of lists) "
                f"{d['ax_iter_us']:.1f} + str(row) {d['ax_str_us']:.1f} ({d['ax_chars_per_row']:,.0f} chars) + "
                f"sha256 {d['ax_sha_us']:.1f} us/row. fastaxo {d['fx_us_per_row']:.2f} us/row: exact dedupe by "
                f"value (fastaxo.RowSet: sampled keys, byte comparison of the {d['rows'] - d['kept']:,} duplicates "
                f"against their first occurrence; {d['fx_rowset_stats']['compares']} further comparisons, "
                f"{d['fx_rowset_stats']['hot_keys']} hot keys) {fs(d['fx_compare_s'])}, select {fs(d['fx_select_s'])}; "
                f"for comparison, fastaxo's SHA-256 path over every byte {fs(d['fx_sha_s'])}"
                + (f" ({d['fx_bytes_hashed'] / 1e6:,.0f} MB of canonical row encoding, "
                   f"{d['fx_sha_gbps']:.2f} GB/s)" if d.get("fx_bytes_hashed") else "")
                + " (medians of 3, outside the timed calls).")
            for who in ("axolotl", "fastaxo"):
                v = d.get(f"e2e_{who}_prepared_equal")
                if v is not None:
                    lines.append(f"- {key}: the datasets `axolotl preprocess` saved "
                                 f"({'Axolotl alone' if who == 'axolotl' else 'with the plugin'}, "
                                 f"{d[f'e2e_{who}_prepared_compared']} runs) equal the in-process Axolotl dedupe "
                                 f"output (rows and order): {yesno(v)}")
        parts.append(
            "## Dedupe step: axolotl.utils.data.utils.deduplicate_and_log_datasets(dataset=ds)\n\n"
            "Interleaved rounds (order alternating), median of the timed calls; cpu = process CPU time of the call "
            "(all threads; fastaxo hashes on all cores, so cpu / wall shows how much of the 2 cores it got on this "
            "shared machine); peak = extra VmHWM of a call, max over its calls.\n\n"
            + fmt_table(["input", "rows", "kept", "implementation", "calls", "median", "cpu", "rows/s", "speed-up",
                         "peak MiB", "check"], tr) + "\n\n" + "\n".join(lines))
    # ---------------- sampler
    if sm:
        tr = [[who_, fs(sm[f"{k}_s"]), fs(sm[f"{k}_epoch_s"]),
               fx_(sm[f"{k}_s"] / sm["fastaxo_s"]) if k != "fastaxo" else "-"]
              for who_, k in (("Axolotl, as it runs", "axolotl"), ("Axolotl, its gc.collect() calls skipped",
                                                                   "axolotl_nogc"), ("with the plugin", "fastaxo"))]
        parts.append(
            "## Packer at train start: MultipackBatchSampler.generate_batches\n\n"
            f"What a train start asks of the samplers, in-process on the trained dataset ({sm['rows']:,} rows; "
            f"batch_size {sm['batch_size']}, bin capacity {sm['seq_len']}, bin_size {sm['bin_size']}, group_size "
            f"{sm['group_size']:,}, the trainer's values): calculate_total_num_steps' sampler (len, efficiency) and "
            f"the trainer's sampler (len, set_epoch, first batch) = {sm['calls']} generate_batches calls, each "
            "drawing a new RandomSampler permutation and packing it; then, timed apart, the rest of the first "
            "epoch's batches as lists. Axolotl's generate_batches ends with gc.collect(): timed as it runs and "
            "with that call skipped (its module's `gc` replaced by a no-op); the plugin's version leaves no garbage "
            f"cycles and does not call it. {a.reps} rounds, order rotating, medians; the cyclic GC paused while "
            "timing. Same seeds for all three: same batch counts, efficiency and every batch of the epoch: "
            f"{yesno(sm['identical'])}.\n\n"
            + fmt_table(["implementation", "train start", "rest of epoch 1's batches", "plugin's speed-up on the start"],
                        tr)
            + (f"\n\n- inside the real `axolotl train` runs (recording plugin), Axolotl's generate_batches took "
               f"{fs(sm['run_ax_total_s'])} over {sm['run_ax_calls']} calls (median of the runs)."
               if sm.get("run_ax_total_s") else ""))
    # ---------------- pack
    if p:
        tr = []
        for r in p["rows"]:
            tr.append([str(r["i"]), r["label"], f"{r['n']:,}", f"{r['bins']:,}" if r.get("bins") else "-",
                       fs(r["run_s"]) if r["run_s"] is not None else "-", fs(r["ax_s"]), fs(r["fx_s"]),
                       fs(r["kernel_s"]), fs(r["to_list_s"]), fx_(r["ratio"]), yesno(r["identical"])])
        tr.append(["all", f"{p['calls']} calls", "", "", fs(p["run_total_s"]) if p["run_total_s"] is not None else "-",
                   fs(p["ax_total_s"]), fs(p["fx_total_s"]), fs(p["kernel_total_s"]), fs(p["to_list_total_s"]),
                   fx_(p["ratio"]), yesno(p["identical_all"])])
        r0 = p["rows"][0]
        j = p["jit"]
        parts.append(
            "## Bin assignment alone: axolotl.utils.samplers.multipack.pack_parallel\n\n"
            "With the plugin the sampler no longer calls it (generate_batches above packs on arrays); it is "
            "still replaced for any other caller, and its contract is a list of lists. "
            f"Calls {p['source']}"
            + (" from the real `axolotl train` (Axolotl alone, recording plugin): arguments as passed "
               f"(bin_capacity {r0['bin_capacity']}, group_size {r0['group_size']:,}, bin_size {r0['bin_size']}, "
               f"num_processes {r0['num_processes']})" if p["source"] == "recorded" else
               f" (bin_capacity {r0['bin_capacity']}, group_size {r0['group_size']:,}, bin_size {r0['bin_size']})")
            + f". Replayed {a.reps} rounds, Axolotl / fastaxo interleaved per call (order alternating), medians per "
            "call, Python's cyclic GC paused during each timed call (a full collection of this process's heap takes "
            "~0.5 s and would land on whichever call happens to run; both return the same list of lists); 'in run' = Axolotl's own call timed inside the real run (its first call includes numba's JIT "
            "compile). fastaxo = make_pack_parallel(original) as the plugin installs it; kernel = "
            "fastaxo.pack_bins(..., strategy='ff', overflow='isolate'), to_list = Bins.to_list(), timed "
            "separately.\n\n"
            + fmt_table(["#", "caller", "rows", "bins", "in run", "Axolotl", "fastaxo", "kernel", "to_list",
                         "speed-up", "same bins"], tr)
            + f"\n\n- per call (median over calls): Axolotl {fs(p['ax_per_call_median_s'])}, fastaxo "
            f"{fs(p['fx_per_call_median_s'])}; ratio of the median per-round totals {fx_(p['ratio_of_rep_total_medians'])}."
            f"\n- fastaxo's time: kernel {fs(p['kernel_total_s'])} ({100 * p['kernel_total_s'] / p['fx_total_s']:.0f}%), "
            f"Bins.to_list() {fs(p['to_list_total_s'])} ({100 * p['to_list_total_s'] / p['fx_total_s']:.0f}%) of "
            f"{fs(p['fx_total_s'])}; Axolotl against the kernel alone: {fx_(p['kernel_only_ratio'])}."
            f"\n- numba JIT compile of Axolotl's pack_group (first call in this process on {j['rows']:,} rows "
            f"minus the second): {fs(j['compile_s'])}; excluded above."
            + (f" In the real run the first call took {fs(p['run_first_call_s'])}." if p["run_first_call_s"] else "")
            + (f"\n- peak memory of the largest call ({p['largest_call_rows']:,} rows): Axolotl "
               f"{p['ax_peak_mib']:.1f} MiB, fastaxo {p['fx_peak_mib']:.1f} MiB (extra VmHWM; both return the same "
               "list of lists)." if p["ax_peak_mib"] is not None else ""))
    # ---------------- collate
    if c:
        tr = []
        for cname, r in c["cases"].items():
            tr.append([cname, f"{r['batches']:,}", f"{r['rows']:,}", f"{r['positions']:,}", fs(r["ax_epoch_s"]),
                       fs(r["fx_epoch_s"]), f"{r['ax_batch_median_ms']:.2f}", f"{r['fx_batch_median_ms']:.3f}",
                       fx_(r["ratio"]), yesno(r["identical"])
                       + (f" (first mismatch: batch {r['first_mismatch_batch']})" if not r["identical"] else "")])
        parts.append(
            "## Collation of an epoch: V2BatchSamplerDataCollatorForSeq2Seq vs FastaxoCollator\n\n"
            f"{c['batches']:,} micro-batches of {c['bins_per_batch']} bins (bin capacity {c['capacity']}) from "
            f"MultipackBatchSampler (trainer parameters {c['params']}), padding=True, pad_to_multiple_of="
            f"{c['pad_to_multiple_of']}, return_tensors='pt'. Rows fetched per bin with Dataset.__getitems__ (what "
            f"Axolotl's patched DataLoader fetcher calls): {fs(c['fetch_s'])} for the epoch, outside the collator "
            f"times (the same for both). Epoch = sum over batches of the per-batch median of {a.collate_reps} calls; "
            "every tensor compared. 'mask dropped' is Axolotl 0.21's sdpa path (rows: input_ids, labels, "
            "position_ids); 'mask kept' adds attention_mask (V2 segment ids).\n\n"
            + fmt_table(["case", "batches", "rows", "positions", "Axolotl epoch", "fastaxo epoch", "Axolotl ms/batch",
                         "fastaxo ms/batch", "speed-up", "identical tensors"], tr)
            + f"\n\n- collators changed their input rows: {yesno(c['inputs_mutated'])}")
    # ---------------- e2e
    if e:
        tr = []
        label = {"axolotl": "Axolotl alone (+recorder)", "fastaxo": "with FastaxoPlugin"}
        for rp in e["reps"]:
            for (who, cmd), r in rp["runs"].items():
                tr.append([str(rp["k"]), label[who],
                           f"axolotl {cmd}" + (f" --launcher python (max_steps {a.max_steps})" if cmd == "train" else ""),
                           str(r["rc"]), fs(r["wall_s"]), fs(r.get("dedupe_s", float("nan"))),
                           str(r.get("pack_calls", "-")), fs(r.get("pack_s", float("nan"))),
                           " ".join(f"{x:g}" for x in r.get("losses", [])) or "-"])
            for who in ("axolotl", "fastaxo"):
                s_ = rp["totals"].get(who)
                if s_:
                    tr.append([str(rp["k"]), label[who], "preprocess + train", "", fs(s_["wall_s"]), fs(s_["dedupe_s"]),
                               str(s_["pack_calls"]), fs(s_["pack_s"]), f"dedupe+pack = {s_['share_pct']:.2f}% of wall"])
        shares = {who: [rp["totals"][who]["share_pct"] for rp in e["reps"] if who in rp["totals"]]
                  for who in ("axolotl", "fastaxo")}
        walls = {who: [rp["totals"][who]["wall_s"] for rp in e["reps"] if who in rp["totals"]]
                 for who in ("axolotl", "fastaxo")}
        lines = [f"- dedupe + pack share of preprocess + train wall, per run: with the plugin "
                 f"{', '.join(f'{x:.2f}%' for x in shares['fastaxo']) or '-'} (median "
                 f"{e['share_pct']:.2f}%)" if e.get("share_pct") is not None else "- share: not measured",
                 f"- Axolotl alone: {', '.join(f'{x:.1f}%' for x in shares['axolotl']) or '-'}; preprocess + train wall, "
                 f"median: Axolotl alone {fs(med(walls['axolotl']))}, with the plugin {fs(med(walls['fastaxo']))}",
                 f"- losses identical in every pair of trains: {yesno(e.get('losses_equal'))}",
                 f"- prepared datasets identical (rows and order) across all runs and equal to the in-process "
                 f"Axolotl dedupe output: {yesno(e.get('prepared_equal'))}",
                 "- pack seconds: Axolotl's = its generate_batches calls timed by the recording plugin (numba "
                 "packing, list building, its gc.collect()); the plugin's = its own generate_batches timing "
                 "(fastaxo_report 'pack' events, via generate_batches); the plugin's report-only checks "
                 "(bincount etc.) are in the wall time, not in 'pack'."]
        if e.get("plugin_events"):
            lines.append(f"- fastaxo report events (run 0): {e['plugin_events']}")
        for rp in e["reps"]:
            for (who, cmd), r in rp["runs"].items():
                if r.get("error"):
                    lines.append(f"- FAILED (run {rp['k']}): {who} `axolotl {cmd}` exit {r['rc']}:\n```\n{r['error']}\n```")
        parts.append(
            "## End to end: real `axolotl preprocess` + `axolotl train` on CPU (tiny random Llama)\n\n"
            f"{len(e['reps'])} runs of each configuration; each run: fresh HF cache and prepared path, order "
            "Axolotl / plugin / plugin / Axolotl (preprocess, preprocess, train, train) in even runs, the reverse in "
            "odd ones. Wall time of each subprocess (interpreter start to exit, nothing subtracted). Dedupe / pack "
            "seconds: fastaxo_report events (plugin) or the recording plugin (Axolotl alone). Config: the CPU config "
            f"of AXOLOTL.md (sdpa, sample_packing, dataset_exact_deduplication, sequence_len {a.seq_len}, "
            f"micro_batch_size {a.micro_batch_size}, dataset_num_proc 1, bf16/fp16/tf32 false, save_strategy no).\n\n"
            + fmt_table(["run", "configuration", "command", "exit", "wall", "dedupe", "pack calls", "pack", "losses"], tr)
            + "\n\n" + "\n".join(lines))
    if NOTES:
        parts.append("Notes:\n" + "\n".join(f"- {x}" for x in dict.fromkeys(NOTES)))
    return "\n\n".join(parts) + "\n"


def e2e_summarize_rep(rp: dict) -> None:
    """Dedupe / pack seconds per run (events matched to processes: preprocess registers first)."""
    runs = rp["runs"]
    for r in runs.values():
        r["dedupe_s"], r["pack_s"], r["pack_calls"] = 0.0, 0.0, 0
    ax_pack = "generate_batches" if any(ev.get("event") == "generate_batches" for ev in rp["calls"]) else "pack_parallel"
    for who, evs, pname in (("fastaxo", rp["report"], "pack"), ("axolotl", rp["calls"], ax_pack)):
        pids: list[int] = []
        for ev in evs:
            if ev.get("event") == "register" and ev["pid"] not in pids:
                pids.append(ev["pid"])
        pid_cmd = {pid: ("preprocess" if k == 0 else "train") for k, pid in enumerate(pids)}
        for ev in evs:
            cmd = pid_cmd.get(ev.get("pid"))
            if cmd is None or (who, cmd) not in runs:
                continue
            r = runs[(who, cmd)]
            if ev.get("event") == "dedupe":
                r["dedupe_s"] += ev["seconds"]
            elif ev.get("event") == pname:
                r["pack_s"] += ev["seconds"]
                r["pack_calls"] += 1
    rp["totals"] = {}
    for who in ("axolotl", "fastaxo"):
        pre, tr = runs.get((who, "preprocess")), runs.get((who, "train"))
        if pre and tr and pre["rc"] == 0 and tr["rc"] == 0:
            w = pre["wall_s"] + tr["wall_s"]
            dd = pre["dedupe_s"] + tr["dedupe_s"]
            pk = pre["pack_s"] + tr["pack_s"]
            rp["totals"][who] = {"wall_s": w, "dedupe_s": dd, "pack_s": pk,
                                 "pack_calls": pre["pack_calls"] + tr["pack_calls"], "share_pct": 100 * (dd + pk) / w}
    la = runs.get(("axolotl", "train"), {}).get("losses")
    lf = runs.get(("fastaxo", "train"), {}).get("losses")
    rp["losses_equal"] = (la == lf) if la and lf else None


def e2e_summarize(e2e: dict, res_dedupe: dict | None) -> dict[str, Any]:
    for rp in e2e["reps"]:
        e2e_summarize_rep(rp)
    fx = [rp["totals"]["fastaxo"]["share_pct"] for rp in e2e["reps"] if "fastaxo" in rp["totals"]]
    ax = [rp["totals"]["axolotl"]["share_pct"] for rp in e2e["reps"] if "axolotl" in rp["totals"]]
    le = [rp["losses_equal"] for rp in e2e["reps"]]
    rep0 = e2e["reps"][0]["report"]
    out = {"reps": e2e["reps"], "n_ok": len(fx), "share_pct": med(fx) if fx else None,
           "ax_share_pct": med(ax) if ax else None,
           "losses_equal": all(le) if le and None not in le else None,
           "plugin_events": {k: sum(1 for ev in rep0 if ev.get("event") == k) for k in
                             sorted({ev.get("event") for ev in rep0})}}
    if res_dedupe and res_dedupe.get("packing"):
        a_, f_ = res_dedupe["packing"].get("e2e_axolotl_prepared_equal"), res_dedupe["packing"].get("e2e_fastaxo_prepared_equal")
        out["prepared_equal"] = (a_ and f_) if a_ is not None and f_ is not None else None
    return out


# ------------------------------------------------------------------------------------ main


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=100_000, help="rows of the generated dataset (default 100,000)")
    p.add_argument("--reps", type=int, default=5, help="interleaved rounds: dedupe (fastaxo) and packer replay")
    p.add_argument("--ax-dedupe-reps", type=int, default=3, help="rounds that also run Axolotl's dedupe (slow)")
    p.add_argument("--collate-reps", type=int, default=3, help="calls per micro-batch and collator (median)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 10,000 rows, 2 rounds, 1 Axolotl dedupe, 2 collate reps, 1 e2e run, max_steps 1")
    p.add_argument("--skip-e2e", action="store_true", help="no real axolotl subprocess runs (packer calls simulated)")
    p.add_argument("--max-steps", type=int, default=2, help="max_steps of the real `axolotl train`")
    p.add_argument("--e2e-reps", type=int, default=3, help="repetitions of the real runs (both configurations)")
    p.add_argument("--max-length", type=int, default=2048)
    p.add_argument("--micro-batch-size", type=int, default=2)
    p.add_argument("--seed", type=int, default=42, help="Axolotl's seed (shuffle, sampler)")
    p.add_argument("--data-seed", type=int, default=0, help="seed of the generated rows")
    p.add_argument("--breakdown-rows", type=int, default=20_000, help="rows for Axolotl's per-row cost breakdown")
    p.add_argument("--collate-max-batches", type=int, default=0, help="collate only this many micro-batches (0: all)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per axolotl subprocess")
    p.add_argument("--out", default=str(HERE / "results" / "bench_axolotl"),
                   help="output prefix: <out>.txt and <out>.jsonl (default bench/results/bench_axolotl)")
    p.add_argument("--keep-tmp", action="store_true", help="keep the temp dir (printed)")
    p.add_argument("--sections", default="dedupe,sampler,pack,collate,chat,text",
                   help="in-process sections to run, comma-separated (default: all of dedupe,sampler,pack,collate,"
                        "chat; the e2e runs are governed by --skip-e2e). Without dedupe, the later sections get the "
                        "deduplicated dataset from the plugin's dedupe (the same rows, as the tests check). "
                        "--sections chat and/or text alone skip the tokenized dataset and its e2e runs")
    p.add_argument("--text-mb", type=float, default=2.0, help="text: MB of each kind of text (default 2)")
    p.add_argument("--text-reps", type=int, default=3, help="text: interleaved rounds per cell")
    p.add_argument("--chat-reps", type=int, default=3, help="chat: interleaved rounds per cell")
    p.add_argument("--chat-tokens", type=int, default=400_000, help="chat: about this many tokens per cell's batch")
    p.add_argument("--chat-max-turns", type=int, default=0, help="chat: skip cells with more turns (0: none)")
    p.add_argument("--chat-one-thread", action="store_true",
                   help="chat: also time fastaxo with TOKENIZERS_PARALLELISM=false (fresh process)")
    p.add_argument("--chat-e2e", action="store_true", help="chat: real `axolotl preprocess` with and without the plugin")
    p.add_argument("--chat-e2e-rows", type=int, default=6000, help="chat e2e: conversations (default 6,000)")
    p.add_argument("--chat-e2e-turns", type=int, default=64, help="chat e2e: turns per conversation (default 64)")
    p.add_argument("--chat-e2e-reps", type=int, default=1, help="chat e2e: pairs of runs (default 1)")
    p.add_argument("--chat-e2e-seq-len", type=int, default=65536, help="chat e2e: sequence_len (default 65536)")
    p.add_argument("--chat-e2e-packing", action="store_true", help="chat e2e: sample_packing on")
    a = p.parse_args()
    a.sections = [x for x in a.sections.split(",") if x]
    bad = sorted(set(a.sections) - {"dedupe", "sampler", "pack", "collate", "chat", "text"})
    if bad:
        p.error(f"--sections: unknown section(s) {', '.join(bad)}; choose from dedupe,sampler,pack,collate,chat,"
                "text")
    if a.quick:
        a.rows = min(a.rows, 10_000) if "--rows" not in sys.argv else a.rows
        a.reps = min(a.reps, 2)
        a.ax_dedupe_reps = min(a.ax_dedupe_reps, 1)
        a.collate_reps = min(a.collate_reps, 2)
        a.max_steps = 1 if "--max-steps" not in sys.argv else a.max_steps
        a.e2e_reps = 1 if "--e2e-reps" not in sys.argv else a.e2e_reps
        a.breakdown_rows = min(a.breakdown_rows, 2000)
    a.ax_dedupe_reps = min(a.ax_dedupe_reps, a.reps)
    a.quick_dedupe_main_only = False
    t_run = time.perf_counter()
    os.environ.update(OFFLINE_ENV)
    tmp_obj = tempfile.TemporaryDirectory(prefix="fastaxo-bench-axolotl-")
    tmp = Path(tmp_obj.name)
    os.environ.update(HF_HOME=str(tmp / "hf_home"), HF_DATASETS_CACHE=str(tmp / "hf_home" / "datasets"),
                      NUMBA_CACHE_DIR=str(tmp / "numba"))
    import numpy as np  # noqa: F401

    import fastaxo

    if Path(fastaxo.__file__).resolve().is_relative_to(REPO):
        sys.exit(f"fastaxo was imported from the source tree ({fastaxo.__file__}); run with cwd=/ so the installed "
                 "package (with its compiled extension) is used")
    git = git_info()
    ver = versions()
    diff = installed_vs_tree(fastaxo)
    rec = JsonRecorder(a.out + ".jsonl")
    cmdline = "python bench/bench_axolotl.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    hdr = [
        "# bench_axolotl: Axolotl with and without fastaxo's plugin, side by side in one run",
        f"# command: {cmdline.strip()}   (cwd=/, {sys.executable})",
        f"# commit: {git['commit']}" + (f" (working tree dirty: {len(git['dirty_paths'])} changed/untracked paths: "
                                         f"{', '.join(x[3:] for x in git['dirty_paths'][:8])}"
                                         f"{' ...' if len(git['dirty_paths']) > 8 else ''})" if git["dirty"] else " (clean)"),
        f"# installed fastaxo {fastaxo.__version__} at {Path(fastaxo.__file__).parent}; threads "
        f"{fastaxo.default_num_threads()}; differs from the working tree in: {', '.join(diff) or 'nothing'}",
        f"# machine: {machine()}; nproc {os.cpu_count()}; loadavg at start {os.getloadavg()[0]:.2f}",
        "# versions: " + " ".join(f"{k}={v}" for k, v in ver.items()),
    ]
    for h in hdr:
        log(h)
    rec.append({"bench": "axolotl", "section": "meta", "command": cmdline, "args": vars(a), **git, "versions": ver,
                "machine": machine(), "nproc": os.cpu_count(), "fastaxo_file": fastaxo.__file__,
                "fastaxo_threads": fastaxo.default_num_threads(), "installed_differs": diff})

    if set(a.sections) <= {"chat", "text"}:
        chat_only(a, tmp, tmp_obj, rec, hdr, t_run)
        return

    # ---- data, tokenizer, model
    model_dir = tmp / "model"
    tok, tok_src = make_tokenizer_and_model(model_dir, a.seq_len)
    vocab = len(tok)
    t0 = time.perf_counter()
    import pyarrow.parquet as pq

    table, info = make_table(a.rows, a.seq_len, vocab, a.data_seed)
    data = tmp / "data.parquet"
    pq.write_table(table, data)
    del table
    info.update(gen_s=time.perf_counter() - t0, parquet_mb=data.stat().st_size / 1e6, vocab=vocab, tokenizer=tok_src)
    log(f"data: {info}")
    rec.append({"bench": "axolotl", "section": "data", **info})

    results: dict[str, Any] = {}
    e2e = None
    if not a.skip_e2e:
        with section("e2e"):
            e2e = e2e_section(tmp, model_dir, data, a)

    log("in-process: building the dataset with Axolotl's steps")
    ctx = Ctx(a, tmp, data)
    hdr.append(f"# data: {info['rows']:,} generated rows ({info['unique']:,} unique + {info['duplicates']:,} exact "
               f"duplicates), {info['tokens']:,} tokens, length mean {info['mean_len']:.0f} / median "
               f"{info['median_len']:.0f} / max {info['max_len']} (lognormal sigma 0.8, clipped to [8, {a.seq_len}]), "
               f"vocab {vocab}; Parquet {info['parquet_mb']:.0f} MB; tokenizer + model: {tok_src}")
    hdr.append(f"# in-process pipeline (Axolotl's functions, {ctx.build_s:.0f} s): load_dataset(parquet) -> "
               f"shuffle(seed={a.seed}) (indices mapping: {yesno(ctx.shuffled_has_indices)}) -> "
               f"handle_long_seq_in_dataset ({len(ctx.ds_nopack):,} rows, indices mapping: "
               f"{yesno(ctx.ds_nopack._indices is not None)}) -> process_datasets_for_packing ({len(ctx.ds):,} rows, "
               f"columns {', '.join(ctx.ds.column_names)}, indices mapping: {yesno(ctx.ds._indices is not None)})")
    if "dedupe" in a.sections:
        with section("dedupe"):
            results["dedupe"] = dedupe_section(ctx, a, rec, e2e)
        dedup_out = results["dedupe"].pop("dedup_out")
    else:
        from axolotl.utils.data import utils as du

        from fastaxo.integrations.axolotl import patched

        with patched(parts=("dedupe",)):
            dedup_out = du.deduplicate_and_log_datasets(dataset=ctx.ds)[0]
    train_ds = dedup_out.flatten_indices()  # what the trainer loads from the prepared dir
    del dedup_out
    ctx.ds_nopack = None
    gc.collect()
    for name, fn in (("sampler", sampler_section), ("pack", pack_section)):
        if name in a.sections:
            with section(name):
                results[name] = fn(ctx, a, rec, e2e, train_ds)
    if "collate" in a.sections:
        with section("collate"):
            results["collate"] = collate_section(ctx, a, rec, e2e, train_ds, tok)
    chat_lines: list[str] = []
    if "chat" in a.sections:
        chat_lines = chat_sections(a, tmp, rec)
    if "text" in a.sections:
        chat_lines += text_sections(a, rec)
    if e2e is not None:
        results["e2e_summary"] = e2e_summarize(e2e, results.get("dedupe"))
        es = results["e2e_summary"]
        for rp in es["reps"]:
            rec.append({"bench": "axolotl", "section": "e2e_run", "run": rp["k"], "order": rp["order"],
                        "totals": rp["totals"], "losses_equal": rp["losses_equal"],
                        "runs": [{"who": w, **{k: v for k, v in r.items() if k != "argv"}}
                                 for (w, _), r in rp["runs"].items()]})
        rec.append({"bench": "axolotl", "section": "e2e", "runs": len(es["reps"]), "share_pct_median": es["share_pct"],
                    "ax_share_pct_median": es["ax_share_pct"], "losses_equal": es["losses_equal"],
                    "prepared_equal": es.get("prepared_equal"), "plugin_events": es["plugin_events"]})
    total = time.perf_counter() - t_run
    hdr.append(f"# total run time: {total / 60:.1f} min; sections (wall, 1-min loadavg start -> end; 2 cores, "
               "others' jobs included): " + "; ".join(f"{n} {fs(t)}, {l0:.1f} -> {l1:.1f}" for n, t, l0, l1 in SECTIONS))
    text = build_report(hdr, results, a) + ("\n" + "\n".join(chat_lines) if chat_lines else "")
    print(text)
    Path(a.out + ".txt").write_text(text)
    rec.append({"bench": "axolotl", "section": "end", "total_s": total,
                "sections": [{"name": n, "seconds": t, "loadavg_start": l0, "loadavg_end": l1}
                             for n, t, l0, l1 in SECTIONS]})
    log(f"wrote {a.out}.txt and {a.out}.jsonl in {total:.0f} s")
    if a.keep_tmp:
        log(f"temp dir kept: {tmp}")
        tmp_obj._finalizer.detach()  # type: ignore[attr-defined]
    else:
        tmp_obj.cleanup()


def chat_sections(a: argparse.Namespace, tmp: Path, rec: JsonRecorder) -> list[str]:
    """The chat-template cells and, with --chat-e2e, the real preprocess runs (bench/_bench_chat.py)."""
    import _bench_chat

    # the cells run fastaxo with its default threads: the tokenizer's pool, which this script's
    # OFFLINE_ENV turns off for the subprocess runs
    saved = os.environ.pop("TOKENIZERS_PARALLELISM", None)
    try:
        with section("chat"):
            res = _bench_chat.run_cells(a, rec, log)
    finally:
        if saved is not None:
            os.environ["TOKENIZERS_PARALLELISM"] = saved
    lines = _bench_chat.report(res, a.chat_one_thread)
    if a.chat_e2e:
        with section("chat_e2e"):
            lines += _bench_chat.e2e_report(_bench_chat.e2e(tmp, a, rec, log))
    return lines


def text_sections(a: argparse.Namespace, rec: JsonRecorder) -> list[str]:
    """The completion / pretraining cells (bench/_bench_text.py)."""
    import _bench_text

    with section("text"):
        res = _bench_text.run_cells(a, rec, log)
    return _bench_text.report(res)


def chat_only(a: argparse.Namespace, tmp: Path, tmp_obj: Any, rec: JsonRecorder, hdr: list[str], t_run: float) -> None:
    """The sections that need no tokenized dataset (chat, text), alone."""
    lines = chat_sections(a, tmp, rec) if "chat" in a.sections else []
    if "text" in a.sections:
        lines += text_sections(a, rec)
    total = time.perf_counter() - t_run
    hdr.append(f"# total run time: {total / 60:.1f} min; sections (wall, 1-min loadavg start -> end; 2 cores, "
               "others' jobs included): " + "; ".join(f"{n} {fs(t)}, {l0:.1f} -> {l1:.1f}" for n, t, l0, l1 in SECTIONS))
    text = "\n".join(hdr) + "\n\n" + "\n".join(lines)
    print(text)
    Path(a.out + ".txt").write_text(text)
    rec.append({"bench": "axolotl", "section": "end", "total_s": total})
    log(f"wrote {a.out}.txt and {a.out}.jsonl in {total:.0f} s")
    if a.keep_tmp:
        tmp_obj._finalizer.detach()  # type: ignore[attr-defined]
    else:
        tmp_obj.cleanup()


if __name__ == "__main__":
    main()
