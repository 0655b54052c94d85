"""Every Python example of the README and of the guide (docs/guide.md) runs as written (in
order, in one namespace), on small files made here: the names it uses are the current ones, and
no DeprecationWarning comes out of it. The training recipes (``<!-- recipe: ... -->``) run in test_train_recipes.py.

Examples reach for names they leave to the reader (``rank``, ``ckpt``, ``convs``...): those are
given below, with the files the examples open. The Ray example's cluster address and shared
directory are the two substitutions (a local Ray and a temporary directory).
"""

from __future__ import annotations

import os
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import REPO

README = REPO / "README.md"
GUIDE = REPO / "docs" / "guide.md"


def python_blocks() -> list[tuple[str, str]]:
    """(section heading, code) of every ```python block of the README and then the guide that
    is not a training recipe."""
    text = README.read_text(encoding="utf-8") + "\n" + GUIDE.read_text(encoding="utf-8")
    out, heading = [], "top"
    for m in re.finditer(r"^(#{2,4} [^\n]*)$|(<!-- recipe: [\w-]+ -->\s*)?```python\n(.*?)```",
                         text, re.S | re.M):
        if m.group(1):
            heading = m.group(1).lstrip("#").strip()
        elif not m.group(2):
            out.append((heading, m.group(3)))
    return out


BLOCKS = python_blocks()


def _rows(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = [rng.integers(1, 1000, int(k)).tolist() for k in rng.integers(1, 300, n)]
    ids += ids[:20]  # some exact duplicates
    labels = [[-100] * (len(r) // 3) + r[len(r) // 3:] for r in ids]
    text = [" ".join(map(str, r[:5])) for r in ids]
    return pa.table({"text": text, "input_ids": pa.array(ids, pa.list_(pa.int32())),
                     "labels": pa.array(labels, pa.list_(pa.int32()))})


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    pq.write_table(_rows(300, 1), tmp_path / "train.parquet")
    pq.write_table(_rows(50, 2), tmp_path / "eval.parquet")
    pq.write_table(_rows(2000, 3), tmp_path / "big.parquet", row_group_size=500)
    (tmp_path / "data").mkdir()
    for i in range(2):
        pq.write_table(_rows(400, 10 + i), tmp_path / "data" / f"part-{i}.parquet")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def given(workdir: Path, heading: str) -> dict:
    """The names a section's example leaves to the reader."""
    ns: dict = {"rank": 0, "world_size": 1, "ckpt": {},
                "batch_offsets": np.array([0, 100, 250, 320])}
    if heading.startswith("Tokenizing in C") and not (workdir / "path" / "to" / "tokenizer"
                                                      ).exists():
        import chat_data

        shutil.copytree(chat_data.qwen3_dir(), workdir / "path" / "to" / "tokenizer")
    if heading.startswith("Chat data"):
        import chat_data

        shutil.copytree(chat_data.qwen3_dir(), workdir / "path" / "to" / "tokenizer",
                        dirs_exist_ok=True)
        convs = chat_data.conversations(3, 8, (1, 6))
        ns.update(rows={"messages": convs}, convs=convs)
        tok = chat_data.qwen3_tokenizer()
        (workdir / "t.jinja").write_text(tok.chat_template, encoding="utf-8")
    return ns


def test_readme_examples_run_in_order(workdir):
    """One namespace, the blocks in document order: a later example uses what an earlier
    one made (``table``, ``ids``), as a reader would. Needs torch and Ray (the main leg;
    min_deps.sh deselects it)."""
    if os.environ.get("FASTAXO_EXPECT_AXOLOTL") != "1":
        pytest.importorskip("torch")
        pytest.importorskip("ray")
    ns: dict = {"__name__": "fastaxo_readme"}  # a fastaxo module for the warning filter
    for heading, code in BLOCKS:
        ns.update(given(workdir, heading))
        if "integrations.ray" in code:
            code = code.replace('address="auto"', 'address="local"').replace(
                '"/shared/packed"', repr(str(workdir / "packed")))
        run(code, heading, ns)
    assert (workdir / "packed" / "part-00000.parquet").is_file()  # the Ray example ran
    assert type(ns["res"]).__name__ == "ChatResult"  # the chat example ran


def run(code: str, heading: str, ns: dict) -> None:
    """Execute one block; a DeprecationWarning that fastaxo attributes to it is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module="(?!fastaxo)")
        exec(compile(code, f"README.md ({heading})", "exec"), ns)


def test_an_old_name_in_an_example_fails():
    import fastaxo

    with pytest.raises(TypeError, match="unexpected keyword argument 'max_len'"):
        run("fastaxo.pack([[1, 2]], max_len=4)", "test", {"__name__": "fastaxo_readme",
                                                          "fastaxo": fastaxo})


def test_every_section_with_code_is_covered():
    headings = {h for h, _ in BLOCKS}
    assert {"Quick start 2: a preprocessing script", "Exact dedupe", "Packing and padding",
            "Streaming reader"} <= headings, headings
    assert any(h.startswith("Chat data") for h in headings)
