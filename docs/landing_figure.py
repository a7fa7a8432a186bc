"""Draw the figure of the documentation's landing page, ``docs/_static/landing.png``.

Usage (from the repository root; about a minute on two cores)::

    python docs/landing_figure.py

Left, the contacts of the bundled Kunitz domain family (PF00014) predicted by the
``contacts`` command's model and settings (the full Potts model, plmc's penalties and
reweighting, 60 iterations), drawn over the contacts of its structure. Right, learning
curves of random-feature attention and of a random-feature MLP with as many trained
weights, on targets that average over the keys. Both panels come from fits run by this
script; the figure is written at 200 dpi, twice the resolution at which the page
shows it.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from sklearn_attn import RFMLP, PottsPseudoLikelihood, RandomFeatureAttentionRegressor
from sklearn_attn.contacts import contact_precision
from sklearn_attn.datasets import load_pf00014, make_token_regression

OUT = Path(__file__).resolve().parent / "_static" / "landing.png"
BLUE, RED, GREY, ORANGE = "#1f77b4", "#d62728", "0.80", "#ff7f0e"


def contact_panel(ax):
    """PF00014: the structure's contacts and the top-L predicted pairs."""
    data = load_pf00014()
    model = PottsPseudoLikelihood(
        "full",
        alpha_couplings=16.0,
        alpha_fields=0.01,
        sequence_identity=0.8,
        max_iter=60,
    )
    with warnings.catch_warnings():
        # 60 iterations is the command's default; the fit says it stopped there.
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(data.sequences)
    scores = model.contact_scores()
    n_sites = scores.shape[0]
    i, j, distance = data.contact_i, data.contact_j, data.distance
    candidate = j - i >= 6
    contact = candidate & (distance < 8.0)
    for a, b in ((i[contact], j[contact]), (j[contact], i[contact])):
        ax.scatter(b + 1, a + 1, s=16, c=GREY, marker="s", linewidths=0)
    ci, cj, cd = i[candidate], j[candidate], distance[candidate]
    top = np.argsort(-scores[ci, cj], kind="stable")[:n_sites]
    hit = cd[top] < 8.0
    ax.scatter(cj[top][hit] + 1, ci[top][hit] + 1, s=13, c=BLUE, linewidths=0)
    ax.scatter(
        cj[top][~hit] + 1, ci[top][~hit] + 1, s=22, c=RED, marker="x", linewidths=1.2
    )
    precision = contact_precision(scores, i, j, distance, top="L")["L"]
    ax.plot([0, n_sites + 1], [0, n_sites + 1], color="0.6", linewidth=0.6)
    ax.set(xlim=(0, n_sites + 1), ylim=(n_sites + 1, 0), aspect="equal")
    ax.set_xticks([1, 20, 40, n_sites])
    ax.set_yticks([1, 20, 40, n_sites])
    ax.set_xlabel("position $j$")
    ax.set_ylabel("position $i$")
    ax.set_title("contacts from an alignment", loc="left", fontweight="bold")
    handles = {
        "in the structure": ax.scatter([], [], s=16, c=GREY, marker="s", linewidths=0),
        "predicted, in contact": ax.scatter([], [], s=13, c=BLUE, linewidths=0),
    }
    if not hit.all():  # only what the map shows
        handles["predicted, not in contact"] = ax.scatter(
            [], [], s=22, c=RED, marker="x", linewidths=1.2
        )
    # In the lower triangle, which mirrors the structure's contacts of the upper.
    ax.legend(
        list(handles.values()),
        list(handles),
        title=f"PF00014, top $L$ = {n_sites}:\n{precision:.0%} in contact",
        loc="lower left",
        fontsize=8.5,
        title_fontsize=8.5,
        handletextpad=0.2,
        borderpad=0.4,
        framealpha=0.92,
        alignment="left",
    )


def learning_curve_panel(ax):
    """Test error against training samples: attention against an MLP."""
    token_dim, n_keys, n_test = 4, 16, 500
    sizes = np.array([32, 64, 128, 256, 512, 1024])
    seeds = range(3)
    # As many trained weights: 100 heads of d + 1 values, 500 hidden units.
    models = {
        "random-feature attention": (
            lambda seed: RandomFeatureAttentionRegressor(100, random_state=seed),
            BLUE,
            "o",
        ),
        "random-feature MLP": (
            lambda seed: RFMLP(500, random_state=seed),
            ORANGE,
            "s",
        ),
    }
    errors = {name: np.empty((len(seeds), len(sizes))) for name in models}
    for s, seed in enumerate(seeds):
        X, y = make_token_regression(
            sizes[-1] + n_test,
            n_keys=n_keys,
            token_dim=token_dim,
            target="correlation",
            random_state=seed,
        )
        for name, (make, _, _) in models.items():
            for k, n in enumerate(sizes):
                fitted = make(seed).fit(X[:n], y[:n])
                errors[name][s, k] = 1.0 - fitted.score(X[-n_test:], y[-n_test:])
    for name, (_, color, marker) in models.items():
        mean = errors[name].mean(axis=0)
        ax.plot(sizes, mean, marker=marker, color=color, label=name, markersize=4.5)
        low, high = errors[name].min(axis=0), errors[name].max(axis=0)
        ax.fill_between(sizes, low, high, color=color, alpha=0.15, linewidth=0)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.set_xlabel("training samples $n$")
    ax.set_ylabel("test error, $1 - R^2$")
    ax.set_title("learning an attention layer", loc="left", fontweight="bold")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="lower left", fontsize=9, framealpha=0.9)
    ax.text(
        0.97,
        0.62,
        f"{n_keys} keys, $d$ = {token_dim}\nkey-averaged target\n3 seeds",
        transform=ax.transAxes,
        fontsize=9,
        ha="right",
        va="top",
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    plt.rcParams.update(
        {
            "font.size": 10,
            "axes.titlesize": 10.5,
            "axes.labelsize": 10,
            "xtick.labelsize": 9,
            "ytick.labelsize": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(7.6, 3.1), layout="constrained", width_ratios=[1, 1.3]
    )
    contact_panel(left)
    learning_curve_panel(right)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=200, metadata={"Software": None})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
