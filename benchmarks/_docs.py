"""Shared by the benchmarks: rewrite the table between two markers of a doc."""

from __future__ import annotations

from pathlib import Path


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
