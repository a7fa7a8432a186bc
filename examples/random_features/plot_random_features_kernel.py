"""
===========================================================
Random-feature transformers and their infinite-width kernel
===========================================================

:class:`~sklearn_attn.AttentionRandomFeatures` is a transformer, as
:class:`~sklearn.kernel_approximation.RBFSampler` is: it maps a sequence of
tokens to the features of an attention layer with ``n_heads`` frozen random
query-key matrices, and any linear model can sit on top of it in a
:class:`~sklearn.pipeline.Pipeline`. As ``n_heads`` grows, the inner products
of the features converge to a deterministic kernel,
:func:`~sklearn_attn.rfa_kernel`, which
:class:`~sklearn.kernel_ridge.KernelRidge` uses as a precomputed kernel: the
"infinitely wide" layer.

This example fits both, and shows the finite-width model approach the kernel
model as the number of heads grows, at the Monte Carlo rate
:math:`M^{-1/2}`.
"""

# %%
# Data, and the features in a pipeline
# ------------------------------------
# A query and 4 keys in :math:`\mathbb{R}^4` per sample, with the key-averaged
# correlation target; 500 samples to train, 500 to test. Ridge regression on
# the features is exactly what
# :class:`~sklearn_attn.RandomFeatureAttentionRegressor` fits: with the same
# seed and penalty both predict the same.
import sys

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter, ScalarFormatter
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import Ridge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from sklearn_attn import (
    AttentionRandomFeatures,
    RandomFeatureAttentionRegressor,
    rfa_kernel,
)
from sklearn_attn.datasets import make_token_regression

X, y = make_token_regression(1000, n_keys=4, token_dim=4, noise=0.1, random_state=0)
X_train, y_train, X_test, y_test = X[:500], y[:500], X[500:], y[500:]

pipeline = make_pipeline(
    AttentionRandomFeatures(n_heads=200, random_state=0), Ridge(alpha=0.01)
).fit(X_train, y_train)
rfa = RandomFeatureAttentionRegressor(n_heads=200, alpha=0.01, random_state=0)
rfa.fit(X_train, y_train)
gap = np.abs(pipeline.predict(X_test) - rfa.predict(X_test)).max()
print(f"pipeline test R^2 = {pipeline.score(X_test, y_test):.4f}")
print(f"largest difference from RandomFeatureAttentionRegressor: {gap:.1e}")

# %%
# The kernel model
# ----------------
# :func:`~sklearn_attn.rfa_kernel` returns Gram matrices: ``K(X_train)`` to fit,
# ``K(X_test, X_train)`` to predict. ``KernelRidge(kernel="precomputed")``
# declares its input pairwise, so
# :class:`~sklearn.model_selection.GridSearchCV` cuts the Gram matrix by rows
# *and* columns and can choose the penalty by 5-fold cross-validation.
K_train = rfa_kernel(X_train)
K_test = rfa_kernel(X_test, X_train)
search = GridSearchCV(
    KernelRidge(kernel="precomputed"), {"alpha": np.logspace(-5, 1, 7)}, cv=5
).fit(K_train, y_train)
alpha = search.best_params_["alpha"]
kernel_model = search.best_estimator_
kernel_error = 1.0 - kernel_model.score(K_test, y_test)
f_kernel = kernel_model.predict(K_test)
print(f"alpha chosen by cross-validation: {alpha:.0e}")
print(f"kernel ridge test error MSE / Var(y) = {kernel_error:.4f}")

# %%
# Finite width against infinite width
# -----------------------------------
# For each number of heads :math:`M` and each of 5 seeds: the relative
# distance of the features' Gram matrix :math:`\Phi \Phi^\top` from the
# kernel, and ridge regression on the features with the kernel model's
# penalty and no intercept (the kernel model has none), whose predictions then
# converge to the kernel model's.
n_heads_grid = 2 ** np.arange(2, 12)
seeds = range(5)
gram_error = np.empty((len(seeds), len(n_heads_grid)))
prediction_gap = np.empty_like(gram_error)
test_error = np.empty_like(gram_error)
for s in seeds:
    for k, n_heads in enumerate(n_heads_grid):
        features = AttentionRandomFeatures(n_heads=n_heads, random_state=s)
        Phi = features.fit_transform(X_train)
        gram_error[s, k] = np.linalg.norm(Phi @ Phi.T - K_train) / np.linalg.norm(
            K_train
        )
        model = make_pipeline(features, Ridge(alpha=alpha, fit_intercept=False))
        f = model.fit(X_train, y_train).predict(X_test)
        prediction_gap[s, k] = np.linalg.norm(f - f_kernel) / np.linalg.norm(f_kernel)
        test_error[s, k] = 1.0 - model.score(X_test, y_test)

# %%
# Lines are medians over the 5 seeds, bands the lowest to the highest.
fig, (ax_gap, ax_err) = plt.subplots(1, 2, figsize=(8, 4.4), layout="constrained")
for values, color, label in (
    (gram_error, "tab:blue", r"Gram matrix $\|\Phi\Phi^\top - K\|_F / \|K\|_F$"),
    (prediction_gap, "tab:purple", r"predictions $\|f_M - f_\infty\| / \|f_\infty\|$"),
):
    ax_gap.fill_between(
        n_heads_grid, values.min(0), values.max(0), color=color, alpha=0.2
    )
    ax_gap.plot(n_heads_grid, np.median(values, 0), "o-", color=color, label=label)
reference = gram_error[:, 0].mean() * np.sqrt(n_heads_grid[0] / n_heads_grid)
ax_gap.plot(n_heads_grid, reference, "k--", linewidth=1, label=r"$\propto M^{-1/2}$")
ax_gap.set_yscale("log")
ax_gap.set_ylabel("relative distance to the kernel")

ax_err.fill_between(
    n_heads_grid, test_error.min(0), test_error.max(0), color="tab:orange", alpha=0.2
)
ax_err.plot(
    n_heads_grid,
    np.median(test_error, 0),
    "o-",
    color="tab:orange",
    label="ridge on $M$ heads' features",
)
ax_err.axhline(
    kernel_error, color="k", linestyle=":", label=r"kernel ridge ($M = \infty$)"
)
ax_err.set_yscale("log")
ax_err.set_ylabel(r"test error $\mathrm{MSE} / \mathrm{Var}(y)$")
for ax in (ax_gap, ax_err):
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("heads $M$")
    ax.grid(True, which="major", alpha=0.3)
handles = [h for ax in (ax_gap, ax_err) for h in ax.get_legend_handles_labels()[0]]
fig.legend(handles=handles, loc="outside lower center", ncol=2)
exponent = int(np.round(np.log10(alpha)))
fig.suptitle(
    f"$n = 500$ training samples, $N = 4$ keys, $d = 4$, "
    f"$\\alpha = 10^{{{exponent}}}$: median and range of 5 seeds"
)
if "sphinx_gallery" not in sys.modules:  # run as a script: save the figure
    fig.savefig("random_features_kernel.png", dpi=120, bbox_inches="tight")

for k in (6, 9):  # 256 and 2048 heads
    print(
        f"M = {n_heads_grid[k]:4d}: Gram matrix off by "
        f"{np.median(gram_error[:, k]):.3f}, "
        f"predictions by {np.median(prediction_gap[:, k]):.3f}, "
        f"test error {np.median(test_error[:, k]):.4f} (kernel {kernel_error:.4f})"
    )

# %%
# The Gram matrix converges at the Monte Carlo rate :math:`M^{-1/2}` of an
# average of :math:`M` independent heads, and the predictions, after a slower
# start, at the same rate; the test error of the finite model settles on the
# kernel model's. The kernel costs :math:`O(n^2 N^2 d)` to build and an
# :math:`n \times n` solve, the features :math:`O(n M N d^2)`: for large ``n``
# the finite-width model is the cheaper one.
