"""Contacts at protein scale: the memory a fit needs, known before the work, and
sequence weights computed once and reused.

References: the peak that ``tracemalloc`` records while a fit runs (the estimate
must bound it from above), the estimator's own identity reweighting, and plmc's
weights files (one number a line).
"""

import io
import json
import time
import tracemalloc
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from sklearn_attn import PottsPseudoLikelihood
from sklearn_attn.__main__ import main
from sklearn_attn._console import byte_size, format_bytes
from sklearn_attn.contacts import read_weights, write_weights
from sklearn_attn.datasets import make_potts_sequences
from sklearn_attn.potts import _estimator as potts_estimator
from sklearn_attn.potts import decode_sequences, estimate_fit_memory
from sklearn_attn.potts._gather import available as gather_available

# -- the estimate -------------------------------------------------------------------


@pytest.mark.parametrize(
    "parametrization, n_sites, n_states, n_samples",
    [
        ("full", 12, 21, 300),
        ("full", 40, 21, 200),
        ("full", 30, 5, 3000),
        ("factored", 40, 21, 300),
        ("factored", 80, 5, 2000),
    ],
)
@pytest.mark.parametrize(
    "algorithm",
    [
        "dense",
        pytest.param(
            "gather",
            marks=pytest.mark.skipif(not gather_available(), reason="needs numba"),
        ),
    ],
)
def test_estimate_bounds_the_peak_of_a_fit(
    parametrization, n_sites, n_states, n_samples, algorithm
):
    rng = np.random.default_rng(0)
    X = rng.integers(0, n_states, size=(n_samples, n_sites))
    model = PottsPseudoLikelihood(
        parametrization,
        n_heads=2,
        states=range(n_states),
        max_iter=3,
        algorithm=algorithm,
    )
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    estimate = estimate_fit_memory(
        n_samples, n_sites, n_states, parametrization, n_heads=2, algorithm=algorithm
    )
    # From above, and not by more than the fixed overhead and a factor of 2.
    assert peak <= estimate <= 2 * peak + 32 * 2**20


def test_estimate_grows_with_the_square_of_the_couplings():
    small = estimate_fit_memory(1000, 100, 21, "full")
    large = estimate_fit_memory(1000, 200, 21, "full")
    overhead = 32 * 2**20
    assert 3.9 < (large - overhead) / (small - overhead) < 4.0
    assert estimate_fit_memory(1000, 100, 21, "factored") < small
    # The gathers form no float64 gradient of the couplings.
    assert estimate_fit_memory(1000, 100, 21, "full", algorithm="gather") < small


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_sequences=0), "n_sequences must be an integer >= 1"),
        (dict(n_sites=1), "n_sites must be an integer >= 2"),
        (dict(n_states=2.5), "n_states must be an integer >= 2"),
        (dict(n_heads=True), "n_heads must be an integer >= 1"),
        (dict(parametrization="dense"), "parametrization must be"),
        (dict(algorithm="blas"), "algorithm must be 'dense' or 'gather'"),
    ],
)
def test_estimate_refuses_bad_sizes(kwargs, match):
    arguments = dict(n_sequences=10, n_sites=5, n_states=21) | kwargs
    with pytest.raises(ValueError, match=match):
        estimate_fit_memory(**arguments)


# -- the estimator stops before the work ----------------------------------------------

# What the full model of 3,000 sites x 21 states needs, by algorithm (56 and 46
# bytes per coupling, and 1.5 GB of site coverage).
_LONG_FAMILY_NEEDS = [
    ("dense", "224 GB"),
    pytest.param(
        "gather",
        "184 GB",
        marks=pytest.mark.skipif(not gather_available(), reason="needs numba"),
    ),
]


@pytest.mark.parametrize("algorithm, needed", _LONG_FAMILY_NEEDS)
def test_fit_refuses_a_model_larger_than_the_memory(monkeypatch, algorithm, needed):
    # A machine of 64 GB: the full model of 3,000 sites needs about 224 GB by
    # one-hot products, 184 GB by gathers.
    monkeypatch.setattr(potts_estimator, "available_memory_bytes", lambda: 64 * 10**9)
    X = np.zeros((5, 3000), dtype=np.int64)
    X[0] = 1
    model = PottsPseudoLikelihood("full", states=range(21), algorithm=algorithm)
    start = time.perf_counter()
    with pytest.raises(MemoryError, match=rf"needs about {needed}.*more than 64 GB"):
        model.fit(X)
    assert time.perf_counter() - start < 60  # no fit ran: far below a fit's time
    assert not hasattr(model, "couplings_")
    with pytest.raises(MemoryError, match="Fit the factored model"):
        PottsPseudoLikelihood("full", states=range(21), algorithm=algorithm).fit(X)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_fit_without_a_known_memory_limit_runs(monkeypatch):
    monkeypatch.setattr(potts_estimator, "available_memory_bytes", lambda: None)
    X = np.random.default_rng(0).integers(0, 3, size=(50, 4))
    PottsPseudoLikelihood("full", max_iter=5).fit(X)


# -- the command ----------------------------------------------------------------------


def _alignment_file(tmp_path, seed=0, n=120, length=10):
    """``n`` sequences, each twice: the identity reweighting halves N_eff."""
    codes, _ = make_potts_sequences(
        n_samples=n // 2, n_sites=length, n_states=21, random_state=seed
    )
    sequences = 2 * decode_sequences(codes, alphabet="protein")
    path = tmp_path / "family.fasta"
    path.write_text("".join(f">s{k}\n{s}\n" for k, s in enumerate(sequences)))
    return path


def _run(tmp_path, alignment, out, *options):
    return main(
        ["contacts", str(alignment), "--max-iter", "3", "-q", "-o", str(out), *options]
    )


def test_command_refuses_a_fit_beyond_max_memory(tmp_path, capsys):
    alignment = _alignment_file(tmp_path)
    assert _run(tmp_path, alignment, tmp_path / "out", "--max-memory", "1M") == 1
    message = capsys.readouterr().err
    assert "needs about" in message and "more than 1 MB (--max-memory)" in message
    assert "--model factored" in message and "nothing was fitted" in message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("algorithm, needed", _LONG_FAMILY_NEEDS)
def test_command_refuses_a_long_family_at_once(tmp_path, capsys, algorithm, needed):
    # 3,000 columns: about 224 GB for the full model by one-hot products, 184 GB
    # by gathers, refused after reading.
    rng = np.random.default_rng(0)
    letters = np.array(list("ACDEFGHIKLMNPQRSTVWY"))
    text = "".join(f">s{k}\n{''.join(rng.choice(letters, 3000))}\n" for k in range(5))
    path = tmp_path / "long.fasta"
    path.write_text(text)
    options = ("--max-memory", "64G", "--algorithm", algorithm)
    assert _run(tmp_path, path, tmp_path / "out", *options) == 1
    assert f"needs about {needed}" in capsys.readouterr().err


def test_saved_weights_reproduce_the_fit(tmp_path):
    alignment = _alignment_file(tmp_path, seed=3)
    weights = tmp_path / "weights.txt"
    assert (
        _run(tmp_path, alignment, tmp_path / "a", "--save-weights", str(weights)) == 0
    )
    assert _run(tmp_path, alignment, tmp_path / "b", "--weights", str(weights)) == 0
    for name in ("contacts.csv", "contacts.ec"):
        assert (tmp_path / "a" / name).read_bytes() == (
            tmp_path / "b" / name
        ).read_bytes()
    first, second = (
        json.loads((tmp_path / folder / "summary.json").read_text())
        for folder in ("a", "b")
    )
    assert first["N_eff"] == second["N_eff"] <= 60
    assert second["weights"] == str(weights)
    assert set(first["timings_s"]) == {"read_s", "weight_s", "fit_s", "write_s"}
    assert first["memory_estimate_mb"] > 0


def test_weights_file_must_match_the_alignment(tmp_path, capsys):
    alignment = _alignment_file(tmp_path)
    weights = tmp_path / "weights.txt"
    weights.write_text("1\n" * 119)
    assert _run(tmp_path, alignment, tmp_path / "out", "--weights", str(weights)) == 1
    assert "has 119 weight(s) but the alignment 120" in capsys.readouterr().err


def test_weights_files_round_trip_exactly(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    weights = rng.random(50) ** 3
    weights[rng.integers(50)] = 0.0
    out = io.StringIO()
    write_weights(out, weights)
    assert out.getvalue().count("\n") == 50
    assert_array_equal(read_weights(io.StringIO(out.getvalue()), 50), weights)


@pytest.mark.parametrize(
    "text, match",
    [
        ("1\nx\n", "must hold numbers only"),
        ("1\n-1\n", "finite non-negative"),
        ("1\nnan\n", "finite non-negative"),
        ("0\n0\n", "no positive weight"),
        ("# nothing\n", "one weight a sequence"),
    ],
)
def test_bad_weights_files(text, match):
    with pytest.raises(ValueError, match=match):
        read_weights(io.StringIO(text))


@pytest.mark.parametrize(
    "text, size",
    [("8G", 8 * 10**9), ("500M", 5 * 10**8), ("1.5GB", 15 * 10**8), ("1e6", 10**6)],
)
def test_sizes(text, size):
    assert byte_size(text) == size


@pytest.mark.parametrize("text", ["", "G", "-1G", "0", "lots", "infG"])
def test_bad_sizes(text):
    with pytest.raises(Exception, match="expected a size such as 8G"):
        byte_size(text)


def test_format_bytes():
    assert format_bytes(222.3e9) == "222 GB"
    assert format_bytes(1.5e6) == "1.5 MB"
    assert format_bytes(999) == "0.999 kB"
