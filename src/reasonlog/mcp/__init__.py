"""`reasonlog mcp`: the archive offered to agents through the Model Context Protocol (docs/mcp.md)."""
from __future__ import annotations

import functools


@functools.cache
def available() -> bool:
    """Whether the `mcp` extra is installed (asked before anything of the SDK, or pydantic, is imported)."""
    try:
        import mcp.server  # noqa: F401
    except ImportError:
        return False
    return True
