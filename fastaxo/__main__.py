"""The ``fastaxo`` command line.

fastaxo prepare INPUT... -o OUT --max-length N
                             dedupe + pack tokenized rows into packed Parquet (bounded memory)
fastaxo prepare --ray ADDRESS|local INPUT... -o OUT_DIR --max-length N
                             the same on a Ray cluster: shards OUT_DIR/part-NNNNN.parquet
fastaxo demo [--rows N]      prepare on the built-in dataset, next to a plain-Python pipeline
fastaxo info [--tokenizer PATH]
                             what this build is: version, OpenMP, threads, SHA-256 path;
                             with --tokenizer, the encoder fastaxo uses for it (or why HF's)
fastaxo dedupe [FILE ...]    exact dedupe of Parquet files (streamed, bounded memory);
                             with no FILE, of the built-in default dataset
fastaxo bench [--quick] [--out DIR]
                             the benchmark matrix against every installed baseline:
                             results.json, results.md and PNG charts (matplotlib)

Exit codes: 0 success, 1 a data error (the message names the file and row; bench: a failed
check), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from fastaxo._cli_args import build_parser
from fastaxo._core.proc import peak_rss_mib


def _cmd_info(args: argparse.Namespace) -> int:
    import fastaxo
    from fastaxo.tokenizer.select import ENV, choice

    fastaxo.show_config()
    mode = choice()
    print(f"  tokenizer        : {mode} ({ENV}: "
          + {"auto": "fastaxo's C encoder where exact, else HF's)",
             "hf": "HF tokenizers always)",
             "fastaxo": "fastaxo's C encoder, an error where not exact)"}[mode])
    from fastaxo.chat.snapshot import ENV as CACHE_ENV
    from fastaxo.chat.snapshot import cache_dir

    where = cache_dir()
    print(f"  tokenizer cache  : {where if where is not None else 'off'} ({CACHE_ENV}: "
          "snapshots that spare a repeated chat prepare the transformers import)")
    if args.tokenizer is not None:
        return _info_tokenizer(args.tokenizer)
    return 0


def _info_tokenizer(path: str) -> int:
    """Which encoder fastaxo uses for the tokenizer at ``path``: for raw text (as prepare
    --tokenizer loads it) and, when the directory holds a chat template and transformers is
    installed, for chat."""
    from fastaxo.pipeline.columns import load_tokenizer

    if not os.path.exists(path):
        print(f"  tokenizer        : {path}\n    error          : no such file or directory")
        return 1
    tt = load_tokenizer(path)  # a file that is not a tokenizer: one line on stderr, exit 1
    print(f"  tokenizer        : {path}\n    file           : {tt.file}\n"
          f"    text encoder   : {tt.describe_encoder()}")
    if not os.path.isdir(path):
        return 0
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        print("    chat encoder   : unknown (transformers is not installed)")
        return 0
    from fastaxo.errors import InvalidInputError
    from fastaxo.pipeline.columns import ChatTokenizer

    try:  # as prepare loads it: from the tokenizer's snapshot when one is recorded
        spec = ChatTokenizer(path).spec
        problem = spec.problem()
        if problem is not None:
            print(f"    chat encoder   : HF tokenizers, Axolotl's algorithm ({problem})")
        elif spec.encoder == "fastaxo":
            print("    chat encoder   : fastaxo")
        else:
            print(f"    chat encoder   : HF tokenizers ({spec.encoder_reason})")
    except InvalidInputError as e:
        if "the tokenizer has none" in str(e):  # (ChatSpec.create's words)
            print("    chat encoder   : none (the tokenizer has no chat template)")
        else:
            print(f"    chat encoder   : none: {e}")
    except Exception as e:  # noqa: BLE001 - info reports, it does not fail on a tokenizer
        # (transformers cannot load it for chat; prepare's text path above still can)
        print(f"    chat encoder   : none: transformers cannot load it for chat "
              f"({type(e).__name__}: {e})")
    return 0


def _dedupe_builtin(args: argparse.Namespace) -> int:
    import numpy as np

    import fastaxo
    from fastaxo._bench.demo import tokenized_table

    print(
        f"fastaxo dedupe: built-in default dataset ({args.rows:,} tokenized rows, 10% exact "
        "duplicates, seed 0)"
    )
    table = tokenized_table(args.rows, 0.1, seed=0)
    ids = table.column("input_ids").combine_chunks()
    print(f"  columns {table.column_names}, {len(ids.values):,} tokens per column, "
          f"{table.nbytes / 2**20:,.0f} MiB in Arrow")
    cfg = fastaxo.config()
    threads = cfg["default_threads"] if args.threads is None else args.threads

    t0 = time.perf_counter()
    res = fastaxo.dedupe(table, num_threads=args.threads)
    dt = time.perf_counter() - t0
    print(f"  dedupe over all {table.num_columns} columns: kept {len(res.keep):,} rows, dropped "
          f"{res.n_duplicates:,} duplicates in {dt * 1e3:,.0f} ms ({len(table) / dt:,.0f} rows/s, "
          f"{threads} threads, SHA-256 path {cfg['sha256']})")

    # The same digests two ways: fastaxo on the Arrow column, and the hashlib loop a user writes.
    t0 = time.perf_counter()
    digests = fastaxo.hash_rows(ids, num_threads=args.threads)
    dt_fx = time.perf_counter() - t0
    offs, vals = np.frombuffer(ids.buffers()[1], np.int32)[: len(ids) + 1], ids.values.to_numpy()
    t0 = time.perf_counter()
    ref = [hashlib.sha256(vals[offs[i] : offs[i + 1]].tobytes()).digest() for i in range(len(ids))]
    dt_ref = time.perf_counter() - t0
    same = digests.tobytes() == b"".join(ref)
    print(
        f"  SHA-256 of input_ids rows: fastaxo {dt_fx * 1e3:,.0f} ms, hashlib loop "
        f"{dt_ref * 1e3:,.0f} ms "
        f"({dt_ref / dt_fx:.1f}x), digests identical: {same}"
    )
    distinct = len(set(ref))
    print(f"  seen set: {res.seen.nbytes / 2**20:.1f} MiB for {len(res.seen):,} distinct rows; "
          f"peak RSS {peak_rss_mib() or 0:,.0f} MiB (mostly the generated dataset)")
    ok = same and len(res.keep) == distinct and bool(np.all(np.diff(res.keep) > 0))
    print("  result:", "OK" if ok else "MISMATCH")
    return 0 if ok else 1


def _parquet_batches(path: str, batch_rows: int) -> Any:
    """The record batches of a Parquet file; a corrupt or truncated file is a FileFormatError
    that names it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fastaxo.errors import FileFormatError

    try:
        pf = pq.ParquetFile(path, pre_buffer=False)
        # one row group per call, as the reader reads them: pyarrow 15 crashed on a lying
        # footer when iter_batches crossed row groups
        for rg in range(pf.num_row_groups):
            yield from pf.iter_batches(batch_size=batch_rows, row_groups=[rg])
    except (pa.ArrowInvalid, pa.ArrowIOError) as e:
        if isinstance(e, OSError) and e.errno is not None:
            raise  # permission denied, ...: the OS error names the file
        msg = (str(e).splitlines() or [""])[0]
        raise FileFormatError(f"{path}: not a readable Parquet file: {msg}", path) from None


def _cmd_dedupe(args: argparse.Namespace) -> int:
    from fastaxo._core.files import TempOutput, check_not_an_input, check_output
    from fastaxo.errors import InvalidInputError

    if args.output is not None:  # ("-o ''" too: an empty path is an error, not "no output")
        if not args.inputs:
            # without inputs dedupe runs the built-in demo dataset: writing that to OUT would
            # pass off generated rows as the user's result (a glob that matched nothing)
            raise InvalidInputError("-o/--output: no input files to dedupe; give the Parquet "
                                    "files (without inputs, dedupe shows the built-in demo and "
                                    "writes nothing)")
        check_output(args.output, "-o/--output")  # before anything is read
    if not args.inputs:
        return _dedupe_builtin(args)
    import pyarrow.parquet as pq

    from fastaxo._core.progress import Progress
    from fastaxo.readers.sources import check_readable

    t0 = time.perf_counter()
    for path in args.inputs:
        check_readable(path)  # a FIFO, a device, permissions: one line, before any read
    if args.output is not None:
        check_not_an_input(args.output, args.inputs, "-o/--output")
    try:
        total: int | None = sum(pq.read_metadata(p).num_rows for p in args.inputs)
    except Exception:  # not Parquet: the reading below says so, naming the file
        total = None
    tmp = TempOutput(args.output, "-o/--output") if args.output is not None else None
    bar = None if args.quiet else Progress("fastaxo dedupe", total, "rows")
    try:
        with _interrupts() as interrupted:
            n_in, n_out = _dedupe_files(args, tmp, interrupted, bar)
    finally:
        if tmp is not None:
            tmp.abort()  # (nothing left to remove after a commit)
        if bar is not None:
            bar.close()
    dt = time.perf_counter() - t0
    print(
        f"fastaxo dedupe: {n_in:,} rows in, {n_out:,} kept, {n_in - n_out:,} duplicates dropped, "
        f"{dt:.2f} s ({n_in / max(dt, 1e-9):,.0f} rows/s), peak RSS {peak_rss_mib() or 0:,.0f} MiB"
        + (f"; wrote {args.output}" if args.output is not None else "")
    )
    return 0


def _dedupe_files(args: argparse.Namespace, tmp: Any, interrupted: threading.Event,
                  bar: Any) -> tuple[int, int]:
    """``fastaxo dedupe``'s pass over its input files: (rows in, rows kept). The kept rows go
    to ``tmp`` (committed only when complete and not interrupted)."""
    import pyarrow.parquet as pq

    import fastaxo

    seen = fastaxo.Seen()
    columns = args.columns.split(",") if args.columns else None
    n_in = n_out = 0
    writer = None
    try:
        for path in args.inputs:
            for batch in _parquet_batches(path, args.batch_rows):
                if interrupted.is_set():  # a Ctrl-C that library code swallowed
                    raise KeyboardInterrupt
                res = fastaxo.dedupe(batch, columns=columns, seen=seen, num_threads=args.threads)
                n_in += res.n_rows
                n_out += len(res.keep)
                if bar is not None:
                    bar.update(res.n_rows, f"{n_in - n_out:,} duplicates")
                if tmp is not None:
                    if writer is None:
                        writer = pq.ParquetWriter(tmp.path, batch.schema)
                    writer.write_batch(res.apply(batch))
        if tmp is not None:
            if writer is None:  # no rows at all: an empty file with the first input's columns
                from fastaxo.readers.parquet import read_footer

                writer = pq.ParquetWriter(tmp.path, read_footer(args.inputs[0])[0])
            writer.close()
            writer = None
            if interrupted.is_set():
                raise KeyboardInterrupt
            tmp.commit()  # only a complete file ever appears at OUT
    finally:
        if writer is not None:
            try:
                writer.close()
            except Exception:
                pass
    return n_in, n_out


def _fail(cmd: str, exc: BaseException) -> int:
    print(f"fastaxo {cmd}: error: {_describe(exc)}", file=sys.stderr)
    return 1


def _describe(exc: BaseException) -> str:
    """One line for an error that ends a command: what went wrong, and where."""
    if isinstance(exc, MemoryError):
        return ("out of memory" + (f" ({exc})" if str(exc) else "")
                + "; try smaller --batch-rows / --pack-window, or fewer --threads")
    if isinstance(exc, OSError) and exc.strerror:  # "Permission denied: 'out.parquet'"
        return exc.strerror + (f": {exc.filename!r}" if exc.filename else "")
    text = str(exc).strip() or type(exc).__name__
    # pyarrow's messages can run to a C++ backtrace: its first line is the message
    return text.splitlines()[0] if type(exc).__module__.startswith("pyarrow") else text


def _run(args: argparse.Namespace) -> int:
    """Run a command: a user error ends in one line on stderr and exit 1 (argparse's own errors
    are exit 2); Ctrl-C is 130; SIGTERM / SIGHUP remove this run's temporary files and exit
    128 + the signal; a closed stdout (``| head``) is not an error."""
    from fastaxo._core.files import (
        Terminated,
        received_signal,
        remove_live_temporaries,
        signals_remove_temporaries,
    )
    from fastaxo.errors import FastaxoError

    cmd = args.command
    previous = signals_remove_temporaries()

    def stopped(signum: int) -> int:
        name = signal.Signals(signum).name
        print(f"fastaxo {cmd}: stopped by {name}; no output written", file=sys.stderr)
        return 128 + signum

    code = 0
    try:
        code = int(args.func(args))
        # here, not at exit: a stdout whose reader went away fails where it is handled (at
        # exit, Python prints "Exception ignored ... BrokenPipeError" and exits 120)
        if sys.stdout is not None:  # (None under pythonw)
            sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        print(f"fastaxo {cmd}: interrupted; no output written", file=sys.stderr)
        return 130
    except Terminated as t:
        return stopped(t.signum)
    except (FastaxoError, OSError, MemoryError, ImportError) as e:
        if _reader_gone(e):
            # the reader of stdout went away (| head): say nothing more, and keep Python's
            # exit flush from failing on the same pipe
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return code
        sig = received_signal()  # the handler's Terminated, come back as another error
        return _fail(cmd, e) if sig is None else stopped(sig)
    except Exception as e:
        sig = received_signal()
        if sig is not None:
            return stopped(sig)
        if type(e).__module__.startswith("pyarrow"):  # ArrowInvalid & co: a data error
            return _fail(cmd, e)
        raise
    finally:
        # a temporary still registered when the command ends was abandoned, by any path
        # (each writer removes its own; this is the net under a cleanup a Ctrl-C cut short)
        remove_live_temporaries()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _reader_gone(exc: BaseException) -> bool:
    """Whether ``exc`` is the reader of stdout going away (``| head``). POSIX says EPIPE;
    Windows says EINVAL (its ERROR_NO_DATA has no errno of its own), told from another EINVAL
    by flushing stdout again: the text it could not write is still in stdout's buffer."""
    if isinstance(exc, BrokenPipeError):
        return True
    if (os.name != "nt" or not isinstance(exc, OSError) or exc.errno != errno.EINVAL
            or sys.stdout is None):
        return False
    try:
        sys.stdout.flush()
    except OSError as again:
        return again.errno in (errno.EINVAL, errno.EPIPE)
    return False


@contextlib.contextmanager
def _interrupts() -> Iterator[threading.Event]:
    """A command's Ctrl-C, whatever library code does with it.

    A Ctrl-C is a KeyboardInterrupt wherever it lands, but one that lands inside library code
    (an import, a C extension's callback, pyarrow's lazy imports) can come out as another
    exception, or be swallowed. The yielded event is set on SIGINT: the command checks it
    between batches and before it commits its output (prepare's ``cancel=``), and any
    exception that leaves the block after it was set becomes the KeyboardInterrupt it was
    (``_run`` reports it: exit 130)."""
    interrupted = threading.Event()

    def on_sigint(signum: int, frame: Any) -> None:
        interrupted.set()
        raise KeyboardInterrupt

    # a Ctrl-C that lands in a callback Python cannot raise from (an import lock's weakref
    # callback, a __del__) is "ignored" with a traceback on stderr; the event carries it
    # to the command, so it is dropped without the traceback
    hook = sys.unraisablehook

    def quiet(unraisable: Any) -> None:
        if not (isinstance(unraisable.exc_value, KeyboardInterrupt) and interrupted.is_set()):
            hook(unraisable)

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, on_sigint) if main else None
    if main:
        sys.unraisablehook = quiet
    try:
        yield interrupted
    except Exception as e:
        if interrupted.is_set():
            raise KeyboardInterrupt from e
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
            sys.unraisablehook = hook


@contextlib.contextmanager
def _rare_collections() -> Iterator[None]:
    """The cyclic GC rarely during the command: a chat pass makes millions of small objects
    (messages, guards, rows) in a short life, and each young collection scanned them (~2% of
    the CPU); what exists at the start (the imports) is frozen, never scanned again. Restored
    after (main() also runs in-process)."""
    import gc

    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(old[0], 100_000), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def _cmd_prepare(args: argparse.Namespace) -> int:
    from fastaxo._core.files import check_not_an_input, check_output
    from fastaxo.pipeline import prepare

    # every output now, before anything is read: a bad path must not cost the whole run
    if args.ray is None:  # (with --ray, OUTPUT is a directory of shards: ray_prepare checks it)
        check_output(args.output, "-o/--output")
    if args.report_json is not None:
        check_output(args.report_json, "--report-json")
        check_not_an_input(args.report_json, [*args.inputs, args.output], "--report-json")
    with _interrupts() as interrupted, _rare_collections():
        common = dict(
            strategy=args.strategy,
            overflow=args.overflow,
            layout=args.layout,
            attention=args.attention,
            pad_token_id=args.pad_token_id,
            dedupe=not args.no_dedupe,
            dedupe_columns=args.dedupe_columns.split(",") if args.dedupe_columns else None,
            pack_window=args.pack_window,
            tokenizer=args.tokenizer,
            text_column=args.text_column,
            format=args.format,
        )
        tok_opts = dict(add_special_tokens=not args.no_special_tokens,
                        append_eos=args.append_eos, eos_token=args.eos_token)
        chat = _chat_options(args)
        rep: Any
        if args.ray is not None:
            from fastaxo.integrations.ray import prepare as ray_prepare

            rep = ray_prepare(
                args.inputs,
                args.output,
                args.max_length,
                address=args.ray,
                num_cpus_per_task=args.ray_cpus_per_task,
                threads_per_task=args.threads,
                unit_rows=args.ray_unit_rows,
                batch_rows=args.batch_rows,
                max_row_bytes=args.max_row_bytes,
                messages_column=args.messages_column,
                chat=chat,
                **common,
                **tok_opts,
            )
        else:
            rep = prepare(
                args.inputs,
                args.output,
                args.max_length,
                batch_rows=args.batch_rows,
                progress=not args.quiet,
                num_threads=args.threads,
                cancel=interrupted,
                messages_column=args.messages_column,
                chat=chat,
                max_row_bytes=args.max_row_bytes,
                **common,
                **tok_opts,
            )
    print(rep)
    if args.report_json is not None:
        rep.to_json(args.report_json)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    import json
    import shutil
    import tempfile

    from fastaxo._bench.plain_pipeline import check_packed, plain_prepare
    from fastaxo._core.files import TempOutput, check_output

    if args.report_json is not None:
        check_output(args.report_json, "--report-json")  # now, not after the demo
    tmp = tempfile.mkdtemp(prefix="fastaxo-demo-", dir=args.dir)
    try:
        data = _demo_data(args.rows, tmp)
        out = os.path.join(tmp, "packed.parquet")
        rep = _demo_prepare(args, data, out, os.path.join(tmp, "report.json"))
        if rep is None:
            return 1
        fl = _demo_floors(data, out, args.max_length, tmp, rep.seconds)
        print(
            "plain Python on the same file (pyarrow batches, hashlib per row + a set, first-fit "
            "decreasing "
            f"over Python lists per window of {rep.pack_window:,}, np.concatenate per bin, pyarrow "
            "writer):"
        )
        ref = plain_prepare(data, os.path.join(tmp, "plain.parquet"), args.max_length,
                            rep.pack_window)
        st = ref["stages"]
        print(
            f"  {ref['seconds']:.2f} s ({ref['rows_in'] / ref['seconds']:,.0f} rows/s): read "
            f"{st['read']:.2f} s, "
            f"dedupe {st['dedupe']:.2f} s, pack {st['pack']:.2f} s, build bins {st['build']:.2f} "
            "s, "
            f"write {st['write']:.2f} s; {ref['duplicates']:,} duplicates, {ref['bins']:,} bins"
        )
        print(
            f"  fastaxo prepare: {rep.seconds:.2f} s, {ref['seconds'] / rep.seconds:.1f}x faster; "
            f"{rep.bins:,} bins vs {ref['bins']:,} (lower bound {rep.lower_bound:,})"
        )
        chk = check_packed(out, args.max_length, ref["kept"])
        ok = _demo_check(args.max_length, os.path.basename(out), rep, ref, chk)
        if args.report_json is not None:
            with TempOutput(args.report_json, "--report-json") as out_json, \
                    open(out_json.path, "w") as fh:
                json.dump({"prepare": rep.as_dict(), "floors": fl,
                           "plain": {k: v for k, v in ref.items() if k != "kept"},
                           "check": chk, "ok": ok}, fh, indent=2)
        print("result:", "OK" if ok else "MISMATCH")
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _demo_floors(data: str, out: str, max_length: int, tmp: str, seconds: float
                 ) -> dict[str, float]:
    """pyarrow alone reading the input and writing prepare's rows (fastaxo._bench.floor), in
    the old layout and the new; printed against prepare's ``seconds``."""
    from fastaxo._bench.floor import floors

    fl = floors(data, out, max_length, tmp)
    print("the floor (pyarrow alone reading the input and writing the same packed rows, zstd "
          "1, no dictionary, no statistics):")
    print(f"  old layout (input_ids, labels, position_ids, segment ids; int32): "
          f"{fl['old']:.2f} s; prepare {seconds:.2f} s is {seconds / fl['old']:.2f}x of it")
    print(f"  new layout (prepare's columns and types): {fl['new']:.2f} s; prepare is "
          f"{seconds / fl['new']:.2f}x of it")
    return fl


def _demo_data(rows: int, tmp: str) -> str:
    """The built-in dataset (rows tokenized chat-shaped rows, 10% duplicates, seed 0) written
    to tmp/chat.parquet; its path."""
    import pyarrow.parquet as pq

    from fastaxo._bench.demo import tokenized_table

    data = os.path.join(tmp, "chat.parquet")
    t0 = time.perf_counter()
    table = tokenized_table(rows, 0.1, seed=0).select(["input_ids", "labels"])
    pq.write_table(table, data, row_group_size=16384)
    tokens = len(table.column("input_ids").combine_chunks().values)
    del table
    print(
        f"fastaxo demo: built-in dataset: {rows:,} tokenized chat-shaped rows (input_ids, "
        "labels; "
        f"{tokens:,} tokens, 10% exact duplicates, seed 0) written to {data} "
        f"({os.path.getsize(data) / 2**20:,.0f} MiB) in {time.perf_counter() - t0:.1f} s"
    )
    return data


def _demo_prepare(args: argparse.Namespace, data: str, out: str, rep_json: str) -> Any:
    """``fastaxo prepare`` of the demo's data in a process of its own (so the peak RSS is
    prepare's, not the generator's); its report (a PrepareReport), or None if it failed."""
    import json
    import subprocess

    from fastaxo._core.backend import child_argv, child_env
    from fastaxo.pipeline import PrepareReport

    cmd = (["prepare", data, "-o", out, "--max-length", str(args.max_length), "--strategy",
            args.strategy, "--report-json", rep_json]
           + (["--threads", str(args.threads)] if args.threads else [])
           + (["--quiet"] if args.quiet else []))
    print("$ fastaxo " + " ".join(cmd[:6]), flush=True)
    r = subprocess.run(child_argv("fastaxo", *cmd), stdout=subprocess.PIPE, text=True,
                       env=child_env())
    print(r.stdout, end="", flush=True)
    if r.returncode != 0:
        print(f"result: MISMATCH (fastaxo prepare exited with {r.returncode})")
        return None
    with open(rep_json) as fh:
        return PrepareReport(**json.load(fh))


def _demo_check(max_length: int, name: str, rep: Any, ref: dict[str, Any],
                chk: dict[str, Any]) -> bool:
    """Prints the check of prepare's output against the plain pipeline's; whether it holds."""
    same_dups = rep.duplicates == ref["duplicates"] and rep.rows_in == ref["rows_in"]
    print(
        f"check: {chk['sequences']:,} sequences read back from {name}; same "
        "kept rows as "
        f"the plain pipeline: {chk['missing'] == 0 and chk['unexpected'] == 0} (missing "
        f"{chk['missing']:,}, "
        f"unexpected {chk['unexpected']:,}); duplicates {rep.duplicates:,} vs "
        f"{ref['duplicates']:,}; "
        f"bins over {max_length:,} tokens: {chk['over_capacity_bins']}; tokens "
        f"{chk['tokens']:,} "
        f"vs report {rep.tokens_out:,}"
    )
    return bool(chk["ok"] and same_dups and chk["tokens"] == rep.tokens_out
                and chk["bins"] == rep.bins)


def _cmd_bench(args: argparse.Namespace) -> int:
    from fastaxo._bench.matrix import cmd_bench

    return cmd_bench(args, args.argv[1:])



def _chat_options(args: Any) -> dict[str, Any] | None:
    """prepare's ``chat`` options from the CLI (None when none is given)."""
    opts: dict[str, Any] = {}
    if args.chat_template is not None:
        opts["chat_template"] = args.chat_template
    for name in ("message_field_role", "message_field_content"):
        if getattr(args, name) is not None:
            opts[name] = getattr(args, name)
    if args.roles_to_train is not None:
        opts["roles_to_train"] = [r for r in args.roles_to_train.split(",") if r]
    if args.train_on_inputs:
        opts["train_on_inputs"] = True
    if args.train_on_eos is not None:
        opts["train_on_eos"] = args.train_on_eos
    if args.train_on_eot is not None:
        opts["train_on_eot"] = args.train_on_eot
    if args.eot_tokens is not None:
        opts["eot_tokens"] = [t for t in args.eot_tokens.split(",") if t]
    return opts or None

def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv, {"prepare": _cmd_prepare, "demo": _cmd_demo,
                                 "info": _cmd_info, "dedupe": _cmd_dedupe,
                                 "bench": _cmd_bench})
    args = parser.parse_args(argv)
    args.argv = argv
    if args.command in ("prepare", "demo") and args.max_length is None:
        if args.command == "demo":
            args.max_length = 4096
        else:
            parser.error("the following arguments are required: --max-length")
    return _run(args)


if __name__ == "__main__":
    sys.exit(main())
