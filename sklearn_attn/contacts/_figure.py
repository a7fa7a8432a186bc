"""The contact map of the ``contacts`` command: top-L predictions over a structure."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_contact_map"]


def plot_contact_map(
    path, scores, positions, known=None, *, min_separation=6, cutoff=8.0
):
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
