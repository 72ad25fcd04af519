"""What a secret looks like: the default patterns, and the rule that tells a key from base64 data.

A key is masked wherever it stands on its own in text: after a space, a quote, `=` or `:`, and also after `/`,
`_`, `-` or `+` (a URL path `/v1/<key>/data`, a name `MY_TOKEN_<key>`). The same prefixes occur by chance inside
base64 data (an image's `AIza`, a URL-safe blob's `sk-`), which must replay byte for byte. What tells them apart
is the run of base64 characters (`A-Za-z0-9+/_-`, and `=` as padding) around the match, on its line:
- a run that holds more than `DATA_RUN` characters besides the match is data (no URL segment or name is that long
  next to a key without a dot, a colon or a space);
- a run that is a line of wrapped base64 (64 or 76 wide, the widths of PEM and MIME, with a neighbouring line of
  that width) is data;
- a run with an `=` inside it (`KEY=<key>`, not padding at its end) is never data.
Patterns whose match holds a character base64 lacks (a space, a dot) cannot sit inside data and skip the rule.
"""
from __future__ import annotations

import itertools
import re

MAX = 256  # longer than any provider's key; a run this long is data, not a key
DATA_RUN = 64  # base64 characters besides the match that make its run data (see the module's docstring)
WRAPS = (64, 76)  # the widths base64 is wrapped at: PEM (RFC 7468) and MIME (RFC 2045)
_B64 = r"A-Za-z0-9+/_=\-"
_LEFT = re.compile(rf"[{_B64}]*\Z")
_RIGHT = re.compile(rf"[{_B64}]*")
_BREAK = re.compile(r"\r?\n|\\r\\n|\\n")  # a line break, raw or as a JSON escape (raw payload bytes)
_BREAK_BEFORE = re.compile(r"(?:\r?\n|\\r\\n|\\n)\Z")

# Not after a letter or digit, and not followed by one: a key glued into a word is a word. A JSON escape
# (`\n`, `\t`, `\u001b`) ends with a letter or digit but stands for a separator: raw payload bytes hold them.
BEFORE = r"(?:(?<![A-Za-z0-9])|(?<=\\[nrtbf])|(?<=\\u[0-9A-Fa-f]{4}))"
AFTER = r"(?![A-Za-z0-9])"


def token(body: str) -> str:
    """`body` as a whole token (see BEFORE and AFTER)."""
    return BEFORE + body + AFTER


def with_digit(charset: str) -> str:
    """A lookahead that a digit follows within a key's length: keys are random, hyphenated words are not."""
    return rf"(?=[{charset}]{{0,{MAX}}}\d)"


_SEP = r"(?:\s|\\[nrt])"  # whitespace, or its JSON escape
_BEARER = r"A-Za-z0-9\-._~+/"
_TOKENISH = (rf"(?:{with_digit(_BEARER)}|(?=[{_BEARER}]{{0,{MAX}}}[A-Z])(?=[{_BEARER}]{{0,{MAX}}}[a-z]))")
_PEM_CHUNK = r"(?:[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9+/]{1,15}={1,2}|(?:Proc-Type|DEK-Info|Comment):[^\n\r\\\"]*)"



def spellings(word: bytes) -> tuple[bytes, ...]:
    """Every spelling of an ASCII word in upper and lower case letters ("ecret": "ecret", "ecreT", ... "ECRET")."""
    return tuple(bytes(p) for p in itertools.product(*((c, c ^ 0x20) if chr(c).isalpha() else (c,) for c in word)))


# The words of the two patterns spelt in any case (`(?i:...)`: aws_secret_key's "secret", bearer_token's "bearer").
ANY_CASE_WORDS = (b"ecret", b"earer")
# Each default pattern needs one of LITERALS to match: a substring test (fast, in C) over the text decides
# whether the regex (slow, in Python's engine) runs at all. The words spelt in any case are there in every spelling:
# with only "ecret" and "ECRET", "SeCrEt_AcCeSs_KeY = <key>" held no literal and its key was stored as written.
LITERALS = (b"sk-", b"AIza", b"AKIA", b"ASIA", b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_",
            b"xox", b"hf_", b"gsk_", b"xai-", b"k_live_", b"k_test_", b"eyJ", b"PRIVATE KEY",
            *(spelling for word in ANY_CASE_WORDS for spelling in spellings(word)))
DEFAULT_PATTERNS: dict[str, str] = {
    "anthropic_key": token(rf"sk-ant-{with_digit('A-Za-z0-9_-')}[A-Za-z0-9_\-]{{20,{MAX}}}"),
    "openai_key": token(rf"sk-(?:proj-|svcacct-|admin-)?{with_digit('A-Za-z0-9_-')}[A-Za-z0-9_\-]{{20,{MAX}}}"),
    "google_api_key": token(r"AIza[0-9A-Za-z_\-]{35}"),
    "aws_access_key": token(r"(?:AKIA|ASIA)[0-9A-Z]{16}"),
    # The secret half of an AWS key pair has no prefix: only its label says what it is. The label stays.
    "aws_secret_key": BEFORE + r"(?i:(?:aws[_\-. ]?)?secret[_\-. ]?access[_\-. ]?key)[\"']?\s*(?:[:=]|=>)\s*"
                      r"[\"']?(?P<SECRET>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
    "github_token": token(rf"(?:gh[pousr]_[A-Za-z0-9]{{36,{MAX}}}|github_pat_[A-Za-z0-9_]{{22,{MAX}}})"),
    "slack_token": token(rf"xox[abprs]-{with_digit('A-Za-z0-9-')}[A-Za-z0-9\-]{{10,{MAX}}}"),
    "huggingface_token": token(rf"hf_[A-Za-z0-9]{{30,{MAX}}}"),
    "groq_key": token(rf"gsk_[A-Za-z0-9]{{20,{MAX}}}"),
    "xai_key": token(rf"xai-[A-Za-z0-9]{{20,{MAX}}}"),
    "stripe_key": token(rf"[rs]k_(?:live|test)_[A-Za-z0-9]{{16,{MAX}}}"),
    "jwt": token(r"eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"),
    # A credential holds a digit or mixes cases; prose after "bearer" ("bearer instruments") does neither.
    "bearer_token": BEFORE + r"(?i:bearer)" + _SEP + "+" + _TOKENISH
                    + r"[A-Za-z0-9\-._~+/]{16,}=*(?![A-Za-z0-9\-._~+/=])",
    # The block through its END line, or, without one, through the base64 lines that follow BEGIN. Its body
    # holds no quote, so it never runs from one JSON string into the next.
    "private_key": rf"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:{_SEP}+{_PEM_CHUNK})*"
                   rf"(?:{_SEP}*-----END [A-Z0-9 ]*PRIVATE KEY-----)?",
}
# The patterns whose whole match is spelt in base64's alphabets: only they can occur inside base64 data.
DATA_SHAPED = frozenset({"anthropic_key", "openai_key", "google_api_key", "aws_access_key", "github_token",
                         "slack_token", "huggingface_token", "groq_key", "xai_key", "stripe_key"})
# The first character of every default pattern. Python's engine tries each alternative at each position;
# one class test in front rejects most positions at once.
STARTS = r"(?=[sSAagxhreBb\-])"
# The default patterns each literal stands for, and each pattern's first characters. A string holding only some
# literals is searched with only their patterns (`Redactor.text`): the others cannot match in it. Prose passes
# the literal test through "secret" and "bearer", and the two patterns of those words alone search it ten times
# faster than all of them. The two spelt in any case (`(?i:...)`: "SeCrEt", "BeArEr" hold no literal) are in
# every search, so a string with any literal is masked exactly as by every pattern.
PATTERNS_OF = {b"sk-": ("anthropic_key", "openai_key"), b"AIza": ("google_api_key",),
               b"AKIA": ("aws_access_key",), b"ASIA": ("aws_access_key",), b"ghp_": ("github_token",),
               b"gho_": ("github_token",), b"ghu_": ("github_token",), b"ghs_": ("github_token",),
               b"ghr_": ("github_token",), b"github_pat_": ("github_token",), b"xox": ("slack_token",),
               b"hf_": ("huggingface_token",), b"gsk_": ("groq_key",), b"xai-": ("xai_key",),
               b"k_live_": ("stripe_key",), b"k_test_": ("stripe_key",), b"eyJ": ("jwt",),
               b"PRIVATE KEY": ("private_key",)}
ANY_CASE = ("aws_secret_key", "bearer_token")
FIRST = {"anthropic_key": "s", "openai_key": "s", "google_api_key": "A", "aws_access_key": "A",
         "aws_secret_key": "aAsS", "github_token": "g", "slack_token": "x", "huggingface_token": "h", "groq_key": "g",
         "xai_key": "x", "stripe_key": "rs", "jwt": "e", "bearer_token": "bB", "private_key": "\\-"}
# A password in a URL's userinfo, of any scheme (`postgresql://alice:<password>@host/db`, RFC 3986 3.2.1): the
# password is masked, the scheme, user, host, port and path stay. It runs up to the last `@` before the path, as
# URL parsers read it (a raw `@` in a password is common), and never across a space, a quote or a backslash (a
# JSON escape). The pattern starts with its literal `://`, which the engine searches for fast; text without both
# `://` and `@` is not searched at all (see `Redactor.text`). A password already masked is left as it is.
URL_PASSWORD = re.compile(r"://(?<=[A-Za-z0-9+.\-]://)[^\s:/?#@\"\\<>\[\]]{0,256}:"
                          r"(?P<SECRET>(?!\[REDACTED:)[^\s/?#\"\\<>]{1,1024})@")
URL_KIND = "url_password"

# A JSON object's key that says its value is an AWS secret access key (`{"SecretAccessKey": "..."}`).
AWS_SECRET_NAME = re.compile(r"(?i)(?:aws[_\-. ]?)?secret[_\-. ]?access[_\-. ]?key")
AWS_SECRET_VALUE = re.compile(r"[A-Za-z0-9/+]{40}")


def in_base64_data(text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]` lies inside base64 data rather than standing as a key of its own."""
    left = _LEFT.search(text, max(0, start - DATA_RUN - 1), start)
    lo = left.start() if left else start
    hi = _RIGHT.match(text, end, end + DATA_RUN + 1).end()  # type: ignore[union-attr]  # `*` always matches
    run = text[lo:hi]
    if "=" in run.rstrip("="):
        return False  # `NAME=<key>`: base64 has `=` only as padding at its end
    if (start - lo) + (hi - end) > DATA_RUN:
        return True
    return _wrapped_line(text, lo, hi)


def _wrapped_line(text: str, lo: int, hi: int) -> bool:
    """Whether `text[lo:hi]` is a line of base64 wrapped at one of WRAPS: a neighbouring line of that width
    (the line itself full width, or the last, shorter one)."""
    width = hi - lo
    before = _BREAK_BEFORE.search(text, max(0, lo - 4), lo)
    if before is not None:
        prev = _LEFT.search(text, max(0, before.start() - max(WRAPS) - 1), before.start())
        if prev is not None and (n := before.start() - prev.start()) in WRAPS and width <= n:
            return True
    after = _BREAK.match(text, hi)
    if after is not None and width in WRAPS:
        nxt = _RIGHT.match(text, after.end(), after.end() + width + 1)
        return nxt is not None and 0 < nxt.end() - after.end() <= width
    return False
