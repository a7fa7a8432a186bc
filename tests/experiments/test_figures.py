"""The reproductions' figures and summaries, drawn from small hand-made tables.

The house style: no empty panel, no legend on a panel, one legend per figure
or one per part of it (a subfigure; each entry a drawn artist), no colliding
tick labels, bands and "±" only over several seeds, and a caption that says
how many seeds. The tables are built here, not run, so these tests take a
second or two.
"""

import copy
import functools
import itertools

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.utils import Bunch

from sklearn_attn.contacts import contact_precision
from sklearn_attn.experiments import (
    format_implicit_bias_summary,
    format_mha_summary,
    format_potts_summary,
    format_rfa_summary,
    plot_implicit_bias,
    plot_mha,
    plot_potts,
    plot_rfa,
    run_rfa,
    write_csv,
)
from sklearn_attn.experiments._common import _curve, _figure, _figure_legend
from sklearn_attn.experiments._potts._real import _contact_rows

pytest.importorskip("matplotlib")


# -- tables ----------------------------------------------------------------------------
@functools.cache
def _rfa_run(n_seeds):
    """The tables of ``run_rfa`` on the tiny settings of its own tests."""
    from test_reproduce_rfa import TINY

    return run_rfa(quick=True, n_seeds=n_seeds, progress=False, config=TINY)


def _rfa_tables(n_seeds):
    return copy.deepcopy(_rfa_run(n_seeds))


def _pf_like(n_sites, rng):
    """A contact map with the layout of ``load_pf00014``'s, and random scores."""
    i, j = np.triu_indices(n_sites, 1)
    distance = rng.uniform(3.0, 20.0, size=i.size)
    scores = rng.standard_normal((n_sites, n_sites))
    scores = scores + scores.T
    return Bunch(contact_i=i, contact_j=j, distance=distance), scores


def _potts_tables(n_seeds, rng):
    synthetic = [
        {
            "part": "synthetic",
            "parametrization": p,
            "n_train": n,
            "seed": seed,
            "test_loss": 2.0,
            "true_conditional_entropy": 2.0,
            "relative_excess_loss": (5.0 if p == "full" else 0.5)
            / n**0.8
            * (1 + 0.1 * seed),
            "coupling_correlation": 1 - (1 if p == "full" else 0.1) / n**0.3,
            "n_iter": 10,
            "fit_seconds": 0.1,
        }
        for p in ("factored", "full")
        for n in (400, 1600, 6400)
        for seed in range(n_seeds)
    ]
    # The dense study: the vanilla layer (no couplings) not at the largest n.
    dense = [
        {
            "part": "dense",
            "model": model,
            "n_train": n,
            "seed": seed,
            "test_loss": 1.0 + excess,
            "true_conditional_entropy": 1.0,
            "relative_excess_loss": excess,
            "train_relative_excess_loss": excess / 2,
            "coupling_correlation": None if model == "vanilla" else 1 - excess,
            "n_iter": 10,
            "converged": model != "vanilla",
            "fit_seconds": 0.1,
            "beta": 3.0,
            "n_sites": 20,
            "n_states": 10,
            "n_test": 1000,
            "vanilla_max_n": 1600,
        }
        for model, scale, floor in (
            ("factored", 0.5, 0.0),
            ("vanilla", 0.5, 0.1),
            ("full", 5.0, 0.0),
        )
        for n in (400, 1600, 6400)
        if not (model == "vanilla" and n > 1600)
        for seed in range(n_seeds)
        for excess in [floor + scale / n**0.8 * (1 + 0.1 * seed)]
    ]
    # The default run has two PF00014 models: one above the diagonal, one below.
    data, scores = _pf_like(20, rng)
    real, contacts = [], []
    for model in ("full", "factored (32 heads)")[: 1 if n_seeds == 1 else 2]:
        scores = scores + rng.standard_normal(scores.shape)
        precision = contact_precision(
            scores, data.contact_i, data.contact_j, data.distance
        )
        real.append(
            {
                "part": "real",
                "model": model,
                "n_iter": 5,
                "converged": False,
                "objective_plmc_units": 1.0,
                "fit_seconds": 1.0,
                **{f"precision_top_{k}": v for k, v in precision.items()},
            }
        )
        contacts += _contact_rows(model, scores, data)
    return {"synthetic": synthetic, "dense": dense, "real": real, "contacts": contacts}


def _mha_tables(n_seeds):
    rows = []
    for m, model in itertools.product((1, 2), ("learner", "too_few_heads", "uniform")):
        model = "uniform_linear" if model == "uniform" else model
        if model == "too_few_heads" and m == 1:
            continue
        for n in (2, 4, 8, 32, 128):
            error = 1e-16 if model == "learner" and n >= 8 else 0.5
            rows.append(
                {
                    "model": model,
                    "m": m,
                    "d": 4,
                    "k": 4,
                    "n_train": n,
                    "n_fit_heads": m,
                    "error_mean": error,
                    "error_std": 0.0,
                    "error_median": error,
                    "error_min": error / 10 if n_seeds > 1 else error,
                    "error_max": error * 2 if n_seeds > 1 else error,
                    "success_rate": float(error < 1e-6),
                    "theta_error_median": None,
                    "fit_seconds_mean": 0.1,
                    "n_seeds": n_seeds,
                }
            )
    return {"learning_curves": rows}


def _implicit_bias_tables(n_seeds, n_reached, beyond_float=False):
    traj, final, spectra = [], [], []
    for s, dim in (("diagonal", 5), ("full", 4)):
        for p in ("separate", "combined"):
            reached = n_reached[p]
            for it in (0, 1, 10, 100, 1000):
                row = {
                    "structure": s,
                    "parametrization": p,
                    "iteration": it,
                    "log10_excess_loss_median": -(1.0 + it) if reached else np.nan,
                    "log10_excess_loss_q25": -(2.0 + it) if reached else np.nan,
                    "log10_excess_loss_q75": -(0.5 + it) if reached else np.nan,
                    "opt_attention_mean": 0.5,
                    "n_samples": 5,
                    "n_tokens": 3,
                    "dim": dim,
                    "n_seeds": n_seeds,
                    "n_reached": reached,
                    "n_positive_margin": n_seeds if it >= 10 else 0,
                }
                if beyond_float and reached and it == 1000:
                    # As in the default run: log10(L - L*) of -1e269 and -inf.
                    row["log10_excess_loss_median"] = -3e269
                    row["log10_excess_loss_q25"] = -np.inf
                    row["log10_excess_loss_q75"] = -2e209
                for name in ("nuc", "fro"):
                    row[f"corr_{name}_mean"] = 1 - 1 / (2 + it)
                    row[f"corr_{name}_std"] = 0.05
                    row[f"corr_{name}_min"] = 0.5
                    row[f"ratio_{name}_mean"] = 1 + 1 / (1 + it) if it >= 10 else np.nan
                    row[f"ratio_{name}_std"] = 0.01 if it >= 10 else np.nan
                traj.append(row)
            for seed in range(n_seeds):
                final.append(
                    {
                        "structure": s,
                        "parametrization": p,
                        "seed": seed,
                        "corr_nuc": 0.99,
                        "corr_fro": 0.9,
                        "ratio_nuc": 1.01,
                        "ratio_fro": 1.2,
                        "rank": 2,
                        "rank_svm_nuc": 2,
                        "rank_svm_fro": dim,
                        "reached": seed < reached,
                    }
                )
        for source in ("separate", "combined", "svm_nuclear", "svm_frobenius"):
            for k in range(dim):
                spectra.append(
                    {
                        "structure": s,
                        "source": source,
                        "index": k + 1,
                        "value_mean": 1.0 / (k + 1),
                        "value_std": 0.0,
                        "n_seeds": n_seeds,
                    }
                )
    return {"trajectories": traj, "final": final, "spectra": spectra}


# -- checks ----------------------------------------------------------------------------
def _drawn(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _has_points(artist):
    if hasattr(artist, "get_xdata"):
        return len(artist.get_xdata()) > 0
    if hasattr(artist, "get_offsets"):
        return len(artist.get_offsets()) > 0
    return True


def _check_house_style(fig):
    renderer = _drawn(fig)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert axes
    for ax in axes:
        # No empty panel, no legend on a panel.
        assert ax.has_data(), ax.get_title()
        assert ax.get_legend() is None
        # No two tick labels of an axis overlap (e.g. minor labels of a log axis).
        for axis in (ax.xaxis, ax.yaxis):
            boxes = [
                label.get_window_extent(renderer)
                for label in axis.get_ticklabels(minor=False)
                + axis.get_ticklabels(minor=True)
                if label.get_visible() and label.get_text()
            ]
            for a, b in itertools.combinations(boxes, 2):
                assert not a.overlaps(b), (ax.get_title(), axis.axis_name)
    # One legend for the figure, or one below each part of it (none then for
    # the figure); each entry names an artist drawn with data.
    legends = _legends(fig)
    if fig.subfigs and not fig.legends:
        assert all(len(sub.legends) == 1 for sub in fig.subfigs)
    else:
        assert len(legends) == 1
    drawn = {}
    for ax in axes:
        for artist in ax.get_children():
            if _has_points(artist):
                drawn.setdefault(artist.get_label(), artist)
    for legend in legends:
        for text in legend.get_texts():
            assert text.get_text() in drawn, text.get_text()
    assert "seed" in fig._suptitle.get_text()


def _legends(fig):
    """The legends of a figure and of its subfigures."""
    return list(fig.legends) + [
        legend for sub in fig.subfigs for legend in _legends(sub)
    ]


def _bands(fig):
    from matplotlib.collections import PolyCollection

    return sum(isinstance(c, PolyCollection) for ax in fig.axes for c in ax.collections)


# -- tests -----------------------------------------------------------------------------
@pytest.mark.parametrize("n_seeds", [1, 2])
def test_rfa_figure_and_summary(n_seeds):
    tables = _rfa_tables(n_seeds)
    fig = plot_rfa(tables)
    if n_seeds == 1:  # drawing is the slow part: once is enough
        _check_house_style(fig)
    # Top: the degree curves, a panel per model and contrast; middle: n*
    # against N and d, BiasedRFA's ratios; bottom: gamma, the mean scale and
    # the softmax: none left empty.
    assert len(fig.axes) == 4 + 3 + 3
    assert all(ax.has_data() for ax in fig.axes)
    assert (_bands(fig) > 0) == (n_seeds > 1)
    titles = ("RFA\n", "BiasedRFA\n", "RFMLP\n", "RFA without the constant")
    thresholds = {
        (r["model"], r["qk_bias"], r["target"]): r for r in tables["degree_thresholds"]
    }
    variants = (("RFA", True), ("BiasedRFA", True), ("RFMLP", None), ("RFA", False))
    for ax, title, (model, qk_bias) in zip(fig.axes[:4], titles, variants, strict=True):
        assert ax.get_title().startswith(title)
        # A line per target, the threshold and the mean's error as references.
        curves = [line for line in ax.lines if len(line.get_xdata()) == 3]
        assert len(curves) == 2
        row = thresholds[model, qk_bias, "correlation-1"]
        needed = row["n_needed"]
        text = f"$> {row['largest_n']}$" if needed is None else str(needed)
        assert f"$n^*$: $t$ {text}" in ax.get_title()
    n_star_axes = fig.axes[4:6]
    assert [ax.get_xlabel()[:3] for ax in n_star_axes] == ["$N$", "$d$"]
    labels = {
        text.get_text() for legend in _legends(fig) for text in legend.get_texts()
    }
    assert {"threshold 0.6", "RFA, softmax", "RFA, $d = 2$", "$n = 64$"} <= labels
    summary = format_rfa_summary(tables)
    assert ("\u00b1" in summary) == (n_seeds > 1)
    assert f"{n_seeds} seed" in summary
    for title in (
        "Degree table",
        "Sample complexity",
        "BiasedRFA against RFA",
        "mean scale",
        "ReLU against",
    ):
        assert title in summary


def test_rfa_figure_of_one_study():
    """A figure from the degree table alone (the other studies left out)."""
    tables = _rfa_tables(1)
    for name in tables:
        if not name.startswith("degree"):
            tables[name] = []
    fig = plot_rfa(tables)
    assert len(fig.axes) == 4 and all(ax.has_data() for ax in fig.axes)
    assert "Sample complexity" not in format_rfa_summary(tables)


@pytest.mark.parametrize("n_seeds", [1, 3])
def test_potts_figure_and_summary(n_seeds, global_random_seed):
    tables = _potts_tables(n_seeds, np.random.default_rng(global_random_seed))
    fig = plot_potts(tables)
    if n_seeds == 1:
        _check_house_style(fig)
    # Learning curves on the ring and on the dense teacher, precision, contacts.
    assert len(fig.axes) == 6
    assert (_bands(fig) > 0) == (n_seeds > 1)
    # The dense row: three models on the loss panel (the vanilla layer to its
    # largest size only), two on the coupling panel (vanilla has no couplings).
    loss, corr = fig.axes[2], fig.axes[3]
    labels = {x.get_label(): x for x in loss.lines if x.get_label()[0] != "_"}
    assert set(labels) == {
        "factored (one free head)",
        "vanilla attention (one layer)",
        "full (plmDCA)",
    }
    assert list(labels["vanilla attention (one layer)"].get_xdata()) == [400, 1600]
    assert "vanilla attention (one layer)" not in {x.get_label() for x in corr.lines}
    assert "vanilla up to $n = 1600$" in fig._suptitle.get_text()
    # A precision curve per model, at k = L the table's precision at L.
    curves = [line for line in fig.axes[4].lines if len(line.get_xdata()) > 10]
    assert len(curves) == len(tables["real"])
    for curve, row in zip(curves, tables["real"], strict=True):
        k, precision = curve.get_data()
        assert precision[list(k).index(20)] == pytest.approx(row["precision_top_L"])
    summary = format_potts_summary(tables)
    assert ("\u00b1" in summary) == (n_seeds > 1)
    assert ("1 seed" if n_seeds == 1 else f"{n_seeds} seeds") in summary
    # The dense table: every model and size, the vanilla layer's missing size
    # said to be not run, and why.
    dense = summary[summary.index("Dense signed teacher") : summary.index("PF00014")]
    (vanilla_6400,) = [
        line for line in dense.splitlines() if line.split()[:2] == ["vanilla", "6400"]
    ]
    assert "not run" in vanilla_6400
    assert "not run above n = 1600" in dense
    for model in ("factored", "full"):
        assert sum(line.startswith(model) for line in dense.splitlines()) == 3


def test_potts_figure_without_the_real_part():
    tables = _potts_tables(1, np.random.default_rng(0))
    tables.update(real=[], contacts=[])  # run_potts(real=False)
    fig = plot_potts(tables)
    assert len(fig.axes) == 4 and all(ax.has_data() for ax in fig.axes)
    assert "PF00014" not in format_potts_summary(tables)


def test_potts_figure_without_the_dense_study():
    """Tables written before the dense study, or run with ``dense=None``."""
    tables = _potts_tables(1, np.random.default_rng(0))
    del tables["dense"]
    fig = plot_potts(tables)
    _check_house_style(fig)
    assert len(fig.axes) == 4
    assert "dense" not in fig._suptitle.get_text()
    assert "Dense" not in format_potts_summary(tables)


@pytest.mark.parametrize("n_seeds", [1, 2])
def test_mha_figure_and_summary(n_seeds):
    tables = _mha_tables(n_seeds)
    fig = plot_mha(tables)
    if n_seeds == 1:
        _check_house_style(fig)
    assert len(fig.axes) == 2
    assert (_bands(fig) > 0) == (n_seeds > 1)
    assert f"{n_seeds} seed" in format_mha_summary(tables)


def test_implicit_bias_figure_without_runs_reaching_the_optimum():
    # No separate run reaches L*: no loss line and no legend entry for it there,
    # and the panel's title says so.
    tables = _implicit_bias_tables(3, {"separate": 0, "combined": 2})
    fig = plot_implicit_bias(tables)
    _check_house_style(fig)
    assert len(fig.axes) == 8
    ax_loss = fig.axes[0]
    assert len(ax_loss.lines) == 1
    assert "separate 0/3" in ax_loss.get_title()
    assert "3 seeds" in format_implicit_bias_summary(tables)


def test_implicit_bias_figure_with_gaps_beyond_floating_point():
    # The loss gap's digits reach 1e269 and infinity (the default run): the
    # figure is drawn without overflow, the axis ending below the largest float.
    import warnings

    tables = _implicit_bias_tables(2, {"separate": 2, "combined": 2}, beyond_float=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fig = plot_implicit_bias(tables)
        _check_house_style(fig)
    low, high = fig.axes[0].get_ylim()
    assert 0 < low < 1 and 1e269 < high < 1e306


def _theorem_tables(n_equal, n_generic):
    """The theorem study's tables: trajectories of the "full" rows, per-seed ends."""
    tables = _implicit_bias_tables(n_generic, {"separate": 1, "combined": 1})
    tables["theorem_trajectories"] = [
        {**row, "scores": "equal", "score_gap": 0.5, "n_seeds": n_equal}
        for row in tables["trajectories"]
        if row["structure"] == "full"
    ]
    final = []
    for scores, count in (("equal", n_equal), ("generic", n_generic)):
        for p in ("separate", "combined"):
            for seed in range(count):
                # Equal scores: within 1e-4 of the limit; generic: up to 0.5.
                distance = 10.0 ** -(4 - seed / count) if scores == "equal" else 0.5
                final.append(
                    {
                        "scores": scores,
                        "parametrization": p,
                        "seed": seed,
                        "corr_nuc_opt": 1 - distance if p == "separate" else 0.8,
                        "corr_fro_opt": 1 - distance if p == "combined" else 0.8,
                    }
                )
    tables["theorem_final"] = final
    return tables


def test_implicit_bias_figure_with_the_theorem_row():
    # A last row for the theorem's setting: its training curves, and per seed
    # the distance of each run from its predicted SVM, equal (solid) against
    # generic (dotted) scores.
    tables = _theorem_tables(5, 3)
    fig = plot_implicit_bias(tables)
    _check_house_style(fig)
    assert len(fig.axes) == 3 * 4
    assert "equal scores" in fig.axes[8].get_title()
    ends = fig.axes[11]
    assert sorted(line.get_linestyle() for line in ends.lines) == ["-", "-", ":", ":"]
    solid = [line for line in ends.lines if line.get_linestyle() == "-"]
    for line in solid:
        # Sorted per seed, at the middle of each seed's share of the axis.
        assert_allclose(line.get_xdata(), (np.arange(5) + 0.5) / 5)
        assert np.all(np.diff(line.get_ydata()) >= 0)
        assert_allclose(line.get_ydata(), np.sort(10.0 ** -(4 - np.arange(5) / 5)))
    legend = [text.get_text() for text in fig.legends[0].get_texts()]
    assert sum("generic tokens" in label for label in legend) == 2
    assert "score gap 0.5" in fig._suptitle.get_text()


def test_contact_rows_rank_as_contact_precision(global_random_seed):
    # Exact reference: the precision of the top k ranked rows is
    # contact_precision's, for every k it reports.
    data, scores = _pf_like(30, np.random.default_rng(global_random_seed))
    rows = _contact_rows("m", scores, data)
    ranked = sorted((r for r in rows if r["rank"] is not None), key=lambda r: r["rank"])
    assert [r["rank"] for r in ranked] == list(range(1, len(ranked) + 1))
    assert all(r["j"] - r["i"] >= 6 for r in ranked)
    expected = contact_precision(
        scores, data.contact_i, data.contact_j, data.distance, top=[1, 6, 30, 60]
    )
    hits = np.cumsum([r["contact"] for r in ranked])
    for k, value in expected.items():
        assert hits[k - 1] / k == value


def test_contact_rows_write_as_csv(tmp_path):
    data, scores = _pf_like(8, np.random.default_rng(0))
    path = write_csv(_contact_rows("m", scores, data), tmp_path / "contacts.csv")
    lines = open(path).read().splitlines()
    assert lines[0] == "model,i,j,distance,contact,score,rank"
    assert len(lines) == 1 + 8 * 7 // 2


def test_legend_skips_empty_lines_and_repeats():
    fig = _figure(4, 3)
    ax = fig.subplots()
    assert _curve(ax, [1, 2], [np.nan, np.nan], label="nothing") is None
    ax.plot([], [], label="empty")
    _curve(ax, [1, 2, 3], [1, 2, 3], label="a")
    _curve(ax, [1, 2, 3], [3, 2, 1], label="a")
    legend = _figure_legend(fig)
    assert [t.get_text() for t in legend.get_texts()] == ["a"]
    # Fewer than three points: markers, no line.
    line = _curve(ax, [1, 2], [1, 2], label="b")
    assert line.get_linestyle() == "None"
