"""What the commands and the studies share at the console: progress lines on
standard error with the elapsed time, the argument types of the parsers, and
``--scheduler``, which sends a command's joblib work to a Dask cluster."""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time

__all__ = [
    "CommandError",
    "Progress",
    "add_scheduler_option",
    "byte_size",
    "format_bytes",
    "fraction",
    "non_negative_float",
    "on_cluster",
    "positive_int",
    "print_to_stderr",
]


def print_to_stderr(message):
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
            progress = print_to_stderr
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


def positive_int(text):
    """argparse type: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def non_negative_float(text):
    """argparse type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def fraction(text):
    """argparse type: a number in [0, 1]."""
    value = non_negative_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def format_bytes(n_bytes):
    """``n_bytes`` in kB, MB, GB or TB, to three significant digits."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes / 1e3:.3g} kB"


_UNITS = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def byte_size(text):
    """argparse type: a size such as ``8G``, ``500MB`` or ``1.5e9`` (bytes)."""
    value = text.strip().upper().removesuffix("B")
    unit = value[-1:] if value[-1:] in _UNITS else ""
    try:
        number = float(value[: len(value) - len(unit)])
    except ValueError:
        number = -1.0
    if not number > 0 or not math.isfinite(number):
        raise argparse.ArgumentTypeError(
            f"expected a size such as 8G, 500M or 1.5e9 (bytes); got {text!r}"
        )
    return int(number * _UNITS[unit])


# -- clusters -------------------------------------------------------------------


def add_scheduler_option(parser):
    """Add ``--scheduler ADDRESS`` to a command's parser."""
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run the fits on the Dask cluster of this scheduler (e.g. "
        "tcp://10.0.0.5:8786), through joblib's dask backend; the results are "
        "those of the local run. Needs sklearn-attn[dask].",
    )


class CommandError(Exception):
    """A problem to report in one line (and exit status 1), not as a traceback."""


@contextlib.contextmanager
def on_cluster(address):
    """Send joblib's work to the Dask cluster at ``address`` (if not None)."""
    if address is None:
        yield
        return
    try:
        from dask.distributed import Client
    except ImportError as exc:
        raise CommandError(
            "--scheduler needs dask.distributed, which is not installed: "
            "pip install sklearn-attn[dask]"
        ) from exc
    import joblib

    try:
        client = Client(address)
    except (OSError, TimeoutError, ValueError) as exc:
        raise CommandError(
            f"could not connect to the Dask scheduler at {address}: {exc}"
        ) from exc
    with client:
        nthreads = client.nthreads()
        print_to_stderr(
            f"on the Dask cluster at {client.scheduler.address}: "
            f"{len(nthreads)} workers, {sum(nthreads.values())} threads"
        )
        # n_jobs=-1: as many tasks at once as the cluster has threads, unless
        # --n-jobs says otherwise.
        with joblib.parallel_config(backend="dask", n_jobs=-1):
            yield
