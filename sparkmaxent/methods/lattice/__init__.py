"""Mikheev's feature collocation lattice (1998): the empirical lattice
(build), selection by frequency redistribution (select), generalization by
constraint removal (generalize), and the training method (method)."""
