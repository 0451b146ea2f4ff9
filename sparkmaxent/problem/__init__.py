"""The optimization problem (driver side): the data fit over the blocks
(``objective``), the penalty (``penalty``) and the optimality certificate
(``kkt``)."""

from .kkt import Certificate, ConjunctionCheck, kkt_certificate, kkt_from_parts
from .objective import Evaluation, Objective
from .penalty import BoxProblem, Penalty, orthant_problem

__all__ = [
    "Objective",
    "Evaluation",
    "Penalty",
    "BoxProblem",
    "orthant_problem",
    "Certificate",
    "ConjunctionCheck",
    "kkt_certificate",
    "kkt_from_parts",
]
