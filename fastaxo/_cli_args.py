"""The command line's parser: one builder per subcommand, the choices from the library's
constants (:mod:`fastaxo._core.choices`). The commands themselves live in ``__main__``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from fastaxo._core.checks import MAX_ROW_BYTES, cli_positive_float, cli_positive_int
from fastaxo._core.choices import (
    ATTENTION,
    OVERFLOW_MODES,
    PREPARE_LAYOUTS,
    PREPARE_STRATEGIES,
    STRATEGIES,
    TRAIN_OPTIONS,
)

__all__ = ["build_parser"]

#: subcommand name -> the function that runs it
Commands = dict[str, Callable[[argparse.Namespace], int]]


def build_parser(argv: list[str], commands: Commands) -> argparse.ArgumentParser:
    """fastaxo's parser; ``bench``'s options are added only when ``argv`` runs it."""
    from fastaxo._version import __version__

    parser = argparse.ArgumentParser(
        prog="fastaxo", description="Fast, memory-bounded data preparation for Axolotl."
    )
    parser.add_argument("--version", action="version", version=f"fastaxo {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _prepare_parser(sub, commands)
    _demo_parser(sub, commands)
    _info_parser(sub, commands)
    _dedupe_parser(sub, commands)
    _bench_parser(sub, commands, argv)
    return parser


def _layout_arguments(p_p: Any) -> None:
    """prepare's output layout, and the input padding named by a pad id."""
    p_p.add_argument(
        "--layout",
        choices=PREPARE_LAYOUTS,
        default="standard",
        help="the output's columns: standard (default: input_ids, labels with -100 on each "
        "sequence's first token, position_ids restarting per sequence, seq_lengths; the "
        "narrowest integer types; a stock transformers model trains on it) or axolotl "
        "(Axolotl's: segment ids 1..k in attention_mask, int32)",
    )
    p_p.add_argument(
        "--attention",
        choices=(*ATTENTION, "none", "auto"),
        default="auto",
        help="with --layout axolotl: attention_mask as segment ids 1..k per row (auto, the "
        "default), all ones, or no column; the standard layout has none",
    )
    p_p.add_argument("--pad-token-id", type=int, metavar="ID",
                     help="tokenized input padded with ID and no attention_mask: the run of ID "
                     "that ends a row is dropped (where labels are -100), counted")


def _prepare_parser(sub: Any, commands: Commands) -> None:
    """fastaxo prepare."""
    p_p = sub.add_parser(
        "prepare",
        help="dedupe + pack tokenized rows into packed Parquet (bounded memory)",
        description="Stream tokenized rows (input_ids, and labels when present) from Parquet, "
        "Arrow, JSON Lines, CSV, ... files, drop exact duplicates, pack them into rows of "
        "--max-length tokens and write packed Parquet (input_ids, labels, position_ids, "
        "seq_lengths; unpadded rows of at most --max-length tokens; --layout axolotl for "
        "Axolotl's attention_mask).",
    )
    p_p.add_argument(
        "inputs", nargs="+", metavar="INPUT", help="files, directories or globs (read in order)"
    )
    p_p.add_argument(
        "-o",
        "--output",
        required=True,
        help="the packed Parquet file to write (with --ray: a directory for the shards)",
    )
    _length_argument(p_p, None)
    p_p.add_argument(
        "--strategy",
        choices=PREPARE_STRATEGIES,
        default="bfd",
        help="bin packing: best-fit decreasing (default), first-fit decreasing, first-fit, "
        "next-fit; or wrapped: the documents back to back, cut every --max-length tokens",
    )
    p_p.add_argument(
        "--pack-window",
        type=cli_positive_int,
        default=100_000,
        help="kept rows packed together (default 100000, Axolotl's group size; the memory bound)",
    )
    p_p.add_argument(
        "--overflow",
        choices=OVERFLOW_MODES[:4],
        default="error",
        help="rows longer than --max-length: error (default; names file and row), truncate, split, "
        "drop",
    )
    _layout_arguments(p_p)
    p_p.add_argument("--no-dedupe", action="store_true", help="keep duplicate rows")
    p_p.add_argument("--dedupe-columns", help="comma-separated columns that define a duplicate "
                     "(default: the columns written: input_ids, and labels when present)")
    p_p.add_argument(
        "--tokenizer",
        metavar="DIR",
        help="tokenize --text-column with this local HF tokenizer "
        "(DIR/tokenizer.json; the tokenizers library)",
    )
    p_p.add_argument(
        "--text-column", default="text", help="text column for --tokenizer (default: text)"
    )
    p_p.add_argument("--no-special-tokens", action="store_true",
                     help="with --tokenizer: no special tokens (BOS, ...) added to each row")
    p_p.add_argument("--append-eos", action="store_true",
                     help="with --tokenizer: append the EOS token to every document (the "
                     "eos_token of tokenizer_config.json, or --eos-token); counted in the report")
    p_p.add_argument("--eos-token", metavar="TOKEN",
                     help="append this EOS token to every document (implies --append-eos)")
    p_p.add_argument("--max-row-bytes", type=cli_positive_int, default=MAX_ROW_BYTES,
                     metavar="N", help="with --tokenizer: the largest text or rendered "
                     f"conversation tokenized, in bytes (default {MAX_ROW_BYTES:,}); a larger "
                     "row is an error, or left out and counted with --overflow drop")
    _chat_arguments(p_p)
    p_p.add_argument("--format", choices=("parquet", "arrow", "jsonl", "csv", "tsv", "text"),
                     help="input format (default: from the file names)")
    p_p.add_argument(
        "--batch-rows",
        type=cli_positive_int,
        default=8192,
        help="rows per batch read (with --ray: rows tokenized at a time; default 8192)",
    )
    p_p.add_argument(
        "--threads",
        type=cli_positive_int,
        default=None,
        help="threads (default: FASTAXO_NUM_THREADS, OMP_NUM_THREADS, CPUs)",
    )
    p_p.add_argument("--report-json", metavar="FILE", help="also write the report as JSON")
    p_p.add_argument("-q", "--quiet", action="store_true",
                     help="no progress (a bar on a terminal, else a line every few seconds)")
    _ray_arguments(p_p)
    p_p.set_defaults(func=commands["prepare"])


def _chat_arguments(p_p: argparse.ArgumentParser) -> None:
    """prepare's chat options (a messages column with a tokenizer directory)."""
    chat = p_p.add_argument_group(
        "chat data (a messages column, with --tokenizer DIR holding tokenizer_config.json)",
        "Axolotl's type: chat_template output: input_ids and role-masked labels")
    chat.add_argument("--messages-column", metavar="NAME",
                      help="the column of OpenAI-style messages (default: messages, used when "
                      "there is no --text-column)")
    chat.add_argument("--message-field-role", metavar="NAME",
                      help="the messages' field holding the role (ShareGPT: from; default role)")
    chat.add_argument("--message-field-content", metavar="NAME",
                      help="the messages' field holding the text (ShareGPT: value; default "
                      "content)")
    chat.add_argument("--chat-template", metavar="FILE|NAME",
                      help="a Jinja template file, or an Axolotl template name (chatml, llama3, "
                      "...; needs axolotl); default: the tokenizer's")
    chat.add_argument("--roles-to-train", metavar="ROLES",
                      help="comma-separated roles whose turns are trained (default: assistant)")
    chat.add_argument("--train-on-inputs", action="store_true",
                      help="train on every turn (Axolotl's train_on_inputs)")
    chat.add_argument("--train-on-eos", choices=TRAIN_OPTIONS,
                      help="which EOS tokens are trained (default: turn)")
    chat.add_argument("--train-on-eot", choices=TRAIN_OPTIONS,
                      help="which end-of-turn tokens are trained (default: as --train-on-eos)")
    chat.add_argument("--eot-tokens", metavar="TOKENS",
                      help="comma-separated end-of-turn tokens (default: the EOS token)")


def _demo_parser(sub: Any, commands: Commands) -> None:
    """fastaxo demo."""
    p_demo = sub.add_parser(
        "demo", help="prepare on the built-in dataset, next to a plain-Python pipeline"
    )
    p_demo.add_argument(
        "--rows",
        type=cli_positive_int,
        default=200_000,
        help="rows of the built-in dataset (default 200000)",
    )
    _length_argument(p_demo, 4096)
    p_demo.add_argument("--strategy", choices=STRATEGIES, default="bfd")
    p_demo.add_argument("--threads", type=cli_positive_int, default=None)
    p_demo.add_argument(
        "--dir", help="where to make the temporary directory (default: the system's)"
    )
    p_demo.add_argument(
        "--report-json", metavar="FILE", help="also write both reports and the check as JSON"
    )
    p_demo.add_argument("-q", "--quiet", action="store_true",
                     help="no progress (a bar on a terminal, else a line every few seconds)")
    p_demo.set_defaults(func=commands["demo"])


def _info_parser(sub: Any, commands: Commands) -> None:
    """fastaxo info."""
    p_info = sub.add_parser("info", help="show version, OpenMP, threads and the SHA-256 path")
    p_info.add_argument("--tokenizer", metavar="PATH",
                        help="also say which encoder fastaxo uses for this tokenizer (a "
                        "directory or tokenizer.json), on raw text and on chat: fastaxo's C "
                        "encoder, or HF's and why")
    p_info.set_defaults(func=commands["info"])


def _dedupe_parser(sub: Any, commands: Commands) -> None:
    """fastaxo dedupe."""
    p_d = sub.add_parser("dedupe", help="exact dedupe of Parquet files, or of the built-in dataset")
    p_d.add_argument("-q", "--quiet", action="store_true",
                     help="no progress (a bar on a terminal, else a line every few seconds)")
    p_d.add_argument("inputs", nargs="*", help="Parquet files (default: the built-in dataset)")
    p_d.add_argument("-o", "--output", help="write the kept rows to this Parquet file")
    p_d.add_argument("--columns", help="comma-separated columns to compare (default: all, "
                     "the columns written)")
    p_d.add_argument(
        "--batch-rows",
        type=cli_positive_int,
        default=65536,
        help="rows per batch read (default 65536)",
    )
    p_d.add_argument(
        "--threads",
        type=cli_positive_int,
        default=None,
        help="threads (default: FASTAXO_NUM_THREADS, OMP_NUM_THREADS, CPUs)",
    )
    p_d.add_argument(
        "--rows",
        type=cli_positive_int,
        default=200_000,
        help="rows of the built-in dataset (default 200000)",
    )
    p_d.set_defaults(func=commands["dedupe"])


def _bench_parser(sub: Any, commands: Commands, argv: list[str]) -> None:
    """fastaxo bench: its options only when it runs (they import the benchmark harness)."""
    p_b = sub.add_parser(
        "bench",
        help="the benchmark matrix: JSON, Markdown and PNG charts",
        description="Run every kernel (hash_rows, dedupe, pack_bins, pack, pad, and the reader per "
        "format) at 10k, 100k, 1M and 10M rows against every installed baseline (hashlib, plain "
        "Python, NumPy, pyarrow, fast-axolotl, HF datasets, Axolotl), each cell in a fresh process "
        "(peak memory), outputs checked against the baselines; cells over the memory budget or "
        "the time limit are skipped and listed. Writes results.json, results.md and PNG charts "
        "(matplotlib, optional). Exit 1 if a check failed.",
    )
    if argv[:1] == ["bench"]:  # (its options import the benchmark harness: ~50 ms)
        from fastaxo._bench.matrix import add_arguments as _bench_arguments

        _bench_arguments(p_b)
    p_b.set_defaults(func=commands["bench"])


def _length_argument(parser: argparse.ArgumentParser, default: int | None) -> None:
    """``--max-length`` (the name pack, pack_bins, pad and prepare share)."""
    parser.add_argument("--max-length", type=cli_positive_int, metavar="N",
                        help="tokens per packed row" + (f" (default {default})" if default else
                                                        " (required)"))


def _ray_arguments(p_p: argparse.ArgumentParser) -> None:
    """prepare's Ray options."""
    p_p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run on a Ray cluster ('local' starts one here; 'auto', "
        "'host:port'): OUTPUT is a directory of shards part-NNNNN.parquet, one per window, that "
        "read "
        "in order equal the single-machine output (pip install 'fastaxo[ray]')",
    )
    p_p.add_argument("--ray-cpus-per-task", type=cli_positive_float, default=1.0, metavar="C",
                     help="CPUs each Ray task reserves (default 1; --threads defaults to the same)")
    p_p.add_argument(
        "--ray-unit-rows",
        type=cli_positive_int,
        default=16_384,
        metavar="N",
        help="input rows per Ray scan task (Parquet: whole row groups up to about N; "
        "default 16384)",
    )
