"""``python -m sklearn_attn contacts ALIGNMENT``: contacts from an alignment.

The command a computational biologist runs instead of plmc, as its pipeline:
read the alignment (plmc's conventions) into codes, fit the Potts model by
pseudo-likelihood (reweighting the sequences), score the pairs, and write the
contact list, a plmc-style EC file, the couplings, a contact map and a JSON
summary. Progress goes to standard error; results go to files. Option names
follow plmc's where it has one.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._console import Progress, fraction, non_negative_float, positive_int
from ..potts import PottsPseudoLikelihood, apc
from ._alignment import Alignment
from ._figure import plot_contact_map
from ._formats import write_contacts, write_couplings, write_ec
from ._structure import contact_precision, read_distances

DEFAULT_OUTPUT_DIR = "contacts_out"


def add_parser(subparsers):
    """Add the ``contacts`` command to an argparse program.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        What ``argparse.ArgumentParser.add_subparsers()`` returned.

    Returns
    -------
    parser : argparse.ArgumentParser
        The command's parser; ``parser.parse_args(...).run(args)`` runs it
        and returns the exit status.

    Examples
    --------
    >>> import argparse
    >>> from sklearn_attn.contacts import add_parser
    >>> program = argparse.ArgumentParser(prog="tool")
    >>> parser = add_parser(program.add_subparsers(dest="command"))
    >>> args = program.parse_args(["contacts", "family.a2m", "--model", "factored"])
    >>> args.alignment, args.model, args.heads
    ('family.a2m', 'factored', 32)
    """
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
        type=positive_int,
        default=32,
        metavar="H",
        help="attention heads of the factored model (default: 32)",
    )
    parser.add_argument(
        "--alpha-couplings",
        type=non_negative_float,
        default=16.0,
        metavar="LE",
        help="coupling penalty in plmc's units (plmc's -le; default: 16.0, "
        "plmc's protein setting)",
    )
    parser.add_argument(
        "--alpha-fields",
        type=non_negative_float,
        default=0.01,
        metavar="LH",
        help="field penalty (plmc's -lh; default: 0.01)",
    )
    parser.add_argument(
        "--identity",
        type=fraction,
        default=0.8,
        metavar="T",
        help="reweighting: a sequence counts 1/#{sequences with identity >= T}; "
        "1 - plmc's -t (default: 0.8, i.e. plmc's -t 0.2); 0 disables it",
    )
    parser.add_argument(
        "--max-iter",
        type=positive_int,
        default=None,
        metavar="N",
        help="L-BFGS iterations at most (plmc's -m; default: 60 for the full "
        "model, within 0.1%% of plmc's optimum on PF00014, 1000 for the factored)",
    )
    parser.add_argument(
        "--tol",
        type=non_negative_float,
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
        type=non_negative_float,
        default=8.0,
        help="contact when distance < cutoff (default: 8.0 Angstrom)",
    )
    parser.add_argument(
        "--min-separation",
        type=positive_int,
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
    parser.set_defaults(run=run, predict=predict_contacts)
    return parser


# -- the command --------------------------------------------------------------


def run(args):
    """Run ``contacts`` with parsed arguments; returns the exit status."""
    predict_contacts(args)
    return 0


def predict_contacts(args):
    """Read, fit, score and write, with parsed arguments; returns the summary
    written to ``summary.json``."""
    # The interpreter with the package loaded is the baseline of the memory.
    baseline_rss = _current_rss_bytes()
    progress = Progress(False if args.quiet else None, prefix="[contacts] ")
    timings = {}

    alignment = _read(args, progress)
    timings["read_s"] = progress.elapsed()
    model, converged = _fit(alignment, args, progress)
    timings["fit_s"] = progress.elapsed() - timings["read_s"]
    raw = model.contact_scores(apc_correction=False, gauge=args.gauge)
    scores = apc(raw)
    known = precision = None
    if args.distances is not None:
        known = read_distances(args.distances, alignment.positions)
        precision = _score(scores, known, args, progress)
    files, figure_note = _write(args, alignment, model, raw, scores, known)
    timings["write_s"] = progress.elapsed() - timings["read_s"] - timings["fit_s"]
    peak = _peak_rss_bytes()
    summary = _summary(
        args,
        alignment,
        model,
        converged=converged,
        precision=precision,
        files=files,
        wall=progress.elapsed(),
        timings=timings,
        memory=None
        if peak is None or baseline_rss is None
        else max(peak - baseline_rss, 0) / 1e6,
    )
    with open(
        os.path.join(args.output_dir, "summary.json"), "w", encoding="utf-8"
    ) as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    if figure_note:
        progress(figure_note)
    progress(f"wrote {args.output_dir}/ in {summary['wall_time_s']:.1f} s in all")
    return summary


def _read(args, progress):
    """The alignment, encoded once over the alphabet."""
    alignment = Alignment.read(
        args.alignment,
        format=args.format,
        alphabet=args.alphabet,
        unknown_letters=args.unknown_letters,
        focus=args.focus,
    )
    progress(
        f"read {alignment.n_read} sequences from {args.alignment}: "
        f"{alignment.n_sequences} kept, {len(alignment.dropped)} dropped (letters "
        f"outside the alphabet); {alignment.n_sites} columns"
        + (f" (focus {alignment.focus})" if alignment.focus else "")
    )
    return alignment


def _max_iter(args):
    if args.max_iter is not None:
        return args.max_iter
    return 60 if args.model == "full" else 1000


def _fit(alignment, args, progress):
    """The fitted model, and whether it converged within ``max_iter``."""
    model = PottsPseudoLikelihood(
        args.model,
        n_heads=args.heads,
        states=range(alignment.n_states),
        alpha_fields=args.alpha_fields,
        alpha_couplings=args.alpha_couplings,
        sequence_identity=args.identity if args.identity > 0 else None,
        max_iter=_max_iter(args),
        tol=args.tol,
        random_state=args.random_state,
        verbose=0 if args.quiet else 10,
        device=args.device,
    )
    progress(
        f"fitting the {args.model} model (max_iter={model.max_iter}, "
        f"alpha_couplings={args.alpha_couplings}, alpha_fields="
        f"{args.alpha_fields}, identity={args.identity})"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # The estimator's progress lines go to standard error, with ours.
        with contextlib.redirect_stdout(sys.stderr):
            model.fit(alignment.codes)
    converged = True
    for w in caught:
        if issubclass(w.category, ConvergenceWarning):
            converged = False
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    progress(
        f"N_eff = {model.n_eff_:.2f}; {model.n_iter_} iterations, objective "
        f"{model.objective_:.1f}"
        + ("" if converged else f" (stopped at max_iter={model.max_iter})")
    )
    return model, converged


def _score(scores, known, args, progress):
    """Precision of the predicted contacts against the known structure."""
    precision = contact_precision(
        scores, *known, min_separation=args.min_separation, cutoff=args.cutoff
    )
    progress(
        "precision at L/5, L/2, L, 2L: "
        + ", ".join(f"{precision[k]:.3f}" for k in ("L/5", "L/2", "L", "2L"))
    )
    return precision


def _write(args, alignment, model, raw, scores, known):
    """The output files; returns their paths and a note if no figure was drawn."""
    os.makedirs(args.output_dir, exist_ok=True)
    path = {
        name: os.path.join(args.output_dir, name)
        for name in ("contacts.csv", "contacts.ec", "couplings.npz", "contact_map.png")
    }
    sites = dict(positions=alignment.positions, residues=alignment.residues)
    write_contacts(path["contacts.csv"], scores, raw, **sites)
    write_ec(path["contacts.ec"], scores, **sites)
    write_couplings(
        path["couplings.npz"],
        model.couplings_,
        model.fields_,
        states=np.array(list(alignment.states)),
        **sites,
        n_eff=model.n_eff_,
        alpha_couplings=model.alpha_couplings_,
        alpha_fields=args.alpha_fields,
        n_iter=model.n_iter_,
        objective=model.objective_,
        model=args.model,
    )
    files = [path["contacts.csv"], path["contacts.ec"], path["couplings.npz"]]
    figure_note = plot_contact_map(
        path["contact_map.png"],
        scores,
        alignment.positions,
        known,
        min_separation=args.min_separation,
        cutoff=args.cutoff,
    )
    if figure_note is None:
        files.append(path["contact_map.png"])
    return files, figure_note


def _summary(
    args, alignment, model, *, converged, precision, files, wall, timings, memory
):
    """What ``summary.json`` records of the run."""
    return {
        "alignment": os.path.abspath(args.alignment),
        "format": args.format,
        "alphabet": alignment.states,
        "sequences_read": alignment.n_read,
        "sequences_kept": alignment.n_sequences,
        "sequences_dropped": len(alignment.dropped),
        "dropped_names": alignment.dropped[:100],
        "unknown_letters": args.unknown_letters,
        "focus": alignment.focus,
        "first_position": int(alignment.positions[0]),
        "L": alignment.n_sites,
        "q": alignment.n_states,
        "N_eff": model.n_eff_,
        "identity": args.identity,
        "alpha_couplings": args.alpha_couplings,
        "alpha_fields": args.alpha_fields,
        "model": args.model,
        "heads": args.heads if args.model == "factored" else None,
        "parameters": model.n_parameters_,
        "gauge": args.gauge,
        "max_iter": model.max_iter,
        "iterations": model.n_iter_,
        "objective": model.objective_,
        "converged": converged,
        "wall_time_s": wall,
        "timings_s": timings,
        "peak_memory_mb": memory,
        "precision": precision,
        "distances": None
        if args.distances is None
        else os.path.abspath(args.distances),
        "cutoff": args.cutoff,
        "min_separation": args.min_separation,
        "files": files,
    }


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
