"""The ``:measured:`` role: a number read from a committed result file.

A measured number in the documentation is written as a reference into a file of
``benchmarks/results/`` and rendered from it at build time, so the text and the
file cannot disagree::

    :measured:`reproduce/potts/potts_dense.csv[model=factored,
    n_train=25600]:max(relative_excess_loss):.2%`

    :measured:`vanilla_iterations.json/rows[teacher=0,
    max_iter=500]:relative_excess_loss:.2%`

(the worst of the dense teachers' excess at 25,600 sequences, and one
teacher's excess after 500 iterations, both as percentages).

The grammar is ``FILE STEP* : VALUE [: SPEC]``:

``FILE``
    A ``.csv`` or ``.json`` path relative to ``benchmarks/results/``. A CSV file
    is a table: a list of rows, each a record of its columns (an integer or a
    decimal cell is read as a number, an empty one as missing).
``STEP``
    ``/KEY`` takes the item ``KEY`` of a JSON object, or the item at index
    ``KEY`` of a list; ``[COND, COND, ...]`` keeps the records of a table for
    which every condition holds. A condition is ``NAME OP VALUE`` with ``OP``
    one of ``=  !=  <  <=  >  >=``; ``VALUE`` is read as JSON when it parses (so
    ``400`` and ``0.1`` are numbers, ``true`` a boolean), else as text.
``VALUE``
    ``NAME``: the field ``NAME`` of the record reached, or of the one record of
    the table reached (a table of any other length is an error, so a selection
    cannot silently pick one of several rows); ``mean(NAME)``, ``std(NAME)``
    (``ddof=0``, as the reproductions' summaries), ``median(NAME)``,
    ``min(NAME)``, ``max(NAME)``: over the records of the table (at least one,
    each with a number there); ``count()``: how many records. An optional
    ``*FACTOR`` multiplies the value (``std(relative_excess_loss)*100`` is a
    spread in percentage points).
``SPEC``
    A Python format specification (``.2f``, ``.3g``, ``.1%`` for a fraction as
    a percentage, ``,`` for thousands separators); none: ``str`` of the value.

A reference that does not resolve is an error naming the reference, which fails
the documentation build. The module is plain Python (Sphinx is imported only in
:func:`setup`), so ``tests/test_docs_claims.py`` resolves the documentation's
references with the same code as the build.
"""

from __future__ import annotations

import csv
import json
import math
import operator
import re
import statistics
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
ROLE = re.compile(r":measured:`([^`]+)`")

_REFERENCE = re.compile(
    r"^(?P<file>[^\[\]:]+?\.(?:csv|json))"
    r"(?P<steps>(?:/[^/\[\]:]+|\[[^\]]*\])*)"
    r":(?P<value>[^:]+)"
    r"(?::(?P<spec>.*))?$",
    re.DOTALL,
)
_STEP = re.compile(r"/([^/\[\]:]+)|\[([^\]]*)\]")
_CONDITION = re.compile(
    r"^(?P<name>[^=!<>]+?)\s*(?P<op><=|>=|!=|=|<|>)\s*(?P<value>.*)$"
)
_VALUE = re.compile(
    r"^(?:(?P<agg>mean|std|median|min|max|count)\(\s*(?P<arg>[^()]*?)\s*\)"
    r"|(?P<name>[^()*]+?))"
    r"\s*(?:\*\s*(?P<factor>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?))?$"
)
_OPS = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_AGGREGATES = {
    "mean": statistics.fmean,
    "std": statistics.pstdev,
    "median": statistics.median,
    "min": min,
    "max": max,
}


class MeasuredError(ValueError):
    """A reference that does not resolve; the message names the reference."""


def resolve(reference, root=RESULTS):
    """The text that ``:measured:`reference``` renders.

    Parameters
    ----------
    reference : str
        ``FILE STEP* : VALUE [: SPEC]`` (see the module's docstring); white
        space around its separators is ignored, so a reference may wrap.
    root : path-like, default=RESULTS
        The folder that ``FILE`` is relative to.

    Returns
    -------
    text : str

    Raises
    ------
    MeasuredError
        The reference cannot be parsed or resolved, or its value formatted.
    """
    # Named on one line, as the reference is written when it wraps.
    name = " ".join(reference.split())
    try:
        value, spec = lookup(reference, root)
    except MeasuredError as exc:
        raise MeasuredError(f"measured reference {name!r}: {exc}") from None
    try:
        return format(value, spec)
    except (TypeError, ValueError) as exc:
        raise MeasuredError(
            f"measured reference {name!r}: cannot format {value!r} with {spec!r}: {exc}"
        ) from None


def lookup(reference, root=RESULTS):
    """``(value, spec)`` of a reference: the number (or text) and its format."""
    match = _REFERENCE.match(reference.strip())
    if match is None:
        raise MeasuredError("expected FILE[/KEY | [NAME=VALUE, ...]]*:VALUE[:SPEC]")
    root = Path(root).resolve()
    path = (root / match["file"].strip()).resolve()
    if not path.is_relative_to(root):
        raise MeasuredError(f"{match['file']} is outside {root}")
    if not path.is_file():
        raise MeasuredError(f"no file {path}")
    node = _read(path)
    for key, conditions in _STEP.findall(match["steps"]):
        node = _select(node, conditions) if conditions else _item(node, key.strip())
    value = _value(node, match["value"].strip())
    return value, (match["spec"] or "").strip()


def _read(path):
    with open(path, encoding="utf-8", newline="") as handle:
        if path.suffix == ".csv":
            return [{k: _cell(v) for k, v in r.items()} for r in csv.DictReader(handle)]
        try:
            return json.load(handle)
        except ValueError as exc:
            raise MeasuredError(f"{path} is not JSON: {exc}") from None


def _cell(text):
    """A CSV cell as a number when it is one, ``None`` when empty."""
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _item(node, key):
    if isinstance(node, dict):
        if key not in node:
            raise MeasuredError(f"no key {key!r} (keys: {', '.join(map(str, node))})")
        return node[key]
    if isinstance(node, list):
        try:
            return node[int(key)]
        except ValueError:
            raise MeasuredError(f"/{key} into a list needs an index") from None
        except IndexError:
            raise MeasuredError(f"no item {key} in a list of {len(node)}") from None
    raise MeasuredError(f"/{key} into {node!r}, which is not an object or a list")


def _select(node, conditions):
    _table(node, f"[{conditions}]")
    tests = []
    for condition in conditions.split(","):
        match = _CONDITION.match(condition.strip())
        if match is None:
            raise MeasuredError(f"condition {condition.strip()!r} is not NAME OP VALUE")
        name, op, text = match["name"].strip(), match["op"], match["value"].strip()
        if node and not any(name in row for row in node):
            raise MeasuredError(f"no column {name!r} (columns: {', '.join(node[0])})")
        try:
            wanted = json.loads(text)
        except ValueError:
            wanted = text
        tests.append((name, _OPS[op], wanted))

    def keep(row):
        try:
            return all(
                row.get(name) is not None and op(row[name], wanted)
                for name, op, wanted in tests
            )
        except TypeError:  # an order between a number and a text
            return False

    return [row for row in node if keep(row)]


def _value(node, text):
    match = _VALUE.match(text)
    if match is None:
        raise MeasuredError(f"value {text!r} is not NAME, AGGREGATE(NAME) or count()")
    if match["agg"] == "count":
        if match["arg"]:
            raise MeasuredError("count() takes no column")
        value = len(_table(node, "count()"))
    elif match["agg"]:
        name = match["arg"]
        rows = _table(node, f"{match['agg']}({name})")
        if not rows:
            raise MeasuredError(f"{match['agg']}({name}) of no rows")
        value = _AGGREGATES[match["agg"]](
            [_number(row.get(name), name, row) for row in rows]
        )
    else:
        name = match["name"]
        if isinstance(node, list):
            if len(node) != 1:
                raise MeasuredError(f"{len(node)} rows match where {name} needs one")
            node = node[0]
        if not isinstance(node, dict) or name not in node:
            raise MeasuredError(f"no field {name!r} in {_short(node)}")
        value = node[name]
        if value is None:
            raise MeasuredError(f"{name} is empty in {_short(node)}")
    if match["factor"]:
        value = _number(value, text, node) * float(match["factor"])
    return value


def _table(node, what):
    if not (isinstance(node, list) and all(isinstance(r, dict) for r in node)):
        raise MeasuredError(f"{what} applies to a table (a list of records)")
    return node


def _number(value, name, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MeasuredError(f"{name} is {value!r}, not a number, in {_short(where)}")
    if math.isnan(value):
        raise MeasuredError(f"{name} is NaN in {_short(where)}")
    return value


def _short(node, limit=200):
    text = repr(node)
    return text if len(text) <= limit else text[:limit] + "..."


def references(text):
    """The ``:measured:`` references of a reST text, in order."""
    return [" ".join(ref.split()) for ref in ROLE.findall(text)]


def _role(name, rawtext, text, lineno, inliner, options=None, content=None):
    from docutils import nodes

    try:
        rendered = resolve(text)
    except MeasuredError as exc:
        message = inliner.reporter.error(str(exc), line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    # A changed result file rebuilds the pages that cite it.
    env = getattr(inliner.document.settings, "env", None)
    if env is not None:
        env.note_dependency(str(_source(text)))
    return [nodes.inline(rawtext, rendered, classes=["measured"])], []


def _source(reference, root=RESULTS):
    """The result file of a reference that resolves."""
    return (Path(root) / _REFERENCE.match(reference.strip())["file"].strip()).resolve()


def setup(app):
    app.add_role("measured", _role)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
