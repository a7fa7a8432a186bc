"""PottsPseudoLikelihood: factored self-attention trained by masked-token prediction.

One topic, the estimator: its parameters, fit (starts, preconditioned L-BFGS,
warm starts), sampling and contact scores. What it shares with the vanilla
baseline is in ``_sequence_model.py`` and the model's numerics in ``_model.py``;
a third of the size is the class docstring, which documents both
parametrisations for the user guide.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, DensityMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    check_is_fitted,
)

from .._backend import (
    DeviceCacheMixin,
    available_memory_bytes,
    free_device_memory,
    resolve_device,
    to_device,
    to_host,
)
from ._alignment import _site_coverage, _state_frequencies
from ._gather import resolve_algorithm
from ._mean_field import mean_field_couplings
from ._memory import estimate_fit_memory, memory_error
from ._model import (
    FactoredAttention,
    FullCouplings,
    OneHotRows,
    log_conditionals,
    objective,
    one_hot,
    zero_sum_gauge,
)
from ._sampling import gibbs_sample
from ._scores import apc, frobenius_scores
from ._sequence_model import _SequenceModelMixin

# Pairs kept by L-BFGS, and the precision of the objective's two big products.
_LBFGS_HISTORY = 5
_PRODUCT_DTYPE = np.float32

# Attributes that encoding X in fit (re)sets.
_ENCODING_STATE = (
    "states_",
    "_string_input",
    "_input_states_",
    "_missing_code",
    "n_features_in_",
    "feature_names_in_",
)


class PottsPseudoLikelihood(
    _SequenceModelMixin, DeviceCacheMixin, DensityMixin, BaseEstimator
):
    """Generalized Potts model fitted by pseudo-likelihood (factored self-attention).

    One layer of *factored* self-attention (attention from positions only,
    values from tokens only) trained by masked-token prediction computes the
    conditionals of a generalized Potts model,

    .. math::

        p(s_i = a \\mid s_{-i}) \\propto \\exp\\Big(h_i(a) + \\sum_{j \\ne i}
        \\sum_{k=1}^{H} A^k_{ij} V^k_{a s_j}\\Big),

    and its training loss is the negative pseudo-log-likelihood (Rende, Gerace,
    Laio and Goldt, 2024). With ``parametrization="full"`` the couplings are the
    free symmetric tensor ``J_ij(a, b)`` of plmDCA instead. Both are fitted by
    L-BFGS on analytic gradients of plmc's objective

    .. math::

        f = -\\sum_s w_s \\sum_i \\log p(s_i \\mid s_{-i})
            + \\alpha_h \\sum_{i,a} h_i(a)^2
            + \\frac{\\alpha_J}{2} \\sum_{i \\ne j} \\sum_{a,b} J_{ij}(a, b)^2 ,

    in plmc's units (a weighted sum over sequences).

    Read more in the :ref:`User Guide <potts>`.

    Parameters
    ----------
    parametrization : {"factored", "full"}, default="factored"
        Factored self-attention, or the full plmDCA coupling tensor.
    n_heads : int, default=1
        Number of attention heads ``H`` (factored only).
    attention : {"softmax", "free"}, default="softmax"
        ``"softmax"``: each ``A^k`` is a row-wise softmax over ``j != i`` of free
        logits; ``"free"``: an unconstrained matrix with zero diagonal.
    alphabet : str, default="protein"
        Used when ``X`` holds aligned strings: ``"protein"``
        (``-ACDEFGHIKLMNPQRSTVWY``, gap included), ``"dna"``, ``"rna"``, or any
        string of distinct characters. Integer codes ignore it. Predictions
        encode text over the fitted ``states_``, whatever ``alphabet`` is set
        to after ``fit``.
    unknown_letters : {"drop", "gap", "error"}, default="drop"
        For text input: what a letter outside the alphabet (``X``, ``B``,
        ``Z``, ...; lower case counts as upper case) does. ``"drop"`` leaves
        such sequences out of ``fit``, as plmc does (``n_sequences_dropped_``
        counts them, and their ``sample_weight`` goes with them), and makes
        the prediction methods raise on them; ``"gap"`` reads such letters as
        the gap (the alphabet's first character); ``"error"`` raises.
    states : "auto" or array-like of shape (n_states,), default="auto"
        For integer codes, the values they may take, as
        :class:`~sklearn.preprocessing.OneHotEncoder` takes ``categories``:
        ``"auto"`` takes the distinct values of ``X`` in ``fit``; distinct
        increasing numbers fix them, so that a state the data lack still has
        its fields and couplings (``range(21)`` for codes over the letters of
        ``"protein"``, such as those of
        :meth:`Alignment.read <sklearn_attn.contacts.Alignment.read>`). Text
        takes its states from ``alphabet``, and ``states`` must then be
        ``"auto"``.
    missing_state : state or None, default=None
        A state read as missing data rather than as a state (the gap ``"-"``,
        or its code, as plmc's ``-g``): a site in it has no conditional of
        its own and adds nothing to the conditionals of the other sites, so
        each sequence is modelled by the Potts model of the sites it has.
        It leaves ``states_``, the fields and the couplings (``q - 1``
        states). For text, a character of the alphabet; for codes, one of
        ``states`` (with ``states="auto"``, it need not occur in ``X``). The
        prediction methods read it as missing too: :meth:`predict` and
        :meth:`predict_proba` then give every site's conditional given the
        sites present, and :meth:`score_samples` averages over the sites
        present. ``None``: every state is a state.
    alpha_fields : float, default=0.01
        Penalty ``alpha_h`` on the fields (plmc's ``-lh``).
    alpha_couplings : float, default=None
        Penalty ``alpha_J`` on the couplings (plmc's ``-le``); ``None`` means
        ``0.01 (q - 1) (L - 1)``, the scaling EVcouplings uses with plmc.
    sequence_identity : float in (0, 1], default=None
        When set and no ``sample_weight`` is given, weight each sequence by
        ``1 / #{sequences with identity >= sequence_identity}`` (0.8 in plmc and
        CCMpred). ``None``: unit weights.
    max_iter : int, default=500
        Maximum number of L-BFGS iterations.
    tol : float, default=1e-7
        Stop when the relative decrease of the objective falls below ``tol``
        on two iterations in a row, or the largest gradient entry of the
        per-site mean objective falls below ``tol``.
    init_scale : float, default=0.1
        Standard deviation of the random initial attention logits and values.
    init : {"auto", "mean-field", "random"}, default="auto"
        Start of factored attention. ``"mean-field"``: the best ``n_heads``-head
        factorization (a truncated SVD of the zero-sum-gauge blocks) of the
        mean-field couplings ``J = -C^{-1}`` of the alignment (``C`` its
        connected correlations), for free attention only; ``"random"``:
        Gaussian logits and values of standard deviation ``init_scale``;
        ``"auto"``: ``"mean-field"`` with free attention, else ``"random"``.
        The factored objective is not convex: random starts of a free head
        can stop in local optima, which the mean-field start avoids on dense
        signed teachers (the user guide's :ref:`potts` section has the
        measurement). The mean-field start costs one to three evaluations of the
        objective. The full model (convex) always starts from zero couplings.
    n_init : int, default=1
        Number of starts of factored attention; the one with the lowest
        objective is kept. The first is ``init``, the others random. Ignored
        by the full model and by a warm start.
    random_state : int, RandomState instance or None, default=None
        Seed of the random starts and of :meth:`sample`.
    verbose : int, default=0
        Print the objective every ``verbose`` iterations.
    warm_start : bool, default=False
        When True and the model is fitted, ``fit`` starts L-BFGS from the
        fitted parameters (the fields and the couplings, or the fields,
        attention logits and values) instead of the initialisation, for
        example along a path of decreasing penalties (see
        :ref:`potts_penalty_path`). The data and the penalties may change;
        the alignment length, the states (``states_``, which for text are
        the alphabet's), the kind of input (codes or text), and
        ``parametrization``, ``n_heads`` and ``attention`` may not: a change
        of any of them raises a ``ValueError`` that names it and leaves the
        fitted model as it was, as scikit-learn's MLP and SGD estimators do
        for new features or classes. L-BFGS's correction pairs are not kept,
        so the continued run starts afresh from that point; ``n_iter_``,
        ``loss_curve_`` and ``objective_`` describe the last call to ``fit``
        only. ``random_state`` and ``init_scale`` are then unused. On an
        unfitted model, ``fit`` is the same either way.
    device : {None, "cpu", "cuda", "cuda:N"}, default=None
        Where to compute (see :ref:`devices`): the objective and gradient in
        ``fit``, the predictions, and the Gibbs sampler of :meth:`sample`.
        ``None`` follows the input (CuPy codes in, CuPy out); the optimiser's
        state stays on the host.
    algorithm : {"auto", "gather", "dense"}, default="auto"
        How ``fit`` computes the objective's two big products (see
        :ref:`the user guide <potts_algorithm>`). ``"gather"``: sums of rows
        gathered by the sequences' codes, by compiled kernels (numba, the
        ``fast`` extra; CPU only); ``"dense"``: products of one-hot blocks by
        BLAS (or cuBLAS). ``"auto"``: ``"gather"`` on the CPU when numba is
        installed, else ``"dense"``. Both minimise the same objective; their
        results differ by float32 rounding only.

    Attributes
    ----------
    states_ : ndarray of shape (n_states,)
        The states: the alphabet's characters for string input (dtype
        ``<U1``, for bytes input too), the distinct codes seen in ``fit`` for
        integer input (in the dtype of ``X``: a float32 or bool code array
        gives float32 or bool states).
    n_sites_ : int
        Alignment length ``L``.
    fields_ : ndarray of shape (n_sites, n_states), dtype float64
        Fields in the zero-sum gauge of the couplings.
    couplings_ : ndarray of shape (n_sites, n_states, n_sites, n_states), \
            dtype float64
        Couplings ``J[i, a, j, b]`` in the zero-sum gauge.
    attention_ : ndarray of shape (n_heads, n_sites, n_sites), dtype float64
        Attention matrices ``A^k`` (factored only).
    values_ : ndarray of shape (n_heads, n_states, n_states), dtype float64
        Value matrices ``V^k`` (factored only).
    alpha_couplings_ : float
        The coupling penalty used (``alpha_couplings`` or its default).
    n_parameters_ : int
        Number of free parameters the fit optimised (fields and couplings,
        or fields, attention logits and values).
    n_eff_ : float
        Effective number of sequences: the sum of the weights the fit used
        (``sample_weight``, the ``sequence_identity`` reweighting, or one per
        sequence), as plmc reports it.
    n_sequences_dropped_ : int
        Sequences of ``X`` left out for letters outside the alphabet
        (``unknown_letters="drop"``); 0 for integer codes.
    objective_ : float
        plmc's objective at the solution, in plmc's units.
    algorithm_ : str
        The algorithm the last call to ``fit`` used, ``"gather"`` or
        ``"dense"``.
    n_iter_ : int
        Number of L-BFGS iterations of the kept start of the last call to
        ``fit``. A kept start that stops at ``max_iter`` before reaching
        ``tol`` emits a :class:`~sklearn.exceptions.ConvergenceWarning`.
    loss_curve_ : list of float
        plmc's objective after each iteration of the kept start of the last
        call to ``fit``.
    init_objectives_ : ndarray of shape (n_starts,)
        plmc's objective at the end of each start (``n_init`` of factored
        attention, else one).
    best_init_ : int
        Index of the kept start in ``init_objectives_``.
    n_features_in_ : int
        Equal to ``n_sites_``.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Column names of ``X``; defined only when ``X`` has column names that
        are all strings.

    Notes
    -----
    **Dtypes.** ``X`` holds labels (codes or letters), not measurements, so
    its dtype sets only that of ``states_`` and of what is made of states
    (:meth:`predict`, :meth:`sample`). The parameters, :meth:`predict_proba`,
    :meth:`score_samples`, :meth:`contact_scores` and the scalar attributes
    are float64 whatever ``X`` is. During ``fit`` the objective's two big
    products run in float32 with float64 sums (see the User Guide); nothing
    in float32 is stored. ``sample_weight`` is read as float64 and is never
    modified, nor is ``X``.

    See Also
    --------
    sklearn_attn.datasets.make_potts_sequences : Samples from a planted model.
    sklearn_attn.contacts.Alignment : An alignment file read into codes.

    Examples
    --------
    >>> from sklearn_attn import PottsPseudoLikelihood
    >>> from sklearn_attn.datasets import make_potts_sequences
    >>> X, params = make_potts_sequences(
    ...     n_samples=500, n_sites=8, n_states=5, random_state=0)
    >>> model = PottsPseudoLikelihood(random_state=0).fit(X)
    >>> model.predict_proba(X[:2]).shape
    (2, 8, 5)
    >>> model.contact_scores().shape
    (8, 8)
    """

    _parameter_constraints = {
        "parametrization": [StrOptions({"factored", "full"})],
        "n_heads": [Interval(Integral, 1, None, closed="left")],
        "attention": [StrOptions({"softmax", "free"})],
        "alphabet": [str],
        "unknown_letters": [StrOptions({"drop", "gap", "error"})],
        "states": [StrOptions({"auto"}), "array-like"],
        "missing_state": "no_validation",
        "alpha_fields": [Interval(Real, 0, None, closed="left")],
        "alpha_couplings": [Interval(Real, 0, None, closed="left"), None],
        "sequence_identity": [Interval(Real, 0, 1, closed="right"), None],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "init_scale": [Interval(Real, 0, None, closed="left")],
        "init": [StrOptions({"auto", "mean-field", "random"})],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
        "device": [str, None],
        "algorithm": [StrOptions({"auto", "gather", "dense"})],
    }

    def __init__(
        self,
        parametrization="factored",
        *,
        n_heads=1,
        attention="softmax",
        alphabet="protein",
        unknown_letters="drop",
        states="auto",
        missing_state=None,
        alpha_fields=0.01,
        alpha_couplings=None,
        sequence_identity=None,
        max_iter=500,
        tol=1e-7,
        init_scale=0.1,
        init="auto",
        n_init=1,
        random_state=None,
        verbose=0,
        warm_start=False,
        device=None,
        algorithm="auto",
    ):
        self.parametrization = parametrization
        self.n_heads = n_heads
        self.attention = attention
        self.alphabet = alphabet
        self.unknown_letters = unknown_letters
        self.states = states
        self.missing_state = missing_state
        self.alpha_fields = alpha_fields
        self.alpha_couplings = alpha_couplings
        self.sequence_identity = sequence_identity
        self.max_iter = max_iter
        self.tol = tol
        self.init_scale = init_scale
        self.init = init
        self.n_init = n_init
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.device = device
        self.algorithm = algorithm

    # -- fit ------------------------------------------------------------------
    def _make_parametrization(self, n_sites, n_states):
        if self.parametrization == "full":
            return FullCouplings(n_sites, n_states)
        return FactoredAttention(
            n_sites, n_states, self.n_heads, self.attention, self.init_scale
        )

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, sample_weight=None):
        """Fit the model by minimising plmc's pseudo-likelihood objective.

        With ``warm_start=True`` on a fitted model, L-BFGS starts from its
        parameters (see ``warm_start``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_sites), or aligned text
            Either integer state codes: an integer or bool array, or floats
            with integer values (as scikit-learn accepts ``1.0`` as a class
            label; ``states_`` keeps their dtype), or aligned sequences of
            equal length in the ``alphabet``, in any of these text forms: a
            list of str or of ASCII bytes (one character per byte), a list of
            sequences of single characters, a NumPy unicode or bytes array
            (1-D of strings, or 2-D of single characters), an object array or
            a pandas Series or DataFrame of these. ``X`` is not modified.
            Non-integral, NaN or complex values, ragged rows, no sequences,
            fewer than 2 sites, and codes mixed with text raise a
            ``ValueError`` naming ``X``; a single string or entries that are
            neither raise a ``TypeError``.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative sequence weights; when ``None`` and
            ``sequence_identity`` is set, identity-based weights are computed.

        Returns
        -------
        self : object
            The fitted model.

        Raises
        ------
        MemoryError
            Before any work, when the fit's arrays would need more memory than
            the system has available (see
            :func:`~sklearn_attn.potts.estimate_fit_memory`).

        Warns
        -----
        ConvergenceWarning
            When L-BFGS stops at ``max_iter`` iterations (or at scipy's limit
            of objective evaluations) before reaching ``tol``; ``n_iter_`` says
            how many iterations were done.
        """
        device = resolve_device(self.device, X)
        algorithm = self._resolved_algorithm(device)
        previous = self._previous_fit()
        # Encoding with reset=True replaces these; a warm start that finds X
        # incompatible puts them back, so the fitted model stays consistent.
        encoding_state = {
            name: vars(self)[name] for name in _ENCODING_STATE if name in vars(self)
        }
        codes, dropped = self._encode(to_host(X), reset=True)
        if previous is not None:
            try:
                self._check_warm_start_data(previous)
            except ValueError:
                for name in _ENCODING_STATE:
                    vars(self).pop(name, None)
                vars(self).update(encoding_state)
                raise
        self._clear_device_cache()
        n_sites = codes.shape[1]
        n_states = self.states_.size
        self.n_sites_ = n_sites
        codes, weights = self._fit_weights(codes, dropped, sample_weight)
        self.alpha_couplings_ = float(
            0.01 * (n_states - 1) * (n_sites - 1)
            if self.alpha_couplings is None
            else self.alpha_couplings
        )
        parametrization = self._make_parametrization(n_sites, n_states)
        self._check_memory(device, algorithm, len(codes), n_sites, n_states)
        frequencies = _state_frequencies(codes, weights, n_states)
        weight_sum = float(weights.sum())
        # With missing sites, the weight each coupling's conditionals see: the
        # preconditioner's curvature (the factored model has none).
        coverage = (
            _site_coverage(codes, weights, n_states)
            if self.parametrization == "full"
            else None
        )
        init = self._resolved_init()
        xp = device.xp
        with device.activate():
            rows = OneHotRows(
                to_device(codes, device),
                to_device(weights, device),
                n_states,
                dtype=_PRODUCT_DTYPE,
                xp=xp,
                gather=algorithm == "gather",
            )
            runs = []
            for initial in self._starts(
                parametrization, previous, init, frequencies, weight_sum, rows
            ):
                runs.append(
                    self._minimize(
                        parametrization,
                        frequencies,
                        weight_sum,
                        coverage,
                        initial,
                        rows,
                        self.alpha_couplings_,
                        device,
                    )
                )
            del rows  # the pool can only release unreferenced blocks
        free_device_memory(device)
        run = self._keep_best_run(runs)
        self._store(parametrization, run["theta"])
        self.algorithm_ = algorithm
        return self

    def _resolved_algorithm(self, device):
        """``algorithm`` with ``"auto"`` resolved for ``device``; checked
        before any work."""
        return resolve_algorithm(
            self.algorithm, "cpu" if device.kind == "cpu" else self.device or "cuda"
        )

    def _check_memory(self, device, algorithm, n_rows, n_sites, n_states):
        """Stop before any work when the fit's arrays cannot fit in memory."""
        if device.kind != "cpu":
            return  # the large arrays live in the device's memory
        limit = available_memory_bytes()
        estimate = estimate_fit_memory(
            n_rows,
            n_sites,
            n_states,
            self.parametrization,
            self.n_heads,
            algorithm=algorithm,
        )
        if limit is not None and estimate > limit:
            raise memory_error(
                estimate,
                limit,
                where=f"{type(self).__name__}.fit ({self.parametrization!r}, "
                f"L = {n_sites}, q = {n_states}, {n_rows} distinct sequences)",
                options="Fit the factored model (parametrization='factored'), "
                "fewer sites or sequences, on a GPU (device='cuda'), or on a "
                "machine with more memory.",
            )

    def _resolved_init(self):
        """``init`` with ``"auto"`` resolved; ``None`` for the full model."""
        if self.parametrization == "full":
            return None
        if self.init == "auto":
            return "mean-field" if self.attention == "free" else "random"
        if self.init == "mean-field" and self.attention != "free":
            raise ValueError(
                "init='mean-field' factors signed couplings, which needs "
                f"attention='free'; got attention={self.attention!r}. Use "
                "init='random' (or 'auto') with softmax attention."
            )
        return self.init

    def _starts(self, parametrization, previous, init, frequencies, weight_sum, rows):
        """A callable per start that makes its parameter vector when needed.

        The continued fit of a warm start, the full model's single start
        (its objective is convex), or ``n_init`` starts of factored
        attention, whose random parts are all drawn before any runs (so that
        start ``k`` is the same whatever ``n_init`` is); with
        ``init="mean-field"`` the first start is the factored mean-field
        couplings instead of its draw.
        """
        if previous is not None:
            return [lambda: self._fitted_parameters(parametrization)]
        random_state = check_random_state(self.random_state)
        if init is None:
            return [
                lambda: parametrization.initial(random_state, frequencies, weight_sum)
            ]
        draws = [
            parametrization.initial(random_state, frequencies, weight_sum)
            for _ in range(self.n_init)
        ]
        if init == "mean-field":
            attention, values = parametrization.factor(
                mean_field_couplings(rows, parametrization.n_states)
            )
            fields, raw, value_part = parametrization.split(draws[0])
            raw[...] = attention
            value_part[...] = values
        return [functools.partial(np.array, draw) for draw in draws]

    def _minimize(
        self,
        parametrization,
        frequencies,
        weight_sum,
        coverage,
        initial,
        rows,
        alpha_couplings,
        device,
    ):
        """L-BFGS in preconditioned coordinates ``u = sqrt(curvature) * theta``.

        Starts from ``initial()``, the parameter vector (made only when
        needed); only ``u`` and the preconditioner outlive the start, so the
        peak memory holds few vectors of the parameters' size. Returns the
        run: its parameters, objective (in plmc's units), iterations, curve,
        and why it stopped short of ``tol`` (None when it did not).
        """
        xp = device.xp
        # Optimise the per-site mean (tolerances then mean the same at any size),
        # in coordinates where the Hessian's diagonal is about one.
        scale = weight_sum * parametrization.n_sites
        curvature = parametrization.curvature(
            frequencies, weight_sum, self.alpha_fields, alpha_couplings, coverage
        )
        unit_scaled = curvature is not None
        if curvature is None:
            precondition = np.ones(parametrization.n_params, dtype=np.float32)
        else:
            # Without a penalty, a state a site never (or always) shows has no
            # curvature at the start: the objective is flat there to second
            # order, and falls towards an optimum at infinity. Any positive
            # scale preconditions it; the smallest positive one keeps it tame.
            positive = curvature > 0
            floor = curvature.min(initial=np.inf, where=positive)
            floor = scale if np.isinf(floor) else floor
            del positive
            np.maximum(curvature, floor, out=curvature)
            curvature /= scale
            # Any positive scaling preconditions: float32 halves its memory, and
            # theta = u / p and grad / p use the same numbers.
            precondition = np.sqrt(curvature, out=curvature).astype(np.float32)
            del curvature

        precondition_on_device = to_device(precondition, device)

        def fun(u):
            # theta = u / precondition, formed piece by piece inside.
            value, grad = objective(
                to_device(u, device),
                parametrization,
                rows,
                self.alpha_fields,
                alpha_couplings,
                xp,
                scale=precondition_on_device,
            )
            grad = to_host(grad)
            grad /= precondition  # in place: no second vector of the parameters' size
            grad /= scale
            return value / scale, grad

        run = self._lbfgs_run(
            fun,
            # Made inside minimize_lbfgs, so that no frame here keeps the
            # start alive through the run.
            lambda: initial() * precondition,
            scale,
            history=_LBFGS_HISTORY,
            history_dtype=np.float32,
            # The preconditioned Hessian's diagonal is about one: a unit
            # first step is a diagonal Newton step.
            initial_step=1.0 if unit_scaled else None,
        )
        run["theta"] = run["theta"] / precondition
        return run

    def _store(self, parametrization, theta):
        L, q = self.n_sites_, self.states_.size
        self.n_parameters_ = int(parametrization.n_params)
        couplings_mat, fields = parametrization.couplings(theta)
        couplings = couplings_mat.reshape(L, q, L, q)
        # The gauge the penalty chose (plmc scores contacts in it).
        self._fitted_couplings = couplings
        self.couplings_, self.fields_ = zero_sum_gauge(couplings, fields)
        # What a warm start continues from (the full model's couplings are
        # the blocks of _fitted_couplings, exactly).
        self._last_fit = {
            "parametrization": self.parametrization,
            "string_input": self._string_input,
            "states": self.states_,
            "fields": fields.copy(),  # in the fitted gauge, as theta holds them
        }
        if self.parametrization == "factored":
            _, raw, values = parametrization.split(theta)
            self.attention_ = parametrization.attention_matrices(raw)
            self.values_ = values.copy()
            self._last_fit.update(
                n_heads=self.n_heads,
                attention=self.attention,
                logits=raw.copy(),
                values=self.values_.copy(),
            )

    # -- warm start -----------------------------------------------------------
    def _previous_fit(self):
        """The last fit's record when ``fit`` continues it, else None.

        Raises if a parameter that shapes the model changed since that fit.
        """
        previous = getattr(self, "_last_fit", None)
        if not self.warm_start or previous is None:
            return None
        changed = [
            (name, previous[name], getattr(self, name))
            for name in ("parametrization", "n_heads", "attention")
            if name in previous and previous[name] != getattr(self, name)
        ]
        if changed:
            name, before, now = changed[0]
            raise ValueError(
                f"warm_start=True continues the previous fit, which had "
                f"{name}={before!r}; got {name}={now!r}. Set warm_start=False "
                "to fit from the initialisation."
            )
        return previous

    def _check_warm_start_data(self, previous):
        """Raise unless the encoded ``X`` has the previous fit's sites and states."""
        intro = "warm_start=True continues the previous fit, "
        advice = " Set warm_start=False to fit from the initialisation."
        if self._string_input != previous["string_input"]:
            before, now = (
                ("integer codes", "strings")
                if self._string_input
                else ("strings", "integer codes")
            )
            raise ValueError(f"{intro}which saw {before}; X holds {now}.{advice}")
        n_sites = previous["fields"].shape[0]
        if self.n_features_in_ != n_sites:
            raise ValueError(
                f"{intro}on {n_sites} sites; X has {self.n_features_in_} sites."
                + advice
            )
        states = previous["states"]
        if not np.array_equal(self.states_, states):
            source = " (its alphabet)" if self._string_input else ""
            raise ValueError(
                f"{intro}whose states_ were {states.tolist()}; X has the states "
                f"{self.states_.tolist()}{source}.{advice}"
            )

    def _fitted_parameters(self, parametrization):
        """The last fit's parameter vector, as ``parametrization`` lays it out."""
        previous = self._last_fit
        if isinstance(parametrization, FullCouplings):
            return parametrization.parameters(
                self._fitted_couplings, previous["fields"]
            )
        return np.concatenate(
            [previous[name].ravel() for name in ("fields", "logits", "values")]
        )

    # -- predictions ----------------------------------------------------------
    def _log_conditionals(self, X):
        """``(log_p, codes, device)``, the first two on the compute device."""
        check_is_fitted(self)
        device = resolve_device(self.device, X)
        codes, _ = self._encode(to_host(X), reset=False)
        q = self.states_.size
        L = self.n_sites_
        xp = device.xp
        with device.activate():
            codes = to_device(codes, device)
            couplings = self._cached_on("couplings_", device)
            log_p = log_conditionals(
                one_hot(codes, q, xp),
                couplings.reshape(L * q, L * q),
                self._cached_on("fields_", device),
                xp,
            )
        return log_p, codes, device

    def sample(self, n_samples=1, *, burn_in=200, thin=10, random_state=None):
        """Draw sequences from the fitted conditionals by Gibbs sampling.

        Parameters
        ----------
        n_samples : int, default=1
            Number of sequences.
        burn_in : int, default=200
            Sweeps discarded before the first sample of each chain.
        thin : int, default=10
            Sweeps between two samples of the same chain.
        random_state : int, RandomState instance or None, default=None
            Seed; ``None`` uses the estimator's ``random_state``.

        Returns
        -------
        X : ndarray of shape (n_samples, n_sites)
            Entries of ``states_``. With a non-symmetric (factored) model the
            chain's stationary law has these conditionals only approximately.
        """
        check_is_fitted(self)
        seed = self.random_state if random_state is None else random_state
        codes = gibbs_sample(
            self.couplings_,
            self.fields_,
            n_samples,
            burn_in=burn_in,
            thin=thin,
            random_state=seed,
            device=self.device,
        )
        return self.states_[codes]

    def contact_scores(
        self, *, apc_correction=True, gauge="zero-sum", exclude_states=None
    ):
        """Coupling strength of every pair of sites, for contact prediction.

        Parameters
        ----------
        apc_correction : bool, default=True
            Apply the average-product correction ``F_ij - F_i F_j / F``.
        gauge : {"zero-sum", "fitted"}, default="zero-sum"
            Score ``couplings_`` (zero-sum gauge), or the couplings in the gauge
            chosen by the penalty, as plmc does.
        exclude_states : state, sequence of states or None, default=None
            States left out of the Frobenius norms (e.g. ``["-"]`` for the
            gap): entries of ``states_``, one or several; a str is read as its
            characters, and an empty sequence leaves out nothing. A state the
            model does not know raises a ``ValueError`` that lists
            ``states_``; a nested sequence raises a ``TypeError``.

        Returns
        -------
        scores : ndarray of shape (n_sites, n_sites)
            Symmetric, zero diagonal; Frobenius norms of the ``q x q`` blocks.
        """
        check_is_fitted(self)
        if not isinstance(apc_correction, (bool, np.bool_)):
            raise TypeError(
                f"apc_correction must be True or False; got {apc_correction!r}."
            )
        if gauge not in ("zero-sum", "fitted"):
            raise ValueError(f"gauge must be 'zero-sum' or 'fitted'; got {gauge!r}.")
        couplings = self.couplings_ if gauge == "zero-sum" else self._fitted_couplings
        excluded = None
        if exclude_states is not None:
            excluded = self._state_indices(exclude_states, "exclude_states") or None
        scores = frobenius_scores(couplings, exclude_states=excluded)
        return apc(scores) if apc_correction else scores

    def _state_indices(self, states, name):
        """Positions in ``states_`` of a state or a sequence of states."""
        if isinstance(states, str):  # a string of states, one per character
            items = list(states)
        elif isinstance(states, np.ndarray):
            items = states.tolist() if states.ndim else [states.item()]
        elif isinstance(states, Iterable) and not isinstance(states, bytes):
            items = list(states)
        else:  # a single state
            items = [states]
        known = self.states_.tolist()
        position = {state: k for k, state in enumerate(known)}
        indices = []
        for state in items:
            if isinstance(state, np.generic):
                state = state.item()
            if isinstance(state, (list, tuple, set, dict, np.ndarray)):
                raise TypeError(
                    f"{name} must be a state or a flat sequence of states (entries "
                    f"of states_ = {known}); found a {type(state).__name__} "
                    f"({state!r})."
                )
            try:
                index = position.get(state)
            except TypeError:  # unhashable: cannot be a state
                index = None
            if index is None:
                raise ValueError(
                    f"{name} must hold states of the model, i.e. entries of "
                    f"states_ = {known}; {state!r} is not one of them."
                )
            indices.append(index)
        return indices
