"""Token arrays scored by MLlib's own models: a ``CountVectorizerModel``
over the model's vocabulary, then its ``LogisticRegressionModel``.

An ``array<string>`` row's features are its tokens; the predicates a
multiclass model without conjunctions weights are names, and its scores
are linear in their values (``Scorer.linear``). So the model's predicates
with a non-zero weight, in the order of ``Scorer.names`` (the
label-independent predicate index), are a vocabulary: MLlib's
``CountVectorizerModel.from_vocabulary`` turns the tokens into a Vector
over it, a token outside it adding nothing, repeats counted as
``prepare`` sums them (``binary=True`` for a model trained on binary
predicates: a token's presence, as ``prepare(binary=True)``), and the
model's MLlib form over that index space (ml/mllib.py's centered
coefficients and intercepts: equal rawPrediction, probability and
prediction) scores the Vector. Both run in the JVM with no Python
worker. A null array scores as an empty one (the vectoriser alone would
fail on it), as the other scorers do.

Under Spark Connect the vectoriser is built on the server
(``from_vocabulary`` has a Connect form) and the logistic model through
storage (ml/mllib_stored.py); with no location to write it, the caller
scores in SQL (ml/sql.py). What has no such form raises
:class:`NotMLlib` naming why: conjunction features, fewer than two
classes, a zero threshold, a model with no non-zero weight (an empty
vocabulary, which ``CountVectorizerModel`` refuses). ``sqlExpression``
is unaffected: it stays the SQL text for SQL users.
"""

from __future__ import annotations

import logging

import numpy as np

from .mllib import _outputs, built_model, centered_form, refuse
from .mllib_stored import NotMLlib, released_at_exit
from .scoring import Scorer

log = logging.getLogger(__name__)

#: the columns transform hands MLlib: the tokens (a null row as an empty
#: array) and their Vector over the model's vocabulary
_TOKENS, _VECTOR = "__sparkmaxent_tokens", "__sparkmaxent_token_vector"


def vocabulary_form(scorer: Scorer) -> tuple[list[str], tuple]:
    """(vocabulary, (coefficients, intercepts)): the model's predicates with
    a non-zero weight in ``Scorer.names`` order, and MLlib's form of the
    model over Vectors whose index j is vocabulary[j] (module docstring);
    NotMLlib when there is none."""
    refuse(scorer, 1, values=False)  # the vectoriser's values are counts or presence
    W, _ = scorer.linear()
    rows = np.flatnonzero(np.any(W != 0, axis=1))
    if not len(rows):
        raise NotMLlib("the model has no non-zero weight: its vocabulary would be empty")
    names = scorer.names.to_pylist()
    vocabulary = [names[j] for j in rows]
    form = centered_form(scorer, rows, np.arange(len(rows)), len(rows))
    return vocabulary, form


def text_models(model):
    """(``CountVectorizerModel``, ``LogisticRegressionModel`` with the
    model's output Params and thresholds) scoring ``model``'s token arrays
    (module docstring); both kept on the model under its weights, binary
    setting and session, built again when they change."""
    from pyspark.ml.feature import CountVectorizerModel

    scorer = model.scorer()
    spark = model.spark_session()
    key = (id(model.maxentModel), scorer.binary, getattr(spark, "session_id", id(spark)))
    cached = getattr(model, "_text_mllib", None)
    if cached is None or cached[0] != key:
        vocabulary, form = vocabulary_form(scorer)
        vectorizer = released_at_exit(
            CountVectorizerModel.from_vocabulary(
                vocabulary, inputCol=_TOKENS, outputCol=_VECTOR, binary=scorer.binary
            )
        )
        size = len(vocabulary)
        lr = built_model(model, "_text_mllib_lr", size, lambda: form)
        cached = (key, vectorizer, lr)
        model._text_mllib = cached
    return cached[1], _outputs(cached[2].copy(), model, _VECTOR)


def text_transform(model, dataset, features_col: str, required: bool):
    """``dataset`` (an ``array<string>`` ``features_col``) scored by
    :func:`text_models` (every column, then rawPrediction, probability and
    prediction as MLlib adds them), or None with a log line when the model
    or session does not allow it (``required``: raise NotMLlib instead)."""
    from pyspark.sql import functions as F

    try:
        vectorizer, lr = text_models(model)
    except NotMLlib as why:
        if required:
            raise
        log.info("transform scores the tokens without MLlib's models: %s", why)
        return None
    tokens = F.coalesce(F.col(features_col), F.array().cast("array<string>"))
    vectors = vectorizer.transform(dataset.withColumn(_TOKENS, tokens))
    return lr.transform(vectors).drop(_TOKENS, _VECTOR)


__all__ = ["text_models", "text_transform", "vocabulary_form"]
