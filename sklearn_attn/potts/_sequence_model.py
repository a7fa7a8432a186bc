"""What the pseudo-likelihood models share: input, sequence weights, L-BFGS runs,
predictions.

:class:`_SequenceModelMixin` is the part of a model of single-site
conditionals that does not depend on how the conditionals are parametrised:
it reads aligned text or integer codes (``alphabet``, ``unknown_letters``,
``states``, and ``missing_state`` where a model has it), weights the
sequences of a fit, runs L-BFGS and keeps the best of
several starts, and answers the prediction methods from
``_log_conditionals(X)``. :class:`~sklearn_attn.PottsPseudoLikelihood` and
:class:`~sklearn_attn.potts.VanillaAttentionPseudoLikelihood` add their
parametrisations.
"""

from __future__ import annotations

import time
from numbers import Number

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import assert_all_finite, validate_data

from .._backend import limit_optimizer_blas, to_host, to_output
from .._lbfgs import minimize_lbfgs
from .._text import (
    ALPHABETS,
    codes_and_known,
    is_text,
    resolve_alphabet,
    text_codepoints,
    text_view,
    unknown_letter_message,
)
from .._validation import check_sample_weight
from .._warnings import warn_at_caller
from ._alignment import sequence_weights


def _is_auto(states):
    return isinstance(states, str) and states == "auto"


def _given_states(states):
    """The ``states`` parameter as a NumPy array of distinct increasing numbers."""
    try:
        array = np.asarray(states)
    except ValueError:
        array = None
    if (
        array is None
        or array.ndim != 1
        or array.dtype.kind not in "iuf"
        or array.size < 2
        or not np.all(np.isfinite(array))
        or not np.all(np.diff(array) > 0)
    ):
        raise ValueError(
            "states must be 'auto' or at least 2 distinct numbers in increasing "
            f"order (the values integer codes may take); got {states!r}."
        )
    return array


class _SequenceModelMixin:
    """Input, weights and predictions of a model of single-site conditionals.

    Shared by :class:`PottsPseudoLikelihood` and
    :class:`~sklearn_attn.potts.VanillaAttentionPseudoLikelihood`: aligned text or
    integer codes in (``alphabet``, ``unknown_letters``, ``states_``), the fit's
    sequence weights (``sample_weight`` or ``sequence_identity``), and the
    prediction methods, which read ``_log_conditionals(X)``.
    """

    # -- input ----------------------------------------------------------------
    #: A state read as missing data; models that offer it have the parameter.
    missing_state = None

    def _alphabet_string(self):
        return ALPHABETS.get(self.alphabet, self.alphabet)

    def _input_states(self):
        """The states ``X`` is read over: ``states_`` and the missing state."""
        return getattr(self, "_input_states_", self.states_)

    def _encode(self, X, *, reset):
        """``(codes, dropped)``: integer codes in ``0 .. n_states - 1``, shape
        (n, L), ``-1`` at missing sites, and the mask of the rows of ``X`` left
        out of them (or None)."""
        text = text_view(X)
        if is_text(text):
            codes, dropped = self._encode_text(text, reset=reset)
        else:
            codes, dropped = self._encode_codes(X, reset=reset), None
        return self._mark_missing(codes, reset=reset), dropped

    def _mark_missing(self, codes, *, reset):
        """Codes over ``states_``: the missing state's become ``-1``.

        In ``fit``, takes the missing state out of ``states_`` (the input's
        states stay in ``_input_states_``, to read the predictions' ``X``).
        """
        if reset:
            self._input_states_ = self.states_
            self._missing_code = None
            if self.missing_state is not None:
                self._missing_code = self._missing_index()
                self.states_ = np.delete(self.states_, self._missing_code)
                if self.states_.size < 2:
                    raise ValueError(
                        f"Besides missing_state={self.missing_state!r}, X has "
                        f"{self.states_.size} state(s); at least 2 are needed."
                    )
        missing = getattr(self, "_missing_code", None)
        if missing is None:
            return codes
        out = codes - (codes > missing)
        out[codes == missing] = -1
        return out

    def _missing_index(self):
        """Position of ``missing_state`` among the input's states."""
        missing = self.missing_state
        states = self.states_
        if self._string_input:
            if not (isinstance(missing, str) and len(missing) == 1):
                raise TypeError(
                    "missing_state must be one character of the alphabet for text "
                    f"input (such as '-', the gap); got {missing!r}."
                )
        elif isinstance(missing, (str, bytes)) or not isinstance(
            missing, (Number, np.generic)
        ):
            raise TypeError(
                "missing_state must be a number (one of the integer codes) for "
                f"integer codes; got {missing!r}."
            )
        where = np.flatnonzero(states == missing)
        if where.size:
            return int(where[0])
        if self._string_input or not _is_auto(self.states):
            source = "the alphabet" if self._string_input else "states"
            raise ValueError(
                f"missing_state={missing!r} is not one of the states of "
                f"{source}: {states.tolist()}."
            )
        # states='auto' from data without the missing state: nothing is
        # missing in fit, but predictions may meet it.
        position = int(np.searchsorted(states, missing))
        self.states_ = self._input_states_ = np.insert(
            states, position, np.asarray(missing, dtype=states.dtype)
        )
        return position

    def _encode_text(self, X, *, reset):
        if reset:
            if not _is_auto(self.states):
                raise ValueError(
                    "states applies to integer codes; X holds text, whose states "
                    f"are the alphabet's ({self.alphabet!r}). Leave states='auto', "
                    "or give integer codes."
                )
            alphabet = resolve_alphabet(self._alphabet_string())
        points = text_codepoints(X, name="X")
        if not reset:
            if not getattr(self, "_string_input", False):
                raise ValueError(
                    "X holds strings but the model was fitted on integer codes."
                )
            # The fitted states, not the parameter: predictions never depend on
            # an alphabet set after fit.
            alphabet = "".join(self._input_states())
        codes, known = codes_and_known(points, alphabet)
        unknown = ~known.all(axis=1)
        dropped = None
        if unknown.any() and self.unknown_letters != "gap":  # gap: code 0 already
            if self.unknown_letters == "drop" and reset:
                # plmc's rule: such sequences are left out of the fit.
                dropped = unknown
                codes = codes[~unknown]
                if not codes.size:
                    raise ValueError(
                        f"Every sequence of X has letters outside the alphabet "
                        f"{alphabet!r}; none is left to fit (unknown_letters="
                        "'drop'). Use unknown_letters='gap' to read them as gaps."
                    )
            else:
                message = unknown_letter_message(points, known, alphabet, "X")
                if self.unknown_letters == "drop":
                    message += (
                        " A prediction cannot drop a sequence (unknown_letters="
                        "'drop' drops them from fit only): set unknown_letters="
                        "'gap' to read such letters as gaps."
                    )
                raise ValueError(message)
        if reset:
            self.states_ = np.array(list(alphabet))
            self._string_input = True
        codes = validate_data(self, codes, reset=reset, dtype=None)
        if codes.shape[1] < 2:
            raise ValueError(f"X has {codes.shape[1]} site(s); at least 2 are needed.")
        return codes, dropped

    def _encode_codes(self, X, *, reset):
        if X is None or isinstance(X, (Number, np.generic)):
            raise TypeError(
                "X must be integer state codes of shape (n_samples, n_sites) or a "
                f"sequence of aligned strings; got {type(X).__name__} ({X!r})."
            )
        if isinstance(X, (list, tuple)):
            try:
                X = np.asarray(X)
            except ValueError:  # NumPy refuses ragged nested sequences
                lengths = [len(row) if hasattr(row, "__len__") else 1 for row in X]
                s = next((k for k, n in enumerate(lengths) if n != lengths[0]), None)
                why = (
                    "its rows are not flat sequences of numbers"
                    if s is None
                    else f"its rows have different lengths: X[{s}] has "
                    f"{lengths[s]} entries, but X[0] has {lengths[0]}"
                )
                raise ValueError(
                    "X must be integer state codes of shape (n_samples, n_sites); "
                    f"{why}."
                ) from None
        if isinstance(X, np.ndarray):
            if X.dtype.kind == "c":
                raise ValueError(  # scikit-learn's wording, then ours
                    f"Complex data not supported: X has dtype {X.dtype}, and must "
                    "hold integer state codes (or aligned strings with an "
                    "alphabet)."
                )
            if X.size == 0 and X.ndim < 2:
                raise ValueError(
                    "X is empty (0 sequences); give integer state codes of shape "
                    "(n_samples, n_sites) or a sequence of aligned strings."
                )
            if X.ndim != 2:
                raise ValueError(
                    "X must be integer state codes of shape (n_samples, n_sites) "
                    f"or a sequence of aligned strings; got an array of shape "
                    f"{X.shape}."
                    + (
                        " Reshape your data with X.reshape(1, -1) if it is a "
                        "single sequence."
                        if X.ndim == 1
                        else ""
                    )
                )
        try:
            X = validate_data(self, X, reset=reset, dtype=None, ensure_min_features=1)
        except ValueError as exc:
            if "0 feature(s)" not in str(exc):
                raise
            # scikit-learn's words (its checks look for them), and ours: an
            # empty row such as [[], []] may have been meant as text.
            raise ValueError(
                f"X has 0 sites: {exc} At least 2 sites are needed for a "
                "pseudo-likelihood."
            ) from None
        if X.dtype.kind in "US":
            raise ValueError(
                "X mixes integer codes and strings; give either integer state "
                "codes or aligned sequences, not both."
            )
        if X.dtype.kind == "O":
            try:
                X = X.astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    "X must hold integer state codes (or aligned strings with an "
                    "alphabet); its objects are not numbers."
                ) from exc
            assert_all_finite(X, input_name="X")  # None became NaN
        if X.dtype.kind not in "iub":
            if X.dtype.kind == "f":
                integral = X == np.round(X)
            else:
                integral = np.zeros(X.shape, dtype=bool)
            if not integral.all():
                row, col = np.argwhere(~integral)[0]
                raise ValueError(
                    "X must hold integer state codes (or aligned strings with an "
                    f"alphabet); got values of dtype {X.dtype} that are not "
                    f"integers, such as X[{row}, {col}] = {X[row, col].item()!r}."
                )
        if X.shape[1] < 2:
            raise ValueError(
                f"X has {X.shape[1]} site(s) ({X.shape[1]} feature(s)); at least 2 "
                "sites are needed for a pseudo-likelihood."
            )
        if reset:
            self._string_input = False
            if _is_auto(self.states):
                self.states_ = np.unique(X)
                if self.states_.size < 2:
                    raise ValueError(
                        f"X holds a single state ({self.states_[0]}); at least 2 "
                        "are needed."
                    )
            else:
                self.states_ = _given_states(self.states)
        elif getattr(self, "_string_input", False):
            raise ValueError(
                "X holds integer codes but the model was fitted on strings."
            )
        states = self.states_ if reset else self._input_states()
        codes = np.searchsorted(states, X)
        codes = np.minimum(codes, states.size - 1)
        unseen = states[codes] != X
        if np.any(unseen):
            row, col = np.argwhere(unseen)[0]
            raise ValueError(
                f"X contains state {X[row, col].item()!r} (sample {row}, site "
                f"{col}) that was "
                + (
                    "not seen in fit"
                    if _is_auto(self.states) or not reset
                    else "not given in states"
                )
                + f"; the states are {states.tolist()}."
            )
        return codes

    def _fit_weights(self, codes, dropped, sample_weight):
        """Distinct sequences and their weights for ``fit``.

        Sets ``n_eff_`` and ``n_sequences_dropped_``. Identical sequences
        contribute identical terms, so they are merged (and those of zero
        weight, which contribute nothing, dropped).
        """
        n_samples = codes.shape[0]
        self.n_sequences_dropped_ = 0 if dropped is None else int(dropped.sum())
        if dropped is None:
            weights = check_sample_weight(sample_weight, n_samples)
        else:
            weights = check_sample_weight(sample_weight, dropped.size)
            weights = None if weights is None else weights[~dropped]
        if weights is None:
            if self.sequence_identity is not None:
                # Two missing sites agree, as two gaps do in plmc's identity.
                n_states = self.states_.size
                weights = sequence_weights(
                    np.where(codes < 0, n_states, codes),
                    identity_threshold=self.sequence_identity,
                    n_states=n_states + 1,
                )
            else:
                weights = np.ones(n_samples)
        self.n_eff_ = float(weights.sum())
        if not self.n_eff_ > 0:
            raise ValueError(
                "The sequences kept for the fit have a total weight of "
                f"{self.n_eff_}; at least one positive sample_weight is needed."
            )
        positive = weights > 0
        codes, inverse = np.unique(codes[positive], axis=0, return_inverse=True)
        weights = np.bincount(
            inverse.ravel(), weights=weights[positive], minlength=len(codes)
        )
        return codes, weights

    # -- predictions ----------------------------------------------------------
    def predict_proba(self, X):
        """Conditional distribution of every site given the others.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_sites), or aligned text
            Integer codes if ``fit`` saw codes, text if it saw text (in any
            of the text forms ``fit`` accepts), with ``n_sites_`` sites.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_sites, n_states)
            ``proba[s, i, a] = p(s_i = states_[a] | rest of sequence s)``; a
            CuPy array when ``device=None`` and ``X`` is one.
        """
        log_p, _, device = self._log_conditionals(X)
        with device.activate():
            return to_output(device.xp.exp(log_p), device)

    def predict(self, X):
        """Most likely state of each site given the other sites.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_sites), or aligned text
            Integer codes if ``fit`` saw codes, text if it saw text (in any
            of the text forms ``fit`` accepts), with ``n_sites_`` sites.

        Returns
        -------
        states : ndarray of shape (n_samples, n_sites)
            Entries of ``states_``; a CuPy array when ``device=None`` and ``X``
            is one.
        """
        log_p, _, device = self._log_conditionals(X)
        with device.activate():
            best = log_p.argmax(axis=2)
            if device.return_device_arrays:  # integer codes in, so integer states
                return device.xp.asarray(self.states_)[best]
        return self.states_[to_host(best)]

    def score_samples(self, X):
        """Mean pseudo-log-likelihood per site of each sequence.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_sites), or aligned text
            Integer codes if ``fit`` saw codes, text if it saw text (in any
            of the text forms ``fit`` accepts), with ``n_sites_`` sites.

        Returns
        -------
        scores : ndarray of shape (n_samples,)
            ``(1 / L) sum_i log p(s_i | s_-i)``; a CuPy array when
            ``device=None`` and ``X`` is one. With a ``missing_state``, the
            mean over the sites present (NaN for a sequence with none).
        """
        log_p, codes, device = self._log_conditionals(X)
        xp = device.xp
        with device.activate():
            if getattr(self, "_missing_code", None) is None:
                picked = xp.take_along_axis(log_p, codes[:, :, None], axis=2)
                return to_output(picked[:, :, 0].mean(axis=1), device)
            present = codes >= 0
            picked = xp.take_along_axis(
                log_p, xp.maximum(codes, 0)[:, :, None], axis=2
            )[:, :, 0]
            with np.errstate(invalid="ignore", divide="ignore"):
                scores = (picked * present).sum(axis=1) / present.sum(axis=1)
            return to_output(scores, device)

    def score(self, X, y=None, sample_weight=None):
        """Mean pseudo-log-likelihood per site (higher is better).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_sites), or aligned text
            Integer codes if ``fit`` saw codes, text if it saw text (in any
            of the text forms ``fit`` accepts), with ``n_sites_`` sites.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Weights of the sequences.

        Returns
        -------
        score : float
            Weighted mean of :meth:`score_samples`.
        """
        scores = to_host(self.score_samples(X))
        weights = check_sample_weight(sample_weight, len(scores))
        return float(np.average(scores, weights=weights))

    # -- fitting --------------------------------------------------------------
    def _lbfgs_run(self, fun, x0, scale, **options):
        """One L-BFGS run of the per-site mean objective ``fun`` from ``x0``
        (an array, or a function that makes it: see :func:`minimize_lbfgs`).

        ``fun`` returns the objective divided by ``scale`` (the weight sum
        times the number of sites, so that tolerances mean the same at any
        size); the curve and the objective are reported in plmc's units.
        Returns the run: its parameters, objective, iterations, curve, and
        why it stopped short of ``tol`` (None when it did not).
        """
        curve = []
        start = time.perf_counter()

        def callback(iteration, x, value):
            curve.append(float(value * scale))
            if self.verbose and iteration % self.verbose == 0:
                print(
                    f"iteration {iteration}: objective {curve[-1]:.6g} "
                    f"({time.perf_counter() - start:.1f} s)"
                )

        with limit_optimizer_blas():
            result = minimize_lbfgs(
                fun,
                x0,
                max_iter=self.max_iter,
                ftol=self.tol,
                gtol=self.tol,
                callback=callback,
                **options,
            )
        stop = None
        if result.status == 1:  # a limit was reached before the tolerance
            if result.nit >= self.max_iter:
                stop = f"in max_iter={self.max_iter} L-BFGS iterations"
            else:
                stop = (
                    f"in {result.nfev} objective evaluations (the limit; "
                    f"{result.nit} of max_iter={self.max_iter} iterations done)"
                )
        return {
            "theta": result.x,
            "objective": float(result.fun * scale),
            "n_iter": int(result.nit),
            "curve": curve,
            "stop": stop,
        }

    def _keep_best_run(self, runs):
        """The run of lowest objective, kept as the fit: sets ``objective_``,
        ``init_objectives_``, ``best_init_``, ``n_iter_`` and ``loss_curve_``,
        and warns when it stopped short of ``tol``."""
        objectives = np.array([run["objective"] for run in runs])
        best = int(np.argmin(np.where(np.isfinite(objectives), objectives, np.inf)))
        run = runs[best]
        if run["stop"] is not None:
            kept = " (the kept start)" if len(runs) > 1 else ""
            warn_at_caller(
                f"{type(self).__name__}.fit did not converge {run['stop']}{kept}: "
                f"tol={self.tol} was not reached. Increase max_iter, or loosen tol.",
                ConvergenceWarning,
            )
        self.init_objectives_ = objectives
        self.best_init_ = best
        self.n_iter_ = run["n_iter"]
        self.objective_ = run["objective"]
        self.loss_curve_ = run["curve"]
        return run

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        tags.target_tags.required = False
        return tags
