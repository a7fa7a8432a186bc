"""Helpers shared by the reproductions: progress lines, CSV tables, seeds, tasks."""

from __future__ import annotations

import csv
import math
import os
import sys
import time

import numpy as np
from joblib import parallel_config
from sklearn.utils.parallel import Parallel, delayed

__all__ = [
    "Progress",
    "format_table",
    "run_tasks",
    "seed_pair",
    "summarize",
    "write_csv",
]


def _stderr(message):
    print(message, file=sys.stderr, flush=True)


class Progress:
    """Report progress lines with the elapsed time.

    Parameters
    ----------
    progress : callable, None or False
        ``None`` prints to standard error, ``False`` stays silent and a callable
        receives each message (a string).
    prefix : str
        Put in front of every message, e.g. ``"[rfa]"``.
    """

    def __init__(self, progress=None, prefix=""):
        if progress is None:
            progress = _stderr
        elif progress is False:
            progress = None
        elif not callable(progress):
            raise TypeError(
                f"progress must be None, False or a callable; got {progress!r}."
            )
        self._report = progress
        self.prefix = prefix
        self.start = time.perf_counter()

    def elapsed(self):
        """Seconds since this object was created."""
        return time.perf_counter() - self.start

    def __call__(self, message):
        if self._report is not None:
            self._report(f"{self.prefix}{message} [{self.elapsed():6.1f} s]")


def seed_pair(random_state, *keys):
    """Two independent integer seeds (data, weights) for one repetition.

    Derived from ``random_state`` and integer ``keys`` with
    :class:`numpy.random.SeedSequence`, so every repetition, part and setting
    gets fresh data and fresh random weights, reproducibly.
    """
    entropy = [int(random_state), *(int(k) for k in keys)]
    data_seed, weight_seed = np.random.SeedSequence(entropy).generate_state(2)
    return int(data_seed), int(weight_seed)


def _in_sequence(function, *args):
    # A task's own joblib calls (learning_curve, restarts) stay in its worker:
    # under the dask backend they would otherwise go back to the scheduler.
    with parallel_config(backend="sequential"):
        return function(*args)


def run_tasks(tasks, *, n_jobs=None):
    """Run the calls ``function(*args)`` of ``tasks``; yield results in order.

    The grid of a reproduction, through :class:`sklearn.utils.parallel.Parallel`:
    one task after another in this process with ``n_jobs=None``, on joblib
    workers otherwise, or on a Dask cluster under
    ``joblib.parallel_config(backend="dask")``. Every task carries its own
    seeds, so the results do not depend on where it ran.

    Parameters
    ----------
    tasks : list of tuple
        ``(function, *args)`` per call; ``function`` is defined at module level
        (workers in other processes import it).
    n_jobs : int, default=None
        Joblib workers; ``None`` takes the active ``parallel_config``'s
        (one at a time outside one).

    Returns
    -------
    results : generator
        The results in the order of ``tasks``, each as soon as it and those
        before it are done.
    """
    return Parallel(n_jobs=n_jobs, return_as="generator")(
        delayed(_in_sequence)(*task) for task in tasks
    )


def summarize(values):
    """Mean and standard deviation (``ddof=0``) of the finite entries."""
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan, math.nan
    return float(values.mean()), float(values.std())


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return "" if math.isnan(value) else repr(value)
    if isinstance(value, np.integer):
        return str(int(value))
    return str(value)


def write_csv(rows, path):
    """Write a table (a list of dict rows) to a CSV file.

    Parameters
    ----------
    rows : list of dict
        The rows; the columns are the keys of the first row, in order, followed
        by any new keys of later rows. ``None`` and NaN are written as empty
        cells, floats at full precision.
    path : str or path-like
        Output file; its folder is created if needed.

    Returns
    -------
    path : str
        The path written.

    Examples
    --------
    >>> import os, tempfile
    >>> from sklearn_attn.experiments import write_csv
    >>> path = os.path.join(tempfile.mkdtemp(), "table.csv")
    >>> _ = write_csv([{"model": "RFA", "error": 0.5}], path)
    >>> print(open(path).read().strip())
    model,error
    RFA,0.5
    """
    rows = list(rows)
    columns = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    path = os.fspath(path)
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row.get(key)) for key in columns])
    return path


def format_table(header, lines):
    """Align a header and lines of cells (strings) as a plain-text table."""
    cells = [list(map(str, header))] + [list(map(str, line)) for line in lines]
    widths = [max(len(row[j]) for row in cells) for j in range(len(header))]
    out = []
    for i, row in enumerate(cells):
        out.append(
            "  ".join(
                c.rjust(w) if j else c.ljust(w)
                for j, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if i == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)
