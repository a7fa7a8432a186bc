"""
==========================================================
Implicit bias of softmax attention: nuclear vs Frobenius
==========================================================

A one-layer softmax attention classifier with a fixed value head ``v`` reads
each sequence ``X_i`` (``T`` tokens in ``R^d``) through a query ``z_i``:

.. math::

    \\Phi(X_i, z_i) = v^T X_i^T \\operatorname{softmax}(X_i W z_i).

On separable data the exponential loss is smallest when all attention sits on
the optimal token ``opt_i = argmax_t y_i v^T x_{i,t}``, which needs
``||W|| -> infinity``. Gradient descent then picks a *direction*, and which one
depends on the parametrization (Tarzanagh et al., 2023; Sheen, Chen, Wang and
Zhou, 2024):

* ``W`` trained directly ("combined") tends to the max-margin solution of
  smallest **Frobenius** norm;
* ``W = K Q^T`` with ``K`` and ``Q`` trained separately tends to the one of
  smallest **nuclear** norm, which is of lower rank.

The max-margin problems are solved with SciPy (an exact active-set method for
the Frobenius norm, a Burer-Monteiro factorisation for the nuclear norm). The
training runs in the log domain, so it stays exact long after every
non-selected attention weight has underflowed.

``python -m sklearn_attn reproduce implicit-bias`` repeats this over 20
instances, for full and diagonal weights.
"""

# %%
# An instance and its two max-margin solutions
# --------------------------------------------
# Six sequences of four unit-norm tokens in ``R^8`` (the protocol of
# Tarzanagh et al.); the generator redraws until some ``W`` separates the
# optimal tokens.
import matplotlib.pyplot as plt
import numpy as np

from sklearn_attn.attention import (
    attention_margin,
    make_max_margin_attention_data,
    max_margin_svm,
    train_attention_classifier,
)

X, z, y, v, opt = make_max_margin_attention_data(6, 4, 8, random_state=0)
W_fro, fro = max_margin_svm(X, z, y, v, norm="frobenius")
W_nuc, nuc = max_margin_svm(X, z, y, v, norm="nuclear", random_state=0)
print(f"Frobenius SVM: ||W||_F = {fro:.3f}, rank {np.linalg.matrix_rank(W_fro, 1e-6)}")
print(f"nuclear SVM:   ||W||_* = {nuc:.3f}, rank {np.linalg.matrix_rank(W_nuc, 1e-6)}")

# %%
# Training both parametrizations
# ------------------------------
# Normalised gradient steps of 1% of the parameters' norm (``relative_gd``):
# the norm grows geometrically, which the slow, logarithmic directional
# convergence of ``(K, Q)`` needs. Both start from independent Gaussian
# entries of scale 0.01.
runs = {
    parametrization: train_attention_classifier(
        X,
        z,
        y,
        v,
        parametrization=parametrization,
        optimizer="relative_gd",
        learning_rate=0.01,
        n_iter=30000,
        checkpoints=40,
        random_state=0,
    )
    for parametrization in ("separate", "combined")
}
for name, run in runs.items():
    W = run.W[-1]
    ratio = np.linalg.norm(W, "nuc") / attention_margin(W, X, z, y, v)
    print(
        f"{name:9s} corr with Frobenius SVM {run.correlation(W_fro)[-1]:.5f}, "
        f"with nuclear SVM {run.correlation(W_nuc)[-1]:.5f}; "
        f"||W||_*/margin = {ratio:.3f} (nuclear optimum {nuc:.3f}); "
        f"log10(L - L*) = {run.log10_excess_loss[-1]:.3g}"
    )

# %%
# Direction along training, and the spectra at the end
# ----------------------------------------------------
# Solid lines: correlation ``<W, W*> / (||W|| ||W*||)`` with the nuclear SVM;
# dashed: with the Frobenius SVM. Right: singular values of ``W / margin(W)``
# against those of the two solutions (which have margin 1).
colors = {"separate": "tab:blue", "combined": "tab:orange"}
fig, (ax_corr, ax_sv) = plt.subplots(1, 2, figsize=(10, 3.8))
for name, run in runs.items():
    it = run.iterations[1:]
    ax_corr.plot(
        it,
        run.correlation(W_nuc)[1:],
        color=colors[name],
        label=f"{name} vs nuclear SVM",
    )
    ax_corr.plot(
        it,
        run.correlation(W_fro)[1:],
        "--",
        color=colors[name],
        label=f"{name} vs Frobenius SVM",
    )
    sv = run.singular_values[-1] / attention_margin(run.W[-1], X, z, y, v)
    ax_sv.plot(np.arange(1, 9), sv, "o-", color=colors[name], label=name)
ax_sv.plot(
    np.arange(1, 9), np.linalg.svd(W_nuc, compute_uv=False), "k--", label="nuclear SVM"
)
ax_sv.plot(
    np.arange(1, 9), np.linalg.svd(W_fro, compute_uv=False), "k:", label="Frobenius SVM"
)
ax_corr.set_xscale("log")
ax_corr.set_xlabel("iteration")
ax_corr.set_ylabel("correlation")
ax_corr.set_ylim(0, 1.02)
ax_corr.legend(fontsize=8)
ax_sv.set_xlabel("index")
ax_sv.set_ylabel("singular value of W / margin")
ax_sv.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %%
# Diagonal weights: l1 against l2
# -------------------------------
# With ``W = diag(w)`` the nuclear norm is ``||w||_1`` and the Frobenius norm
# ``||w||_2``: the product ``k * q`` of separate diagonal factors tends to the
# sparse l1 max-margin solution, a directly trained ``w`` to the dense l2 one.
Xd, zd, yd, vd, _ = make_max_margin_attention_data(
    5, 3, 10, structure="diagonal", random_state=2
)
w_l1 = np.diag(max_margin_svm(Xd, zd, yd, vd, norm="l1")[0])
w_l2 = np.diag(max_margin_svm(Xd, zd, yd, vd, norm="l2")[0])
fig, ax = plt.subplots(figsize=(8, 3.2))
width = 0.2
index = np.arange(10)
for k, name in enumerate(("separate", "combined")):
    run = train_attention_classifier(
        Xd,
        zd,
        yd,
        vd,
        parametrization=name,
        structure="diagonal",
        optimizer="relative_gd",
        learning_rate=0.01,
        n_iter=30000,
        checkpoints=[30000],
        random_state=0,
    )
    w = np.diag(run.W[-1])
    w = w / attention_margin(w, Xd, zd, yd, vd)
    ax.bar(index + (k - 1.5) * width, w, width, color=colors[name], label=name)
ax.bar(
    index + 0.5 * width,
    w_l1,
    width,
    color="tab:blue",
    alpha=0.4,
    hatch="//",
    label="l1 SVM",
)
ax.bar(
    index + 1.5 * width,
    w_l2,
    width,
    color="tab:orange",
    alpha=0.4,
    hatch="//",
    label="l2 SVM",
)
ax.axhline(0, color="k", linewidth=0.8)
ax.set_xlabel("coordinate j")
ax.set_ylabel("w_j / margin")
ax.legend(fontsize=8, ncol=4)
fig.tight_layout()
plt.show()
