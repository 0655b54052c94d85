"""Build of fastaxo's C/Cython extensions.

OpenMP is probed by compiling and linking a tiny program with the compiler setuptools
will use. FASTAXO_OPENMP=1 makes OpenMP required (wheels set it), FASTAXO_OPENMP=0
disables it, unset means "use it when the compiler has it, else warn loudly and build
serial". FASTAXO_DEBUG=1 turns Cython's bounds/wraparound checks back on.
FASTAXO_SANITIZE=1 builds with AddressSanitizer + UndefinedBehaviorSanitizer (gcc/clang; for
scripts/sanitize.sh, never for a release: run it with libasan preloaded).
No -march=native: SIMD paths are chosen at run time (csrc/fx_sha256*.c).
"""

from __future__ import annotations

import os
import sys
import tempfile
import textwrap
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent.resolve()
HASH_CSRC = ["csrc/fx_sha256.c", "csrc/fx_sha256_many.c", "csrc/fx_sha256_x86.c",
             "csrc/fx_sha256_arm.c", "csrc/fx_rows.c", "csrc/fx_seen.c", "csrc/fx_rowset.c"]
PACK_CSRC = ["csrc/fx_pack.c", "csrc/fx_fill.c", "csrc/fx_perm.c", "csrc/fx_json.c",
             "csrc/fx_parquet.c"]
TOK_CSRC = ["csrc/fx_unicode.c", "csrc/fx_bpe.c", "csrc/fx_bpe_cache.c", "csrc/fx_bpe_merge.c",
            "csrc/fx_pretok.c", "csrc/fx_mem.c"]

OPENMP_TEST = textwrap.dedent(
    """
    #include <omp.h>
    int main(void) {
        int n = 0;
        #pragma omp parallel reduction(+:n)
        n += 1;
        return n > 0 ? 0 : 1;
    }
    """
)


def _env_flag(name: str) -> str:
    return os.environ.get(name, "").strip().lower()


def _openmp_flags(compiler) -> tuple[list[str], list[str]]:
    """(compile args, link args) that make OpenMP work with this compiler."""
    if compiler.compiler_type == "msvc":
        return ["/openmp"], []
    if sys.platform == "darwin":
        prefix = os.environ.get("FASTAXO_LIBOMP_PREFIX") or next(
            (p for p in ("/opt/homebrew/opt/libomp", "/usr/local/opt/libomp") if os.path.isdir(p)),
            "",
        )
        inc = [f"-I{prefix}/include"] if prefix else []
        lib = [f"-L{prefix}/lib", f"-Wl,-rpath,{prefix}/lib"] if prefix else []
        return ["-Xpreprocessor", "-fopenmp", *inc], [*lib, "-lomp"]
    return ["-fopenmp"], ["-fopenmp"]


def _probe_openmp(compiler, cflags: list[str], ldflags: list[str]) -> tuple[bool, str]:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "omp_probe.c")
        src.write_text(OPENMP_TEST)
        try:
            objs = compiler.compile([str(src)], output_dir=tmp, extra_postargs=cflags)
            compiler.link_executable(objs, "omp_probe", output_dir=tmp, extra_postargs=ldflags)
        except Exception as exc:  # CompileError, LinkError, missing headers...
            return False, str(exc).strip().splitlines()[-1] if str(exc).strip() else type(
                exc
            ).__name__
    return True, ""


class BuildExt(build_ext):
    _fx_inplace = False

    def finalize_options(self) -> None:
        super().finalize_options()
        # the three extensions compile side by side (one per core) unless -j says otherwise:
        # pip and `python -m build` pass no -j, and every CI leg builds from source
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        # setuptools clears self.inplace while it builds (and copies the extensions after)
        self._fx_inplace = bool(self.inplace)
        super().run()

    def build_extensions(self) -> None:
        mode = _env_flag("FASTAXO_OPENMP")
        cflags, ldflags = _openmp_flags(self.compiler)
        use_openmp = False
        if mode in ("0", "false", "no", "off"):
            print("fastaxo: OpenMP disabled by FASTAXO_OPENMP=0; building the serial version")
        else:
            ok, why = _probe_openmp(self.compiler, cflags, ldflags)
            if ok:
                use_openmp = True
            elif mode in ("1", "true", "yes", "on"):
                raise RuntimeError(
                    f"fastaxo: FASTAXO_OPENMP=1 but OpenMP does not compile here: {why}"
                )
            else:
                bar = "!" * 78
                print(
                    f"\n{bar}\nfastaxo: WARNING: this compiler has no OpenMP ({why}).\n"
                    "fastaxo: building the SERIAL version: hashing uses ONE core.\n"
                    "fastaxo: install OpenMP (libgomp / libomp) and reinstall for parallel "
                    "kernels.\n"
                    f"{bar}\n",
                    file=sys.stderr,
                )
        extra_c = [] if self.compiler.compiler_type == "msvc" else ["-std=c11"]
        san_c: list[str] = []
        san_l: list[str] = []
        if _env_flag("FASTAXO_SANITIZE") in ("1", "true", "yes", "on"):
            san = "-fsanitize=address,undefined"
            # -O1 -g: reports with lines; no recover: a UB report ends the run like an ASan one
            san_c = [san, "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g", "-O1"]
            san_l = [san]
            print("fastaxo: building with AddressSanitizer + UndefinedBehaviorSanitizer")
        for ext in self.extensions:
            ext.extra_compile_args += extra_c + (cflags if use_openmp else []) + san_c
            ext.extra_link_args += (ldflags if use_openmp else []) + san_l
        # Next to the built extension (build_lib, or the source tree for --inplace).
        # (setuptools builds in build_lib and copies only the extensions for --inplace)
        build_info = (ROOT / "fastaxo" if self._fx_inplace
                      else Path(self.get_ext_fullpath("fastaxo._hash")).parent) / "_build_info.py"
        build_info.parent.mkdir(parents=True, exist_ok=True)
        build_info.write_text(
            "# Generated by setup.py at build time; not committed.\n"
            f"OPENMP = {use_openmp!r}\nCOMPILER = {self.compiler.compiler_type!r}\n"
            f"OPENMP_FLAGS = {(cflags if use_openmp else [])!r}\n"
            f"SANITIZE = {bool(san_c)!r}\n"
            f"GIT_COMMIT = {_git_commit()!r}\n"
        )
        super().build_extensions()


def _git_commit():
    """The commit being built (+ "-dirty" with uncommitted changes to tracked files), or None
    outside a git checkout (an sdist build): benchmarks run on an installed build name it."""
    import subprocess

    root = Path(__file__).resolve().parent
    if not (root / ".git").exists():
        return None
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (sha + ("-dirty" if dirty else "")) if sha else None


def extensions():
    import numpy
    from Cython.Build import cythonize

    debug = _env_flag("FASTAXO_DEBUG") in ("1", "true", "yes", "on")
    exts = [
        Extension(
            f"fastaxo.{name}",
            sources=[f"fastaxo/{name}.pyx", *csrc],
            # a changed header (fx_unicode_tables.h is regenerated) rebuilds the extension
            depends=sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "csrc").glob("*.h")),
            # _pack reads lists of NumPy rows through the NumPy C API (pad_list)
            include_dirs=["csrc", *([numpy.get_include()] if name == "_pack" else [])],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        )
        for name, csrc in (("_hash", HASH_CSRC), ("_pack", PACK_CSRC), ("_tok", TOK_CSRC))
    ]
    return cythonize(
        exts,
        compiler_directives={
            "language_level": 3,
            "boundscheck": debug,
            "wraparound": debug,
            "cdivision": True,
            "initializedcheck": debug,
            "freethreading_compatible": True,
            "embedsignature": True,
        },
    )


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})
