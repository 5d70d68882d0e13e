"""MATCH_RECOGNIZE (seed 001): row pattern recognition on Spark.

``spec`` holds the clause as plain objects (``kit.sql`` parses them from Flink SQL);
``match_recognize(table, spec, semantics)`` runs it (``operator``) with the matcher of the
chosen semantics (``matcher``: Flink's CEP NFA in ``flink``, the SQL standard's thread VM;
``compiled``: Flink's NFA in the JVM, for a large input and the queries it takes);
``cep.CepOperator`` is Flink's CEP operator per element, for a driver that steps a key's rows.
"""

from . import spec
from .operator import SEMANTICS, MatchRecognizeWarning, MatchResult, match_recognize

__all__ = ["spec", "match_recognize", "MatchResult", "MatchRecognizeWarning", "SEMANTICS"]
