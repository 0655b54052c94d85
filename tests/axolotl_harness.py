"""Helpers for tests that run the REAL axolotl (0.21) on CPU, fully offline.

Nothing here imports axolotl, torch or transformers at module import time: the test module
decides whether axolotl is importable first (and fails or skips with a clear message).
Everything is deterministic: same arguments -> byte-identical tokenizer, model weights and data.

Facts this relies on (read off the axolotl 0.21.0 wheel):
- `axolotl preprocess` saves the prepared dataset with `Dataset.save_to_disk` under
  `<dataset_prepared_path>/<md5 of the dataset config>/` (utils/data/shared.py
  get_prepared_dataset_path); `load_prepared` finds that subdirectory.
- A dataset whose columns include input_ids, attention_mask and labels is taken as already
  tokenized (utils/data/wrappers.py `_is_dataset_already_tokenized`), whatever `type` says;
  `type` may be left out for such a dataset.
- Exact dedupe runs after tokenization, the length filter and the packing columns
  (position_ids, length), so it compares tokenized rows; before it, merge_datasets shuffles
  (shuffle_merged_datasets defaults to true, seed = cfg.seed), so the prepared rows are not
  in file order, and "first occurrence" means first in the shuffled order.
- Prepared column types follow the input: the alpaca strategy gives input_ids int32,
  attention_mask int8, labels int64; a pre-tokenized list<int32> file stays int32; axolotl
  adds position_ids list<int64> and length int64.
- A tiny `axolotl preprocess` peaks at ~3.1-3.25 GiB of address space (VmPeak: torch, numba,
  pyarrow thread pools) with < 1 GiB RSS. Under RLIMIT_AS just above that, axolotl alone on
  a Parquet file bigger than the limit dies in datasets' Parquet -> Arrow cache conversion
  (MemoryError from pyarrow's scanner read-ahead), before it would mmap the cache.

Typical use (tests/test_axolotl.py):
    tok = make_tokenizer(d / "tok"); model_dir = make_model(d / "model", tok)
    meta = make_alpaca(d / "alpaca.jsonl", 400, 0.1, seed=0)
    cfg = write_config(d / "run", model_dir=model_dir, datasets=meta["path"], max_steps=6)
    proc = run_axolotl("preprocess", cfg, timeout=600); ds = load_prepared(d / "run" / "prepared")
    proc = run_axolotl("train", cfg, timeout=600); losses = parse_losses(proc.stdout)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "AXOLOTL_DO_NOT_TRACK": "1",
    "WANDB_MODE": "disabled",
    "CUDA_VISIBLE_DEVICES": "",
}

# The tokenizer's special tokens; ids are fixed by their order in the trainer's list.
BOS, EOS, PAD, UNK = "<s>", "</s>", "<pad>", "<unk>"
SPECIAL_TOKENS = [UNK, BOS, EOS, PAD]  # ids 0, 1, 2, 3
VOCAB_SIZE = 500

# A fixed word list: the tokenizer's training corpus and the alpaca rows are built from it.
_WORDS = (
    "the of and to in is was for on that with as by at from his her they this which are "
    "were had have has an be not but their one all been there can more when who will would "
    "about time year people way day man thing woman life child world school state family "
    "student group country problem hand part place case week company system program question "
    "work government number night point home water room mother area money story fact month lot "
    "right study book eye job word business issue side kind head house service friend father "
    "power hour game line end member law car city community name president team minute idea "
    "kid body information back parent face others level office door health person art war "
    "history party result change morning reason research girl guy moment air teacher force "
    "education write describe explain summarize translate list compare classify rewrite "
    "generate answer suggest give create find identify calculate analyze evaluate improve "
    "quickly carefully brown fox jumps over lazy dog river mountain forest ocean desert "
    "planet star galaxy energy matter atom cell gene protein sugar salt iron copper silver "
    "gold red green blue yellow purple orange black white seven eleven twenty hundred "
    "thousand million first second third last next previous early late small large tiny huge"
).split()

ALPACA_COLUMNS = ("instruction", "input", "output")


# --------------------------------------------------------------------------- environment


def venv_bin() -> Path:
    """The bin directory of the Python running the tests (the venv that has axolotl)."""
    return Path(sys.executable).parent


def axolotl_env(extra_env: dict[str, str] | None = None, hf_home: str | os.PathLike | None = None) -> dict[str, str]:
    """Environment for an offline CPU axolotl run: offline flags, the venv's bin first on PATH,
    no repo source tree on PYTHONPATH (the installed fastaxo must be the one imported)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(OFFLINE_ENV)
    env["PATH"] = str(venv_bin()) + os.pathsep + env.get("PATH", "")
    env["VIRTUAL_ENV"] = str(venv_bin().parent)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    if hf_home is not None:
        # keep the datasets cache (load_dataset's Arrow copy) inside the test's tmp dir
        env["HF_HOME"] = str(hf_home)
        env["HF_DATASETS_CACHE"] = str(Path(hf_home) / "datasets")
    if extra_env:
        env.update({k: str(v) for k, v in extra_env.items()})
    return env


def axolotl_importable() -> tuple[bool, str]:
    """(True, version) if `import axolotl` works in this interpreter, else (False, error)."""
    try:
        import axolotl  # noqa: F401
    except Exception as exc:  # ImportError, or a broken dependency raising anything else
        return False, f"{type(exc).__name__}: {exc}"
    return True, getattr(axolotl, "__version__", "?")


def prlimit_path() -> str | None:
    """util-linux prlimit, or None."""
    return shutil.which("prlimit")


# --------------------------------------------------------------------------- tokenizer / model


def _corpus(n_lines: int = 2000, seed: int = 1234) -> list[str]:
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n_lines):
        k = int(rng.integers(4, 24))
        words = [_WORDS[j] for j in rng.integers(0, len(_WORDS), size=k)]
        line = " ".join(words)
        if i % 3 == 0:
            line = line.capitalize() + "."
        if i % 7 == 0:
            line += f" {int(rng.integers(0, 10000))}"
        lines.append(line)
    # the alpaca prompt template words, so they become few tokens
    lines += [
        "Below is an instruction that describes a task, paired with an input that provides "
        "further context. Write a response that appropriately completes the request.",
        "Below is an instruction that describes a task. Write a response that appropriately "
        "completes the request.",
        "### Instruction:\n### Input:\n### Response:\n",
    ] * 20
    return lines


def make_tokenizer(dir: str | os.PathLike, vocab_size: int = VOCAB_SIZE):
    """Train a tiny byte-level BPE on a fixed corpus and save it as a HF tokenizer dir.

    Special tokens <unk>=0, <s>=1 (bos, prepended by the post-processor like Llama),
    </s>=2 (eos), <pad>=3 (pad, distinct from eos). Returns the loaded
    `PreTrainedTokenizerFast` (AutoTokenizer.from_pretrained(dir) loads the same offline).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        model_max_length=2048,
        padding_side="right",
    )
    fast.save_pretrained(str(dir))
    return fast


def make_model(dir: str | os.PathLike, tokenizer, seed: int = 0, **config_overrides):
    """Tiny random LlamaForCausalLM (hidden 64, 2 layers, 4 heads / 2 kv heads, intermediate
    128, 1024 positions), saved with save_pretrained (safetensors) into dir, together with the
    tokenizer (so the dir works as base_model and tokenizer_config). Returns the dir."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    cfg = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    cfg.update(config_overrides)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**cfg))
    model.save_pretrained(str(dir), safe_serialization=True)
    tokenizer.save_pretrained(str(dir))
    return dir


# --------------------------------------------------------------------------- datasets


def _sentence(rng: np.random.Generator, lo: int, hi: int) -> str:
    k = int(rng.integers(lo, hi + 1))
    return " ".join(_WORDS[j] for j in rng.integers(0, len(_WORDS), size=k))


def _plant_duplicates(n: int, dup_fraction: float, rng: np.random.Generator) -> tuple[list[int], int]:
    """Row order as indices into the unique rows: n_unique = n - n_dup unique rows in order,
    and n_dup = round(n * dup_fraction) copies of randomly chosen unique rows, each placed at a
    random position AFTER its original (so the first occurrence is always the original).
    Returns (order, n_unique)."""
    n_dup = int(round(n * dup_fraction))
    n_unique = n - n_dup
    if n_unique <= 0:
        raise ValueError("dup_fraction leaves no unique rows")
    src = rng.integers(0, n_unique, size=n_dup)
    # original u sits at key u; a copy of s at a key in (s, n_unique): sorted keys = row order
    dup_keys = src + 0.5 + rng.random(n_dup) * (n_unique - src - 0.5)
    keys = np.concatenate([np.arange(n_unique, dtype=np.float64), dup_keys])
    ids = np.concatenate([np.arange(n_unique), src])
    order = ids[np.argsort(keys, kind="stable")]
    return [int(i) for i in order], n_unique


def make_alpaca(
    path: str | os.PathLike,
    n: int,
    dup_fraction: float = 0.1,
    seed: int = 0,
    fmt: str = "jsonl",
    max_words: int = 24,
) -> dict[str, Any]:
    """Alpaca-style rows (instruction, input, output) of varied lengths with round(n *
    dup_fraction) planted EXACT duplicate rows (copies of earlier rows). Every unique row has a
    distinct instruction (it carries its number), about a third have an empty input. With the
    harness tokenizer and axolotl's alpaca template, max_words=24 gives 96-214 tokens per row
    (all under sequence_len 256, so axolotl's length filter drops nothing). Returns {"path", "rows", "unique", "duplicates"}."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    order, n_unique = _plant_duplicates(n, dup_fraction, rng)
    unique = []
    for i in range(n_unique):
        verb = _WORDS[int(rng.integers(0, len(_WORDS)))]
        instruction = f"Task {i}: {verb} {_sentence(rng, 2, max(2, max_words // 4))}."
        inp = "" if rng.random() < 0.35 else _sentence(rng, 1, max(1, max_words // 3))
        output = _sentence(rng, 1, max_words)
        unique.append({"instruction": instruction, "input": inp, "output": output})
    rows = [unique[i] for i in order]
    if fmt == "jsonl":
        with open(path, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table({c: pa.array([r[c] for r in rows], pa.string()) for c in ALPACA_COLUMNS})
        pq.write_table(table, path)
    else:
        raise ValueError(f"fmt must be 'jsonl' or 'parquet', not {fmt!r}")
    return {"path": str(path), "rows": n, "unique": n_unique, "duplicates": n - n_unique}


def read_alpaca(path: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of a make_alpaca file (either format), independently of the generator."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def make_pretokenized(
    path: str | os.PathLike,
    n: int,
    dup_fraction: float = 0.1,
    seed: int = 0,
    min_len: int = 16,
    max_len: int = 200,
    vocab_size: int = VOCAB_SIZE,
    prompt_fraction: float = 0.4,
    text_bytes: int = 0,
    id_type: str = "int32",
    row_group_rows: int | None = None,
) -> dict[str, Any]:
    """Parquet of already-tokenized rows: input_ids, attention_mask, labels (list<id_type>;
    axolotl accepts any int list type, it only checks the three column names), with
    round(n * dup_fraction) planted exact duplicate rows (copies of earlier rows, every column
    equal). Row i starts with BOS then two tokens encoding its unique number, so unique rows
    differ in input_ids alone. labels = input_ids with the prompt prefix (about prompt_fraction
    of the row, at least 1 token) set to -100; the last token is EOS. text_bytes > 0 adds a
    `text` column (large_string) of that many random printable ASCII bytes per row
    (incompressible, to make the file big; duplicates carry the same text).

    Written in row groups (default: ~64 MiB of text or 10k rows each) without holding the whole
    table: generating a 4 GiB file takes seconds and ~200 MiB of memory.
    Returns {"path", "rows", "unique", "duplicates", "bytes", "tokens_unique"}.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    order, n_unique = _plant_duplicates(n, dup_fraction, rng)
    if n_unique > (vocab_size - 4) ** 2:
        raise ValueError("too many unique rows for the id encoding")
    lengths = rng.integers(min_len, max_len + 1, size=n_unique)
    row_seeds = rng.integers(0, 2**63 - 1, size=n_unique)

    def unique_row(i: int) -> dict[str, Any]:
        r = np.random.default_rng(int(row_seeds[i]))
        L = int(lengths[i])
        ids = r.integers(4, vocab_size, size=L).astype(np.int64)
        ids[0] = 1  # BOS
        ids[1] = 4 + i // (vocab_size - 4)
        ids[2] = 4 + i % (vocab_size - 4)
        ids[-1] = 2  # EOS
        n_prompt = max(1, min(L - 1, int(round(L * prompt_fraction))))
        labels = ids.copy()
        labels[:n_prompt] = -100
        return {"input_ids": ids, "attention_mask": np.ones(L, np.int64), "labels": labels}

    pa_int = {"int32": pa.int32(), "int64": pa.int64()}[id_type]
    fields = [
        pa.field("input_ids", pa.list_(pa_int)),
        pa.field("attention_mask", pa.list_(pa_int)),
        pa.field("labels", pa.list_(pa_int)),
    ]
    if text_bytes:
        fields.append(pa.field("text", pa.large_string()))
        # Row texts are windows of one random printable pool at row-dependent offsets: cheap
        # to make, and incompressible for snappy (it only matches within 64 KiB blocks).
        pool_len = (64 << 20) + text_bytes
        pool = np.random.default_rng([seed, 7]).integers(32, 127, size=pool_len, dtype=np.uint8)
        span = pool_len - text_bytes + 1
        text_offsets = (np.arange(n_unique, dtype=np.int64) * 1_000_003 + 12_345) % span
    schema = pa.schema(fields)
    if row_group_rows is None:
        row_group_rows = max(1, min(10_000, (64 << 20) // text_bytes)) if text_bytes else 10_000

    def ragged(rows: list[np.ndarray]) -> pa.Array:
        offsets = np.zeros(len(rows) + 1, np.int32)
        np.cumsum([len(r) for r in rows], out=offsets[1:])
        values = np.concatenate(rows).astype(np.dtype(id_type))
        return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))

    # a duplicate is unique_row(i) generated again from its own seed: an exact copy
    # no dictionary / compression / statistics for the text: hashing and compressing
    # megabytes of random text is what would make writing slow
    writer_kw: dict[str, Any] = {"compression": "snappy"}
    if text_bytes:
        writer_kw = {
            "compression": {"input_ids": "snappy", "attention_mask": "snappy", "labels": "snappy", "text": "none"},
            "use_dictionary": ["input_ids", "attention_mask", "labels"],
            "write_statistics": ["input_ids", "attention_mask", "labels"],
        }
    with pq.ParquetWriter(path, schema, **writer_kw) as w:
        for start in range(0, n, row_group_rows):
            idx = order[start : start + row_group_rows]
            chunk = [unique_row(i) for i in idx]
            cols = {name: ragged([c[name] for c in chunk]) for name in ("input_ids", "attention_mask", "labels")}
            if text_bytes:
                offs = np.arange(len(idx) + 1, dtype=np.int64) * text_bytes
                values = np.concatenate([pool[text_offsets[i] : text_offsets[i] + text_bytes] for i in idx])
                cols["text"] = pa.LargeStringArray.from_buffers(
                    len(idx), pa.py_buffer(offs), pa.py_buffer(values)
                )
            w.write_table(pa.table(cols, schema=schema), row_group_size=row_group_rows)
            del chunk, cols
    return {
        "path": str(path),
        "rows": n,
        "unique": n_unique,
        "duplicates": n - n_unique,
        "bytes": path.stat().st_size,
        "tokens_unique": int(lengths.sum()),
    }


# --------------------------------------------------------------------------- config


def _yaml_dump(obj: Any) -> str:
    import yaml

    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)


def base_config(dir: str | os.PathLike, model_dir: str | os.PathLike, datasets: Any) -> dict[str, Any]:
    """The CPU config of AXOLOTL.md as a dict (see write_config)."""
    dir = Path(dir)
    if isinstance(datasets, (str, os.PathLike)):
        datasets = [{"path": str(datasets), "type": "alpaca"}]
    return {
        "base_model": str(model_dir),
        "tokenizer_config": str(model_dir),
        "model_type": "LlamaForCausalLM",
        "tokenizer_type": "AutoTokenizer",
        "datasets": datasets,
        "dataset_prepared_path": str(dir / "prepared"),
        "output_dir": str(dir / "out"),
        "val_set_size": 0,
        "sequence_len": 256,
        "sample_packing": True,
        "pad_to_sequence_len": True,
        "micro_batch_size": 2,
        "gradient_accumulation_steps": 1,
        "num_epochs": 1,
        "max_steps": 6,
        "learning_rate": 1.0e-3,
        "optimizer": "adamw_torch",
        "lr_scheduler": "constant",
        "warmup_steps": 0,
        "weight_decay": 0.0,
        "logging_steps": 1,
        "save_strategy": "no",
        "bf16": False,
        "fp16": False,
        "tf32": False,
        "attn_implementation": "sdpa",
        "gradient_checkpointing": False,
        "dataset_num_proc": 1,
        "dataset_exact_deduplication": True,
        "dataloader_num_workers": 0,
        "dataloader_pin_memory": False,
        "seed": 42,
        "use_wandb": False,
        "special_tokens": {"pad_token": PAD},
    }


def write_config(
    dir: str | os.PathLike,
    *,
    model_dir: str | os.PathLike,
    datasets: Any,
    name: str = "config.yml",
    **overrides: Any,
) -> Path:
    """Write an axolotl YAML config for a CPU run into dir and return its path.

    datasets: a list of dataset dicts, or a path (-> [{"path": p, "type": "alpaca"}]).
    overrides: any config key; a value of None removes the key (e.g. val_set_size=None).
    dataset_prepared_path and output_dir default to dir/prepared and dir/out.
    """
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    cfg = base_config(dir, model_dir, datasets)
    for k, v in overrides.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    path = dir / name
    path.write_text(_yaml_dump(cfg), encoding="utf-8")
    return path


PLUGIN = "fastaxo.integrations.axolotl.FastaxoPlugin"


def plugin_overrides(report: str | os.PathLike | None = None, **keys: Any) -> dict[str, Any]:
    """Config overrides that turn the fastaxo plugin on (plus fastaxo_* keys)."""
    out: dict[str, Any] = {"plugins": [PLUGIN]}
    if report is not None:
        out["fastaxo_report"] = str(report)
    out.update(keys)
    return out


# --------------------------------------------------------------------------- running


def run_axolotl(
    cmd: str,
    config_path: str | os.PathLike,
    timeout: float = 300,
    extra_env: dict[str, str] | None = None,
    prlimit_as: int | None = None,
    launcher: str | None = "python",
    extra_args: Sequence[str] = (),
    hf_home: str | os.PathLike | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess:
    """Run `axolotl <cmd> <config>` (cmd "preprocess" or "train") in a subprocess and return
    the CompletedProcess (text stdout/stderr captured; .seconds = wall time).

    launcher: for train, "python" (default: runs the trainer in the CLI process; no second
    interpreter) or "accelerate" (axolotl's default: execs `accelerate launch -m
    axolotl.cli.train`). prlimit_as=BYTES runs it under `prlimit --as=BYTES` (RLIMIT_AS, the
    address-space limit, inherited by every child). The working directory is the config's
    dir (never the repo: `-m` launches put the cwd on sys.path). hf_home defaults to
    <config dir>/hf_home so the datasets cache stays in the test's tmp dir. check=True raises
    AssertionError with the output tail on a non-zero exit.
    """
    if cmd not in ("preprocess", "train"):
        raise ValueError(f"cmd must be 'preprocess' or 'train', not {cmd!r}")
    config_path = Path(config_path).resolve()
    exe = venv_bin() / "axolotl"
    argv = [str(exe) if exe.exists() else "axolotl", cmd, str(config_path)]
    if cmd == "train" and launcher:
        argv += ["--launcher", launcher]
    argv += list(extra_args)
    if prlimit_as is not None:
        pl = prlimit_path()
        if pl is None:
            raise RuntimeError("prlimit (util-linux) not found on PATH")
        argv = [pl, f"--as={int(prlimit_as)}", "--"] + argv
    env = axolotl_env(extra_env, hf_home if hf_home is not None else config_path.parent / "hf_home")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            argv,
            cwd=str(config_path.parent),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        raise AssertionError(
            f"axolotl {cmd} timed out after {timeout} s\n{tail(out + err)}"
        ) from None
    proc.seconds = time.perf_counter() - t0  # type: ignore[attr-defined]
    if check and proc.returncode != 0:
        raise AssertionError(describe_failure(proc))
    return proc


def tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


_NOISE_FRAMES = ("/pickle.py", "/dill/", "/copyreg.py", "/runpy.py", "/click/")


def traceback_summary(text: str, blocks: int = 2, max_frames: int = 20) -> str:
    """The last `blocks` Python tracebacks in text (a chained exception's cause and the final
    error), condensed: their File lines (minus pickle/dill/click plumbing) and exception
    lines. '' if there is none."""
    lines = text.splitlines()
    found = []
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith("Traceback (most recent call last)"):
            frames, j = [], i + 1
            while j < len(lines) and (lines[j].startswith((" ", "\t")) or not lines[j].strip()):
                st = lines[j].strip()
                if st.startswith("File ") and not any(n in st for n in _NOISE_FRAMES):
                    frames.append(st)
                j += 1
            exc = lines[j].strip() if j < len(lines) else "?"
            if len(frames) > max_frames:
                frames = frames[:4] + ["..."] + frames[-(max_frames - 5) :]
            found.append("Traceback (condensed):\n" + "\n".join("  " + f for f in frames) + "\n" + exc)
            i = j
        i += 1
    return "\n".join(found[-blocks:])


def describe_failure(proc: subprocess.CompletedProcess, lines: int = 40) -> str:
    """Exit code, the condensed last traceback, and the tails of stdout and stderr."""
    cmd = " ".join(map(str, proc.args)) if isinstance(proc.args, (list, tuple)) else str(proc.args)
    tb = traceback_summary((proc.stderr or "") + "\n" + (proc.stdout or ""))
    return (
        f"`{cmd}` exited with {proc.returncode}\n{tb}\n--- stdout (tail) ---\n{tail(proc.stdout or '', lines)}"
        f"\n--- stderr (tail) ---\n{tail(proc.stderr or '', lines)}"
    )


# --------------------------------------------------------------------------- results


def prepared_dirs(dataset_prepared_path: str | os.PathLike) -> list[Path]:
    """The saved datasets under dataset_prepared_path: directories holding a
    `dataset_info.json` + `state.json` (Dataset.save_to_disk), i.e. <path>/<config md5>/."""
    root = Path(dataset_prepared_path)
    if not root.is_dir():
        return []
    found = []
    for state in sorted(root.rglob("state.json")):
        d = state.parent
        if (d / "dataset_info.json").exists():
            found.append(d)
    return found


def load_prepared(dataset_prepared_path: str | os.PathLike):
    """The datasets.Dataset that `axolotl preprocess` saved under dataset_prepared_path
    (in its hash subdirectory). Exactly one saved dataset must be there."""
    from datasets import load_from_disk

    dirs = prepared_dirs(dataset_prepared_path)
    if len(dirs) != 1:
        listing = sorted(str(p.relative_to(dataset_prepared_path)) for p in Path(dataset_prepared_path).rglob("*")) if Path(dataset_prepared_path).exists() else []
        raise AssertionError(
            f"expected exactly one saved dataset under {dataset_prepared_path}, found {len(dirs)}: "
            f"{[str(d) for d in dirs]}; contents: {listing[:40]}"
        )
    return load_from_disk(str(dirs[0]))


def streamed_dirs(dataset_prepared_path: str | os.PathLike) -> list[Path]:
    """The datasets the plugin's streaming loader (fastaxo_streaming) prepared under
    dataset_prepared_path: `<path>/fastaxo-stream-<key>/` holding data.arrow (an Arrow IPC
    stream of the surviving rows in file order), indices.npy (int64 positions into it, in the
    prepared order: Axolotl's shuffle, then dedupe) and meta.json (written last)."""
    root = Path(dataset_prepared_path)
    if not root.is_dir():
        return []
    return sorted(d for d in root.glob("fastaxo-stream-*") if (d / "meta.json").exists())


def load_streamed(dataset_prepared_path: str | os.PathLike):
    """(datasets.Dataset, meta dict) of the one streamed dataset under dataset_prepared_path,
    read from the layout above (data.arrow rows selected by indices.npy), independently of the
    plugin's own loading code."""
    from datasets import Dataset

    dirs = streamed_dirs(dataset_prepared_path)
    if len(dirs) != 1:
        listing = sorted(str(p.relative_to(dataset_prepared_path)) for p in Path(dataset_prepared_path).rglob("*")) if Path(dataset_prepared_path).exists() else []
        raise AssertionError(
            f"expected exactly one fastaxo-stream-* dataset under {dataset_prepared_path}, found "
            f"{len(dirs)}; contents: {listing[:40]}"
        )
    d = dirs[0]
    order = np.load(d / "indices.npy")
    ds = Dataset.from_file(str(d / "data.arrow"))
    if order.dtype != np.int64 or order.ndim != 1 or (len(order) and (order.min() < 0 or order.max() >= len(ds))):
        raise AssertionError(f"{d}/indices.npy: not int64 positions into the {len(ds)} rows of data.arrow")
    return ds.select(order), json.loads((d / "meta.json").read_text())


_LOSS_DICT = re.compile(r"\{[^{}\n]*['\"]loss['\"]\s*:[^{}\n]*\}")
_LOSS_VALUE = re.compile(r"['\"]loss['\"]\s*:\s*['\"]?([-+0-9.eEnaifINF]+)['\"]?")


def parse_losses(stdout: str) -> list[float]:
    """Per-step training losses from the trainer's log lines, in order.

    The HF Trainer prints one dict per logging step, e.g. {'loss': 6.01, 'grad_norm': ...,
    'learning_rate': ..., 'epoch': ...} (transformers 5 may print values as strings). The
    final summary dict ({'train_runtime': ..., 'train_loss': ...}) is not counted: only the
    key 'loss' exactly.
    """
    out = []
    for m in _LOSS_DICT.finditer(stdout):
        v = _LOSS_VALUE.search(m.group(0))
        if v:
            out.append(float(v.group(1)))
    return out


def read_report(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The JSON-lines report the fastaxo plugin appends to (fastaxo_report); [] if absent.
    A line that is not JSON fails loudly (several processes append to it: lines must be whole)."""
    path = Path(path)
    if not path.exists():
        return []
    events = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise AssertionError(f"{path}:{i + 1}: not a JSON line ({exc}): {line[:200]!r}") from None
    return events


def events(report: Iterable[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in report if e.get("event") == name]


def measure_vm_peak(
    cmd: str,
    config_path: str | os.PathLike,
    timeout: float = 300,
    extra_env: dict[str, str] | None = None,
    poll_seconds: float = 0.05,
) -> tuple[int, subprocess.CompletedProcess]:
    """Run `axolotl <cmd> <config>` and return (max VmPeak over the process tree, proc).

    VmPeak (peak virtual address space, what RLIMIT_AS bounds) is polled from
    /proc/<pid>/status of the process and its descendants every poll_seconds; the value only
    grows, so the last reading of each pid is its peak up to then (a final spike in the last
    poll interval can be missed: leave a margin).
    """
    config_path = Path(config_path).resolve()
    exe = venv_bin() / "axolotl"
    argv = [str(exe), cmd, str(config_path)]
    if cmd == "train":
        argv += ["--launcher", "python"]
    env = axolotl_env(extra_env, config_path.parent / "hf_home")
    out_f = open(config_path.parent / f"{cmd}.vmpeak.stdout", "w+")
    err_f = open(config_path.parent / f"{cmd}.vmpeak.stderr", "w+")
    peak: dict[int, int] = {}
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, cwd=str(config_path.parent), env=env, stdout=out_f, stderr=err_f, text=True)
    try:
        while True:
            for pid in [p.pid] + _descendants(p.pid):
                v = _vm_peak(pid)
                if v is not None:
                    peak[pid] = max(peak.get(pid, 0), v)
            if p.poll() is not None:
                break
            if time.perf_counter() - t0 > timeout:
                p.kill()
                p.wait()
                raise AssertionError(f"axolotl {cmd} timed out after {timeout} s")
            time.sleep(poll_seconds)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    out_f.seek(0)
    err_f.seek(0)
    proc = subprocess.CompletedProcess(argv, p.returncode, out_f.read(), err_f.read())
    out_f.close()
    err_f.close()
    proc.seconds = time.perf_counter() - t0  # type: ignore[attr-defined]
    return (max(peak.values()) if peak else 0), proc


def _vm_peak(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmPeak:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def _descendants(pid: int) -> list[int]:
    out = []
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return out
    for c in children:
        out.append(int(c))
        out += _descendants(int(c))
    return out


# --------------------------------------------------------------------------- comparisons


def row_key(row: dict[str, Any], columns: Sequence[str] = ALPACA_COLUMNS) -> tuple:
    return tuple(row[c] for c in columns)


def distinct_count(rows: Iterable[Any]) -> int:
    """Number of distinct rows (exact equality), computed with hashlib over a canonical
    JSON of each row: independent of both axolotl's and fastaxo's dedupe."""
    seen = set()
    for r in rows:
        seen.add(hashlib.sha256(json.dumps(r, sort_keys=True, default=_np_default).encode()).digest())
    return len(seen)


def _np_default(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.integer):
        return int(o)
    raise TypeError(type(o))


def all_finite(xs: Iterable[float]) -> bool:
    return all(math.isfinite(x) for x in xs)
