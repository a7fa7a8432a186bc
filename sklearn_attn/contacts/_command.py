"""``python -m sklearn_attn contacts ALIGNMENT``: contacts from an alignment.

The command a computational biologist runs instead of plmc, as its pipeline:
read the alignment (plmc's conventions) into codes, fit the Potts model by
pseudo-likelihood (reweighting the sequences), score the pairs, and write the
contact list, a plmc-style EC file, the couplings, a contact map and a JSON
summary. Progress goes to standard error; results go to files. Option names
follow plmc's where it has one.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import sys
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._backend import available_memory_bytes, current_rss_bytes, peak_rss_bytes
from .._console import (
    Progress,
    add_scheduler_option,
    byte_size,
    format_bytes,
    fraction,
    non_negative_float,
    on_cluster,
    positive_int,
)
from ..potts import (
    PottsPseudoLikelihood,
    apc,
    estimate_fit_memory,
    resolve_algorithm,
    sequence_weights,
)
from ._alignment import Alignment
from ._figure import plot_contact_map
from ._formats import (
    read_weights,
    write_contacts,
    write_couplings,
    write_ec,
    write_weights,
)
from ._structure import contact_precision, read_distances

DEFAULT_OUTPUT_DIR = "contacts_out"
# Suffixes of alignment files, left out of the folder names of families.
_SUFFIXES = (".gz", ".a2m", ".a3m", ".fasta", ".fa", ".afa", ".aln", ".txt")


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
    (['family.a2m'], 'factored', 32)
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
        nargs="+",
        help="aligned FASTA, A2M or A3M file (gzipped or not); with several, each "
        "family is fitted into a folder of its own under --output-dir, and "
        "families.csv sums them up",
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
        "--gaps",
        choices=["state", "ignore"],
        default="state",
        help="'state': the gap is a 21st letter, as plmc fits it by default; "
        "'ignore': gapped sites are missing data, left out of the conditionals "
        "and the couplings (plmc's -g; the couplings then have no gap state; "
        "default: state)",
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
        "--weights",
        metavar="FILE",
        default=None,
        help="read the sequence weights from FILE instead of computing them: one "
        "number a line, one line per sequence kept (as --save-weights and plmc "
        "write them)",
    )
    parser.add_argument(
        "--save-weights",
        metavar="FILE",
        default=None,
        help="write the sequence weights used to FILE, for a later --weights",
    )
    parser.add_argument(
        "--max-memory",
        type=byte_size,
        default=None,
        metavar="SIZE",
        help="refuse, before any work, a fit whose arrays need more than SIZE "
        "(such as 8G or 500M; default: the memory available)",
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
        "--algorithm",
        choices=("auto", "gather", "dense"),
        default="auto",
        help="how the fit computes its products: gathers from the codes (CPU, "
        "needs numba: the fast extra), dense one-hot products, or auto: gather "
        "on the CPU when numba is installed (default: auto)",
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
        nargs="+",
        default=None,
        help="known structure to score the prediction: a table of lines 'i j ... "
        "distance' (1-based positions as in contacts.csv, distance last) or an "
        "L x L distance matrix; one file per ALIGNMENT, in the same order",
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
        "--n-jobs",
        type=positive_int,
        default=1,
        metavar="N",
        help="families fitted at once (default: 1; with --scheduler, as many as "
        "the cluster has threads)",
    )
    add_scheduler_option(parser)
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
    families = _families(args)
    if len(families) == 1:
        predict_contacts(families[0])
        return 0
    rows = _fit_families(families, args)
    path = os.path.join(args.output_dir, "families.csv")
    _write_families(path, rows)
    failed = [row for row in rows if row["status"] != "ok"]
    for row in failed:
        print(
            f"sklearn-attn contacts: {row['alignment']}: {row['status']}",
            file=sys.stderr,
        )
    print(
        f"{len(rows) - len(failed)} of {len(rows)} families fitted; summary in {path}",
        file=sys.stderr,
    )
    return 1 if failed else 0


def _families(args):
    """One set of arguments per alignment; several go into folders of their own."""
    alignments = args.alignment
    if isinstance(alignments, str):
        alignments = [alignments]
    distances = args.distances
    if isinstance(distances, str):
        distances = [distances]
    if distances is not None and len(distances) != len(alignments):
        raise ValueError(
            f"--distances takes one file per alignment: {len(alignments)} "
            f"alignment(s) but {len(distances)} distance file(s)."
        )
    if len(alignments) == 1:
        names = [None]
    else:
        names = _family_names(alignments)
        for option in ("weights", "save_weights"):
            if getattr(args, option) is not None:
                raise ValueError(
                    f"--{option.replace('_', '-')} names one file, so it takes one "
                    f"alignment; got {len(alignments)}."
                )
    return [
        argparse.Namespace(
            **{
                **vars(args),
                "alignment": alignment,
                "distances": None if distances is None else distances[k],
                "output_dir": args.output_dir
                if name is None
                else os.path.join(args.output_dir, name),
                "family": name,
            }
        )
        for k, (alignment, name) in enumerate(zip(alignments, names, strict=True))
    ]


def _family_names(paths):
    """Folder names from the file names (without suffixes), made unique."""
    names = []
    for path in paths:
        name = stem = os.path.basename(os.fspath(path))
        while True:
            for suffix in _SUFFIXES:
                stem = stem.removesuffix(suffix)
            if stem == name:
                break
            name = stem
        name = name or "family"
        base, k = name, 2
        while name in names:
            name, k = f"{base}_{k}", k + 1
        names.append(name)
    return names


def _fit_families(families, args):
    """Fit each family, in parallel or on a cluster; a failure is a row too."""
    from sklearn.utils.parallel import Parallel, delayed

    with on_cluster(args.scheduler):
        n_jobs = None if args.scheduler is not None else args.n_jobs
        return Parallel(n_jobs=n_jobs)(
            delayed(_fit_family)(family) for family in families
        )


def _fit_family(family):
    """The summary row of one family: what it gave, or why it failed."""
    row = {"family": family.family, "alignment": family.alignment}
    try:
        summary = predict_contacts(family)
    except (OSError, ValueError, RuntimeError, MemoryError) as exc:
        return {**row, "status": f"error: {exc}"}
    precision = summary["precision"] or {}
    return {
        **row,
        "status": "ok",
        "L": summary["L"],
        "sequences_kept": summary["sequences_kept"],
        "N_eff": summary["N_eff"],
        "iterations": summary["iterations"],
        "converged": summary["converged"],
        **{f"precision_{key}": value for key, value in precision.items()},
        "wall_time_s": summary["wall_time_s"],
        "output_dir": family.output_dir,
    }


def _write_families(path, rows):
    """``families.csv``: one row a family, the columns of all rows."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def predict_contacts(args):
    """Read, fit, score and write one family, with parsed arguments; returns the
    summary written to ``summary.json``."""
    if not isinstance(args.alignment, str):
        (args,) = _families(args)
    # The interpreter with the package loaded is the baseline of the memory.
    baseline_rss = current_rss_bytes()
    prefix = "[contacts] " if args.family is None else f"[contacts {args.family}] "
    progress = Progress(False if args.quiet else None, prefix=prefix)
    timings = {}

    alignment = _read(args, progress)
    timings["read_s"] = progress.elapsed()
    memory = _check_memory(alignment, args, progress)
    weights = _weigh(alignment, args, progress)
    timings["weight_s"] = progress.elapsed() - timings["read_s"]
    model, converged = _fit(alignment, weights, args, progress)
    timings["fit_s"] = progress.elapsed() - timings["read_s"] - timings["weight_s"]
    raw = model.contact_scores(apc_correction=False, gauge=args.gauge)
    scores = apc(raw)
    known = precision = None
    if args.distances is not None:
        known = read_distances(args.distances, alignment.positions)
        precision = _score(scores, known, args, progress)
    files, figure_note = _write(args, alignment, model, raw, scores, known)
    timings["write_s"] = progress.elapsed() - sum(timings.values())
    peak = peak_rss_bytes()
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
        memory_estimate=memory,
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


def _model_states(alignment, args):
    """Number of states of the model: the gap leaves them with ``--gaps ignore``."""
    return alignment.n_states - (args.gaps == "ignore")


def _check_memory(alignment, args, progress):
    """The estimated peak of the fit, in bytes; stops at once above the limit."""
    n_states = _model_states(alignment, args)
    algorithm = resolve_algorithm(args.algorithm, args.device)
    estimate = estimate_fit_memory(
        alignment.n_sequences,
        alignment.n_sites,
        n_states,
        args.model,
        args.heads,
        algorithm=algorithm,
    )
    limit = args.max_memory
    source = "--max-memory"
    if limit is None and (args.device or "cpu") == "cpu":
        limit, source = available_memory_bytes(), "the memory available"
    if limit is not None and estimate > limit:
        if args.model == "full":
            factored = estimate_fit_memory(
                alignment.n_sequences,
                alignment.n_sites,
                n_states,
                "factored",
                args.heads,
                algorithm=algorithm,
            )
            options = f"--model factored (about {format_bytes(factored)})"
        else:
            options = "fewer heads (--heads)"
        raise MemoryError(
            f"the {args.model} model of {alignment.n_sites} sites x "
            f"{n_states} states ({alignment.n_sequences} sequences) needs "
            f"about {format_bytes(estimate)} of memory, more than "
            f"{format_bytes(limit)} ({source}); nothing was fitted. Options: "
            f"{options}, fewer sites (--focus, or a filtered alignment), a GPU "
            "(--device cuda), or a machine with more memory."
        )
    progress(f"the fit needs about {format_bytes(estimate)} of memory")
    return estimate


def _weigh(alignment, args, progress):
    """The sequence weights of the fit (None: one per sequence)."""
    if args.weights is not None:
        weights = read_weights(args.weights, alignment.n_sequences)
        progress(f"read {weights.size} weights from {args.weights}")
    elif args.identity > 0:
        weights = sequence_weights(
            alignment.codes,
            identity_threshold=args.identity,
            n_states=alignment.n_states,
        )
        progress(f"weighted the sequences at identity {args.identity}")
    else:
        weights = None
    if args.save_weights is not None:
        write_weights(
            args.save_weights,
            np.ones(alignment.n_sequences) if weights is None else weights,
        )
    return weights


def _max_iter(args):
    if args.max_iter is not None:
        return args.max_iter
    return 60 if args.model == "full" else 1000


def _fit(alignment, weights, args, progress):
    """The fitted model, and whether it converged within ``max_iter``."""
    model = PottsPseudoLikelihood(
        args.model,
        n_heads=args.heads,
        states=range(alignment.n_states),
        # The alphabet's first letter is the gap.
        missing_state=0 if args.gaps == "ignore" else None,
        alpha_fields=args.alpha_fields,
        alpha_couplings=args.alpha_couplings,
        max_iter=_max_iter(args),
        tol=args.tol,
        random_state=args.random_state,
        verbose=0 if args.quiet else 10,
        device=args.device,
        algorithm=args.algorithm,
    )
    progress(
        f"fitting the {args.model} model (max_iter={model.max_iter}, "
        f"alpha_couplings={args.alpha_couplings}, alpha_fields="
        f"{args.alpha_fields}, identity={args.identity}, gaps={args.gaps})"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # The estimator's progress lines go to standard error, with ours.
        with contextlib.redirect_stdout(sys.stderr):
            model.fit(alignment.codes, sample_weight=weights)
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
        states=np.array(list(alignment.states))[model.states_],
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
    args,
    alignment,
    model,
    *,
    converged,
    precision,
    files,
    wall,
    timings,
    memory,
    memory_estimate,
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
        "q": int(model.states_.size),
        "gaps": args.gaps,
        "N_eff": model.n_eff_,
        "identity": args.identity,
        "weights": None if args.weights is None else os.path.abspath(args.weights),
        "alpha_couplings": args.alpha_couplings,
        "alpha_fields": args.alpha_fields,
        "model": args.model,
        "heads": args.heads if args.model == "factored" else None,
        "parameters": model.n_parameters_,
        "gauge": args.gauge,
        "max_iter": model.max_iter,
        "iterations": model.n_iter_,
        "objective": model.objective_,
        "algorithm": model.algorithm_,
        "converged": converged,
        "wall_time_s": wall,
        "timings_s": timings,
        "peak_memory_mb": memory,
        "memory_estimate_mb": memory_estimate / 1e6,
        "precision": precision,
        "distances": None
        if args.distances is None
        else os.path.abspath(args.distances),
        "cutoff": args.cutoff,
        "min_separation": args.min_separation,
        "files": files,
    }
