"""Studies on a Dask cluster: the reproductions' grids, and fits of dask arrays.

One ``LocalCluster`` of two single-threaded worker processes on loopback serves
the whole module (it takes a few seconds to start). Its workers run one BLAS
thread each (dask's nanny sets ``OPENBLAS_NUM_THREADS=1`` and the like), so the
local references that are compared bit for bit run under one BLAS thread too:
a multi-threaded BLAS may split a sum differently, which changes the last bits
of a result but is no difference of the computation.
"""

import logging

import numpy as np
import pytest
from joblib import parallel_config
from numpy.testing import assert_allclose, assert_array_equal, assert_equal
from sklearn.base import clone
from threadpoolctl import threadpool_limits

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

from sklearn_attn import (  # noqa: E402
    RFMLP,
    BiasedRFA,
    RandomFeatureAttentionRegressor,
)
from sklearn_attn.datasets import make_token_regression  # noqa: E402
from sklearn_attn.experiments import (  # noqa: E402
    run_implicit_bias,
    run_mha,
    run_potts,
    run_rfa,
)


@pytest.fixture(scope="module")
def cluster():
    # Without work stealing a task runs where its largest inputs are, which
    # the test of data locality below relies on.
    with (
        dask.config.set({"distributed.scheduler.work-stealing": False}),
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
    ):
        yield cluster


@pytest.fixture
def client(cluster):
    with distributed.Client(cluster) as client:
        yield client


# -- the reproductions' grids ----------------------------------------------------------
# Tiny settings of every reproduction (under a second each on two cores).
_RFA = {
    "n_test": 200,
    "degree": {
        "width": 32,
        "targets": ("correlation-2",),
        "contrast_models": (),
        "train_sizes": (16, 64),
    },
    "scaling": {
        "token_dims": (2,),
        "n_keys": (2, 4),
        "width": 32,
        "models": ("RFA",),
        "train_sizes": (8, 16, 32),
    },
    "biased": None,
    "mean_scale": {"width": 32, "mean_scales": (0.0, 2.0), "train_sizes": (64,)},
    "softmax": {"width": 32, "targets": ("value-1",), "train_sizes": (64,)},
}
_RUNS = {
    "rfa": lambda: run_rfa(quick=True, n_seeds=2, progress=False, config=_RFA),
    "potts": lambda: run_potts(
        progress=False,
        real=False,
        config={
            "n_sites": 6,
            "n_states": 3,
            "n_train": [100, 300],
            "n_test": 300,
            "dense": {
                "n_train": [100, 200],
                "n_test": 300,
                "n_seeds": 2,
                "vanilla_max_iter": 5,
                "vanilla_max_n": 100,
            },
        },
    ),
    "mha": lambda: run_mha(
        quick=True,
        n_seeds=2,
        progress=False,
        config={
            "n_heads": (1,),
            "train_sizes": (4, 16),
            "n_test": 100,
            "thresholds": {
                "n_heads": (1,),
                "token_dims": (3,),
                "n_tokens": 3,
                "inputs": ("boolean",),
                "grid": (4, 16),
                "n_seeds": 2,
                "n_test": 100,
            },
        },
    ),
    "implicit-bias": lambda: run_implicit_bias(
        quick=True,
        n_seeds=2,
        progress=False,
        config={"n_iter": 300, "checkpoints": 4, "n_starts": 1},
    ),
}


def _without_timings(tables):
    """The tables less their wall-clock columns (which no two runs share)."""
    return {
        name: [{k: v for k, v in row.items() if "seconds" not in k} for row in rows]
        for name, rows in tables.items()
    }


@pytest.mark.parametrize("name", sorted(_RUNS))
def test_reproduction_on_a_cluster_is_the_local_run(name, client):
    """Every task of a grid carries its own seeds: where it runs changes nothing.

    Exact equality (NaN matching NaN), not a tolerance: the same arithmetic is
    done on the same data, only in another process.
    """
    with threadpool_limits(1, user_api="blas"):
        local = _without_timings(_RUNS[name]())
    before = _executed(client)
    with parallel_config(backend="dask"):
        on_cluster = _without_timings(_RUNS[name]())
    assert sum(len(rows) for rows in local.values()) > 0
    assert_equal(on_cluster, local)
    # The tasks did run there, on both workers.
    after = _executed(client)
    assert all(after[worker] > before[worker] for worker in after)


def _executed(client):
    """Tasks each worker has run so far."""
    return client.run(lambda dask_worker: dask_worker.state.executed_count)


def test_command_line_on_a_cluster_writes_the_local_tables(cluster, tmp_path, capsys):
    """``reproduce NAME --scheduler ADDRESS`` writes the files of the local run."""
    from sklearn_attn.__main__ import main

    argv = ["reproduce", "implicit-bias", "--quick", "--seeds", "1", "--out"]
    with threadpool_limits(1, user_api="blas"):
        assert main([*argv, str(tmp_path / "local")]) == 0
    scheduler = ["--scheduler", cluster.scheduler_address]
    assert main([*argv, str(tmp_path / "cluster"), *scheduler]) == 0
    err = capsys.readouterr().err
    assert f"on the Dask cluster at {cluster.scheduler_address}: 2 workers" in err
    tables = sorted(p.name for p in (tmp_path / "local").glob("*.csv"))
    # trajectories, final, spectra, aligned, aligned_final, theorem,
    # theorem_final and theorem_trajectories.
    assert len(tables) == 8
    for name in tables:
        # No timings in these tables: the files are the same, byte for byte.
        local = (tmp_path / "local" / name).read_bytes()
        assert (tmp_path / "cluster" / name).read_bytes() == local


def test_contacts_of_many_families_on_a_cluster(cluster, tmp_path, capsys):
    """``contacts A B C --scheduler ADDRESS`` writes the files of the local run."""
    from sklearn_attn.__main__ import main
    from sklearn_attn.datasets import make_potts_sequences
    from sklearn_attn.potts import decode_sequences

    paths = []
    for seed in range(3):
        codes, _ = make_potts_sequences(
            n_samples=60, n_sites=6, n_states=21, random_state=seed
        )
        path = tmp_path / f"family{seed}.fasta"
        sequences = decode_sequences(codes, alphabet="protein")
        path.write_text("".join(f">s{k}\n{s}\n" for k, s in enumerate(sequences)))
        paths.append(str(path))
    argv = ["contacts", *paths, "--max-iter", "3", "-q", "-o"]
    with threadpool_limits(1, user_api="blas"):
        assert main([*argv, str(tmp_path / "local")]) == 0
    scheduler = ["--scheduler", cluster.scheduler_address]
    assert main([*argv, str(tmp_path / "cluster"), *scheduler]) == 0
    assert "on the Dask cluster at" in capsys.readouterr().err
    for seed in range(3):
        for name in ("contacts.csv", "contacts.ec", "couplings.npz"):
            local = (tmp_path / "local" / f"family{seed}" / name).read_bytes()
            remote = (tmp_path / "cluster" / f"family{seed}" / name).read_bytes()
            assert remote == local, (seed, name)


# -- fit on a dask array ---------------------------------------------------------------
ESTIMATORS = {
    "RFA": RandomFeatureAttentionRegressor(n_heads=40, alpha=0.1),
    "BiasedRFA": BiasedRFA(n_heads=40, alpha=0.1),
    "RFMLP": RFMLP(n_features=150, alpha=0.1),
}


@pytest.fixture
def scheduler(request):
    """Dask's scheduler for the test: the cluster, or dask's local threads."""
    if request.param == "cluster":
        with distributed.Client(request.getfixturevalue("cluster")) as client:
            yield client
    else:
        with dask.config.set(scheduler="threads"):
            yield None


def _relative_difference(a, b):
    return np.linalg.norm(np.ravel(a) - np.ravel(b)) / np.linalg.norm(np.ravel(b))


def _assert_same_fit(fitted, reference, X):
    """Same random weights (exactly), same ridge solution up to rounding.

    Both fits solve the same normal equations; they differ only in the order
    in which the covariance is summed (chunk by chunk, merged in a tree), so
    they differ by rounding amplified by the condition number of the system,
    which alpha = 0.1 keeps moderate for these few hundred features of unit
    scale. Worst relative difference of coefficients or predictions over
    seeds 0-99 and the tests below: 1.6e-13 (BiasedRFA), with 1 or 2 BLAS
    threads; the bound 1e-8 leaves five orders of magnitude.
    """
    # With alpha="auto" the penalties are multiples of the features' scale, a
    # sum whose rounding follows the order of summation: alpha_ and gcv_mse_
    # are compared approximately by the test that uses it.
    rounded = ("coef_", "intercept_", "alpha_", "gcv_mse_")
    for name, value in vars(reference).items():
        if name.endswith("_") and name not in rounded:
            assert_array_equal(getattr(fitted, name), value, err_msg=name)
    assert _relative_difference(fitted.coef_, reference.coef_) < 1e-8
    assert _relative_difference(fitted.predict(X), reference.predict(X)) < 1e-8
    assert not hasattr(fitted, "loo_mse_")
    if reference.alpha != "auto":
        assert fitted.alpha_ == reference.alpha_


@pytest.mark.parametrize("scheduler", ["cluster", "threads"], indirect=True)
@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_dask_fit_is_the_numpy_fit(name, scheduler, global_random_seed):
    X, y = make_token_regression(
        n_samples=500, n_keys=4, token_dim=3, random_state=global_random_seed
    )
    weights = np.random.default_rng(global_random_seed).uniform(0, 2, size=len(y))
    weights[:60] = 0  # the whole first chunk of X: its statistics count nothing
    estimator = clone(ESTIMATORS[name]).set_params(random_state=global_random_seed)
    reference = clone(estimator).set_params(solver="primal")
    reference.fit(X, y, sample_weight=weights)
    # Uneven chunks, tokens split across chunks (the fit joins them), weights
    # chunked otherwise than X.
    X_dask = da.from_array(X, chunks=(60, 2, 2))
    fitted = estimator.fit(X_dask, y, sample_weight=da.from_array(weights, 170))
    assert fitted is estimator
    assert fitted.solver_ == "primal"
    _assert_same_fit(fitted, reference, X)


@pytest.mark.parametrize("scheduler", ["cluster"], indirect=True)
def test_dask_fit_of_flat_input_and_dask_targets(scheduler, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X, y = make_token_regression(
        n_samples=400, n_keys=3, token_dim=4, random_state=global_random_seed
    )
    flat = X.reshape(len(X), -1)
    Y = np.column_stack([y, y**2 + rng.normal(size=len(y))])
    estimator = RandomFeatureAttentionRegressor(
        n_heads=30, alpha=0.1, token_dim=4, random_state=global_random_seed
    )
    reference = clone(estimator).set_params(solver="primal").fit(flat, Y)
    fitted = clone(estimator).fit(
        da.from_array(flat, chunks=(90, 7)), da.from_array(Y, chunks=(130, 1))
    )
    assert fitted.coef_.shape == reference.coef_.shape == (2, 30 * 5)
    _assert_same_fit(fitted, reference, flat)


def test_dask_fit_is_partial_fit_over_the_chunks(global_random_seed):
    """The same statistics, merged in a tree or one chunk after another."""
    X, y = make_token_regression(
        n_samples=600, n_keys=4, token_dim=3, random_state=global_random_seed
    )
    estimator = BiasedRFA(n_heads=30, alpha=0.1, random_state=global_random_seed)
    stream = clone(estimator)
    for start in range(0, len(X), 50):
        stream.partial_fit(X[start : start + 50], y[start : start + 50])
    with dask.config.set(scheduler="synchronous"):
        fitted = clone(estimator).fit(da.from_array(X, chunks=50), da.from_array(y))
    _assert_same_fit(fitted, stream, X)


def test_dask_fit_with_auto_alpha_is_the_numpy_fit(global_random_seed):
    """alpha="auto" is chosen by GCV, which the merged statistics determine:
    the dask fit chooses the NumPy fit's penalty (neighbouring grid points'
    GCV differ by far more than the two routes' rounding) and then fits as
    for one alpha."""
    X, y = make_token_regression(
        n_samples=500, n_keys=4, token_dim=3, random_state=global_random_seed
    )
    estimator = RFMLP(n_features=150, random_state=global_random_seed)
    reference = clone(estimator).set_params(solver="primal").fit(X, y)
    with dask.config.set(scheduler="synchronous"):
        fitted = clone(estimator).fit(da.from_array(X, chunks=(60, 5, 3)), y)
    assert fitted.alpha_ == pytest.approx(reference.alpha_, rel=1e-10)
    assert_allclose(fitted.gcv_mse_, reference.gcv_mse_, rtol=1e-6)
    _assert_same_fit(fitted, reference, X)


def test_dask_fit_computes_the_features_on_the_workers(cluster):
    """One task per chunk on the workers; only the statistics come back."""
    X, y = make_token_regression(n_samples=4000, n_keys=8, token_dim=8, random_state=0)
    model = RandomFeatureAttentionRegressor(n_heads=20, alpha=0.1, random_state=0)
    with distributed.Client(cluster) as client:
        X_dask, y_dask = client.persist([da.from_array(X, 500), da.from_array(y, 500)])
        distributed.wait([X_dask, y_dask])
        with distributed.get_task_stream(client) as stream:
            model.fit(X_dask, y_dask)
    ran = [task["worker"] for task in stream.data if "_chunk_statistics" in task["key"]]
    assert len(ran) == 8  # one per chunk, each on the worker it was sent to
    assert len(set(ran)) == 2
    # Merged in a tree, four at a time: 8 -> 2 -> 1.
    assert sum("_merge" in task["key"] for task in stream.data) == 3


def test_dask_fit_rejects_what_it_cannot_do():
    X, y = make_token_regression(n_samples=100, n_keys=3, token_dim=2, random_state=0)
    X_dask = da.from_array(X, chunks=30)
    with pytest.raises(ValueError, match="takes one alpha or alpha='auto'"):
        RandomFeatureAttentionRegressor(10, alpha=[0.1, 1.0]).fit(X_dask, y)
    with pytest.raises(ValueError, match='solver="dual"'):
        RandomFeatureAttentionRegressor(10, solver="dual").fit(X_dask, y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        RandomFeatureAttentionRegressor(10).fit(X_dask, y[:-1])
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        RandomFeatureAttentionRegressor(10).fit(X_dask[X_dask[:, 0, 0] > 0], y)
    with pytest.raises(ValueError, match="token_dim is None"):
        RandomFeatureAttentionRegressor(10).fit(X_dask.reshape(100, -1), y)
    with pytest.raises(ValueError, match="at least one positive entry"):
        RandomFeatureAttentionRegressor(10).fit(X_dask, y, sample_weight=np.zeros(100))
    with pytest.raises(ValueError, match="Negative values"):
        weights = -np.ones(100)
        RandomFeatureAttentionRegressor(10).fit(X_dask, y, sample_weight=weights)
    # A NaN in one chunk is found by that chunk's task.
    X_nan = X.copy()
    X_nan[77, 1, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        with dask.config.set(scheduler="synchronous"):
            RandomFeatureAttentionRegressor(10).fit(da.from_array(X_nan, 30), y)
