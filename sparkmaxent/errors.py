"""The errors a user can act on, each with its exit code (sparkmaxent/cli.py).
Any other exception is an internal error: exit 1, logged with its traceback."""


class InputError(ValueError):
    """Bad input data, paths or model files; the message names the file and
    line (or column) where it can."""


class ConfigError(ValueError):
    """A configuration value, key or file that cannot be used; the message
    names the key."""


class NumericError(ArithmeticError):
    """Training met a non-finite loss, gradient or objective: no model is
    saved (exit 5). The message says where and what to check."""


class UnconvergedError(RuntimeError):
    """A training run stopped without meeting its own criterion: an
    optimizer did not converge or the KKT certificate failed (exit 4,
    unless --allow-unconverged or output.allow_unconverged; a run ended by
    train.selection.max_rounds or max_seconds is not). The model and report
    are saved first, so the run can be inspected (or resumed); the message
    lists the reasons."""


class StalledError(RuntimeError):
    """A Spark pass was cancelled by the backend's watchdog: the cluster had
    no executors for spark.no_executor_timeout_s, or the pass outran
    spark.pass_timeout_s (exit 6). The message says which pass and why; a
    selection run continues from its last checkpoint with --resume."""


#: What a NumericError suggests checking, whichever pass it comes from.
NUMERIC_HINT = (
    "check the feature values' magnitudes (prepare refuses |value| > 1e12, but "
    "large values still make a model ill-conditioned), try train.standardize = true, "
    "or raise the regularization (train.l2, train.grafting.l1)"
)


def check_finite(where: str, **quantities) -> None:
    """Raise NumericError unless every quantity (a number or an array; None
    is skipped) is finite; ``where`` names the method and pass, e.g.
    ``"loss+gradient pass"``. The one check every pass result goes through."""
    import numpy as np

    bad = [
        name
        for name, value in quantities.items()
        if value is not None and not np.all(np.isfinite(np.asarray(value, dtype=np.float64)))
    ]
    if bad:
        raise NumericError(f"{where}: non-finite {', '.join(bad)} (no model saved); {NUMERIC_HINT}")


def check_total_weight(weight: float) -> float:
    """``weight`` (W, the total event weight every sum of a pass is divided
    by), or an InputError when it is not positive (no events, or all of weight 0)."""
    if not weight > 0:
        raise InputError("the training events have zero total weight")
    return weight
