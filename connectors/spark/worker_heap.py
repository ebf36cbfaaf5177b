"""A Python worker's heap, frozen once its imports are done.

PySpark's worker daemon runs a full ``gc.collect()`` after every task of a reused worker
(``pyspark/daemon.py``). A worker that has imported PySpark, pyarrow, pandas and the Kafka
clients holds about 100,000 tracked objects, and every collection walks them all again: 40 ms
per task on an idle 2-core machine, more when the cores are busy, measured in
docs/benchmarks.md. Those objects are modules, classes and functions, never garbage:
``gc.freeze()`` moves them to the permanent generation, and the collection after each task
then walks only what the tasks made.
"""

from __future__ import annotations

import gc

_frozen = False


def freeze_imported_heap() -> None:
    """Freeze what this process holds now, once: called at a task's start, after imports.
    Collected first, so that no garbage of the imports is frozen with them."""
    global _frozen
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen = True
