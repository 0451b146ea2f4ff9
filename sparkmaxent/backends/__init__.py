"""How a pass runs: in-process or on Spark. Only this package and io code import pyspark."""
from .base import Backend, merge_all
from .local import LocalBackend

__all__ = ["Backend", "LocalBackend", "merge_all"]
