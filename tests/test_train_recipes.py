"""Training on ``fastaxo prepare``'s output, the README's recipes run for real: the HF Trainer
and TRL's SFTTrainer (a few steps on a tiny random Llama, finite losses) and ``axolotl train``
on the packed Parquet, whose per-step losses must match Axolotl packing the same rows on the
fly. The Python recipes are the README's own code blocks, executed as they are written.

Main leg only (torch, transformers, TRL and Axolotl installed; min_deps.sh ignores the file).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import axolotl_harness as H
import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import main_leg_only

import fastaxo

pytestmark = [pytest.mark.axolotl, pytest.mark.slow]

try:
    import torch  # noqa: F401
    import transformers  # noqa: F401
    import trl  # noqa: F401
    _MISSING = None
except ImportError as exc:  # pragma: no cover
    _MISSING = exc
main_leg_only(_MISSING, "torch, transformers and TRL")

README = Path(__file__).resolve().parent.parent / "README.md"
SEQ = 256
STEPS = 8


def readme_block(marker: str, lang: str = "python") -> str:
    """The README code block that follows ``<!-- recipe: marker -->``."""
    text = README.read_text(encoding="utf-8")
    m = re.search(rf"<!-- recipe: {re.escape(marker)} -->\s*```{lang}\n(.*?)```", text, re.S)
    assert m, f"README.md has no {lang} block marked <!-- recipe: {marker} -->"
    return m.group(1)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A tiny tokenizer + random Llama at path/to/model, and packed.parquet from
    ``fastaxo prepare`` of 60 pretokenized rows: what the README's recipes start from."""
    root = tmp_path_factory.mktemp("recipes")
    model_dir = root / "path" / "to" / "model"
    tok = H.make_tokenizer(model_dir)
    H.make_model(model_dir, tok)
    src = H.make_pretokenized(root / "rows.parquet", 60, dup_fraction=0.0, seed=5,
                              max_len=120)
    rep = fastaxo.prepare(src["path"], str(root / "packed.parquet"), SEQ, dedupe=False)
    assert rep.sequences_out == 60
    # Axolotl's layout, as files written before the standard one are
    rep = fastaxo.prepare(src["path"], str(root / "packed_axolotl.parquet"), SEQ, dedupe=False,
                          layout="axolotl")
    assert rep.sequences_out == 60
    return root


def run_recipe(marker: str, cwd: Path) -> dict:
    import datasets

    # Dataset.from_parquet caches an Arrow copy: under the test's directory, not ~/.cache
    datasets.config.HF_DATASETS_CACHE = str(cwd / "hf_datasets")
    ns: dict = {"__name__": "recipe"}
    old = os.getcwd()
    os.chdir(cwd)
    try:
        exec(compile(readme_block(marker), f"README.md:{marker}", "exec"), ns)
    finally:
        os.chdir(old)
    return ns


def finite_losses(trainer, collator: bool = True) -> list[float]:
    from fastaxo.integrations.transformers import PackedCollator

    # the rows reached the model through the collator (or the Trainer's default one, with the
    # stock recipe), position ids and sequence lengths intact
    assert isinstance(trainer.data_collator, PackedCollator) == collator
    assert {"position_ids", "seq_lengths"} <= set(trainer.train_dataset.column_names)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert losses and all(math.isfinite(x) for x in losses), trainer.state.log_history
    return losses


def test_hf_trainer_recipe(workdir):
    ns = run_recipe("hf-trainer", workdir)
    losses = finite_losses(ns["trainer"])
    assert ns["trainer"].state.global_step >= 2 and len(losses) >= 2


def test_stock_trainer_recipe(workdir):
    """No custom collator: the Trainer's default one, one row per batch, use_cache=False (the
    logits of this path are checked against unpacked runs in test_stock_trainer.py)."""
    ns = run_recipe("stock-trainer", workdir)
    trainer = ns["trainer"]
    assert trainer.model.config.use_cache is False
    losses = finite_losses(trainer, collator=False)
    assert trainer.state.global_step >= 2 and len(losses) >= 2


def test_trl_sft_recipe(workdir):
    ns = run_recipe("trl-sft", workdir)
    losses = finite_losses(ns["trainer"])
    assert ns["trainer"].state.global_step >= 2 and len(losses) >= 2


def test_axolotl_trains_on_the_packed_file_with_on_the_fly_losses(workdir, tmp_path):
    """``axolotl train`` on packed.parquet (the README's YAML) against Axolotl packing the
    same rows itself: one micro-batch holds every row in both runs, so each step's loss is the
    mean over the same tokens and must agree (float32, CPU)."""
    import yaml

    ok, info = H.axolotl_importable()
    assert ok, info
    model_dir = workdir / "path" / "to" / "model"
    recipe = yaml.safe_load(readme_block("axolotl-yaml", "yaml"))
    assert recipe["sample_packing"] is False and H.PLUGIN in recipe["plugins"]
    # a high learning rate: after a few steps the model uses its context, so a leak shows
    common = {"micro_batch_size": 16, "max_steps": STEPS, "dataset_exact_deduplication": False,
              "sequence_len": SEQ, "learning_rate": 3e-2}
    ours = H.write_config(tmp_path / "packed", model_dir=model_dir,
                          datasets=[{**recipe["datasets"][0],
                                     "path": str(workdir / "packed.parquet")}],
                          sample_packing=False, pad_to_sequence_len=False,
                          plugins=recipe["plugins"],
                          fastaxo_report=str(tmp_path / "report.jsonl"), **common)
    fly = H.write_config(tmp_path / "fly", model_dir=model_dir,
                         datasets=[{"path": str(workdir / "rows.parquet"), "ds_type": "parquet"}],
                         **common)
    axo = [{**recipe["datasets"][0], "path": str(workdir / "packed_axolotl.parquet")}]
    old = H.write_config(tmp_path / "old", model_dir=model_dir, datasets=axo,
                         sample_packing=False, pad_to_sequence_len=False,
                         plugins=recipe["plugins"], **common)
    leak = H.write_config(tmp_path / "leak", model_dir=model_dir, datasets=axo,
                          sample_packing=False, pad_to_sequence_len=False, **common)
    a = H.run_axolotl("train", ours, timeout=600, check=True)
    b = H.run_axolotl("train", fly, timeout=600, check=True)
    d = H.run_axolotl("train", old, timeout=600, check=True)
    c = H.run_axolotl("train", leak, timeout=600, check=True)
    la, lb, lc, ld = (H.parse_losses(r.stdout) for r in (a, b, c, d))
    print(f"packed by fastaxo: {la}\non the fly: {lb}\naxolotl layout: {ld}\n"
          f"no plugin: {lc}")
    assert len(la) == len(lb) == len(ld) == STEPS, (la, lb, ld)
    # the trainer logs 3 decimals; the two runs differ in float summation order (4-D mask
    # against Axolotl's layout), which the high learning rate amplifies to ~2e-3 by step 8.
    # The standard layout (Axolotl takes it as tokenized through the plugin's `prepacked`
    # part) and Axolotl's (a file written before it) train alike.
    assert np.allclose(la, lb, rtol=0, atol=6e-3), (la, lb)
    assert np.allclose(ld, lb, rtol=0, atol=6e-3), (ld, lb)
    for r in (a, d):
        assert "fastaxo-packed dataset; sequences kept apart for sdpa" in r.stdout + r.stderr
    # without the plugin Axolotl hands the segment ids over as a 2-D mask: the sequences mix
    assert np.abs(np.subtract(lc, lb)).max() > 5e-2, (lc, lb)


def test_axolotl_refuses_sample_packing_on_a_packed_file(workdir, tmp_path):
    model_dir = workdir / "path" / "to" / "model"
    cfg = H.write_config(tmp_path, model_dir=model_dir,
                         datasets=[{"path": str(workdir / "packed.parquet"),
                                    "ds_type": "parquet"}],
                         sample_packing=True, plugins=[H.PLUGIN])
    r = H.run_axolotl("train", cfg, timeout=600)
    assert r.returncode != 0
    assert "with sample_packing: true" in r.stdout + r.stderr


def test_the_packed_file_is_what_the_recipes_read(workdir):
    table = pq.read_table(workdir / "packed.parquet")
    assert table.column_names == ["input_ids", "labels", "position_ids", "seq_lengths"]
    assert b"fastaxo.prepare" in table.schema.metadata
    old = pq.read_table(workdir / "packed_axolotl.parquet")
    assert old.column_names == ["input_ids", "labels", "position_ids", "attention_mask"]
