"""LangChain integration: `ReasonlogCallback`, a callback handler that records chat-model calls and tool runs.

    from reasonlog.langchain import ReasonlogCallback
    handler = ReasonlogCallback(recorder, agent="trader")
    model.invoke(messages, config={"callbacks": [handler]})

Needs `langchain-core`; `import reasonlog` itself never imports it.
"""
try:
    import langchain_core  # noqa: F401  (checked first, to name the missing package clearly)
except ImportError as exc:  # pragma: no cover - exercised by a subprocess test
    raise ImportError("reasonlog.langchain needs LangChain: pip install langchain-core") from exc

from .capture.langchain import ReasonlogCallback

__all__ = ["ReasonlogCallback"]
