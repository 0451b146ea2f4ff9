"""How a pass runs: in-process or on Spark. Only this package and io code import pyspark."""

from .base import Backend, merge_all
from .factory import make_backend
from .local import LocalBackend

# SparkBackend is not imported here, so importing the package needs no pyspark.
__all__ = ["Backend", "LocalBackend", "make_backend", "merge_all"]
