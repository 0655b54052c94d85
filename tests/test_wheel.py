"""The wheel as shipped: it brings the OpenMP runtime its extension loads (auditwheel grafts
libgomp on Linux, delocate Homebrew's libomp on macOS, delvewheel MSVC's vcomp140.dll on
Windows), so fastaxo imports on a machine without one, and that runtime is not newer than the
macOS the wheel's tag promises.

Run where an installed, repaired wheel is under test: FASTAXO_EXPECT_BUNDLED_OPENMP=1 is set by
the wheel workflow's test step ([tool.cibuildwheel] in pyproject.toml) and by scripts/test.sh.
A build from source (the sdist legs, a contributor's tree) links the system's runtime."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import struct
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("FASTAXO_EXPECT_BUNDLED_OPENMP") != "1",
    reason="not a repaired wheel under test (FASTAXO_EXPECT_BUNDLED_OPENMP=1: the wheel "
    "workflow and scripts/test.sh)")

# libgomp-1a2b3c4d.so.1.0.0, libomp.dylib, vcomp140-0123abcd.dll, libiomp5md.dll
OPENMP_RUNTIME = re.compile(r"(lib)?(gomp|omp|iomp5(md)?|vcomp\d*)\b", re.IGNORECASE)

# The shared libraries mapped into a fresh interpreter before and after `import fastaxo` (after
# numpy and pyarrow, which fastaxo imports first: what they load is not fastaxo's).
LOADED = r'''
import ctypes, json, os, sys


def loaded():
    if sys.platform.startswith("linux"):
        with open("/proc/self/maps") as fh:
            fields = (line.split(None, 5) for line in fh)
            return sorted({f[5].strip() for f in fields if len(f) == 6 and "/" in f[5]})
    if sys.platform == "darwin":
        dyld = ctypes.CDLL(None)
        dyld._dyld_image_count.restype = ctypes.c_uint32
        dyld._dyld_get_image_name.argtypes = [ctypes.c_uint32]
        dyld._dyld_get_image_name.restype = ctypes.c_char_p
        names = (dyld._dyld_get_image_name(i) for i in range(dyld._dyld_image_count()))
        return sorted({os.fsdecode(n) for n in names if n})
    from ctypes import wintypes

    k32 = ctypes.WinDLL("kernel32", use_last_error=True)
    k32.GetCurrentProcess.restype = wintypes.HANDLE
    k32.K32EnumProcessModules.argtypes = [wintypes.HANDLE, ctypes.POINTER(wintypes.HMODULE),
                                          wintypes.DWORD, ctypes.POINTER(wintypes.DWORD)]
    k32.K32EnumProcessModules.restype = wintypes.BOOL
    k32.GetModuleFileNameW.argtypes = [wintypes.HMODULE, wintypes.LPWSTR, wintypes.DWORD]
    k32.GetModuleFileNameW.restype = wintypes.DWORD
    mods = (wintypes.HMODULE * 4096)()
    need = wintypes.DWORD()
    if not k32.K32EnumProcessModules(k32.GetCurrentProcess(), mods, ctypes.sizeof(mods),
                                     ctypes.byref(need)):
        raise ctypes.WinError(ctypes.get_last_error())
    buf = ctypes.create_unicode_buffer(32768)
    out = set()
    for m in mods[: min(len(mods), need.value // ctypes.sizeof(wintypes.HMODULE))]:
        if m and k32.GetModuleFileNameW(m, buf, len(buf)):
            out.add(buf.value)
    return sorted(out)


import numpy, pyarrow

before = loaded()
import fastaxo

config = fastaxo.config()
print(json.dumps({"before": before, "after": loaded(), "openmp": config["openmp"],
                  "extension": config["extension_path"]}))
'''


def _same_file_key(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


def _shipped() -> dict[str, str]:
    """The installed distribution's files (its RECORD), by normalised path."""
    files = importlib.metadata.files("fastaxo") or []
    return {_same_file_key(str(f.locate())): str(f) for f in files}


def _fresh_import() -> dict:
    r = subprocess.run([sys.executable, "-c", LOADED], capture_output=True, text=True, cwd="/",
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_openmp_runtime_the_extension_loads_is_the_one_in_the_wheel():
    got = _fresh_import()
    assert got["openmp"] is True, "fastaxo.config() reports OpenMP off: a serial build shipped"
    new = sorted(set(got["after"]) - set(got["before"]))
    runtimes = [p for p in new if OPENMP_RUNTIME.match(os.path.basename(p))]
    assert runtimes, f"importing fastaxo loaded no OpenMP runtime; it loaded {new}"
    shipped = _shipped()
    bundled = sorted(v for v in shipped.values() if OPENMP_RUNTIME.match(os.path.basename(v)))
    binaries = sorted(v for v in shipped.values() if re.search(r"\.(so|dylib|dll|pyd)\b", v))
    assert bundled, f"the wheel ships no OpenMP runtime; its binaries: {binaries}"
    outside = [p for p in runtimes if _same_file_key(p) not in shipped]
    assert not outside, (f"OpenMP runtime(s) loaded from outside the wheel: {outside}; the wheel "
                         f"ships {bundled}")
    assert _same_file_key(got["extension"]) in shipped


def _macos_min_versions(path: str) -> list[tuple[int, int]]:
    """The minimum macOS of each architecture of a Mach-O file (LC_BUILD_VERSION, or the older
    LC_VERSION_MIN_MACOSX), as (major, minor)."""
    with open(path, "rb") as fh:
        data = fh.read()
    (magic,) = struct.unpack_from(">I", data)
    offsets = [0]
    if magic == 0xCAFEBABE:  # universal: fat_arch entries, big-endian
        n = struct.unpack_from(">I", data, 4)[0]
        offsets = [struct.unpack_from(">iiIII", data, 8 + 20 * i)[2] for i in range(n)]
    elif magic == 0xCAFEBABF:  # fat_arch_64
        n = struct.unpack_from(">I", data, 4)[0]
        offsets = [struct.unpack_from(">iiQQII", data, 8 + 32 * i)[2] for i in range(n)]
    out = []
    for off in offsets:
        magic, _cpu, _sub, _kind, ncmds = struct.unpack_from("<5I", data, off)
        assert magic == 0xFEEDFACF, f"{path}: not a 64-bit Mach-O (magic {magic:#x})"
        at = off + 32  # after mach_header_64
        for _ in range(ncmds):
            cmd, size = struct.unpack_from("<2I", data, at)
            if cmd == 0x32:  # LC_BUILD_VERSION: platform, minos, sdk, ntools
                platform, version = struct.unpack_from("<2I", data, at + 8)
                if platform == 1:  # PLATFORM_MACOS
                    out.append((version >> 16, (version >> 8) & 0xFF))
            elif cmd == 0x24:  # LC_VERSION_MIN_MACOSX: version, sdk
                (version,) = struct.unpack_from("<I", data, at + 8)
                out.append((version >> 16, (version >> 8) & 0xFF))
            at += size
    return out


@pytest.mark.skipif(sys.platform != "darwin", reason="Mach-O minimum versions: macOS only")
def test_no_binary_in_the_wheel_needs_a_newer_macos_than_its_tag():
    """Homebrew's libomp is built for the runner's macOS: the wheel's tag (from
    MACOSX_DEPLOYMENT_TARGET) must not promise an older one than any binary it ships needs."""
    tags = [ln.split(":", 1)[1].strip()
            for ln in (importlib.metadata.distribution("fastaxo").read_text("WHEEL") or "")
            .splitlines() if ln.startswith("Tag:")]
    promised = {(int(m[1]), int(m[2])) for t in tags if (m := re.search(r"macosx_(\d+)_(\d+)_", t))}
    assert len(promised) == 1, tags
    (tag,) = promised
    binaries = {k: v for k, v in _shipped().items() if v.endswith((".so", ".dylib"))}
    assert any(OPENMP_RUNTIME.match(os.path.basename(v)) for v in binaries.values()), binaries
    for path, name in sorted(binaries.items()):
        needs = _macos_min_versions(path)
        assert needs and max(needs) <= tag, (name, needs, tag)
