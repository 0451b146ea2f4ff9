"""sparkmaxent: sparse conditional maximum-entropy models with feature selection, on Spark."""

__version__ = "0.1.0"
