"""What the proxy recognises in a request: which provider protocol a path speaks, where it goes upstream, and
which headers may be written down.

A model call is a POST to one of the four protocols' paths; everything else (`/v1/models`, token counting,
health checks) is forwarded without being recorded. The upstream is chosen per provider; a path that names none
goes where its headers point (an Anthropic or Google key header), else to the OpenAI upstream.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..providers import OPENAI_CHAT, PROTOCOLS, Provider

UPSTREAMS = {p.name: p.base_url for p in PROTOCOLS}  # anthropic, openai, google
PROVIDERS = tuple(UPSTREAMS)
BY_NAME = {p.name: p for p in reversed(PROTOCOLS)}  # a provider's first protocol speaks for it (its errors)

# Hop-by-hop headers (RFC 9110 7.6.1) and the length, which the proxy's own connections carry.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "host", "content-length"})
# Headers that carry a credential: never written, never logged. A header whose name says key, token, secret,
# auth, cookie or session-token is treated as one too.
CREDENTIAL_HEADERS = frozenset({h for p in PROTOCOLS for h in p.key_headers} | {
    "api-key", "cookie", "set-cookie", "proxy-authorization", "openai-organization", "openai-project",
    "chatgpt-account-id"})
_CREDENTIAL_WORDS = ("key", "token", "secret", "auth", "cookie", "password", "signature", "credential")


@dataclass(frozen=True, slots=True)
class Route:
    """A model call's protocol, whether it streams, and the model its path names."""

    protocol: Provider
    path: str
    path_streams: bool = False
    model: str | None = None

    @property
    def provider(self) -> str:
        return self.protocol.name


def route_of(method: str, path: str) -> Route | None:
    """The model call a request is, or None for any other request (forwarded, not recorded)."""
    if method != "POST":
        return None
    bare = path.split("?", 1)[0].rstrip("/")
    found = next((p for p in PROTOCOLS if bare.endswith(p.path_suffixes)), None)
    return None if found is None else Route(found, path, found.path_streams(bare), found.path_model(bare))


def provider_of(route: Route | None, path: str, headers: dict[str, str]) -> str:
    """Which provider's upstream a request goes to."""
    if route is not None:
        return route.provider
    return next((p.name for p in PROTOCOLS if any(h in headers for h in p.client_headers)
                 or path.startswith(p.path_prefixes)), OPENAI_CHAT.name)


def parse_upstreams(given: tuple[str, ...] | list[str]) -> dict[str, str]:
    """`--upstream URL` (every provider) and `--upstream NAME=URL` into a map by provider; ValueError naming the
    value it cannot read."""
    chosen = dict(UPSTREAMS)
    for value in given:
        name, sep, url = value.partition("=")
        if sep and not name.startswith(("http://", "https://")):
            if name not in UPSTREAMS:
                raise ValueError(f"--upstream {value}: expected NAME=URL with NAME one of {', '.join(PROVIDERS)}")
            chosen[name] = _url(url, value)
        else:
            chosen = dict.fromkeys(UPSTREAMS, _url(value, value))
    return chosen


def _url(url: str, given: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"--upstream {given}: expected an http:// or https:// URL")
    return url.rstrip("/")


def is_credential(name: str) -> bool:
    """Whether a header (its name lowercased) may carry a credential."""
    return name in CREDENTIAL_HEADERS or any(word in name for word in _CREDENTIAL_WORDS)


def recordable_headers(headers: dict[str, str]) -> dict[str, str]:
    """The request headers that may be written down: no credential, nothing hop-by-hop."""
    return {k: v for k, v in headers.items() if not is_credential(k) and k not in HOP_BY_HOP}


def error_body(provider: str, status: int, kind: str, message: str) -> dict:
    """An error as the provider's own clients read one (its SDKs show `message`)."""
    return BY_NAME.get(provider, OPENAI_CHAT).error_body(status, kind, message)
