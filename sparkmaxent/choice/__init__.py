"""Model choice on held-out data (docs/methods/model-choice.md): criteria and
the best stage (heldout), the held-out stop rule (stop_rule), warm-started
penalty paths (path, points) and k-fold choice (folds)."""
