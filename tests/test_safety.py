"""Safe inside a real training process (issue 18): hostile sizes and offsets, buffers changed by
another thread, thread-count bounds, byte order, forks. Each test failed (crashed, hung, or
returned garbage) before its fix; the dangerous ones run in a child process, so a crash is a
failed test, not a dead test run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import EXT

import fastaxo
from fastaxo.errors import CapacityError, FileFormatError, InvalidInputError, InvalidTypeError

needs_ext = pytest.mark.skipif(EXT is None, reason="needs the compiled extension")


def _child(code: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (cwd=/: the installed fastaxo); a crash is its exit
    status, a hang its timeout."""
    full = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, cwd="/", env=full, timeout=timeout)


def _ok(r: subprocess.CompletedProcess, expect: str) -> None:
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    assert expect in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


# ------------------------------------------------------------------ sizes that would wrap
@pytest.mark.parametrize("pad_to", [2**62 + 1, 2**61, 2**63 - 1])
def test_a_huge_pad_to_is_refused_before_anything_is_allocated(pad_to):
    # 4 rows x (2**62 + 1) wraps int64 to 4: the old code made an 8-element buffer and the kernel
    # wrote rows of 2**62 elements into it (SIGSEGV)
    r = _child(f"""
        import numpy as np, fastaxo
        vals = np.arange(40, dtype=np.int64); offs = np.arange(0, 41, 5, dtype=np.int64)
        for call in (lambda: fastaxo.pad_batches((vals, offs), [0, 4, 8], max_length={pad_to},
                                                 truncate=True),
                     lambda: fastaxo.pad((vals, offs), max_length={pad_to}, truncate=True)):
            try:
                call()
                print("returned")
            except fastaxo.CapacityError as e:
                print("CapacityError", "more than fastaxo allocates" in str(e))
        """)
    _ok(r, "CapacityError True\nCapacityError True")


def test_a_huge_multiple_of_is_refused():
    rows = [np.arange(5, dtype=np.int64), np.arange(3, dtype=np.int64)]
    with pytest.raises((CapacityError, InvalidInputError)):
        fastaxo.pad(rows, pad_to_multiple_of=2**62)
    with pytest.raises((CapacityError, InvalidInputError)):
        fastaxo.pad((np.arange(8, dtype=np.int64), np.array([0, 5, 8])), pad_to_multiple_of=2**62)


def test_a_huge_packed_width_is_refused():
    ids = (np.arange(10, dtype=np.int64), np.array([0, 4, 10]))
    with pytest.raises(CapacityError, match="more than fastaxo allocates"):
        fastaxo.pack(ids, 2**61, strategy="ff")


def test_a_huge_split_is_refused_before_anything_is_allocated():
    # (issue 27) overflow="split" of one 2**34-token row into rows of 8 made 16 GiB arrays, one
    # after another, and the OOM killer ended the test run (the fuzz found it; pack splits
    # through the same code). In a child under an address-space limit: were it back, the child
    # gets a MemoryError, and the machine lives. (Not under AddressSanitizer, whose shadow memory
    # needs terabytes of address space: the sanitizer leg runs code the main leg has passed.)
    r = _child("""
        import os, resource, numpy as np, fastaxo
        if "asan" not in os.environ.get("LD_PRELOAD", ""):
            resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
        for lengths, cap in (([3, 2**34, 5], 8), ([2**63 - 1], 1), ([2**40] * 4_000, 2**20)):
            try:
                fastaxo.pack_bins(np.array(lengths), cap, overflow="split", strategy="ffd")
                print("returned")
            except fastaxo.CapacityError as e:
                print("CapacityError", "pieces" in str(e))
            except MemoryError:
                print("MemoryError")
        """)
    _ok(r, "CapacityError True\nCapacityError True\nCapacityError True")


# ------------------------------------------------------------------ offsets
@pytest.mark.parametrize("dtype, offsets", [
    (np.int32, [0, 2**31 - 1, -(2**31) + 5]),           # np.diff wraps to +6 in int32
    (np.int64, [0, 2**62, -(2**63) + 3]),               # and in int64
    (np.int64, [0, 3, 2, 10]),                          # plainly decreasing
    (np.int64, [-1, 3, 10]),
    (np.int64, [0, 3, 11]),                             # past the 10 values
])
def test_offsets_are_validated_without_subtracting(dtype, offsets):
    r = _child(f"""
        import numpy as np, fastaxo
        vals = np.arange(10, dtype=np.int64)
        offs = np.array({offsets!r}, dtype=np.{np.dtype(dtype).name})
        for name, call in (("pack", lambda: fastaxo.pack((vals, offs), 8, overflow="truncate")),
                           ("pad", lambda: fastaxo.pad((vals, offs), max_length=8, truncate=True)),
                           ("bins", lambda: fastaxo.pack_bins((vals, offs), 8,
                                                              overflow="truncate"))):
            try:
                call()
                print(name, "returned")
            except fastaxo.InvalidInputError as e:
                print(name, "refused", "offsets" in str(e))
        """)
    _ok(r, "pack refused True\npad refused True\nbins refused True")


def test_batch_offsets_are_validated_without_subtracting():
    rows = (np.arange(10, dtype=np.int64), np.array([0, 2, 4, 6, 8, 10]))
    big = 3 * 2**61
    for bo in ([0, big, -big, 5], [0, 3, 2, 5]):
        with pytest.raises(InvalidInputError, match="batch_offsets"):
            fastaxo.pad_batches(rows, np.array(bo, dtype=np.int64))


@pytest.mark.parametrize("field, value, err", [
    ("offsets", np.array([0, 5, 2]), InvalidInputError),                   # decreasing
    ("offsets", np.array([0, 2, 9]), InvalidInputError),                   # past the entries
    ("offsets", np.array([1, 3]), InvalidInputError),                      # not from 0
    ("starts", np.array([2**63 - 2, 0, 0]), InvalidInputError),            # start + length wraps
    ("lengths", np.array([2**62, 1, 1]), InvalidInputError),
    ("lengths", np.array([1.5, 1.0, 1.0]), InvalidTypeError),
    ("indices", np.array([0, 1]), InvalidInputError),                      # fewer than lengths
])
def test_user_built_bins_are_checked(field, value, err):
    ids = (np.arange(12, dtype=np.int64), np.array([0, 4, 8, 12]))
    good = fastaxo.pack_bins(ids, 8, strategy="ff")
    parts = {"indices": good.indices, "offsets": good.offsets, "lengths": good.lengths,
             "starts": np.zeros(3, np.int64)}
    parts[field] = value
    bins = fastaxo.Bins(parts["indices"], parts["offsets"], parts["lengths"], parts["starts"], 8,
                        None)
    with pytest.raises(err):
        fastaxo.pack(ids, 8, bins=bins)


def _crafted_ipc(path, kind: str) -> None:
    """An Arrow IPC file written valid, then its list offsets patched (a crafted file)."""
    import pyarrow as pa

    offs = np.array([0, 10, 20, 30], dtype=np.int32)
    ids = pa.ListArray.from_arrays(pa.array(offs), pa.array(np.arange(30, dtype=np.int32) + 7))
    t = pa.table({"input_ids": ids})
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, t.schema) as w:
        w.write_table(t)
    raw = bytearray(path.read_bytes())
    i = raw.find(offs.tobytes())
    assert i >= 0 and raw.find(offs.tobytes(), i + 1) < 0
    patch = {"end": (12, 50_000_000), "down": (4, 25)}[kind]
    raw[i + patch[0]: i + patch[0] + 4] = np.array([patch[1]], dtype=np.int32).tobytes()
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("kind", ["end", "down"])
def test_a_crafted_arrow_file_is_a_file_format_error(tmp_path, kind):
    path = tmp_path / f"crafted_{kind}.arrow"
    _crafted_ipc(path, kind)
    with pytest.raises(FileFormatError, match=r"crafted_.*record batch 0.*corrupt"):
        list(fastaxo.iter_batches(path))
    with pytest.raises(FileFormatError):
        fastaxo.prepare(path, str(tmp_path / "out.parquet"), 64, overflow="truncate")
    assert not (tmp_path / "out.parquet").exists()


# ------------------------------------------------------------------ buffers another thread frees
@needs_ext
@pytest.mark.parametrize("what", ["hash_rows", "pack", "pad"])
def test_a_list_emptied_by_another_thread_mid_call_is_safe(what):
    # rows of 256 KiB are mmap'd by malloc: freed, they are unmapped, so the old code (which read
    # them with the GIL released through the caller's list) crashed at once
    r = _child(f"""
        import threading, time, hashlib, numpy as np, fastaxo
        what = {what!r}
        if what == "hash_rows":
            rows = [bytes([i % 251]) * (1 << 20) for i in range(48)]
            want = [hashlib.sha256(r).digest() for r in rows]
        else:
            rows = [np.full(64 << 10, i, dtype=np.int32) for i in range(48)]
        stop = threading.Event()
        def vandal(delay):
            # empty the list while the kernel runs (its GIL is released): the rows are freed
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < delay and not stop.is_set():
                time.sleep(0)
            rows.clear()
        ok = 0
        for k in range(20):
            rows[:] = ([bytes([i % 251]) * (1 << 20) for i in range(48)] if what == "hash_rows"
                       else [np.full(1 << 18, i, dtype=np.int32) for i in range(48)])
            t = threading.Thread(target=vandal, args=(0.0002 * k,)); stop.clear(); t.start()
            try:
                if what == "hash_rows":
                    out = fastaxo.hash_rows(rows, num_threads=2)
                    assert [bytes(d) for d in out] == want[:len(out)]
                elif what == "pack":
                    out = fastaxo.pack(rows, 1 << 19, strategy="nf", num_threads=2)
                    assert out["input_ids"].shape[1] == 1 << 19
                else:
                    out = fastaxo.pad(rows, num_threads=2)
                    for i, r in enumerate(out["input_ids"]):
                        assert (r == i).all()
                ok += 1
            except (fastaxo.FastaxoError, ValueError, IndexError):
                ok += 1  # a clean error is fine; a crash or wrong bytes is not
            finally:
                stop.set(); t.join()
        print("done", ok)
        """, timeout=300)
    _ok(r, "done 20")


# ------------------------------------------------------------------ thread counts, byte order
def test_num_threads_has_a_bound_and_a_clear_error():
    from fastaxo._core.threads import max_num_threads

    bound = max_num_threads()
    with pytest.raises(InvalidInputError, match=r"num_threads is 50,000; fastaxo runs at most"):
        fastaxo.hash_rows(["a"] * 10, num_threads=50_000)
    assert len(fastaxo.hash_rows(["a"] * 10, num_threads=bound)) == 10
    r = _child("import fastaxo; fastaxo.hash_rows(['a'] * 10000)", FASTAXO_NUM_THREADS="50000")
    assert r.returncode == 1 and "FASTAXO_NUM_THREADS='50000' asks for more threads" in r.stderr
    r = subprocess.run([sys.executable, "-m", "fastaxo", "dedupe", "--threads", "50000"],
                       capture_output=True, text=True, cwd="/", timeout=120)
    assert r.returncode != 0 and "Thread creation failed" not in r.stderr


@pytest.mark.parametrize("order", [">", "<"])
def test_values_of_either_byte_order_are_read_as_numbers(order):
    vals = np.arange(40, dtype=np.int64) * 3
    offs = np.arange(0, 41, 5, dtype=np.int64)
    want = fastaxo.pack((vals, offs), 16)
    for dt in ("i8", "i4", "u2"):
        v = vals.astype(order + dt)
        got = fastaxo.pack((v, offs.astype(order + "i8")), 16)
        assert (got["input_ids"] == want["input_ids"]).all()
        assert (fastaxo.pad((v, offs))["input_ids"] == fastaxo.pad((vals, offs))["input_ids"]).all()


# ------------------------------------------------------------------ fork
@needs_ext
@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_child_forked_after_a_parallel_kernel_does_not_hang():
    # GNU OpenMP's thread team does not survive fork: a child that starts one waits for ever
    r = _child("""
        import os, numpy as np, fastaxo
        rows = [b"x" * 100] * 200_000
        ids = [np.arange(n % 300 + 1, dtype=np.int32) for n in range(20_000)]
        fastaxo.hash_rows(rows, num_threads=2)
        fastaxo.pack(ids, 1024, num_threads=2)
        pid = os.fork()
        if pid == 0:
            out = fastaxo.hash_rows(rows)                       # default threads
            p = fastaxo.pack(ids, 1024, num_threads=2)          # even when asked for two
            d = fastaxo.dedupe(rows)
            b = fastaxo.pad_batches(ids, np.arange(0, 20_001, 1000))
            os._exit(0 if len(out) == len(rows) and len(d.keep) == 1 and len(b) == 20 else 3)
        _, st = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(st))
        """, timeout=60)
    _ok(r, "child 0")


@needs_ext
@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_child_forked_while_another_thread_encodes_does_not_hang():
    # the fork lands while a thread is inside the encoder: its OpenMP team is running and the
    # tokenizer's cache lock is held. The child must neither wait for that lock (it takes
    # caches of its own) nor start a thread team (threads are off after fork), and its ids
    # must be the parent's
    import tokenizer_data

    r = _child(f"""
        import os, threading, time
        from fastaxo import Tokenizer
        tok = Tokenizer.from_pretrained({str(tokenizer_data.qwen3_json())!r})
        big = ["Fork-safe encoding, word after word. " * 400] * 2000
        small = ["caf\u00e9 \u65e5\u672c\u8a9e", "plain words"] * 500
        want = tok.encode_batch(small, num_threads=2).to_pylist()
        stop = threading.Event()
        started = threading.Event()

        calls = [0, 0]                         # started, finished

        def spin():
            while not stop.is_set():
                calls[0] += 1
                started.set()
                tok.encode_batch(big, num_threads=2)
                calls[1] += 1

        th = threading.Thread(target=spin)
        th.start()
        started.wait()
        time.sleep(0.05)                       # inside an encode_batch of ~30 MB
        inside = calls[0] != calls[1]
        pid = os.fork()
        if pid == 0:
            ok = (tok.encode_batch(small, num_threads=2).to_pylist() == want
                  and tok.encode_batch(big[:3]).to_pylist() == tok.encode_batch(big[:3]).to_pylist())
            os._exit(0 if ok else 3)
        _, st = os.waitpid(pid, 0)
        stop.set()
        th.join()
        print("child", os.waitstatus_to_exitcode(st), "forked inside a call", inside)
        """, timeout=120, PYTHONWARNINGS="ignore::DeprecationWarning")
    _ok(r, "child 0 forked inside a call True")


# ------------------------------------------------------------------ busy cores
def _openmp_built() -> bool:
    r = _child("import fastaxo._hash as h; print(h.openmp_enabled())")
    return r.returncode == 0 and r.stdout.strip() == "True"


@needs_ext
@pytest.mark.parametrize("user", [None, "ACTIVE"])
def test_openmp_waits_passively_unless_the_user_chose_a_policy(user):
    # GNU OpenMP spins at barriers by default (GOMP_SPINCOUNT 300000); with the other core busy
    # a spinning thread starved the one it waited for and `pack` ran 6x slower on two threads
    # than on one. fastaxo's libgomp loads with spin count 0, the user's choice wins, and the
    # variable does not leak into the environment of what loads later (torch's libgomp)
    if not _openmp_built():
        pytest.skip("built without OpenMP")
    env = {"OMP_DISPLAY_ENV": "verbose"}
    if user:
        env["OMP_WAIT_POLICY"] = user
    r = _child("""
        import os, fastaxo
        print("left", os.environ.get("OMP_WAIT_POLICY"))
        """, **env)
    assert r.returncode == 0, r.stderr[-3000:]
    if user is None:
        assert "GOMP_SPINCOUNT = '0'" in r.stderr, r.stderr
        assert "left None" in r.stdout
    else:
        assert "OMP_WAIT_POLICY = 'ACTIVE'" in r.stderr, r.stderr
        assert "GOMP_SPINCOUNT = '0'" not in r.stderr
        assert "left ACTIVE" in r.stdout


@needs_ext
def test_with_torch_loaded_first_fastaxo_still_waits_passively():
    # torch's CPU wheel ships libgomp.so.1, and torch is usually imported before fastaxo. The
    # wheel's own copy of libgomp (renamed by auditwheel) is a separate runtime: it starts with
    # spin count 0 while torch's keeps the user's settings. A source build links libgomp.so.1
    # itself and would share torch's runtime (README, "Threads, forks and busy cores").
    if os.environ.get("FASTAXO_EXPECT_AXOLOTL") == "1":  # scripts/test.sh installed torch
        import torch  # noqa: F401
    else:
        pytest.importorskip("torch")
    if not _openmp_built():
        pytest.skip("built without OpenMP")
    import fastaxo._pack as p

    libs = os.path.join(os.path.dirname(os.path.dirname(p.__file__)), "fastaxo.libs")
    if not (os.path.isdir(libs) and any(n.startswith("libgomp") for n in os.listdir(libs))):
        pytest.skip("a source build: its libgomp.so.1 is torch's once torch is loaded")
    r = _child("""
        import torch, fastaxo, numpy as np
        torch.ones(4).sum()
        fastaxo.hash_rows([b"x"] * 100_000, num_threads=2)
        """, OMP_DISPLAY_ENV="verbose")
    assert r.returncode == 0, r.stderr[-3000:]
    counts = [ln.split("=")[1].strip() for ln in r.stderr.splitlines() if "GOMP_SPINCOUNT" in ln]
    assert len(counts) == 2 and "'0'" in counts and counts.count("'0'") == 1, r.stderr


def test_iter_pack_keeps_its_own_rows_between_chunks():
    # the generator runs between the caller's statements: a caller that empties its list and
    # drops its arrays after the first chunk must not free the rows under it
    import gc

    rng = np.random.default_rng(5)
    rows = [rng.integers(0, 1000, int(n)).astype(np.int32) for n in rng.integers(1, 300, 3000)]
    want = [dict(c) for c in fastaxo.iter_pack([r.copy() for r in rows], 512, chunk_bins=64)]
    mine = list(rows)
    it = iter(fastaxo.iter_pack(mine, 512, chunk_bins=64))
    got = [dict(next(it))]
    mine.clear()
    del rows
    gc.collect()
    got += [dict(c) for c in it]
    assert len(got) == len(want) > 2
    for a, b in zip(got, want):
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
