"""What masking does to a value, alone (issue 19, items 1, 2, 3 and 6): different secrets stay different, the
same secret masks the same in another process, nothing masks across JSON structure, base64 data and prose are
left as they are, and keys after `/`, `_`, `-`, `+`, AWS secret keys and unterminated PEM blocks are masked."""
from __future__ import annotations

import base64
import os
import random
import re
import subprocess
import sys
import textwrap
from unittest import mock

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.redact import Redactor
from reasonlog.redact_patterns import LITERALS

MASK = re.compile(r"\[REDACTED:(\w+):([0-9a-f]{12})\]")
KEY_A = "sk-proj-" + "a1B2" * 10
KEY_B = "sk-proj-" + "c3D4" * 10
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PEM_BODY = "MIIEpAIBAAKCAQEA7xTq9Vw3bLmN4kZ2rT8sYp1QaHcUoJ5nD6fE"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"
PREFIXES = ["sk-", "sk-ant-", "sk-proj-", "AIza", "AKIA", "ghp_", "github_pat_", "xoxb-", "hf_", "gsk_", "xai-",
            "sk_live_", "eyJ"]


# ------------------------------------------------------------------ item 1: ids stay apart


def test_two_secrets_of_one_kind_mask_to_two_texts_and_one_secret_to_one():
    r = Redactor()
    a, b, a_again = r.text(f"run-{KEY_A}"), r.text(f"run-{KEY_B}"), r.text(f"run-{KEY_A}")
    assert a != b and a == a_again
    assert [m.group(1) for m in MASK.finditer(a + b)] == ["openai_key", "openai_key"]
    assert KEY_A not in a and KEY_B not in b


def test_the_same_secret_masks_the_same_in_another_process_through_the_key_file(tmp_path):
    """Without $REASONLOG_REDACTION_KEY, the key is a file in the user's data folder, made once and read after."""
    env = {k: v for k, v in os.environ.items() if k != "REASONLOG_REDACTION_KEY"}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    code = textwrap.dedent(f"""
        from reasonlog.redact import Redactor
        print(Redactor().text({KEY_A!r}))
    """)
    first, second = (subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                    check=True).stdout for _ in range(2))
    key_file = tmp_path / "data" / "reasonlog" / "redaction.key"
    assert first == second and MASK.fullmatch(first.strip())
    assert key_file.stat().st_mode & 0o777 == 0o600 and len(key_file.read_bytes()) == 65
    assert first.strip() != Redactor().text(KEY_A)  # the tests' key is another key: another digest


def test_masking_is_idempotent_so_a_server_may_mask_again_what_a_recorder_sent():
    r = Redactor()
    once = r.text(f"{KEY_A} and {PEM} and Bearer abc123DEF456ghi789JKL")
    assert r.text(once) is once and r.masked == 3


# ------------------------------------------------------------------ item 2: never across structure


def test_an_unterminated_pem_block_does_not_reach_into_the_next_string():
    r = Redactor()
    value = {"a": "-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY, "between": "keep me", "b": PEM}
    masked = orjson.loads(r.json(orjson.dumps(value), orjson.dumps))
    assert masked["between"] == "keep me" and list(masked) == ["a", "between", "b"]
    assert MASK.fullmatch(masked["a"]) and MASK.fullmatch(masked["b"])
    raw = r.bytes(orjson.dumps(value))  # opaque bytes too: the block's body holds no quote
    assert orjson.loads(raw)["between"] == "keep me"


# ------------------------------------------------------------------ item 3: non-secrets left alone


def test_url_safe_base64_wrapped_at_76_columns_is_left_alone():
    """A wrapped line that starts with `sk-`: its run is one line, but its neighbours are lines of 76."""
    rng = random.Random(3)
    for width in (64, 76):
        lines = [base64.urlsafe_b64encode(rng.randbytes(width * 3 // 4)).decode() for _ in range(6)]
        lines[2] = "sk-" + lines[2][3:]
        lines[5] = "AKIA" + lines[5][4:20]  # the last, shorter line
        text = "\n".join(lines)
        assert Redactor().text(text) == text


def test_prose_after_bearer_is_left_alone():
    r = Redactor()
    for prose in ["payable to bearer instruments", "bearer instruments-and-other-securities",
                  "the BEARER of-ill-tidings-and-misfortune"]:
        assert r.text(prose) == prose
    assert r.masked == 0
    assert MASK.search(r.text("Authorization: Bearer abc123DEF456ghi789JKL"))


# ------------------------------------------------------------------ item 6: keys in URLs and names, AWS, PEM


def test_a_key_after_a_slash_underscore_dash_or_plus_is_masked():
    r = Redactor()
    for place in ["https://api.example.com/v1/{}/data", "MY_TOKEN_{}", "prefix-{}", "a+{}", "path/to/{}"]:
        masked = r.text(place.format(KEY_A))
        assert KEY_A not in masked and masked == place.format(r.text(KEY_A)), place


def test_aws_secret_access_keys_are_masked_by_their_label():
    r = Redactor()
    for text in [f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", f"aws_secret_access_key = {AWS_SECRET}",
                 f'"SecretAccessKey": "{AWS_SECRET}"']:
        assert AWS_SECRET not in r.text(text) and "aws_secret_key" in r.text(text), text
    masked = r.value({"SecretAccessKey": AWS_SECRET, "AccessKeyId": "AKIAIOSFODNN7EXAMPLE"})
    assert [MASK.fullmatch(v).group(1) for v in masked.values()] == ["aws_secret_key", "aws_access_key"]


def test_a_pem_block_without_its_end_line_is_masked():
    text = f"here:\n-----BEGIN PRIVATE KEY-----\n{PEM_BODY}\n{PEM_BODY[:40]}==\n\nthanks"
    masked = Redactor().text(text)
    assert PEM_BODY[:20] not in masked and masked.startswith("here:\n[REDACTED:private_key:")
    assert masked.endswith("\n\nthanks")


# ------------------------------------------------------------------ properties


def _base64_forms(data: bytes) -> list[str]:
    std, url = base64.b64encode(data).decode(), base64.urlsafe_b64encode(data).decode()
    forms = [std, url, std.rstrip("="), url.rstrip("=")]
    forms += ["\n".join(f[i:i + w] for i in range(0, len(f), w)) for f in (std, url) for w in (64, 76)]
    return forms


@settings(max_examples=300, deadline=None)
@given(data=st.binary(min_size=300, max_size=3000), prefix=st.sampled_from(PREFIXES), where=st.floats(0, 1),
       form=st.integers(0, 7))
def test_masking_never_alters_base64_data_even_with_a_key_prefix_planted_in_it(data, prefix, where, form):
    """Every base64 form of at least 300 bytes, with a key's prefix written over it anywhere (as chance does)."""
    text = _base64_forms(data)[form]
    at = int(where * (len(text) - len(prefix)))
    if "\n" in text[at:at + len(prefix)]:
        return  # the prefix would replace a line break: no longer wrapped data
    text = text[:at] + prefix + text[at + len(prefix):]
    r = Redactor()
    value = {"type": "image", "source": {"data": text}}
    assert r.json(orjson.dumps(value), orjson.dumps) == orjson.dumps(value)
    assert r.masked == 0


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text()
    | st.sampled_from([KEY_A, PEM, "-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY, f"Bearer {KEY_B}", AWS_SECRET]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8) | st.just("SecretAccessKey"),
                                                               inner, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(value=JSONISH)
def test_masked_json_is_the_same_structure_with_only_strings_changed(value):
    r = Redactor()
    masked = orjson.loads(r.json(orjson.dumps(value), orjson.dumps))
    assert _shape(masked) == _shape(value)
    text = orjson.dumps(masked).decode()
    assert KEY_A not in text and PEM_BODY[:20] not in text


def _shape(value):
    """The value with every string replaced by a marker: what masking must never change."""
    if isinstance(value, dict):
        return [("k", _shape(v)) for v in value.values()]
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return "s" if isinstance(value, str) else value


# ------------------------------------------------------------------ issue 34: only the patterns a string can match

PIECES = st.sampled_from([
    KEY_A, PEM, f"Bearer {KEY_B}", f"BeArEr {KEY_B}", f"SeCrEt_Access_Key = {AWS_SECRET}",
    f"aws_secret_access_key: {AWS_SECRET}", "AIza" + "x1Y2z3W4" * 4 + "abc", "AKIA" + "ABCD1234" * 2,
    "ghp_" + "aB3" * 12, "xoxb-12345-" + "abcdef1234", "hf_" + "aB3" * 10, "gsk_" + "aB3" * 7, "xai-" + "aB3" * 7,
    "sk_live_" + "aB3" * 6, "eyJhbGciOi.eyJzdWIiOiIx.SflKxwRJSMeKKF2QT4", "a secret", "the bearer bonds", "sk-",
    "ECRET", "EARER", "PRIVATE KEY", "ghs_", " ", "\n", "/", "_", "-", "=", "QUJD" * 20, "plain prose, no key"])


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(PIECES, min_size=1, max_size=8), literal=st.sampled_from(
    ["sk-", "AIza", "ghp_", "xox", "hf_", "eyJ", "earer", "ecret", "PRIVATE KEY", "k_live_"]))
def test_a_string_with_a_literal_masks_as_every_pattern_would_mask_it(pieces, literal):
    """A string that holds a literal is searched with only its literals' patterns (and the two spelt in any case):
    the masked text is the one the regex of every pattern makes."""
    text = "".join(pieces) + " " + literal
    assert Redactor().text(text) == Redactor(literals=None).text(text)


def test_prose_about_a_secret_with_a_key_in_it_is_masked_by_both_patterns():
    text = f"the secret is out: SeCrEt-Access-Key={AWS_SECRET} and {KEY_A}"
    masked = Redactor().text(text)
    assert [m.group(1) for m in MASK.finditer(masked)] == ["aws_secret_key", "openai_key"]
    assert masked.startswith("the secret is out: SeCrEt-Access-Key=[REDACTED:aws_secret_key:")


# ------------------------------------------------------------------ what may hold a secret, decided in one pass


def _without_automaton() -> Redactor:
    """A redactor made as where the `fast` extra (ahocorasick-rs) is not installed: it tests with one regex."""
    with mock.patch.dict(sys.modules, {"ahocorasick_rs": None}):  # (None: the import raises ImportError)
        redactor = Redactor()
        redactor.may_hold(b"")  # its tests are made on first use, while the import fails
        redactor.text("-")
    return redactor


BYTES_PIECES = st.one_of(st.binary(max_size=40), st.sampled_from(
    [lit for lit in LITERALS] + [lit[:-1] for lit in LITERALS]
    + [b"://", b"@", b"e", b"s", b"\xff", b"\n", b"null", b"nul", b"ull", b"n"]))


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(BYTES_PIECES, max_size=12))
def test_contents_are_masked_unless_they_hold_no_literal_and_no_url(pieces):
    """`may_hold` (whether a content is decoded and masked at all) says no only to bytes that hold none of the
    default patterns' literals and no `://` with an `@`: the same answer with the automaton and without it."""
    data = b"".join(pieces)
    want = any(lit in data for lit in LITERALS) or (b"://" in data and b"@" in data)
    assert Redactor().may_hold(data) is want
    assert _without_automaton().may_hold(data) is want
    # and `scan`, which a content's JSON is asked (one pass for both), says so beside whether it holds `null`
    assert Redactor().scan(data) == _without_automaton().scan(data) == (want, b"null" in data)
    assert Redactor(literals=None).scan(data) == (True, b"null" in data)


def test_a_literal_of_another_set_is_found_where_it_overlaps_a_url():
    """Only the default literals share the automaton with `://` and `null` (none of them can overlap those):
    another set's literal that does is still found."""
    assert Redactor(literals=(b"//k",)).may_hold(b"x://k") is True
    assert Redactor(literals=(b"lx",)).scan(b"nullx") == (True, True)


TEXT_PIECES = st.one_of(st.text(max_size=30), PIECES, st.sampled_from(
    [lit.decode() for lit in LITERALS] + [lit.decode()[:-1] for lit in LITERALS]
    + ["\ud800", "\udfff", "→", "日本語", "://", "@", "postgresql://alice:hunter2@db/x"]))


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(TEXT_PIECES, max_size=8))
def test_a_string_masks_the_same_whichever_way_its_literals_are_found(pieces):
    """Whether a string holds a literal is told by an automaton (the `fast` extra; a string with a lone surrogate,
    which is not UTF-8, by the regex) or, without the extra, by one regex: the same masked text either way."""
    text = "".join(pieces)
    assert Redactor().text(text) == _without_automaton().text(text)


_CASES = st.lists(st.booleans(), min_size=24, max_size=24)  # a case for each letter of the longest label


def _spelt(word: str, upper: list[bool]) -> str:
    return "".join(c.upper() if up else c.lower() for c, up in zip(word, upper, strict=False))


@settings(max_examples=200)
@given(upper=_CASES, fast=st.booleans())
def test_a_label_or_bearer_spelt_in_any_case_is_masked_as_every_pattern_masks_it(upper, fast):
    """The two patterns spelt in any case (the AWS secret key's label, `bearer`) find "SeCrEt_AcCeSs_KeY" and
    "BeArEr" too: the literal test before them holds every spelling of "secret" and "bearer" (it held two of each,
    and these were stored as written). With and without the `fast` extra's automaton."""
    texts = [f"{_spelt('secret_access_key', upper)} = {AWS_SECRET}", f"Authorization: {_spelt('bearer', upper)} "
             "abcdefABCDEF0123456789xyz", orjson.dumps({"note": f"{_spelt('aws_secret_access_key', upper)}: "
                                                                f"'{AWS_SECRET}'"}).decode()]
    with _without_the_fast_extra(not fast):
        r = Redactor()
        for text in texts:
            masked = r.text(text)
            assert masked == Redactor(literals=None).text(text) and MASK.search(masked), text
            assert r.may_hold(text.encode()) and r.scan(text.encode())[0]


def _without_the_fast_extra(hide: bool):
    """ahocorasick_rs made unimportable (the regex path of the literal tests), when `hide`."""
    return mock.patch.dict(sys.modules, {"ahocorasick_rs": None}) if hide else mock.patch.dict(sys.modules, {})
