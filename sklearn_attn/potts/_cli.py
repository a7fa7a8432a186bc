"""``python -m sklearn_attn contacts ALIGNMENT``: contacts from an alignment.

The command a computational biologist runs instead of plmc: read the alignment
(plmc's conventions), reweight it, fit the Potts model by pseudo-likelihood,
and write the contact list, a plmc-style EC file, the couplings, a contact map
and a JSON summary. Progress goes to standard error; results go to files.
Option names follow plmc's where it has one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import warnings

import numpy as np

DEFAULT_OUTPUT_DIR = "contacts_out"


def add_parser(subparsers):
    """The ``contacts`` sub-command's parser, added to ``subparsers``."""
    parser = subparsers.add_parser(
        "contacts",
        help="predict residue contacts from a protein (or RNA/DNA) alignment",
        description="Fit a Potts model to an alignment by pseudo-likelihood "
        "(plmc's objective and conventions) and write contacts.csv, contacts.ec "
        "(plmc's coupling-scores format, as EVcouplings reads it), couplings.npz, "
        "contact_map.png and summary.json. Progress goes to standard error.",
    )
    parser.add_argument(
        "alignment",
        metavar="ALIGNMENT",
        help="aligned FASTA, A2M or A3M file (gzipped or not)",
    )
    parser.add_argument(
        "--format",
        choices=["auto", "fasta", "a2m", "a3m"],
        default="auto",
        help="alignment format; 'auto' picks a2m/a3m from the suffix, else fasta "
        "(a2m/a3m: lower case and '.' are inserts and are dropped)",
    )
    parser.add_argument(
        "--alphabet",
        default="protein",
        help="'protein' (-ACDEFGHIKLMNPQRSTVWY), 'dna', 'rna' or a string of "
        "distinct letters, gap first (plmc's -a; default: protein); one that "
        "starts with '-' is given as --alphabet=-ACGU",
    )
    parser.add_argument(
        "--unknown-letters",
        choices=["drop", "gap"],
        default="drop",
        help="sequences with letters outside the alphabet (X, B, Z, ...) are "
        "dropped, as plmc does, or such letters are read as gaps (default: drop)",
    )
    parser.add_argument(
        "--focus",
        metavar="NAME",
        default=None,
        help="focus sequence (plmc's -f; a full name or a unique prefix): keep "
        "its upper-case columns and number residues by its NAME/start-end range",
    )
    parser.add_argument(
        "--model",
        choices=["full", "factored"],
        default="full",
        help="full plmDCA couplings, or factored self-attention (default: full)",
    )
    parser.add_argument(
        "--heads",
        type=_positive_int,
        default=32,
        metavar="H",
        help="attention heads of the factored model (default: 32)",
    )
    parser.add_argument(
        "--alpha-couplings",
        type=_non_negative_float,
        default=16.0,
        metavar="LE",
        help="coupling penalty in plmc's units (plmc's -le; default: 16.0, "
        "plmc's protein setting)",
    )
    parser.add_argument(
        "--alpha-fields",
        type=_non_negative_float,
        default=0.01,
        metavar="LH",
        help="field penalty (plmc's -lh; default: 0.01)",
    )
    parser.add_argument(
        "--identity",
        type=_fraction,
        default=0.8,
        metavar="T",
        help="reweighting: a sequence counts 1/#{sequences with identity >= T}; "
        "1 - plmc's -t (default: 0.8, i.e. plmc's -t 0.2); 0 disables it",
    )
    parser.add_argument(
        "--max-iter",
        type=_positive_int,
        default=None,
        metavar="N",
        help="L-BFGS iterations at most (plmc's -m; default: 60 for the full "
        "model, within 0.1%% of plmc's optimum on PF00014, 1000 for the factored)",
    )
    parser.add_argument(
        "--tol",
        type=_non_negative_float,
        default=1e-7,
        help="stop when the relative decrease of the objective falls below this "
        "(default: 1e-7)",
    )
    parser.add_argument(
        "--gauge",
        choices=["zero-sum", "fitted"],
        default="zero-sum",
        help="gauge of the couplings scored (plmc scores them as fitted; "
        "default: zero-sum)",
    )
    parser.add_argument(
        "--device",
        default=None,
        help="'cpu', 'cuda' or 'cuda:N' (default: cpu)",
    )
    parser.add_argument(
        "--random-state",
        type=int,
        default=0,
        metavar="SEED",
        help="seed of the factored model's initialisation (default: 0)",
    )
    parser.add_argument(
        "--distances",
        metavar="FILE",
        default=None,
        help="known structure to score the prediction: a table of lines 'i j ... "
        "distance' (1-based positions as in contacts.csv, distance last) or an "
        "L x L distance matrix",
    )
    parser.add_argument(
        "--cutoff",
        type=_non_negative_float,
        default=8.0,
        help="contact when distance < cutoff (default: 8.0 Angstrom)",
    )
    parser.add_argument(
        "--min-separation",
        type=_positive_int,
        default=6,
        help="pairs with |i - j| below this are not scored (default: 6)",
    )
    parser.add_argument(
        "--output-dir",
        "-o",
        default=DEFAULT_OUTPUT_DIR,
        metavar="DIR",
        help=f"where the files go (default: ./{DEFAULT_OUTPUT_DIR})",
    )
    parser.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress on standard error",
    )
    parser.set_defaults(run=run)
    return parser


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or not np.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _fraction(text):
    value = _non_negative_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


# -- memory -------------------------------------------------------------------


def _peak_rss_bytes():
    """Peak resident memory of this process so far, or None where unknown.

    On Linux, the kernel's high-water mark of this program (``VmHWM``):
    ``ru_maxrss`` would also count the parent's memory copied by the fork
    before this interpreter started.
    """
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _current_rss_bytes():
    """Resident memory now (Linux), else the peak so far."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return _peak_rss_bytes()


# -- distances ----------------------------------------------------------------


def read_distances(path, positions):
    """Pairs of sites and their distances from a table or an L x L matrix.

    A table has lines ``i j ... distance`` (whitespace or commas; ``#``
    comments; 1-based positions in the numbering of ``positions``, distance in
    the last column). A matrix has as many rows and columns as there are
    sites. Pairs with a position the model does not have are left out.

    Returns ``(i, j, distance)`` with 0-based site indices, ``i < j``.
    """
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.split("#", 1)[0].replace(",", " ").strip()
            if not line:
                continue
            try:
                rows.append([float(field) for field in line.split()])
            except ValueError:
                if not rows:  # a header line
                    continue
                raise ValueError(
                    f"--distances {path}: line {number} is not numbers: {line[:40]!r}"
                ) from None
    if not rows:
        raise ValueError(f"--distances {path}: no numbers found.")
    n_sites = len(positions)
    widths = {len(row) for row in rows}
    if widths == {n_sites} and len(rows) == n_sites and n_sites > 3:
        matrix = np.asarray(rows)
        i, j = np.triu_indices(n_sites, 1)
        return i, j, matrix[i, j]
    if min(widths) < 3:
        raise ValueError(
            f"--distances {path}: expected lines 'i j ... distance' (3 or more "
            f"columns) or a {n_sites} x {n_sites} matrix; found lines of "
            f"{min(widths)} column(s)."
        )
    table = [(row[0], row[1], row[-1]) for row in rows]
    index = {int(p): k for k, p in enumerate(positions)}
    i, j, distance = [], [], []
    for a, b, d in table:
        if a != int(a) or b != int(b):
            raise ValueError(
                f"--distances {path}: positions must be integers; got {a}, {b}."
            )
        if int(a) in index and int(b) in index and a != b:
            k, m = sorted((index[int(a)], index[int(b)]))
            i.append(k)
            j.append(m)
            distance.append(d)
    if not i:
        raise ValueError(
            f"--distances {path}: no pair has both positions among the model's "
            f"({positions[0]}..{positions[-1]}); with --focus the table must use "
            "the focus residue numbers."
        )
    return np.asarray(i), np.asarray(j), np.asarray(distance)


# -- the command --------------------------------------------------------------


class _Progress:
    def __init__(self, quiet):
        self.quiet = quiet
        self.start = time.perf_counter()

    def __call__(self, message):
        if not self.quiet:
            elapsed = time.perf_counter() - self.start
            print(f"[contacts {elapsed:6.1f} s] {message}", file=sys.stderr, flush=True)


def run(args):
    """Run ``contacts`` with parsed arguments; returns the exit status."""
    from .. import PottsPseudoLikelihood
    from . import (
        apc,
        contact_precision,
        read_alignment,
        write_contacts,
        write_couplings,
        write_ec,
    )

    # The interpreter with the package loaded is the baseline of the memory.
    baseline_rss = _current_rss_bytes()
    start = time.perf_counter()
    progress = _Progress(args.quiet)
    timings = {}

    names, sequences, info = read_alignment(
        args.alignment,
        format=args.format,
        alphabet=args.alphabet,
        unknown_letters=args.unknown_letters,
        focus=args.focus,
        return_info=True,
    )
    del names
    n_kept = len(sequences)
    n_sites = len(sequences[0])
    timings["read_s"] = time.perf_counter() - start
    dropped = len(info.dropped)
    progress(
        f"read {info.n_read} sequences from {args.alignment}: {n_kept} kept, "
        f"{dropped} dropped (letters outside the alphabet); {n_sites} columns"
        + (f" (focus {info.focus})" if info.focus else "")
    )

    max_iter = args.max_iter
    if max_iter is None:
        max_iter = 60 if args.model == "full" else 1000
    model = PottsPseudoLikelihood(
        args.model,
        n_heads=args.heads,
        alphabet=args.alphabet,
        unknown_letters="error",  # read_alignment already applied the choice
        alpha_fields=args.alpha_fields,
        alpha_couplings=args.alpha_couplings,
        sequence_identity=args.identity if args.identity > 0 else None,
        max_iter=max_iter,
        tol=args.tol,
        random_state=args.random_state,
        verbose=0 if args.quiet else 10,
        device=args.device,
    )
    progress(
        f"fitting the {args.model} model (max_iter={max_iter}, alpha_couplings="
        f"{args.alpha_couplings}, alpha_fields={args.alpha_fields}, identity="
        f"{args.identity})"
    )
    fit_start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # The estimator's progress lines go to standard error, with ours.
        with contextlib.redirect_stdout(sys.stderr):
            model.fit(sequences)
    del sequences
    timings["fit_s"] = time.perf_counter() - fit_start
    converged = not any(issubclass(w.category, _convergence_warning()) for w in caught)
    for w in caught:
        if not issubclass(w.category, _convergence_warning()):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    progress(
        f"N_eff = {model.n_eff_:.2f}; {model.n_iter_} iterations, objective "
        f"{model.objective_:.1f}"
        + ("" if converged else f" (stopped at max_iter={max_iter})")
    )

    write_start = time.perf_counter()
    raw = model.contact_scores(apc_correction=False, gauge=args.gauge)
    scores = apc(raw)
    os.makedirs(args.output_dir, exist_ok=True)
    out = {
        name: os.path.join(args.output_dir, name)
        for name in ("contacts.csv", "contacts.ec", "couplings.npz", "summary.json")
    }
    residues = info.residues
    write_contacts(
        out["contacts.csv"], scores, raw, positions=info.positions, residues=residues
    )
    write_ec(out["contacts.ec"], scores, positions=info.positions, residues=residues)
    parametrization = model._make_parametrization(model.n_sites_, model.states_.size)
    n_params = parametrization.n_params
    write_couplings(
        out["couplings.npz"],
        model.couplings_,
        model.fields_,
        states=model.states_,
        positions=info.positions,
        residues=residues,
        n_eff=model.n_eff_,
        alpha_couplings=model.alpha_couplings_,
        alpha_fields=args.alpha_fields,
        n_iter=model.n_iter_,
        objective=model.objective_,
        model=args.model,
    )
    precision = None
    known = None
    if args.distances is not None:
        known = read_distances(args.distances, info.positions)
        precision = contact_precision(
            scores,
            *known,
            min_separation=args.min_separation,
            cutoff=args.cutoff,
        )
        progress(
            "precision at L/5, L/2, L, 2L: "
            + ", ".join(f"{precision[k]:.3f}" for k in ("L/5", "L/2", "L", "2L"))
        )
    figure = os.path.join(args.output_dir, "contact_map.png")
    figure_note = _plot_contact_map(
        figure, scores, info.positions, known, args.min_separation, args.cutoff
    )
    timings["write_s"] = time.perf_counter() - write_start
    wall = time.perf_counter() - start
    peak = _peak_rss_bytes()
    summary = {
        "alignment": os.path.abspath(args.alignment),
        "format": args.format,
        "alphabet": "".join(model.states_),
        "sequences_read": info.n_read,
        "sequences_kept": n_kept,
        "sequences_dropped": dropped,
        "dropped_names": info.dropped[:100],
        "unknown_letters": args.unknown_letters,
        "focus": info.focus,
        "first_position": int(info.positions[0]),
        "L": n_sites,
        "q": int(model.states_.size),
        "N_eff": model.n_eff_,
        "identity": args.identity,
        "alpha_couplings": args.alpha_couplings,
        "alpha_fields": args.alpha_fields,
        "model": args.model,
        "heads": args.heads if args.model == "factored" else None,
        "parameters": n_params,
        "gauge": args.gauge,
        "max_iter": max_iter,
        "iterations": model.n_iter_,
        "objective": model.objective_,
        "converged": converged,
        "wall_time_s": wall,
        "timings_s": timings,
        "peak_memory_mb": None
        if peak is None or baseline_rss is None
        else max(peak - baseline_rss, 0) / 1e6,
        "precision": precision,
        "distances": None
        if args.distances is None
        else os.path.abspath(args.distances),
        "cutoff": args.cutoff,
        "min_separation": args.min_separation,
        "files": [out["contacts.csv"], out["contacts.ec"], out["couplings.npz"]]
        + ([] if figure_note else [figure]),
    }
    with open(out["summary.json"], "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2)
        handle.write("\n")
    if figure_note:
        progress(figure_note)
    progress(f"wrote {args.output_dir}/ in {wall:.1f} s in all")
    return 0


def _convergence_warning():
    from sklearn.exceptions import ConvergenceWarning

    return ConvergenceWarning


def _plot_contact_map(path, scores, positions, known, min_separation, cutoff):
    """Top-L predicted contacts over the known map; a note if it cannot draw."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return (
            "matplotlib is not installed: no contact_map.png (pip install "
            "matplotlib, or sklearn-attn[plot])."
        )
    n_sites = scores.shape[0]
    i, j = np.triu_indices(n_sites, min_separation)
    order = np.lexsort((j, i, -scores[i, j]))[:n_sites]
    top_i, top_j = i[order], j[order]
    positions = np.asarray(positions)
    fig, ax = plt.subplots(figsize=(5.5, 6.2), constrained_layout=True)
    if known is not None:
        ki, kj, distance = known
        contact = (distance < cutoff) & (np.abs(kj - ki) >= min_separation)
        ax.scatter(
            positions[ki[contact]],
            positions[kj[contact]],
            s=30,
            c="0.82",
            marker="s",
            label=f"known contacts (< {cutoff:g} A)",
        )
        ax.scatter(
            positions[kj[contact]], positions[ki[contact]], s=30, c="0.82", marker="s"
        )
        truth = {(a, b) for a, b in zip(ki[contact], kj[contact], strict=True)}
        hit = np.array([(a, b) in truth for a, b in zip(top_i, top_j, strict=True)])
        ax.scatter(
            positions[top_i[hit]],
            positions[top_j[hit]],
            s=12,
            c="tab:blue",
            label=f"top L predicted: true ({hit.sum()})",
        )
        ax.scatter(
            positions[top_i[~hit]],
            positions[top_j[~hit]],
            s=12,
            c="tab:red",
            label=f"top L predicted: false ({(~hit).sum()})",
        )
    else:
        ax.scatter(
            positions[top_i],
            positions[top_j],
            s=12,
            c="tab:blue",
            label="top L predicted contacts",
        )
    ax.set_xlim(positions[0] - 1, positions[-1] + 1)
    ax.set_ylim(positions[-1] + 1, positions[0] - 1)
    ax.set_aspect("equal")
    ax.set_xlabel("residue i")
    ax.set_ylabel("residue j")
    ax.set_title(f"Predicted contacts (|i - j| >= {min_separation})")
    # Below the axes: inside, it would hide the contacts of one corner.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), fontsize=8, ncol=2)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None
