"""
=============================================
Learning a planted multi-head attention layer
=============================================

A two-head attention layer

.. math::

    F(X) = \\sum_{i=1}^{2} \\mathrm{softmax}(X \\Theta_i X^\\top) X W_i

labels random Boolean sequences :math:`X \\in \\{-1, +1\\}^{k \\times d}` (the
setting of Chen and Li, 2024). :class:`~sklearn_attn.MultiHeadAttentionLearner`
fits all its parameters, :math:`\\Theta_i` and :math:`W_i`, by L-BFGS on
analytic gradients from random starts, and refits the :math:`W_i` exactly at
the end. Without weight decay (the default ``alpha=0``) it stops restarting as
soon as a start fits the data exactly, since no other start can do better.
Here the first start does: the layer is recovered to round-off, and the
learned heads match the true ones up to their order, which no data can tell
apart.

``python -m sklearn_attn reproduce mha`` runs the full study: test error
against the number of training sequences for 1, 2 and 3 heads, against a
uniform-attention linear model and a learner with one head too few.
"""

# %%
# A planted layer and its data
# ----------------------------
# Two heads, :math:`k = 8` tokens of dimension :math:`d = 8`, 1,000 training
# sequences. Each :math:`\Theta_i` has Frobenius norm 2, so the scores
# :math:`x_a^\top \Theta_i x_b` have standard deviation 2: attention is neither
# uniform nor hard. The 2,000 test sequences are fresh draws labelled by the
# same layer.
import sys

import matplotlib.pyplot as plt
import numpy as np

from sklearn_attn.attention import (
    MultiHeadAttentionLearner,
    match_heads,
    multihead_attention,
)
from sklearn_attn.datasets import make_attention_layer_regression

shape = dict(n_heads=2, n_tokens=8, token_dim=8)
X, Y, layer = make_attention_layer_regression(n_samples=1000, **shape, random_state=0)
X_test, Y_test, _ = make_attention_layer_regression(
    n_samples=2000, **shape, layer=layer, random_state=1
)

# %%
# Fit
# ---
# Another seed than the data's: the same one would start at the planted layer.
# ``n_init_run_`` says how many of the ``n_init`` starts ran before one fitted
# exactly, ``init_losses_`` and ``init_n_iter_`` their final objectives and
# iterations.
model = MultiHeadAttentionLearner(n_heads=2, random_state=2).fit(X, Y)
relative_error = np.sum((model.predict(X_test) - Y_test) ** 2) / np.sum(Y_test**2)
print(f"test relative error ||F_hat - F||^2 / ||F||^2 = {relative_error:.1e}")
print(f"starts run: {model.n_init_run_} of {model.n_init}")
print(f"their final objectives: {np.array2string(model.init_losses_, precision=2)}")
print(f"their L-BFGS iterations: {model.init_n_iter_}")

# %%
# The heads come out in some order;
# :func:`~sklearn_attn.attention.match_heads` pairs them with the true heads
# (Hungarian matching) and reports relative parameter errors.
matched = match_heads(model.theta_, model.values_, layer.theta, layer.values)
print(f"learned head for each true head: {matched.assignment.tolist()}")
print(f"relative errors: Theta {matched.theta_error:.1e}, W {matched.values_error:.1e}")

# %%
# Learned and true attention on one test sequence
# -----------------------------------------------
# Row :math:`a` of each map is the distribution of output token :math:`a`
# over the :math:`k = 8` tokens. The learned maps, reordered to the true heads,
# are the true ones; the right panel shows the training objective of the kept
# start along its L-BFGS iterations.
x = X_test[:1]
true_attention = multihead_attention(
    x, layer.theta, layer.values, return_attention=True
)[1][0]
learned_attention = model.attention_weights(x)[0][matched.assignment]

fig, axes = plt.subplot_mosaic(
    [["true 1", "learned 1", "curve"], ["true 2", "learned 2", "curve"]],
    figsize=(8, 6.8),
    layout="constrained",
    width_ratios=[1, 1, 1.3],
)
for head in range(2):
    for name, maps in (("true", true_attention), ("learned", learned_attention)):
        ax = axes[f"{name} {head + 1}"]
        image = ax.imshow(maps[head], vmin=0, vmax=1, cmap="viridis")
        ax.set_title(f"{name}, head {head + 1}")
        ax.set_xticks(range(0, 8, 2))
        ax.set_yticks(range(0, 8, 2))
        if head == 1:  # the axes' labels once, along the bottom and the left
            ax.set_xlabel("key token $b$")
        if name == "true":
            ax.set_ylabel("output token $a$")
fig.colorbar(
    image,
    ax=[axes[k] for k in ("true 2", "learned 2")],
    location="bottom",
    shrink=0.8,
    label="softmax weight",
)
curve = axes["curve"]
curve.semilogy(np.arange(1, len(model.loss_curve_) + 1), model.loss_curve_)
curve.set_xlabel("L-BFGS iteration")
curve.set_ylabel("training objective")
curve.set_title(f"kept start ({model.n_iter_} iterations)")
curve.grid(True, which="major", alpha=0.3)
mantissa, exponent = f"{relative_error:.1e}".split("e")
fig.suptitle(
    "Planted 2-head layer, $d = k = 8$, $n = 1000$\n"
    "test relative error "
    f"$\\|\\hat F - F\\|^2 / \\|F\\|^2 = {mantissa} \\times 10^{{{int(exponent)}}}$"
)
if "sphinx_gallery" not in sys.modules:  # run as a script: save the figure
    fig.savefig("mha_planted.png", dpi=120, bbox_inches="tight")

# %%
# The largest difference between the learned and true attention weights:
print(f"max |learned - true| = {np.abs(learned_attention - true_attention).max():.1e}")
