"""Where a pytest run's time went, by test file, from its JUnit XML (scripts/test.sh writes
build/pytest-main.xml): the per-file sums show what to trim when CI nears its time limit, and
their total against the wall time shows how busy the xdist workers were.

    python scripts/test_times.py build/pytest-main.xml [--top 15]
"""

from __future__ import annotations

import argparse
import collections
import xml.etree.ElementTree as ET


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("xml")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    root = ET.parse(args.xml).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    wall = sum(float(s.get("time", 0)) for s in suites)
    per_file: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for case in root.iter("testcase"):
        # xunit2 has no file attribute: the classname is the module's dotted path, then classes
        parts = case.get("classname", "").split(".")
        mod = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
        name = "/".join(parts[: mod + 1]) + ".py"
        per_file[name] += float(case.get("time", 0))
        count[name] += 1
    total = sum(per_file.values())
    print(f"test time {total:.0f} s in {sum(count.values())} tests, wall {wall:.0f} s; by file:")
    for name, t in per_file.most_common(args.top):
        print(f"  {t:7.1f} s  {count[name]:4d} tests  {name}")


if __name__ == "__main__":
    main()
