"""The sdist is complete for a reader: it holds LICENSE and every file or directory that its
Markdown documents link to by a relative path (links and images).

    python scripts/check_sdist.py dist/fastaxo-0.1.0.tar.gz      # exit 1 and the missing ones
"""

from __future__ import annotations

import posixpath
import re
import sys
import tarfile

DOCS = ("README.md", "docs/guide.md", "BENCHMARKS.md", "ARCHITECTURE.md", "CONTRIBUTING.md",
        "CHANGELOG.md")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def missing(sdist: str) -> list[str]:
    with tarfile.open(sdist) as tar:
        names = [m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name]
        files = set(names)
        dirs = {posixpath.dirname(n) for n in names}
        dirs |= {d.rsplit("/", k)[0] for d in list(dirs) for k in range(1, d.count("/") + 1)}
        root = tar.getmembers()[0].name.split("/", 1)[0]
        out = [] if "LICENSE" in files else ["LICENSE"]
        for doc in DOCS:
            if doc not in files:
                out.append(doc)
                continue
            text = tar.extractfile(f"{root}/{doc}").read().decode("utf-8")  # type: ignore[union-attr]
            for target in LINK.findall(text):
                if target.startswith(("http://", "https://", "#", "mailto:")):
                    continue
                path = posixpath.normpath(posixpath.join(posixpath.dirname(doc),
                                                         target.split("#", 1)[0]))
                if path.rstrip("/") not in files and path.rstrip("/") not in dirs:
                    out.append(f"{path} (linked from {doc})")
    return out


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    bad = missing(sys.argv[1])
    for b in bad:
        print(f"check_sdist: missing from {sys.argv[1]}: {b}", file=sys.stderr)
    if not bad:
        print(f"check_sdist: {sys.argv[1]} holds LICENSE and every linked file")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
