"""
=============================================
Contact prediction on PF00014 (Kunitz / BPTI)
=============================================

Residues in contact in a folded protein co-evolve, and the strongest couplings
of a Potts model fitted to the protein family's alignment predict them. This
is plmc's recipe, with plmc's settings: the full plmDCA coupling tensor
(:class:`~sklearn_attn.PottsPseudoLikelihood` with ``"full"``), fitted by
pseudo-likelihood with the penalties ``-le 16 -lh 0.01`` and the usual
reweighting of sequences at 80% identity (``-t 0.2``), the gap as a 21st
state; each pair of columns is scored by the Frobenius norm of its coupling
block with the average-product correction (APC).

The alignment is the Kunitz domain family, 13,600 sequences of 53 columns
(:func:`~sklearn_attn.datasets.load_pf00014`), shipped with the residue
distances of a structure, so the predictions can be checked: the top-ranked
pairs at least 6 apart along the chain are compared with the pairs closer
than 8 Angstrom.

The same from the command line, with all the output files (a ranked contact
list, plmc's coupling-scores file, the couplings, a contact map and a
summary), is ``python -m sklearn_attn contacts ALIGNMENT``; see the user
guide's page "Contact prediction from an alignment".
"""

# %%
# The alignment and a quick fit
# -----------------------------
# 30 L-BFGS iterations keep this example short; the model is then not yet at
# the optimum, so the fit warns that it stopped at ``max_iter`` (silenced
# here). 60 iterations, the command's default, reach plmc's objective to 0.1%
# (in one run the precision at L was 0.981 after 30 iterations and 1.000
# after 60).
import os
import tempfile
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from sklearn_attn import PottsPseudoLikelihood
from sklearn_attn.datasets import load_pf00014
from sklearn_attn.potts import contact_precision, write_contacts

data = load_pf00014()
model = PottsPseudoLikelihood(
    "full",
    alpha_couplings=16.0,
    alpha_fields=0.01,
    sequence_identity=0.8,
    max_iter=30,
)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    model.fit(data.sequences)
print(f"N_eff = {model.n_eff_:.2f}, objective {model.objective_:.1f} (plmc's units)")

# %%
# Contact scores and their precision
# ----------------------------------
# ``contact_scores`` returns the L x L matrix of APC-corrected Frobenius
# norms. The precision is the fraction of true contacts among the top L/5,
# L/2, L and 2L pairs with ``|i - j| >= 6``.
scores = model.contact_scores()
precision = contact_precision(
    scores, data.contact_i, data.contact_j, data.distance, cutoff=8.0
)
print("precision:", {k: round(v, 3) for k, v in precision.items()})

# %%
# The ranked contact list
# -----------------------
# One row per pair of columns (1-based), best first, with the score before
# the APC next to it: the ``contacts.csv`` that the command writes.
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "contacts.csv")
    write_contacts(path, scores, model.contact_scores(apc_correction=False))
    with open(path) as handle:
        print("".join(handle.readlines()[:6]), end="")

# %%
# The contact map
# ---------------
# The known contacts (grey, both triangles) and the top L predicted pairs at
# least 6 apart (upper triangle): blue where the residues are in contact,
# red where they are not.
n_sites = scores.shape[0]
known = (data.distance < 8.0) & (np.abs(data.contact_j - data.contact_i) >= 6)
ki, kj = data.contact_i[known], data.contact_j[known]
i, j = np.triu_indices(n_sites, 6)
top = np.argsort(-scores[i, j], kind="stable")[:n_sites]
top_i, top_j = i[top], j[top]
in_contact = np.zeros((n_sites, n_sites), dtype=bool)
in_contact[ki, kj] = True  # the pairs are listed with i < j
hit = in_contact[top_i, top_j]

fig, ax = plt.subplots(figsize=(5.5, 5.5))
ax.scatter(ki + 1, kj + 1, s=25, c="0.85", marker="s", label="contact (< 8 A)")
ax.scatter(kj + 1, ki + 1, s=25, c="0.85", marker="s")
ax.scatter(top_j[hit] + 1, top_i[hit] + 1, s=12, c="tab:blue", label="predicted, true")
ax.scatter(
    top_j[~hit] + 1, top_i[~hit] + 1, s=12, c="tab:red", label="predicted, false"
)
ax.set_xlim(0, n_sites + 1)
ax.set_ylim(n_sites + 1, 0)
ax.set_aspect("equal")
ax.set_xlabel("column j")
ax.set_ylabel("column i")
ax.set_title(f"PF00014: top L = {n_sites} pairs, precision {precision['L']:.2f}")
ax.legend(loc="lower left", fontsize=8)
fig.tight_layout()
fig.savefig("pf00014_contacts.png", dpi=120)

# %%
# Nearly all of the top L pairs are true contacts. The anti-diagonal streak
# is the antiparallel beta hairpin of the Kunitz fold, and the top pair,
# columns 11 and 35, is the disulfide bridge Cys14-Cys38 of BPTI. For another
# family, :func:`~sklearn_attn.potts.read_contact_map` reads a structure's
# pair distances in the same ``i j score distance`` format.
plt.show()
