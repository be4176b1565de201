"""Shared by the benchmarks: rewrite the table between two markers of a doc."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, Callable


def write_section(doc: Path, begin: str, end: str, table: str, title: str) -> None:
    """Put ``table`` between the ``begin`` / ``end`` markers of ``doc`` (appended with the markers
    when missing; a missing doc starts with ``# title``) and say where it went."""
    text = doc.read_text() if doc.exists() else f"# {title}\n\n{begin}\n{end}\n"
    if begin not in text:
        text += f"\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(f"{head}{begin}\n{table}\n{end}{tail}")
    print(f"written to {doc}")


def publish(table: str, no_docs: bool, doc: Path, begin: str, end: str, title: str) -> int:
    """Print ``table`` and, unless ``no_docs``, put it into ``doc`` (:func:`write_section`); returns 0
    (a benchmark's exit status)."""
    print(table)
    if not no_docs:
        write_section(doc, begin, end, table, title)
    return 0


def measure_and_publish(argv: list[str], name: str, doc_string: str, total: int,
                        measure: Callable[[Callable[[int], None]], Any], render: Callable[[Any, float], str],
                        doc: Path, begin: str, end: str, title: str) -> int:
    """The ``main`` of a benchmark that measures once and writes one table: ``--no-docs`` only
    prints it; ``measure(advance)`` runs with a progress bar of ``total`` steps, ``render(result,
    seconds)`` makes the table (:func:`publish`)."""
    from gen.progress import progress

    p = argparse.ArgumentParser(prog=f"python -m benchmarks {name}", description=doc_string.split("\n")[0])
    p.add_argument("--no-docs", action="store_true", help="print the table only")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    with progress(total, name, True) as advance:
        result = measure(advance)
    return publish(render(result, time.perf_counter() - t0), args.no_docs, doc, begin, end, title)
