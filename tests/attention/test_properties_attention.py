"""Property-based tests of MultiHeadAttentionLearner.

Every call meets the error contract of ``_strategies.check_contract``. On top:
attention weights are probabilities (rows sum to one) for any finite input, as
a softmax of finite scores always is, and a fit on targets of any finite scale
comes back finite or says why.

What the docstrings promise about dtypes today: ``predict`` returns float32 for
float32 ``X`` and float64 otherwise; ``attention_weights`` does not say.
"""

import functools
import warnings

import numpy as np
from _strategies import (
    INVALID,
    INVALID_RANDOM_STATES,
    INVALID_TOKEN_DIMS,
    MODERATE_DECADES,
    Expect,
    Verdict,
    check_contract,
    examples,
    exponents,
    flatten,
    hyper_parameters,
    may_refuse,
    numeric_arrays,
    one_of_rare,
    rare,
    refuse,
    token_dims,
    token_layout_verdict,
    token_shapes,
)
from hypothesis import given
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from sklearn_attn import MultiHeadAttentionLearner

# Small everywhere: a fit is a few L-BFGS steps on a handful of samples.
SPEC = {
    "n_heads": ([1, 2], [0, -1, 1.5, "2", None]),
    "parametrization": (["combined", "separate"], ["both", None]),
    "alpha": ([0.0, 0.1], [-1.0, np.nan, "0"]),
    "solver": (["lbfgs", "gd", "adam"], ["sgd", None]),
    "learning_rate": ([0.01, 0.1], [0.0, -0.1, np.nan]),
    "batch_size": ([None, 1, 2], [0, -1, 1.5]),
    "max_iter": ([2, 1, 3], [0, -1, 2.5]),
    "tol": ([1e-8, 0.0, 1e-2], [-1.0, np.nan]),
    "n_init": ([1, 2], [0, -1, 1.5]),
    "init_scale": ([0.1, 1.0], [0.0, -0.1, np.nan]),
    "random_state": ([0, 1], INVALID_RANDOM_STATES),
}
# A target named "Y" in fit may be called "y" by scikit-learn's checks.
Y_NAMES = ("Y", "y")


def _output_dtype(X):
    """The documented dtype of ``predict``: float32 for float32 X, else float64."""
    return "float32" if getattr(X, "dtype", None) == np.float32 else "float64"


def _read_layout(shape, flat, token_dim):
    """``(n_tokens, token_dim)`` as the learner reads ``X`` of this shape."""
    n, k, d = shape
    if flat and isinstance(token_dim, int) and token_dim > 0:
        return (k * d) // token_dim, token_dim
    return k, d


def _probabilities(weights):
    tol = 1e-5 if np.asarray(weights).dtype == np.float32 else 1e-10
    weights = np.asarray(weights, dtype=np.float64)
    assert np.all(weights >= 0) and np.all(weights <= 1 + tol), (
        "[not-probabilities] attention weights outside [0, 1]."
    )
    sums = weights.sum(axis=-1)
    assert np.all(np.abs(sums - 1) <= 1e-5), (
        f"[not-probabilities] attention rows sum to {sums.min()}..{sums.max()}."
    )


@st.composite
def token_inputs(draw, *, token_dim="draw", shape=None):
    """``(X, shape, flat, token_dim, verdict)`` under the learner's layout rules."""
    shape = draw(token_shapes(max_samples=4, max_tokens=3)) if shape is None else shape
    flat = draw(st.booleans())
    X = draw(numeric_arrays(shape, name="X"))
    verdict = X.verdict
    if token_dim == "draw":
        token_dim, dim_verdict = draw(token_dims(shape, flat))
        verdict |= dim_verdict
    if token_dim not in INVALID_TOKEN_DIMS:
        verdict |= token_layout_verdict(shape, flat, token_dim, min_tokens=1)
    return flatten(X.value, flat), shape, flat, token_dim, verdict


@st.composite
def outputs(draw, n_samples, n_queries, token_dim, flat):
    """Output tokens ``Y``, 3-D or flattened (whatever the layout of ``X``) or not
    valid, with their verdict."""
    kind = one_of_rare(
        draw, ["layout", "other-ndim"], ["tokens", "4-d", "rows", "none"], 8
    )
    if kind == "none":
        return None, refuse(Y_NAMES, "Y is None")
    q, d = n_queries, token_dim
    shape = {
        "layout": (n_samples, q * d) if flat else (n_samples, q, d),
        "other-ndim": (n_samples, q, d) if flat else (n_samples, q * d),
        "tokens": (n_samples, q + 1, d),
        "4-d": (n_samples, q, d, 1),
        "rows": (n_samples + 1, q, d),
    }[kind]
    Y = draw(numeric_arrays(shape, name="Y"))
    verdict = Verdict(Y.verdict.level, Y.verdict.names | {"y"}, Y.verdict.why)
    if kind in ("tokens", "4-d"):
        verdict |= refuse(Y_NAMES, f"Y has shape {shape}")
    elif kind == "rows":
        verdict |= refuse(
            Y_NAMES + ("X", "inconsistent numbers of samples"),
            "Y has one row more than X",
        )
    return Y.value, verdict


@examples(2)
@given(data=st.data())
def test_fit_predict_contract(data):
    """fit, then predict, attention_weights and score on the same data."""
    params, verdict = data.draw(hyper_parameters(SPEC), label="params")
    X, shape, flat, token_dim, x_verdict = data.draw(token_inputs(), label="X")
    verdict |= x_verdict
    n_tokens, dim = _read_layout(shape, flat, token_dim)
    n_queries = data.draw(st.sampled_from([None, None, 1, 2]), label="n_queries")
    q = n_tokens if n_queries is None else n_queries
    if n_queries is not None and n_queries > n_tokens and x_verdict.level < INVALID:
        verdict |= refuse("n_queries", f"n_queries={n_queries} > {n_tokens} tokens")
    rank = one_of_rare(data.draw, [None, None, 1, 2], [0, 4], 8)
    if rank == 0:
        verdict |= refuse("rank", "rank=0")
    elif (
        rank is not None
        and rank > dim
        and params["parametrization"] == "separate"
        and x_verdict.level < INVALID
    ):
        verdict |= refuse("rank", f"rank={rank} > token_dim={dim}")
    Y, y_verdict = data.draw(outputs(shape[0], q, dim, flat), label="Y")
    verdict |= y_verdict
    model = MultiHeadAttentionLearner(
        **params, n_queries=n_queries, rank=rank, token_dim=token_dim
    )
    n_heads = params["n_heads"]
    # predict answers in the layout of Y in fit.
    y_flat = np.ndim(Y) == 2
    out_shape = (shape[0], q * dim) if y_flat else (shape[0], q, dim)

    def call():
        model.fit(X, Y)
        out = [
            Expect(
                "predict",
                model.predict(X),
                shape=out_shape,
                dtypes=(_output_dtype(X),),
            ),
            Expect(
                "attention_weights",
                model.attention_weights(X),
                shape=(shape[0], n_heads, q, n_tokens),
                check=_probabilities,
            ),
        ]
        if shape[0] >= 2:  # R^2 is undefined (NaN, with a warning) for one sample
            out.append(Expect("score", model.score(X, Y), shape=(), dtypes=None))
        return out

    check_contract(call, verdict=verdict, inputs=[X, Y], fitted=[model])


def _tokens(seed, shape, scale=1.0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):
        return (rng.standard_normal(shape) * scale).astype(dtype)


@functools.cache
def _fitted(flat, n_queries, seed):
    """A learner fitted on valid unit-scale data, shared by the predict properties."""
    X = _tokens(seed, (5, 3, 2))
    q = 3 if n_queries is None else n_queries
    Y = _tokens(seed + 1, (5, q, 2))
    if flat:
        X, Y = X.reshape(5, -1), Y.reshape(5, -1)
    model = MultiHeadAttentionLearner(
        n_heads=2,
        n_queries=n_queries,
        n_init=1,
        max_iter=20,
        tol=1e-6,
        token_dim=2 if flat else None,
        random_state=seed,
    )
    with warnings.catch_warnings():
        # A cheap fit on purpose: only its predictions' contract matters here.
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, Y)


@examples(2)
@given(data=st.data())
def test_predict_contract(data):
    """predict and attention_weights on a fitted (or unfitted) learner, any input."""
    fit_flat = data.draw(st.booleans(), label="fit_flat")
    n_queries = data.draw(st.sampled_from([None, 1]), label="n_queries")
    if rare(data.draw, 8):  # unfitted
        model = MultiHeadAttentionLearner(token_dim=2 if fit_flat else None)
        verdict = refuse("fit", "the learner is not fitted")
    else:
        model = _fitted(fit_flat, n_queries, 0)
        verdict = Verdict()
    shape = data.draw(st.sampled_from([(4, 3, 2), (2, 3, 2), (1, 3, 2)]), label="shape")
    if rare(data.draw, 4):
        shape = data.draw(token_shapes(max_samples=4, max_tokens=3), label="shape")
    X, shape, flat, _, x_verdict = data.draw(
        token_inputs(token_dim=model.token_dim, shape=shape), label="X"
    )
    verdict |= x_verdict
    if _read_layout(shape, flat, model.token_dim) != (3, 2):
        verdict |= refuse(
            ("X", "token", "feature", "features"), f"X has shape {shape}, fit (5, 3, 2)"
        )
    q = 3 if n_queries is None else n_queries
    # predict answers in the layout of Y in fit, whatever the layout of X here.
    out_shape = (shape[0], q * 2) if fit_flat else (shape[0], q, 2)

    check_contract(
        lambda: [
            Expect(
                "predict",
                model.predict(X),
                shape=out_shape,
                dtypes=(_output_dtype(X),),
            ),
            Expect(
                "attention_weights",
                model.attention_weights(X),
                shape=(shape[0], 2, q, 3),
                check=_probabilities,
            ),
        ],
        verdict=verdict,
        inputs=[X],
    )


@examples(1)
@given(
    seed=st.integers(0, 2**16),
    exponent=exponents,
    float32=st.booleans(),
    scale_of=st.sampled_from(["Y", "X", "both"]),
    parametrization=st.sampled_from(["combined", "separate"]),
)
def test_fit_at_any_scale(seed, exponent, float32, scale_of, parametrization):
    """A fit on inputs or targets of any finite scale is finite, warns, or refuses.

    Scores ``X Theta X^T`` grow as the square of the scale of ``X`` and the
    loss as the square of the scale of ``Y``; the softmax of finite scores is
    always defined, so NaN attention, a NaN ``loss_`` or NaN predictions
    without a warning break the contract. At extreme scales a clear error
    naming the input is as good as a result.
    """
    if float32:
        exponent = max(-38, min(38, exponent))
    dtype = np.float32 if float32 else np.float64
    c = 10.0**exponent
    X = _tokens(seed, (4, 3, 2), c if scale_of != "Y" else 1.0, dtype)
    Y = _tokens(seed + 1, (4, 3, 2), c if scale_of != "X" else 1.0, dtype)
    verdict = Verdict()
    if abs(exponent) > MODERATE_DECADES:
        names = {"X": ("X",), "Y": Y_NAMES, "both": ("X",) + Y_NAMES}[scale_of]
        verdict = may_refuse(names, f"{scale_of} scaled by 1e{exponent}")
    # Enough iterations for L-BFGS to stop on its own at unit scale: a
    # ConvergenceWarning is then rare and cannot hide a silent NaN.
    model = MultiHeadAttentionLearner(
        n_heads=1,
        parametrization=parametrization,
        n_init=1,
        max_iter=30,
        tol=1e-6,
        random_state=seed % 5,
    )

    def call():
        model.fit(X, Y)
        return [
            Expect(
                "predict", model.predict(X), shape=(4, 3, 2), dtypes=(dtype.__name__,)
            ),
            Expect(
                "attention_weights",
                model.attention_weights(X),
                shape=(4, 1, 3, 3),
                check=_probabilities,
            ),
        ]

    check_contract(call, verdict=verdict, inputs=[X, Y], fitted=[model])
