"""Write :data:`tests.conftest.DURATIONS` from the log of a ``pytest --durations=0`` run.

``python -m tests.durations LOG [--min SECONDS]`` sums each test's setup, call and teardown and
prints the JSON of those taking at least ``--min`` seconds (default 5), longest first.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

from tests.conftest import plain_id

LINE = re.compile(r"^(?P<s>\d+(?:\.\d+)?)s (?:setup|call|teardown)\s+(?P<node>\S+)$")


def parse(text: str) -> dict[str, float]:
    """Seconds by node id of every duration line of a pytest log."""
    total: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        if m := LINE.match(line.strip()):
            total[plain_id(m.group("node"))] += float(m.group("s"))
    return dict(total)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.durations", description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--min", type=float, default=5.0, metavar="SECONDS")
    ap.add_argument("--out", type=Path, help="write the JSON here (replaced only on success) instead of printing it")
    args = ap.parse_args(argv)
    total = parse(args.log.read_text())
    if not total:
        print("error: no duration lines in the log (run pytest with --durations=0)", file=sys.stderr)
        return 1
    keep = sorted(((round(s, 1), n) for n, s in total.items() if s >= args.min), reverse=True)
    text = json.dumps({n: s for s, n in keep}, indent=0) + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
