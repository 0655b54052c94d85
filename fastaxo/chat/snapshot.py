"""Tokenizer snapshots: what the chat path asked of a transformers tokenizer, recorded on one
run and replayed on the next, so a repeated ``prepare`` on the same tokenizer directory never
imports transformers (seconds of CPU in every process, Ray workers included).

A snapshot is keyed so that a replay is exactly what the live object would answer: SHA-256
over the tokenizer directory's files (content up to 64 MiB, name + size + mtime above: model
weights), the installed copies of transformers and the libraries its answers depend on (their
metadata files on ``sys.path``: path, size, mtime; read without importing them), Python's and
fastaxo's versions, this
code and the record format. The record carries its key and is checked whole; anything
unreadable, truncated or for another key is a miss, never trusted. It is JSON (a cache
directory must not be a way to run code), tuples tagged so that they come back as tuples.

:func:`open_tokenizer` gives the chat path a :class:`TokenizerSnapshot` in the tokenizer's
place: plain attributes (``chat_template``, ``eos_token``, ``is_fast``, ...) come from the
record; ``backend_tokenizer`` answers what the chat path's checks asked of it (its flags, its
parts' states, read-only calls such as ``encode_batch`` on probe texts) from the record too, and
becomes ``tokenizers.Tokenizer.from_str`` of the recorded backend for anything else; recorded
calls (``apply_chat_template``, ``encode``, ``get_chat_template``, ``__call__``,
keyed by their arguments) return the recorded result. Anything else loads the real tokenizer
(``AutoTokenizer.from_pretrained`` as without a snapshot) and from then on every answer is
the real tokenizer's: correctness never depends on what the record covers, a need it lacks
costs the import. :func:`seal` ends the recording window (the chat tokenizer's construction,
where only fastaxo's own checks ask) and writes the record when it grew.

``FASTAXO_CACHE_DIR``: where records live (a ``tokenizers/`` directory under it; default
``$XDG_CACHE_HOME/fastaxo``, else ``~/.cache/fastaxo``); ``off`` disables them.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import locale
import logging
import os
import re
import stat
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from fastaxo._core import cache
from fastaxo._version import __version__
from fastaxo.chat.recorded import (
    NOTHING,
    BackendRecorder,
    BackendReplay,
    RawBackend,
    Unencodable,
    call_text,
    check_backend_record,
    decode,
    dumps,
    encode,
)

__all__ = ["ENV", "FORMAT", "TokenizerSnapshot", "cache_dir", "go_live", "jinja_environment",
           "open_tokenizer", "seal", "snapshot_key", "status"]

LOG = logging.getLogger("fastaxo.chat")
ENV = cache.ENV
FORMAT = 3
_MAX_HASHED = 64 << 20  # bigger files (model weights) by name, size and mtime
_MAX_RECORD = 512 << 20
# the cache's bounds: records past the newest _KEEP_RECORDS, or past _MAX_CACHE bytes in all,
# go (least recently used first)
_KEEP_RECORDS = 32
_MAX_CACHE = 1 << 30
# methods whose answers depend on the tokenizer's files and their arguments only
RECORDED_METHODS = frozenset({"apply_chat_template", "encode", "get_chat_template", "__call__"})
_BACKEND = ("backend_tokenizer", "_tokenizer")
# what transformers' answers depend on besides the files (sentencepiece, tiktoken, protobuf:
# the conversion of a directory without tokenizer.json; markupsafe: Jinja's escaping)
_PACKAGES = ("transformers", "tokenizers", "jinja2", "markupsafe", "huggingface_hub",
             "sentencepiece", "tiktoken", "protobuf")


def cache_dir() -> str | None:
    """Where tokenizer snapshots live, or None when ``FASTAXO_CACHE_DIR=off``."""
    base = cache.cache_root()
    return None if base is None else os.path.join(base, "tokenizers")


# -- the key ----------------------------------------------------------------------------------

def _files_digest(path: str) -> str:
    """SHA-256 over the directory's files, subdirectories included (symlinks followed, each
    directory once). Raises OSError when something cannot be read."""
    h = hashlib.sha256()
    seen: set[tuple[int, int]] = set()
    for root, dirs, names in os.walk(path, followlinks=True, onerror=_raise):
        st = os.stat(root)
        if (st.st_dev, st.st_ino) in seen:
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs.sort()
        rel = os.path.relpath(root, path).replace(os.sep, "/")
        for name in sorted(names):
            full = os.path.join(root, name)
            st = os.stat(full)
            entry: list[Any] = [f"{rel}/{name}", st.st_size]
            if not stat.S_ISREG(st.st_mode):
                entry += ["special", stat.S_IFMT(st.st_mode)]
            elif st.st_size > _MAX_HASHED:
                entry += ["stat", st.st_mtime_ns]
            else:
                fh_hash = hashlib.sha256()
                with open(full, "rb") as fh:
                    for block in iter(functools.partial(fh.read, 1 << 20), b""):
                        fh_hash.update(block)
                entry += ["sha256", fh_hash.hexdigest()]
            h.update(json.dumps(entry, ensure_ascii=True).encode() + b"\n")
    return h.hexdigest()


def _raise(e: OSError) -> None:
    raise e


def _version(name: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except Exception:  # noqa: BLE001 - not installed, or broken metadata: part of the key
        return None


def _norm(name: str) -> str:
    # importlib.metadata's normalized distribution name
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _installed(names: tuple[str, ...]) -> dict[str, Any]:
    """Per package, the installed copy importlib.metadata finds: the ``<name>-*.dist-info`` /
    ``.egg-info`` entries of the first ``sys.path`` directory that holds any (a directory
    listed twice counts once), each with its metadata file's size and mtime (an upgrade or a
    reinstall changes them); read without importing importlib.metadata (its e-mail parser
    and the version lookups were ~35 ms a run). Where ``sys.path`` holds what this scan does
    not read (a zip or egg file), the versions from importlib.metadata."""
    wanted = {_norm(n): n for n in names}
    got: dict[str, list[Any]] = {n: [] for n in names}
    seen: set[str] = set()
    for entry in sys.path:
        where = entry or "."
        if os.path.isfile(where):
            return {"versions": {n: _version(n) for n in names}}
        real = os.path.realpath(where)
        if real in seen:
            continue
        seen.add(real)
        try:
            children = sorted(os.listdir(where))
        except OSError:
            continue
        here: set[str] = set()
        for child in children:
            low = child.lower()
            if low.endswith(".egg"):
                return {"versions": {n: _version(n) for n in names}}
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            name = wanted.get(_norm(low.rpartition(".")[0].partition("-")[0]))
            if name is None or (got[name] and name not in here):
                continue  # (a later directory's copy: importlib.metadata takes the first)
            here.add(name)
            full = os.path.join(real, child)
            meta = next((m for m in (os.path.join(full, "METADATA"),
                                     os.path.join(full, "PKG-INFO"), full)
                         if os.path.isfile(m)), None)
            try:
                st = os.stat(meta) if meta is not None else None
            except OSError:
                st = None
            got[name].append([full, None if st is None else st.st_size,
                              None if st is None else st.st_mtime_ns])
    return got


def _code_digest() -> str:
    """This module's and the environment copy's source: a record made by other code (a
    development build without a version change) is another key."""
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("snapshot.py", "recorded.py", "environment.py"):
        try:
            with open(os.path.join(here, name), "rb") as fh:
                h.update(fh.read())
        except OSError:
            h.update(b"?")
    return h.hexdigest()


def snapshot_key(path: str) -> dict[str, Any]:
    """The key of ``path``'s snapshot (see the module docstring). Raises OSError when the
    directory cannot be read whole."""
    return {"format": FORMAT, "path": path, "files": _files_digest(path),
            "installed": _installed(_PACKAGES), "python": sys.version,
            "fastaxo": __version__, "code": _code_digest()}


def _key_digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


# -- the record on disk -----------------------------------------------------------------------

def _read(file: str, key: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The record in ``file`` if it is well formed and for ``key``, else (None, why)."""
    try:
        with open(file, "rb") as fh:
            data = fh.read(_MAX_RECORD + 1)
    except FileNotFoundError:
        return None, "no snapshot yet"
    except OSError as e:
        return None, f"snapshot unreadable ({e.strerror})"
    try:
        if len(data) > _MAX_RECORD:
            raise ValueError("too large")
        rec = _decode_record(data, key)
        if not (type(rec.get("type")) is str and type(rec.get("attrs")) is dict
                and type(rec.get("calls")) is dict and type(rec.get("methods")) is list
                and all(type(m) is str for m in rec["methods"])
                and (rec.get("backend") is None or type(rec.get("backend")) is RawBackend)):
            raise ValueError("a field is missing or of another type")
        env = rec.get("environment")
        if env is not None and not (type(env) is dict and type(env.get("equal")) is bool
                                    and env.get("variant") in _env_variants()):
            raise ValueError("the environment verdict is malformed")
        for v in rec["attrs"].values():
            decode(v)
        check_backend_record(rec.get("backend_answers"))
        for k, v in rec["calls"].items():
            if not (type(v) is dict and set(v) == {"value", "date"}
                    and (v["date"] is None or type(v["date"]) is str)):
                raise ValueError(f"call {k[:40]!r} is malformed")
            decode(v["value"])
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        return None, f"snapshot ignored ({e})"
    return rec, "replayed"


# A record file is the record as one line of JSON, then its backend's JSON as it is (the
# line holds the backend's size and SHA-256). Parsing the backend (a tokenizer.json,
# megabytes) as a JSON string took longer than the rest of the record together.

def _encode_record(rec: dict[str, Any]) -> bytes:
    backend = rec.get("backend")
    if backend is None:
        tail, field = b"", None
    elif isinstance(backend, RawBackend):  # (replayed: written back as read, unchecked)
        tail, field = backend.data, {"bytes": len(backend.data), "sha256": backend.sha256}
    else:
        tail = backend.encode("utf-8", "surrogatepass")
        field = {"bytes": len(tail), "sha256": hashlib.sha256(tail).hexdigest()}
    return dumps(dict(rec, backend=field)).encode("utf-8", "surrogatepass") + b"\n" + tail


def _decode_record(data: bytes, key: dict[str, Any] | None) -> dict[str, Any]:
    """The record in ``data`` (ValueError when it is not one, or not for ``key`` unless that
    is None); its fields are checked by :func:`_read`."""
    head, _, tail = data.partition(b"\n")
    rec = json.loads(head.decode("utf-8", "surrogatepass"))
    if type(rec) is not dict or rec.get("format") != FORMAT:
        raise ValueError("another format")
    if key is not None and rec.get("key") != key:
        raise ValueError("made for another key")
    field = rec.get("backend")
    if field is None:
        if tail:
            raise ValueError("bytes after a record without a backend")
    elif (type(field) is dict and set(field) == {"bytes", "sha256"}
          and field["bytes"] == len(tail) and type(field["sha256"]) is str):
        # (its SHA-256 is checked where it is used: RawBackend.text)
        rec["backend"] = RawBackend(tail, field["sha256"])
    else:
        raise ValueError("the backend is not the one the record names")
    return rec


def _write(file: str, rec: dict[str, Any]) -> None:
    """``rec`` to ``file`` (:func:`~fastaxo._core.cache.write_atomic`), then the cache bounded
    (:func:`_prune`). A failure is logged, never raised: the snapshot is an optimisation."""
    try:
        data = _encode_record(rec)
    except (ValueError, TypeError) as e:
        LOG.debug("tokenizer snapshot: not written to %s: %s", file, e)
        return
    if cache.write_atomic(file, data, "tokenizer snapshot"):
        _prune(os.path.dirname(file), file)


def _prune(folder: str, keep: str) -> None:
    """Bound the cache: the newest :data:`_KEEP_RECORDS` records within :data:`_MAX_CACHE`
    bytes stay, ``keep`` always (:func:`~fastaxo._core.cache.prune`)."""
    cache.prune(folder, keep, ".json", _KEEP_RECORDS, _MAX_CACHE)


# -- the proxy ----------------------------------------------------------------------------------

class _State:
    """A snapshot's state (one attribute of the proxy, so that every other name is the
    tokenizer's)."""

    def __init__(self, path: str, loader: Callable[[str], Any], key: dict[str, Any],
                 file: str, rec: dict[str, Any], live: Any, info: dict[str, Any]):
        self.path, self.loader, self.key, self.file, self.rec = path, loader, key, file, rec
        self.live, self.info = live, info
        self.recording, self.grew = True, live is not None
        self.backend: Any = None  # the real backend of a replay, once built
        self.view: Any = None  # what backend_tokenizer gives while recording or replaying
        self.lock = threading.RLock()

    def go_live(self, why: str) -> Any:
        with self.lock:
            if self.live is None:
                LOG.info("tokenizer snapshot: loading the tokenizer (%s)", why)
                self.live = self.loader(self.path)
                self.info["why"] += f"; transformers loaded for {why}"
            return self.live

    def templates(self, kwargs: dict[str, Any], proxy: Any) -> list[str]:
        """The template sources a render may use: the one passed, and the tokenizer's."""
        got = [kwargs["chat_template"]] if isinstance(kwargs.get("chat_template"), str) else []
        own = getattr(proxy, "chat_template", None)
        got += list(own.values()) if isinstance(own, dict) else [own] if own else []
        return [t for t in got if isinstance(t, str)]

    def call_key(self, proxy: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
                 ) -> tuple[str, str | None] | None:
        """(the canonical JSON of a call, the date it holds for), or None when the call
        cannot be keyed (an argument that is not plain data) or its answer must never be
        replayed."""
        date = None
        if name == "apply_chat_template":
            sources = self.templates(kwargs, proxy)
            # A template that renders the date (Llama 3.x's strftime_now("%d %b %Y")) gives
            # another text tomorrow: its renders hold for the local date (and time locale)
            # they were made on. One that draws random numbers (the random filter, lipsum)
            # never renders the same twice: never replayed. (A template that renders the time
            # of day is caught by the renderer's probe check, which then asks transformers.)
            if any("random" in t or "lipsum" in t for t in sources):
                return None
            if any("strftime_now" in t for t in sources):
                date = f"{time.strftime('%Y-%m-%d')} {locale.setlocale(locale.LC_TIME)}"
        text = call_text(name, args, kwargs, date)
        return None if text is None else (text, date)


class TokenizerSnapshot:
    """A transformers tokenizer as the chat path sees it, answered from a snapshot where it
    holds the answer and from the real tokenizer (loaded then) everywhere else. Its class is
    named as the real tokenizer's (``type(obj).__name__`` is read by error messages and by
    :meth:`fastaxo.Tokenizer.from_hf`). Build one with :func:`open_tokenizer`."""

    _fx: _State

    def __getattr__(self, name: str) -> Any:
        st = self.__dict__.get("_fx")
        if st is None:  # (unpickling, or a name looked up before __init__)
            raise AttributeError(name)
        if st.live is None:
            if name in _BACKEND and st.rec["backend"] is not None:
                if st.view is None:
                    st.view = BackendReplay(st)
                return st.view
            if name in st.rec["attrs"]:
                return decode(st.rec["attrs"][name])
            if name in st.rec["methods"] and name in RECORDED_METHODS:
                return _method(self, name)
            st.go_live(f"attribute {name!r}")
        value = getattr(st.live, name)
        if st.recording:
            if name in _BACKEND:
                if st.rec["backend"] is None:
                    return value
                if not (isinstance(st.view, BackendRecorder) and st.view.real is value):
                    st.view = BackendRecorder(st, value)
                return st.view
            if name in RECORDED_METHODS and callable(value):
                if name not in st.rec["methods"]:
                    st.rec["methods"].append(name)
                    st.grew = True
                return _method(self, name)
            if callable(value):
                # a method the record does not know may change the tokenizer: what comes
                # after is not a fresh tokenizer's answer
                st.recording = False
            else:
                try:
                    enc = encode(value)
                except (Unencodable, RecursionError):
                    return value
                if st.rec["attrs"].get(name, NOTHING) != enc:
                    st.rec["attrs"][name] = enc
                    st.grew = True
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        st = self._fx
        st.recording = False  # the tokenizer is no longer the files' tokenizer
        setattr(st.go_live(f"setting {name!r}"), name, value)

    def __delattr__(self, name: str) -> None:
        st = self._fx
        st.recording = False
        delattr(st.go_live(f"deleting {name!r}"), name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _call(self, "__call__", args, kwargs)

    def __len__(self) -> int:
        return len(self._fx.go_live("len()"))

    def __bool__(self) -> bool:
        return True  # (a real tokenizer's len() is never 0)

    def __reduce_ex__(self, protocol: Any) -> Any:
        # pickled (or copied) as the real tokenizer: a copy of it (its own reduction would
        # name its class, which pickle refuses for an object of another class)
        return copy.copy, (self._fx.go_live("pickling"),)

    def __repr__(self) -> str:
        st = self._fx
        return (f"<TokenizerSnapshot of {type(self).__name__} {st.path!r}: "
                f"{'loaded' if st.live is not None else 'replayed'}>")


def _method(proxy: TokenizerSnapshot, name: str) -> Callable[..., Any]:
    def method(*args: Any, **kwargs: Any) -> Any:
        return _call(proxy, name, args, kwargs)

    method.__name__ = method.__qualname__ = name
    return method


def _call(proxy: TokenizerSnapshot, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
          ) -> Any:
    st = proxy._fx
    if st.live is None:
        key = st.call_key(proxy, name, args, kwargs)
        hit = None if key is None else st.rec["calls"].get(key[0])
        if hit is not None and hit["date"] == key[1]:  # type: ignore[index]
            return decode(hit["value"])
        st.go_live(f"a call of {name}")
    live = st.live
    if not st.recording:
        return (live if name == "__call__" else getattr(live, name))(*args, **kwargs)
    before = st.call_key(proxy, name, args, kwargs)
    result = (live if name == "__call__" else getattr(live, name))(*args, **kwargs)
    after = st.call_key(proxy, name, args, kwargs)
    if before is not None and before == after:  # (not across midnight)
        try:
            st.rec["calls"][before[0]] = {"value": encode(result), "date": before[1]}
            st.grew = True
        except (Unencodable, RecursionError):
            pass
    return result


_CLASSES: dict[str, type] = {}


def _proxy_class(name: str) -> type:
    if not name.isidentifier():
        return TokenizerSnapshot
    cls = _CLASSES.get(name)
    if cls is None:
        cls = _CLASSES[name] = type(name, (TokenizerSnapshot,), {"__module__": __name__})
    return cls


def _backend_json(live: Any) -> str | None:
    """The backend's tokenizer.json text when ``from_str`` of it is the same tokenizer (the
    same text again, the same special-token splitting) and both backend names give it."""
    try:
        from tokenizers import Tokenizer

        b = live.backend_tokenizer
        if b is not live._tokenizer:
            return None
        text = b.to_str()
        again = Tokenizer.from_str(text)
        if again.to_str() != text or again.encode_special_tokens != b.encode_special_tokens:
            return None
        return str(text)
    except Exception:  # noqa: BLE001 - not a fast tokenizer: no backend replayed
        return None


def open_tokenizer(path: str, loader: Callable[[str], Any]) -> tuple[Any, dict[str, Any]]:
    """The tokenizer of directory ``path`` for the chat path, and what the snapshot did
    (``{"state": "hit" | "miss" | "off", "why": ..., "file": ...}``, kept current). ``loader``
    loads the real tokenizer (``AutoTokenizer.from_pretrained``): now on a miss (the proxy
    records it) or when off (the real tokenizer itself is returned), later, if ever, on a
    hit. Call :func:`seal` when the construction that asks the tokenizer is done."""
    where = cache_dir()
    if where is None:
        return loader(path), {"state": "off", "why": f"{ENV}=off", "file": None}
    try:
        key = snapshot_key(path)
    except OSError as e:
        why = f"cannot read {e.filename or path}: {e.strerror}"
        return loader(path), {"state": "off", "why": why, "file": None}
    file = os.path.join(where, _key_digest(key) + ".json")
    rec, why = _read(file, key)
    live = None
    if rec is not None:
        cache.touch(file)
    else:
        live = loader(path)
        rec = {"format": FORMAT, "key": key, "type": type(live).__name__, "attrs": {},
               "calls": {}, "methods": [], "backend": _backend_json(live),
               "backend_answers": {"attrs": {}, "parts": {}, "calls": {}},
               "environment": None}
    info = {"state": "miss" if live is not None else "hit", "why": why, "file": file}
    proxy: Any = object.__new__(_proxy_class(rec["type"]))
    object.__setattr__(proxy, "_fx", _State(path, loader, key, file, rec, live, info))
    return proxy, info


def _state_of(tok: Any) -> _State | None:
    return tok._fx if isinstance(tok, TokenizerSnapshot) else None


def seal(tok: Any) -> None:
    """End ``tok``'s recording window and write its record if it grew (and the directory still
    has the key it had when the record began: not changed while it was read)."""
    st = _state_of(tok)
    if st is None:
        return
    st.recording = False
    if not st.grew:  # (a recording stopped early keeps what it recorded before)
        return
    st.grew = False
    try:
        if snapshot_key(st.path) != st.key:
            LOG.debug("tokenizer snapshot: %s changed while it was read; not written", st.path)
            return
    except OSError:
        return
    today = time.strftime("%Y-%m-%d")
    st.rec["calls"] = {k: v for k, v in st.rec["calls"].items()
                       if v["date"] is None or v["date"].startswith(today)}
    _write(st.file, st.rec)


def status(tok: Any) -> dict[str, Any] | None:
    """What ``tok``'s snapshot did (see :func:`open_tokenizer`), or None for a tokenizer that
    is not a snapshot."""
    st = _state_of(tok)
    return None if st is None else dict(st.info)


def go_live(tok: Any, why: str) -> bool:
    """Make ``tok`` answer from the real tokenizer from now on; False when it is not a
    snapshot or already does."""
    st = _state_of(tok)
    if st is None or st.live is not None:
        return False
    st.go_live(why)
    return True


def _env_variants() -> tuple[str, ...]:
    from fastaxo.chat.environment import VARIANTS  # (imports jinja2: only a record's check)

    return VARIANTS


def jinja_environment(tok: Any) -> Any:
    """The Jinja environment to render ``tok``'s chat templates in: fastaxo's copy where a
    run that had transformers loaded found it equal to transformers' (the verdict is in the
    snapshot), else transformers' own (the verdict is recorded while recording)."""
    from fastaxo.chat.environment import (
        closest_variant,
        fastaxo_environment,
        transformers_environment,
    )

    st = _state_of(tok)
    verdict = None if st is None else st.rec.get("environment")
    if verdict is not None and verdict["equal"]:
        return fastaxo_environment(verdict["variant"])
    env = transformers_environment()
    if st is not None and st.recording and verdict is None:
        variant, diffs = closest_variant(env)
        st.rec["environment"] = {"equal": not diffs, "variant": variant, "differences": diffs}
        st.grew = True
        if diffs:
            LOG.info("tokenizer snapshot: fastaxo's Jinja environments differ from "
                     "transformers' (%s, the closest): later runs import transformers' "
                     "environment", ", ".join(diffs))
    return env
