"""Tests of the benchmark harness (benchmarks/): the package's unit tests never
import benchmark code."""
