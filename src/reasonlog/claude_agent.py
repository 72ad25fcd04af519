"""`from reasonlog.claude_agent import ClaudeAgentLogger`: record Claude Agent SDK sessions."""
from .capture.claude_agent import ClaudeAgentLogger, message_dict

__all__ = ["ClaudeAgentLogger", "message_dict"]
