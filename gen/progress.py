"""Progress display for long runs: a rich progress bar on a terminal, silence otherwise.

``progress(total, "label", enabled)`` yields an ``advance(n=1)`` callable. It draws
only when ``enabled`` is true and stderr is a terminal, so ``--json`` output and
pipes stay clean.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator


def interactive(json_mode: bool = False) -> bool:
    return not json_mode and sys.stderr.isatty()


@contextmanager
def progress(total: int, label: str, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    if not (enabled and sys.stderr.isatty()):
        yield lambda n=1: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n=1: bar.advance(task, n)
