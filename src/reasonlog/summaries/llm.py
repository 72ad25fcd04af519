"""LLM summarizers: Anthropic's Messages API, or Chat Completions on any OpenAI-protocol server (OpenAI, vLLM,
Ollama, ... through `base_url`), through the provider SDKs.

Each call the summarizer makes is recorded by reasonlog itself, in a session of the run `RUN`, so what
summaries cost shows up in `reasonlog stats --by run` and never inside the sessions summarised. A reply that
is empty, refused or cut at the token limit is a failure: a half summary is not stored as a summary.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any

from .targets import Target, transcript
from .terms import RUN, Provenance, SummaryError

VERSION = "llm-1"
MAX_TOKENS = 300
DEFAULT_MODELS = {"anthropic": "claude-haiku-4-5", "openai": "gpt-5-mini"}
SAME = "same"  # --model same: the model that produced the session
DEFAULT_PROMPT = """Summarise this {kind} of an AI agent for a person who will read the full text only if they need to.
In at most three sentences, say what the agent decided and did: the actions it took with their numbers
(amounts, prices, files), the tools it called and what came of them, and anything that failed. Plain text,
no preamble, no lists.

{transcript}"""


def prompt_hash(template: str) -> str:
    return hashlib.blake2b(template.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def check_prompt(template: str, where: str = "prompt") -> str:
    """The template, if it has the `{transcript}` placeholder the target's text goes in; else a ValueError."""
    if "{transcript}" not in template:
        raise ValueError(f"{where}: expected a template containing {{transcript}} (and optionally {{kind}})")
    return template


class LLMSummarizer:
    """Summaries written by a model. `provider` is "anthropic" or "openai" (any OpenAI-protocol server).

    `model`: the model to ask, or "same" for the model of each session (default: a small model of the
    provider). `base_url`: another server (a local vLLM or Ollama). `prompt`: a template with `{transcript}`
    and optionally `{kind}`. `db`: where the summarizer's own calls are recorded (None: not recorded, for
    callers that record them elsewhere).
    """

    def __init__(self, provider: str, *, db: str | None = None, model: str | None = None,
                 base_url: str | None = None, prompt: str | None = None, api_key: str | None = None,
                 max_retries: int = 2, timeout_s: float = 60.0):
        if provider not in DEFAULT_MODELS:
            raise ValueError(f"provider: expected anthropic or openai, got {provider!r}")
        self.name = provider
        self.model = model or DEFAULT_MODELS[provider]
        self.base_url = base_url
        self.template = check_prompt(prompt) if prompt is not None else DEFAULT_PROMPT
        self.prompt_hash = prompt_hash(self.template)
        self.client = _client(provider, base_url, api_key, max_retries, timeout_s)
        self._db = db
        self._recorder: Any = None
        self._session: Any = None

    def provenance(self, target: Target) -> Provenance:
        return Provenance(self.name, self._model_for(target), self.prompt_hash, VERSION)

    def _model_for(self, target: Target) -> str | None:
        return target.model if self.model == SAME else self.model

    def prompt(self, target: Target) -> str:
        return self.template.replace("{kind}", target.kind).replace("{transcript}", transcript(target))

    def estimate(self, target: Target) -> tuple[int, int] | None:
        """About four characters a token for the prompt; the reply at its limit."""
        return len(self.prompt(target)) // 4 + 1, MAX_TOKENS

    def summarize(self, target: Target) -> str:
        model = self._model_for(target)
        if not model:
            raise SummaryError(f"session {target.session_id} names no model to summarise it with; pass --model")
        self._record()
        try:
            if self.name == "anthropic":
                return _anthropic_text(self.client, model, self.prompt(target))
            return _openai_text(self.client, model, self.prompt(target), local=self.base_url is not None)
        except SummaryError:
            raise
        except Exception as exc:  # noqa: BLE001 - the SDKs' errors (status, connection, timeout) become the summary's
            raise SummaryError(f"{type(exc).__name__}: {exc}") from None

    def _record(self) -> None:
        """Open the summarizer's own session on its first call, and record the client's calls there."""
        if self._session is not None or self._db is None:
            return
        from ..capture import Recorder, instrument_anthropic, instrument_openai

        self._recorder = Recorder(self._db, writer="sync")
        self._session = self._recorder.session(agent=f"summarizer-{self.name}", run=RUN, provider=self.name,
                                               model=None if self.model == SAME else self.model,
                                               labels={"purpose": "summaries"})
        instrument = instrument_anthropic if self.name == "anthropic" else instrument_openai
        instrument(self.client, self._recorder, session=self._session)

    def close(self) -> None:
        if self._session is not None:
            self._session.end()
            self._recorder.close()
            self._session = self._recorder = None


def _client(provider: str, base_url: str | None, api_key: str | None, max_retries: int, timeout_s: float) -> Any:
    options: dict[str, Any] = {"max_retries": max_retries, "timeout": timeout_s}
    if base_url:
        options["base_url"] = base_url
    env = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
    key = api_key or os.environ.get(env)
    if not key and not base_url:
        raise ValueError(f"--summarizer {provider}: set {env} (or pass --base-url for a local server)")
    options["api_key"] = key or "unused"  # local OpenAI-protocol servers (Ollama, vLLM) take any key
    try:
        if provider == "anthropic":
            import anthropic

            return anthropic.Anthropic(**options)
        import openai

        return openai.OpenAI(**options)
    except ImportError:
        raise ValueError(f"--summarizer {provider} needs its SDK: pip install {provider}") from None


def _anthropic_text(client: Any, model: str, prompt: str) -> str:
    message = client.messages.create(model=model, max_tokens=MAX_TOKENS,
                                     messages=[{"role": "user", "content": prompt}])
    text = "".join(getattr(b, "text", "") for b in message.content if b.type == "text").strip()
    return _checked(text, message.stop_reason, cut="max_tokens", refused="refusal")


def _openai_text(client: Any, model: str, prompt: str, local: bool) -> str:
    # OpenAI's own API wants max_completion_tokens (its reasoning models refuse max_tokens); servers that speak
    # the protocol locally (vLLM, Ollama) all take max_tokens.
    limit = {"max_tokens": MAX_TOKENS} if local else {"max_completion_tokens": MAX_TOKENS}
    result = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}], **limit)
    if not result.choices:
        raise SummaryError("the reply had no choices")
    choice = result.choices[0]
    if getattr(choice.message, "refusal", None):
        raise SummaryError(f"the model refused: {choice.message.refusal}")
    return _checked((choice.message.content or "").strip(), choice.finish_reason, cut="length",
                    refused="content_filter")


def _checked(text: str, stop: str | None, *, cut: str, refused: str) -> str:
    if stop == cut:
        raise SummaryError(f"the reply was cut at {MAX_TOKENS} tokens (stop reason {stop}); not stored as a summary")
    if stop == refused:
        raise SummaryError(f"the model refused (stop reason {stop})")
    if not text:
        raise SummaryError(f"the reply had no text (stop reason {stop})")
    return text
