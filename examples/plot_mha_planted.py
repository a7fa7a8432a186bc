"""
=============================================
Learning a planted multi-head attention layer
=============================================

A two-head attention layer

.. math::

    F(X) = \\sum_{i=1}^{2} \\mathrm{softmax}(X \\Theta_i X^\\top) X W_i

labels random Boolean sequences ``X`` in ``{-1, +1}^{k x d}`` (the setting of
Chen and Li, 2024). :class:`~sklearn_attn.MultiHeadAttentionLearner` fits all
its parameters, ``Theta_i`` and ``W_i``, by L-BFGS on analytic gradients from a
few random starts and refits the ``W_i`` exactly at the end. On such random
planted layers it recovers the layer to round-off: the learned heads match the
true ones up to the order of the heads, which no data can tell apart.

``python -m sklearn_attn reproduce mha`` runs the full study: test error
against the number of training sequences for 1, 2 and 3 heads, against a
uniform-attention linear model and a learner with one head too few.
"""

# %%
# A planted layer and its data
# ----------------------------
# Each ``Theta_i`` has Frobenius norm 2, so the scores ``x_a^T Theta_i x_b``
# have standard deviation 2: attention is neither uniform nor hard. The test
# sequences are fresh draws labelled by the same layer.
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
model = MultiHeadAttentionLearner(n_heads=2, random_state=2).fit(X, Y)
relative_error = np.sum((model.predict(X_test) - Y_test) ** 2) / np.sum(Y_test**2)
print(f"test relative error ||F_hat - F||^2 / ||F||^2 = {relative_error:.1e}")
print(
    f"final objective of each start: {np.array2string(model.init_losses_, precision=2)}"
)

# %%
# The heads come out in some order; :func:`~sklearn_attn.match_heads` pairs
# them with the true heads (Hungarian matching) and reports relative errors.
matched = match_heads(model.theta_, model.values_, layer.theta, layer.values)
print(f"learned head for each true head: {matched.assignment.tolist()}")
print(f"relative errors: Theta {matched.theta_error:.1e}, W {matched.values_error:.1e}")

# %%
# Learned and true attention on one test sequence
# -----------------------------------------------
# Row ``a`` of each map is the distribution of output token ``a`` over the
# ``k = 8`` tokens. The learned maps, reordered to the true heads, are the true
# ones; the right column shows the training objective of the kept start.
x = X_test[:1]
true_attention = multihead_attention(
    x, layer.theta, layer.values, return_attention=True
)[1][0]
learned_attention = model.attention_weights(x)[0][matched.assignment]

fig, axes = plt.subplot_mosaic(
    [["true 1", "learned 1", "curve"], ["true 2", "learned 2", "curve"]],
    figsize=(10, 6),
    layout="constrained",
    width_ratios=[1, 1, 1.3],
)
for head in range(2):
    for name, maps in (("true", true_attention), ("learned", learned_attention)):
        ax = axes[f"{name} {head + 1}"]
        image = ax.imshow(maps[head], vmin=0, vmax=1, cmap="viridis")
        ax.set_title(f"{name} attention, head {head + 1}", fontsize=9)
        ax.set_xlabel("key token b")
        ax.set_ylabel("output token a")
fig.colorbar(
    image,
    ax=[axes[k] for k in ("learned 1", "learned 2")],
    shrink=0.8,
    label="softmax weight",
)
axes["curve"].semilogy(model.loss_curve_)
axes["curve"].set_xlabel("L-BFGS iteration")
axes["curve"].set_ylabel("training objective")
axes["curve"].set_title("kept start", fontsize=9)
axes["curve"].grid(True, alpha=0.3)
fig.suptitle(
    f"Planted 2-head layer, d = k = 8: test relative error {relative_error:.0e}"
)

# %%
# The maximum difference between the learned and true attention weights:
print(f"max |learned - true| = {np.abs(learned_attention - true_attention).max():.1e}")
plt.show()
