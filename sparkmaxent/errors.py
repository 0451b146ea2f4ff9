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
