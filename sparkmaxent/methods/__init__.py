"""The training methods, one module (or package) per family, each named by
its entries in ``sparkmaxent/registry.py``: baselines, grafting (with its
gradient test: gradient_test, partials), combination, ifs, bayes, lattice/."""
