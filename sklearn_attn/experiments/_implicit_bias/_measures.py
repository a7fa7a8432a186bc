"""Measures of the implicit-bias reproduction's runs against the max-margin SVMs.

The SVMs of a token selection, the correlations, norm ratios and ranks of
every run at its checkpoints and at its end, and their summaries over the
seeds: the rows of every table.
"""

from __future__ import annotations

import numpy as np

from ...attention import attention_margin, max_margin_svm
from .._common import summarize
from ._config import MEASURES


def _svms(structure, instance, selected, cfg, cache, key):
    """Nuclear and Frobenius SVMs (l1 / l2 if diagonal) of a token selection."""
    cache_key = (key, tuple(int(t) for t in selected))
    if cache_key not in cache:
        X, z, y, v, _ = instance
        names = ("nuclear", "frobenius") if structure == "full" else ("l1", "l2")
        cache[cache_key] = [
            max_margin_svm(
                X,
                z,
                y,
                v,
                norm=name,
                opt=selected,
                n_starts=cfg["n_starts"],
                random_state=0,
            )
            for name in names
        ]
    return cache[cache_key]


def _margins(W, instance, selected):
    """The margins of a stack of ``W`` (checkpoints) for the ``selected`` tokens."""
    X, z, y, v, _ = instance
    return attention_margin(W, X, z, y, v, opt=selected)


def _rank(W, tol):
    s = np.linalg.svd(W, compute_uv=False)
    return int(np.sum(s > tol * s[0])) if s[0] > 0 else 0


def _corr(W, W_ref):
    return float(np.sum(W * W_ref) / (np.linalg.norm(W) * np.linalg.norm(W_ref)))


def _measure(W, W0, instance, selected, cfg, cache, b):
    """Final measures of one full-matrix run of the aligned study (one seed).

    Against the SVMs of the selected tokens (Tarzanagh et al.'s protocol) and
    of the optimal ones (``*_opt``, the theorem's reference; the ratio is NaN
    while the margin is not positive); ``corr_nuc_start`` is the correlation
    of the start ``W0`` with the optimal tokens' nuclear SVM.
    """
    opt = instance[4]
    row = {"reached": bool(np.array_equal(selected, opt))}
    nuclear, frobenius = np.linalg.norm(W, "nuc"), np.linalg.norm(W)
    for suffix, tokens in (("", selected), ("_opt", opt)):
        (W_nuc, nuc), (W_fro, fro) = _svms("full", instance, tokens, cfg, cache, b)
        margin = float(_margins(W[None], instance, np.asarray(tokens))[0])
        row[f"corr_nuc{suffix}"] = _corr(W, W_nuc)
        row[f"corr_fro{suffix}"] = _corr(W, W_fro)
        positive = margin > 0
        row[f"ratio_nuc{suffix}"] = nuclear / margin / nuc if positive else np.nan
        if suffix == "":
            row["ratio_fro"] = frobenius / margin / fro if positive else np.nan
        else:
            row["corr_nuc_start"] = _corr(W0, W_nuc)
    return row


def _aligned_rows(init_scale, parametrization, init_name, data, result, cfg, cache):
    """Per-seed rows of one run of the aligned study (first and last steps)."""
    rows = []
    for b, instance in enumerate(data):
        selected = result.selected_tokens[b]
        row = {
            "init_scale": init_scale,
            "parametrization": parametrization,
            "init": init_name,
            "seed": b,
        }
        row.update(
            _measure(result.W[b, -1], result.W[b, 0], instance, selected, cfg, cache, b)
        )
        row["selected"] = " ".join(str(int(t)) for t in selected)
        row["log10_excess_loss"] = float(result.log10_excess_loss[b, -1])
        rows.append(row)
    return rows


def _summary(rows, by=("init_scale", "parametrization", "init"), measures=MEASURES):
    """Mean / std / min / max over seeds of ``measures`` per value of the ``by``
    columns (by default per start scale, parametrization and start)."""
    out = []
    keys = dict.fromkeys(tuple(r[name] for name in by) for r in rows)
    for key in keys:
        sel = [r for r in rows if tuple(r[name] for name in by) == key]
        line = dict(zip(by, key, strict=True))
        line["n_seeds"] = len(sel)
        line["n_reached"] = int(sum(r["reached"] for r in sel))
        for name in measures:
            values = np.array([r[name] for r in sel], dtype=float)
            finite = values[np.isfinite(values)]
            line[f"{name}_n"] = int(finite.size)
            for stat, f in (
                ("mean", np.mean),
                ("std", np.std),
                ("min", np.min),
                ("max", np.max),
            ):
                line[f"{name}_{stat}"] = float(f(finite)) if finite.size else np.nan
        out.append(line)
    return out


def _evaluate(structure, parametrization, data, result, cfg, cache, tokens="selected"):
    """Per-checkpoint and final measurements of one batched run.

    Against the SVMs of the tokens each run selects (``tokens="selected"``,
    Tarzanagh et al.'s protocol) or of the optimal tokens (``"optimal"``, the
    theorem's reference; the ratios are NaN while a run's margin for them is
    not positive).
    """
    n_seeds = len(data)
    corr = np.empty((2, n_seeds, len(result.iterations)))
    ratio = np.full_like(corr, np.nan)
    finals, spectra = [], []
    for b, instance in enumerate(data):
        selected = result.selected_tokens[b]
        reference = selected if tokens == "selected" else instance[4]
        (W_nuc, nuc), (W_fro, fro) = _svms(
            structure, instance, reference, cfg, cache, b
        )
        W = result.W[b]
        margin = _margins(W, instance, reference)
        positive = margin > 0
        for k, (W_svm, value, norms) in enumerate(
            (
                (W_nuc, nuc, result.nuclear_norm[b]),
                (W_fro, fro, result.frobenius_norm[b]),
            )
        ):
            corr[k, b] = np.einsum("cij,ij->c", W, W_svm) / (
                result.frobenius_norm[b] * np.linalg.norm(W_svm)
            )
            ratio[k, b, positive] = norms[positive] / margin[positive] / value
        sv = result.singular_values[b, -1] / margin[-1]
        reached = bool(np.array_equal(selected, instance[4]))
        finals.append(
            {
                "structure": structure,
                "parametrization": parametrization,
                "seed": b,
                "corr_nuc": float(corr[0, b, -1]),
                "corr_fro": float(corr[1, b, -1]),
                "ratio_nuc": float(ratio[0, b, -1]),
                "ratio_fro": float(ratio[1, b, -1]),
                "nuc_over_margin": float(result.nuclear_norm[b, -1] / margin[-1]),
                "fro_over_margin": float(result.frobenius_norm[b, -1] / margin[-1]),
                "svm_nuc": nuc,
                "svm_fro": fro,
                "rank": _rank(W[-1], cfg["rank_tol"]),
                "rank_svm_nuc": _rank(W_nuc, cfg["rank_tol"]),
                "rank_svm_fro": _rank(W_fro, cfg["rank_tol"]),
                "log10_excess_loss": float(result.log10_excess_loss[b, -1]),
                "reached": reached,
                "selected": " ".join(str(int(t)) for t in selected),
            }
        )
        # Each parametrization's spectrum, and that of the SVM it should reach.
        own = (
            ("svm_nuclear", W_nuc)
            if parametrization == "separate"
            else ("svm_frobenius", W_fro)
        )
        spectra.append(
            {parametrization: sv, own[0]: np.linalg.svd(own[1], compute_uv=False)}
        )
    reached = np.array([r["reached"] for r in finals])
    traj = []
    for c, it in enumerate(result.iterations):
        row = {
            "structure": structure,
            "parametrization": parametrization,
            "iteration": int(it),
        }
        for k, name in enumerate(("nuc", "fro")):
            row[f"corr_{name}_mean"], row[f"corr_{name}_std"] = summarize(corr[k, :, c])
            row[f"corr_{name}_min"] = float(np.min(corr[k, :, c]))
            row[f"ratio_{name}_mean"], row[f"ratio_{name}_std"] = summarize(
                ratio[k, :, c]
            )
        # L* is reached only by runs that select the optimal tokens; the others
        # stall at the loss of their selection, so they are left out here.
        losses = result.log10_excess_loss[reached, c]
        for name, q in (("median", 0.5), ("q25", 0.25), ("q75", 0.75)):
            row[f"log10_excess_loss_{name}"] = (
                float(np.quantile(losses, q, method="nearest"))
                if losses.size
                else np.nan
            )
        row["opt_attention_mean"] = float(np.mean(result.opt_attention[:, c]))
        row["n_samples"] = int(cfg[structure]["n_samples"])
        row["n_tokens"] = int(cfg[structure]["n_tokens"])
        row["dim"] = int(cfg[structure]["dim"])
        row["n_seeds"] = n_seeds
        row["n_reached"] = int(reached.sum())
        row["n_positive_margin"] = int(np.isfinite(ratio[0, :, c]).sum())
        traj.append(row)
    return traj, finals, spectra


def _theorem_rows(scores, data, finals):
    """Per-seed rows of the theorem study from ``_evaluate(..., tokens="optimal")``.

    The correlations are repeated as ``*_reached``, NaN for a run that does
    not select the optimal tokens: the theorem's conclusion is conditional on
    reaching them, and its summary is taken over those runs (as the ratios,
    NaN without a positive margin, are). Also the instance's scores
    ``gamma_it = y_i v^T x_it``: the smallest margin of an optimal token over
    the best other one, and the largest spread of the non-optimal scores
    within a sequence (0, up to rounding, in the theorem's setting).
    """
    rows = []
    for instance, final in zip(data, finals, strict=True):
        X, _, y, v, opt = instance
        n = len(opt)
        gamma = y[:, None] * (X @ v)
        others = np.ones(gamma.shape, dtype=bool)
        others[np.arange(n), opt] = False
        rest = gamma[others].reshape(n, -1)
        reached = final["reached"]
        rows.append(
            {
                "scores": scores,
                "parametrization": final["parametrization"],
                "seed": final["seed"],
                "reached": final["reached"],
                "corr_nuc_opt": final["corr_nuc"],
                "corr_fro_opt": final["corr_fro"],
                "corr_nuc_opt_reached": final["corr_nuc"] if reached else np.nan,
                "corr_fro_opt_reached": final["corr_fro"] if reached else np.nan,
                "ratio_nuc_opt": final["ratio_nuc"],
                "ratio_fro_opt": final["ratio_fro"],
                "svm_nuc": final["svm_nuc"],
                "svm_fro": final["svm_fro"],
                "rank": final["rank"],
                "rank_svm_nuc": final["rank_svm_nuc"],
                "rank_svm_fro": final["rank_svm_fro"],
                "score_gap_min": float(np.min(gamma[np.arange(n), opt] - rest.max(1))),
                "nonopt_score_spread": float(np.max(rest.max(1) - rest.min(1))),
                "log10_excess_loss": final["log10_excess_loss"],
                "selected": final["selected"],
            }
        )
    return rows


def _spectra_rows(structure, spectra_by_par):
    rows = []
    sources = {}
    for spectra in spectra_by_par:
        for per_seed in spectra:
            for source, values in per_seed.items():
                sources.setdefault(source, []).append(values)
    for source in ("separate", "combined", "svm_nuclear", "svm_frobenius"):
        values = np.asarray(sources.get(source, []))
        for k in range(values.shape[1] if values.size else 0):
            mean, std = summarize(values[:, k])
            rows.append(
                {
                    "structure": structure,
                    "source": source,
                    "index": k + 1,
                    "value_mean": mean,
                    "value_std": std,
                    "n_seeds": int(values.shape[0]),
                }
            )
    return rows
