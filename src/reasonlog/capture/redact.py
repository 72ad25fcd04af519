"""The redactor, where capture's modules and older callers import it from (it lives in `reasonlog.redact`)."""
from ..redact import DEFAULT_PATTERNS, Redactor

__all__ = ["DEFAULT_PATTERNS", "Redactor"]
