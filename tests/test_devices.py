"""Every estimator on the device path: ``device="cuda"`` and CuPy input.

Each test runs twice: against the NumPy-backed fake CuPy of ``_fake_cupy`` (on
every machine, so CI exercises the device branches), and against the real CuPy
on a GPU (marked ``gpu``, skipped without one). See the ``cupy`` fixture.

Tolerances. The fake computes the same float64 arithmetic as the CPU path, up to
the order of a few reductions. On a GPU, cuBLAS and OpenBLAS round differently
(~1e-15 relative per product), which the ridge solves amplify by the condition
number of their regularised Gram matrices (< 1e4 for the alphas used here) and
optimisers by their few iterations: 1e-6 relative leaves a wide margin for both.
"""

import pickle
import sys
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV

from sklearn_attn import (
    RFMLP,
    BiasedRFA,
    MultiHeadAttentionLearner,
    PottsPseudoLikelihood,
    RandomFeatureAttentionRegressor,
)
from sklearn_attn._backend import is_device_array
from sklearn_attn.attention import (
    make_max_margin_attention_data,
    train_attention_classifier,
)
from sklearn_attn.datasets import make_potts_sequences
from sklearn_attn.potts import conditional_log_probs, gibbs_sample
from sklearn_attn.random_features import AttentionRandomFeatures, MLPRandomFeatures

RTOL, ATOL = 1e-6, 1e-9

REGRESSORS = {
    "rfa-dual": lambda device: RandomFeatureAttentionRegressor(
        n_heads=40, alpha=0.1, solver="dual", random_state=0, device=device
    ),
    "rfa-primal-loo": lambda device: RandomFeatureAttentionRegressor(
        n_heads=10,
        alpha=[0.01, 0.1, 1.0],
        solver="primal",
        random_state=0,
        device=device,
    ),
    "brfa-dual-loo": lambda device: BiasedRFA(
        n_heads=40, alpha=[0.01, 0.1, 1.0], solver="dual", random_state=0, device=device
    ),
    "brfa-primal": lambda device: BiasedRFA(
        n_heads=10, alpha=0.1, solver="primal", random_state=0, device=device
    ),
    "rfmlp-dual": lambda device: RFMLP(
        200, alpha=0.1, bias=True, solver="dual", random_state=0, device=device
    ),
    "rfmlp-primal-min-norm": lambda device: RFMLP(
        30, alpha=0.0, solver="primal", random_state=0, device=device
    ),
}


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 6, 4))
    y = np.einsum("nd,nkd->n", X[:, 0], X[:, 1:]) / 5 + 0.1 * rng.standard_normal(80)
    weights = rng.uniform(0.5, 2.0, 80)
    return X, y, weights


def _fit_quietly(model, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(*args, **kwargs)


# -- random features and the ridge core ---


@pytest.mark.parametrize("name", sorted(REGRESSORS))
@pytest.mark.parametrize("weighted", [False, True])
def test_random_feature_regressors_agree(cupy, data, name, weighted):
    X, y, weights = data
    sample_weight = weights if weighted else None
    cpu = REGRESSORS[name]("cpu").fit(X, y, sample_weight=sample_weight)
    gpu = REGRESSORS[name]("cuda").fit(X, y, sample_weight=sample_weight)
    assert type(gpu.coef_) is np.ndarray  # public state is NumPy
    assert gpu.alpha_ == cpu.alpha_
    assert_allclose(gpu.coef_, cpu.coef_, rtol=RTOL, atol=ATOL)
    assert_allclose(gpu.predict(X), cpu.predict(X), rtol=RTOL, atol=ATOL)

    # device=None follows CuPy input: CuPy in, CuPy out.
    follow = REGRESSORS[name](None).fit(
        cupy.asarray(X), cupy.asarray(y), sample_weight=sample_weight
    )
    out = follow.predict(cupy.asarray(X))
    assert is_device_array(out)
    assert_allclose(out.get(), cpu.predict(X), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    "make",
    [
        lambda device: AttentionRandomFeatures(10, random_state=0, device=device),
        lambda device: AttentionRandomFeatures(
            10, value_bias=True, random_state=0, device=device
        ),
        lambda device: MLPRandomFeatures(20, bias=True, random_state=0, device=device),
    ],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_transformers_agree_and_keep_dtype(cupy, data, make, dtype):
    X = data[0].astype(dtype)
    expected = make("cpu").fit_transform(X)
    got = make("cuda").fit(X).transform(X)
    assert type(got) is np.ndarray and got.dtype == dtype
    rtol = RTOL if dtype == np.float64 else 1e-5
    assert_allclose(got, expected, rtol=rtol, atol=rtol)
    on_device = make(None).fit(cupy.asarray(X)).transform(cupy.asarray(X))
    assert is_device_array(on_device) and on_device.dtype == dtype
    assert_allclose(on_device.get(), expected, rtol=rtol, atol=rtol)


def test_float32_ridge_is_accurate(cupy, data):
    """float32 features and products on the device, refined in float64.

    float32 and float64 input then differ only by the rounding of the input
    and features: measured 3.6e-8 (dual) and 7.1e-8 (primal) relative on this
    problem; the tolerance is 14x the larger.
    """
    X, y, _ = data
    for solver, n_heads in [("dual", 40), ("primal", 10)]:
        model = RandomFeatureAttentionRegressor(
            n_heads=n_heads, alpha=0.1, solver=solver, random_state=0, device="cuda"
        )
        X32 = X.astype(np.float32)
        got = model.fit(X32, y).predict(X32)
        expected = model.set_params(device="cpu").fit(X, y).predict(X)
        assert_allclose(got, expected, rtol=0, atol=1e-6 * np.abs(expected).max())


@pytest.mark.parametrize("mode", ["dual", "primal"])
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_ridge_falls_back_to_eigh_when_cholesky_fails(cupy, monkeypatch, mode, device):
    """A real Cholesky failure (rank-5 features, alpha = 1e-20) gives exactly the
    eigen route's answer on the untouched matrix: the failed factorisation must
    leave the matrix as it was (LAPACK overwrites its lower triangle)."""
    from sklearn_attn._backend import Device
    from sklearn_attn.random_features import _feature_blocks, _ridge, _spectral

    rng = np.random.default_rng(0)
    n, p = (30, 40) if mode == "dual" else (40, 30)
    features = rng.standard_normal((n, 5)) @ rng.standard_normal((5, p))
    y = rng.standard_normal((n, 1))
    on = Device() if device == "cpu" else Device("cuda", 0)

    def fit():
        blocks = _feature_blocks.ExplicitFeatures(features, on, block_size=16)
        return _ridge.fit_ridge(blocks, y, [1e-20], mode=mode)

    failed = fit()

    class Refuses:
        def __init__(self, matrix, device):
            raise np.linalg.LinAlgError("refused before touching the matrix")

    monkeypatch.setattr(_spectral, "CholeskyFactor", Refuses)
    assert_allclose(failed.coef, fit().coef, rtol=1e-12, atol=1e-12)


# -- attention learner and implicit bias ---


@pytest.mark.parametrize(
    "params",
    [
        dict(),
        dict(parametrization="separate", rank=2),
        dict(solver="adam", learning_rate=0.05),
        dict(n_queries=2, alpha=1e-3),
    ],
)
def test_attention_learner_agrees(cupy, params):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((50, 5, 3))
    Y = rng.standard_normal((50, params.get("n_queries", 5), 3))
    kwargs = dict(n_init=2, max_iter=15, random_state=0, **params)
    cpu = _fit_quietly(MultiHeadAttentionLearner(2, device="cpu", **kwargs), X, Y)
    gpu = _fit_quietly(MultiHeadAttentionLearner(2, device="cuda", **kwargs), X, Y)
    assert type(gpu.theta_) is np.ndarray
    assert gpu.n_iter_ == cpu.n_iter_
    assert_allclose(gpu.theta_, cpu.theta_, rtol=RTOL, atol=ATOL)
    assert_allclose(gpu.predict(X), cpu.predict(X), rtol=RTOL, atol=ATOL)
    out = gpu.set_params(device=None).predict(cupy.asarray(X))
    assert is_device_array(out)
    assert_allclose(out.get(), cpu.predict(X), rtol=RTOL, atol=ATOL)


def test_attention_learner_float32_on_device(cupy):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 4, 3)).astype(np.float32)
    Y = rng.standard_normal((40, 4, 3)).astype(np.float32)
    kwargs = dict(n_init=1, max_iter=10, random_state=0)
    cpu = _fit_quietly(MultiHeadAttentionLearner(1, device="cpu", **kwargs), X, Y)
    gpu = _fit_quietly(MultiHeadAttentionLearner(1, device="cuda", **kwargs), X, Y)
    pred = gpu.predict(X)
    assert pred.dtype == np.float32
    # Both in float32: float32 round-off (~1e-7) over 10 L-BFGS steps.
    assert_allclose(pred, cpu.predict(X), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("parametrization", ["separate", "combined"])
def test_implicit_bias_training_agrees(cupy, parametrization):
    X, z, y, v, _ = make_max_margin_attention_data(
        n_samples=6, n_tokens=4, dim=8, random_state=0
    )
    kwargs = dict(
        parametrization=parametrization,
        optimizer="relative_gd",
        learning_rate=0.01,
        n_iter=300,
        checkpoints=4,
        random_state=0,
    )
    cpu = train_attention_classifier(X, z, y, v, device="cpu", **kwargs)
    gpu = train_attention_classifier(X, z, y, v, device="cuda", **kwargs)
    assert isinstance(gpu.W, np.ndarray)
    assert_allclose(gpu.W, cpu.W, rtol=1e-8, atol=1e-12)
    assert_allclose(gpu.log10_excess_loss, cpu.log10_excess_loss, rtol=1e-8)


# -- Potts ---


@pytest.fixture
def sequences():
    X, _ = make_potts_sequences(
        n_samples=300, n_sites=6, n_states=3, graph="ring", random_state=0
    )
    return X


@pytest.mark.parametrize(
    "params",
    [
        dict(parametrization="factored", n_heads=2),
        dict(parametrization="factored", attention="free"),
        dict(parametrization="full"),
    ],
)
def test_potts_agrees(cupy, sequences, params):
    X = sequences
    # The same algorithm on both devices: a GPU fit is the dense products
    # (the CPU's gathers against them are tested in test_potts_gather).
    kwargs = dict(max_iter=15, random_state=0, algorithm="dense", **params)
    cpu = _fit_quietly(PottsPseudoLikelihood(device="cpu", **kwargs), X)
    gpu = _fit_quietly(PottsPseudoLikelihood(device="cuda", **kwargs), X)
    assert type(gpu.couplings_) is np.ndarray
    assert gpu.n_iter_ == cpu.n_iter_
    assert gpu.objective_ == pytest.approx(cpu.objective_, rel=1e-10)
    assert_allclose(gpu.couplings_, cpu.couplings_, rtol=RTOL, atol=ATOL)
    assert_allclose(gpu.predict_proba(X), cpu.predict_proba(X), rtol=RTOL, atol=ATOL)
    assert_allclose(gpu.score_samples(X), cpu.score_samples(X), rtol=RTOL)
    assert_array_equal(gpu.predict(X[:50]), cpu.predict(X[:50]))

    # CuPy codes in, CuPy out.
    X_dev = cupy.asarray(X)
    follow = gpu.set_params(device=None)
    for method in ("predict_proba", "predict", "score_samples"):
        out = getattr(follow, method)(X_dev)
        assert is_device_array(out), method
        assert_allclose(out.get(), getattr(cpu, method)(X), rtol=RTOL, atol=ATOL)
    assert follow.score(X_dev) == pytest.approx(cpu.score(X), rel=RTOL)


def test_gibbs_sampler_draws_the_same_chains(cupy):
    rng = np.random.default_rng(0)
    J = rng.standard_normal((5, 3, 5, 3)) * 0.5
    J = (J + J.transpose(2, 3, 0, 1)) / 2
    J[np.arange(5), :, np.arange(5), :] = 0.0
    h = rng.standard_normal((5, 3))
    cpu = gibbs_sample(J, h, 500, random_state=0, device="cpu")
    gpu = gibbs_sample(J, h, 500, random_state=0, device="cuda")
    assert isinstance(gpu, np.ndarray)
    # Same uniforms; a draw can differ only where a uniform falls within
    # rounding (~1e-15) of a cumulative probability.
    assert np.mean(np.all(cpu == gpu, axis=1)) > 0.99
    on_device = gibbs_sample(cupy.asarray(J), cupy.asarray(h), 10, random_state=0)
    assert is_device_array(on_device)
    log_cpu = conditional_log_probs(cpu, J, h)
    assert_allclose(
        conditional_log_probs(cpu, J, h, device="cuda"), log_cpu, atol=1e-12
    )
    log_dev = conditional_log_probs(cupy.asarray(cpu), cupy.asarray(J), cupy.asarray(h))
    assert is_device_array(log_dev)
    assert_allclose(log_dev.get(), log_cpu, atol=1e-12)


def test_potts_sample_runs_on_the_device(cupy, sequences):
    kwargs = dict(max_iter=5, random_state=0)
    cpu = _fit_quietly(PottsPseudoLikelihood(device="cpu", **kwargs), sequences)
    gpu = _fit_quietly(PottsPseudoLikelihood(device="cuda", **kwargs), sequences)
    drawn_cpu = cpu.sample(200, burn_in=20, thin=2, random_state=1)
    drawn_gpu = gpu.sample(200, burn_in=20, thin=2, random_state=1)
    assert isinstance(drawn_gpu, np.ndarray)
    assert np.mean(np.all(drawn_cpu == drawn_gpu, axis=1)) > 0.99


# -- scikit-learn tools, pickling, memory and conversions ---


def test_grid_search_with_cuda_device(cupy, data):
    X, y, _ = data
    # joblib's worker processes import the real CuPy, not the fake.
    n_jobs = 1 if getattr(cupy, "is_fake", False) else 2
    search = GridSearchCV(
        RandomFeatureAttentionRegressor(n_heads=20, random_state=0, device="cuda"),
        {"alpha": [0.01, 1.0]},
        cv=3,
        n_jobs=n_jobs,
    ).fit(X, y)
    reference = GridSearchCV(
        RandomFeatureAttentionRegressor(n_heads=20, random_state=0, device="cpu"),
        {"alpha": [0.01, 1.0]},
        cv=3,
    ).fit(X, y)
    assert search.best_params_ == reference.best_params_
    assert_allclose(
        search.cv_results_["mean_test_score"],
        reference.cv_results_["mean_test_score"],
        rtol=RTOL,
    )
    assert type(search.predict(X)) is np.ndarray


FITTED = {
    "rfa": lambda device, X, y, seqs: RandomFeatureAttentionRegressor(
        n_heads=10, random_state=0, device=device
    ).fit(X, y),
    "rfmlp": lambda device, X, y, seqs: RFMLP(30, random_state=0, device=device).fit(
        X, y
    ),
    "mha": lambda device, X, y, seqs: _fit_quietly(
        MultiHeadAttentionLearner(
            1, n_init=1, max_iter=5, random_state=0, device=device
        ),
        X,
        X,
    ),
    "potts": lambda device, X, y, seqs: _fit_quietly(
        PottsPseudoLikelihood(max_iter=5, random_state=0, device=device), seqs
    ),
}


def _inputs(name, X, seqs):
    return seqs if name == "potts" else X


@pytest.mark.parametrize("name", sorted(FITTED))
def test_gpu_fit_pickles_to_numpy_state(cupy, monkeypatch, data, sequences, name):
    X, y, _ = data
    model = FITTED[name]("cuda", X, y, sequences)
    inputs = _inputs(name, X, sequences)
    model.predict(inputs)  # fills the device caches
    payload = pickle.dumps(model)
    assert b"cupy" not in payload
    expected = FITTED[name]("cpu", X, y, sequences).predict(inputs)

    if getattr(cupy, "is_fake", False):
        # A machine without CUDA: `import cupy` fails.
        monkeypatch.setitem(sys.modules, "cupy", None)
        restored = pickle.loads(payload)
        with pytest.raises(ImportError, match=r"set_params\(device='cpu'\)"):
            restored.predict(inputs)
    restored = pickle.loads(payload)
    restored.set_params(device="cpu")
    assert_allclose(restored.predict(inputs), expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", sorted(FITTED))
def test_memory_pool_is_released_after_fit(cupy, data, sequences, name):
    X, y, _ = data
    pool = cupy.get_default_memory_pool()
    if getattr(cupy, "is_fake", False):
        before = pool.n_frees
        FITTED[name]("cuda", X, y, sequences)
        assert pool.n_frees == before + 1
    else:  # pragma: no cover - needs a GPU
        FITTED[name]("cuda", X, y, sequences)
        # Blocks cached but unused after the fit: only the few small arrays
        # freed after the release (the problem's own arrays are ~100 KB).
        assert pool.total_bytes() - pool.used_bytes() <= 2**20


@pytest.mark.parametrize("name", sorted(FITTED))
def test_cupy_input_with_cpu_device_is_copied_to_the_host(cupy, data, sequences, name):
    X, y, _ = data
    X_dev, seqs_dev = cupy.asarray(X), cupy.asarray(sequences)
    model = FITTED[name]("cpu", X_dev, y, seqs_dev)
    out = model.predict(_inputs(name, X_dev, seqs_dev))
    assert isinstance(out, np.ndarray)
    expected = FITTED[name]("cpu", X, y, sequences).predict(_inputs(name, X, sequences))
    assert_allclose(out, expected, rtol=RTOL, atol=ATOL)
    # The user's device arrays are untouched, also by a fit and predictions on
    # the device (device=None follows them there without copying them).
    follow = FITTED[name](None, X_dev, cupy.asarray(y), seqs_dev)
    follow.predict(_inputs(name, X_dev, seqs_dev))
    assert_array_equal(X_dev.get(), X)
    assert_array_equal(seqs_dev.get(), sequences)
