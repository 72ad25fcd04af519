"""The replay's matching rule (issue 32): a re-run's request matches its recording when it differs only in what a
real agent makes fresh every run (ids, times, process ids, temporary paths, the keys a protocol fills per run), and
never when anything else changed. Named cases from the real CLIs' requests, and hypothesis properties."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog.capture.replay_match import matching_form, tolerated


def same(recorded, sent, protocol=None) -> bool:
    return matching_form(recorded, protocol) == matching_form(sent, protocol)


# ------------------------------------------------------------------------------ the real CLIs' volatile values

def test_claude_codes_device_and_session_ids_are_tolerated_and_named():
    def request(device: str, session: str) -> dict:
        return {"model": "claude-sonnet-4-5", "max_tokens": 32000,
                "metadata": {"user_id": f"user_{device}_account__session_{session}"},
                "messages": [{"role": "user", "content": "list the files"}]}

    recorded = request("a" * 64, str(uuid.uuid4()))
    sent = request("b" * 64, str(uuid.uuid4()))
    assert same(recorded, sent, "anthropic")
    (difference,) = tolerated(recorded, sent, "anthropic")
    assert (difference.path, difference.kind) == ("metadata.user_id", "fresh each run")
    other_prompt = {**sent, "messages": [{"role": "user", "content": "delete the files"}]}
    assert not same(recorded, other_prompt, "anthropic")


def test_codex_thread_ids_and_times_are_tolerated():
    def request(thread: str, item: str, at: int) -> dict:
        return {"model": "gpt-5-codex", "prompt_cache_key": thread, "client_metadata": {"thread_id": thread},
                "input": [{"type": "message", "role": "user", "id": f"msg_{item}", "create_time": at,
                           "content": [{"type": "input_text", "text": "run the tests"}]}]}

    a = request("019a2d7a-41c4-78b1-b7cc-a45d62a89cd5", "0123456789abcdef0123456789abcdef", 1764288000)
    b = request("019ac0de-1111-7222-8333-944455556666", "fedcba9876543210fedcba9876543210", 1764288999)
    assert same(a, b, "openai_responses")
    paths = sorted(d.path for d in tolerated(a, b, "openai_responses"))
    assert paths == ["client_metadata", "input.0.create_time", "input.0.id", "prompt_cache_key"]


def test_gemini_call_ids_and_the_shells_process_group_are_tolerated():
    def request(ms: int, pgid: int) -> dict:
        call_id = f"run_shell_command_{ms}_0"
        return {"contents": [
            {"role": "user", "parts": [{"text": "what is in hello.txt?"}]},
            {"role": "model", "parts": [{"functionCall": {"id": call_id, "name": "run_shell_command",
                                                          "args": {"command": "cat hello.txt"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"id": call_id, "name": "run_shell_command", "response": {
                "output": f"Command: cat hello.txt\nOutput: hello\nProcess Group PGID: {pgid}"}}}]}]}

    a, b = request(1764288000123, 4242), request(1764288077456, 5151)
    assert same(a, b, "gemini")
    assert {d.kind for d in tolerated(a, b, "gemini")} == {"epoch", "pid"}
    changed_output = request(1764288077456, 5151)
    changed_output["contents"][2]["parts"][0]["functionResponse"]["response"]["output"] = \
        "Command: cat hello.txt\nOutput: goodbye\nProcess Group PGID: 5151"
    assert not same(a, changed_output, "gemini")


def test_an_id_used_twice_must_still_be_used_twice():
    """The call id in a tool call and in its result are one value: a re-run pairing them differently differs."""
    one, two = str(uuid.uuid4()), str(uuid.uuid4())
    recorded = {"messages": [{"tool_call_id": one}, {"tool_result_for": one}]}
    assert same(recorded, {"messages": [{"tool_call_id": two}, {"tool_result_for": two}]})
    assert not same(recorded, {"messages": [{"tool_call_id": two}, {"tool_result_for": one}]})


# ------------------------------------------------------------------------------ properties

WORD = st.text(alphabet="ghijklmnopqrstuvwxyz ", min_size=1, max_size=12)  # no digit, no hex: never a token
VOLATILE = st.one_of(
    st.uuids().map(str),
    st.integers(1_500_000_000_000, 1_999_999_999_999).map(str),
    st.integers(1, 4_000_000).map(lambda n: f"PGID: {n}"),
    st.binary(min_size=16, max_size=16).map(bytes.hex),
    st.from_regex(r"/tmp/tmp[a-z0-9_]{6,10}", fullmatch=True),
)


@st.composite
def requests(draw):
    """A request whose strings are words with volatile values between them; the values apart, and each message's
    pieces (True for a word)."""
    n = draw(st.integers(1, 6))
    values = draw(st.lists(VOLATILE, min_size=1, max_size=4, unique=True))
    messages, pieces_of = [], []
    for _ in range(n):
        pieces = draw(st.lists(st.one_of(WORD.map(lambda w: (True, w)), st.sampled_from(values).map(
            lambda v: (False, v))), min_size=1, max_size=5))
        pieces_of.append(pieces)
        messages.append({"role": draw(st.sampled_from(["user", "assistant"])),
                         "content": " ".join(p for _, p in pieces)})
    return {"model": "m", "messages": messages}, values, pieces_of


def replaced(request: dict, mapping: dict[str, str]) -> dict:
    def swap(text: str) -> str:
        for old, new in mapping.items():
            text = text.replace(old, f"\0{new}\0")
        return text.replace("\0", "")
    return {**request, "messages": [{**m, "content": swap(m["content"])} for m in request["messages"]]}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(requests(), st.data())
@pytest.mark.slow
def test_a_request_with_only_volatile_values_changed_matches(case, data):
    request, values, _ = case
    fresh = data.draw(st.lists(VOLATILE.filter(lambda v: v not in values), min_size=len(values),
                               max_size=len(values), unique=True))
    kinds = {v: matching_form({"x": v})["x"].split("#")[0] for v in values + fresh}
    mapping = {old: new for old, new in zip(values, fresh, strict=True) if kinds[old] == kinds[new]}
    sent = replaced(request, mapping)
    assert same(request, sent)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(requests(), st.data())
def test_a_request_with_any_content_changed_does_not_match(case, data):
    request, _, pieces_of = case
    i = data.draw(st.integers(0, len(request["messages"]) - 1))
    pieces = pieces_of[i]
    words = [k for k, (is_word, text) in enumerate(pieces) if is_word and text.strip()]
    if words:  # one letter of a word changed
        k = data.draw(st.sampled_from(words))
        text = pieces[k][1]
        j = data.draw(st.sampled_from([j for j, c in enumerate(text) if c != " "]))
        new = data.draw(st.sampled_from("ghijklmnopqrstuvwxyz").filter(lambda c: c != text[j]))
        pieces = [*pieces[:k], (True, text[:j] + new + text[j + 1:]), *pieces[k + 1:]]
    else:  # a word added
        pieces = [*pieces, (True, "extra")]
    sent = {**request, "messages": [*request["messages"][:i],
                                    {**request["messages"][i], "content": " ".join(p for _, p in pieces)},
                                    *request["messages"][i + 1:]]}
    assert not same(request, sent)


def test_a_409_shows_where_a_long_line_differs_not_its_first_300_characters():
    from reasonlog.capture.proxy_replay import request_diff

    prompt = "You are an agent. " * 200
    recorded = {"system": prompt + "Your memory is in /home/alice/.claude/memory.", "messages": []}
    sent = {"system": prompt + "Your memory is in /home/bob/.claude/memory.", "messages": []}
    diff = request_diff(recorded, sent).splitlines()
    removed = next(line for line in diff if line.startswith("-") and not line.startswith("---"))
    added = next(line for line in diff if line.startswith("+") and not line.startswith("+++"))
    assert "/home/alice/.claude" in removed and "/home/bob/.claude" in added
    assert len(removed) < 320 and removed[1] == "…"


def test_parallel_tool_results_in_another_order_match_and_the_order_is_said():
    """Claude Code sends the results of parallel calls in the order they finished, the cache mark on the last."""
    def request(first: dict, second: dict) -> dict:
        return {"messages": [{"role": "user", "content": [first, {**second, "cache_control": {"type": "ephemeral"}}]}]}

    two = {"type": "tool_result", "tool_use_id": "toolu_010", "content": "two"}
    missing = {"type": "tool_result", "tool_use_id": "toolu_011", "content": "cat: missing.txt", "is_error": True}
    recorded, sent = request(missing, two), request(two, missing)
    assert same(recorded, sent, "anthropic")
    (difference,) = tolerated(recorded, sent, "anthropic")
    assert (difference.path, difference.kind) == ("messages.0.content", "order of parallel tool results")
    assert not same(recorded, request(two, {**missing, "content": "cat: found"}), "anthropic")
    # Results that are not side by side keep their places: a text between them is a fence.
    fenced = {"messages": [{"role": "user", "content": [missing, {"type": "text", "text": "and"}, two]}]}
    fenced_other = {"messages": [{"role": "user", "content": [two, {"type": "text", "text": "and"}, missing]}]}
    assert not same(fenced, fenced_other, "anthropic")


def test_how_long_a_tool_took_is_tolerated_in_its_result_only():
    def request(took: str, prompt: str = "wait 5 seconds, then run it") -> dict:
        return {"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]},
                          {"type": "custom_tool_call_output", "call_id": "call_1", "output": [
                              {"type": "input_text", "text": f"Script completed\nWall time {took}\nOutput:\n"}]}]}

    assert same(request("0.3 seconds"), request("0.1 seconds"), "openai_responses")
    assert not same(request("0.3 seconds"), request("0.3 seconds", "wait 6 seconds, then run it"), "openai_responses")


# ------------------------------------------------------------------------------ lines listed in another order

def gemini_request(skills: list[tuple[str, str]]) -> dict:
    """Gemini CLI 0.61's request naming its skills in three places: its system prompt (a block of lines each), its
    `activate_skill` tool's description (a list inside a sentence) and that tool's `enum`. It finds them by a
    directory walk (node-glob) whose order changes run to run: a CI run's replay got them the other way round."""
    listed = "".join(f"  <skill>\n    <name>{name}</name>\n    <description>{about}</description>\n  </skill>\n"
                     for name, about in skills)
    prompt = f"You are an interactive CLI agent.\n<available_skills>\n{listed}</available_skills>\n# Hook Context"
    names = [name for name, _ in skills]
    activate = {"name": "activate_skill",
                "description": f"Activates a specialized agent skill by name (Available: "
                               f"{', '.join(repr(n) for n in names)}). Returns the skill's instructions.",
                "parametersJsonSchema": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string", "enum": names, "description": "The name of the skill to activate."}}}}
    return {"systemInstruction": {"role": "user", "parts": [{"text": prompt}]},
            "contents": [{"role": "user", "parts": [{"text": "Read hello.txt"}]}],
            "tools": [{"functionDeclarations": [activate]}]}


SKILLS = [("antigravity-support", "Use when the user asks about Antigravity CLI."),
          ("skill-creator", "Guide for creating effective skills.")]


def test_what_an_agent_found_on_disk_listed_in_another_order_matches_loosely_and_says_so():
    recorded, sent = gemini_request(SKILLS), gemini_request(SKILLS[::-1])
    assert not same(recorded, sent, "gemini")  # the exact form still tells them apart: an exact match wins
    assert matching_form(recorded, "gemini", in_any_order=True) == matching_form(sent, "gemini", in_any_order=True)
    assert [(d.path, d.kind) for d in tolerated(recorded, sent, "gemini")] == [
        ("systemInstruction.parts.0.text", "order of lines"),
        ("tools.0.functionDeclarations.0.description", "order of words"),
        ("tools.0.functionDeclarations.0.parametersJsonSchema.properties.name.enum", "order of items")]
    changed = gemini_request([SKILLS[1], ("antigravity-support", "Use when the user asks about Gravity CLI.")])
    assert matching_form(recorded, "gemini", in_any_order=True) != \
        matching_form(changed, "gemini", in_any_order=True)
    renamed = gemini_request([SKILLS[1], ("antigravity-help", SKILLS[0][1])])
    assert matching_form(recorded, "gemini", in_any_order=True) != \
        matching_form(renamed, "gemini", in_any_order=True)


LINE = st.text(alphabet="ghijklmnopqrstuvwxyz <>/", min_size=1, max_size=20)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(LINE, min_size=2, max_size=8), st.randoms(use_true_random=False), st.data())
def test_lines_in_any_order_match_loosely_and_a_changed_line_never_does(lines, random, data):
    shuffled = lines[:]
    random.shuffle(shuffled)
    recorded, sent = {"system": "\n".join(lines)}, {"system": "\n".join(shuffled)}
    loose = matching_form(recorded, in_any_order=True)
    assert matching_form(sent, in_any_order=True) == loose
    assert same(recorded, sent) == (lines == shuffled)
    if lines != shuffled:
        assert [(d.path, d.kind) for d in tolerated(recorded, sent)] == [("system", "order of lines")]
    i = data.draw(st.integers(0, len(shuffled) - 1))
    # another line (other characters, not just the same ones moved about) never matches
    other = data.draw(LINE.filter(lambda line: sorted(line) != sorted(shuffled[i]) and line not in lines))
    changed = {"system": "\n".join([*shuffled[:i], other, *shuffled[i + 1:]])}
    assert matching_form(changed, in_any_order=True) != loose


NAME = st.text(alphabet="abcdefgh-_", min_size=1, max_size=12)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(NAME, min_size=2, max_size=6, unique=True), st.randoms(use_true_random=False), st.data())
def test_names_listed_in_a_sentence_or_a_list_in_any_order_match_loosely_and_a_changed_name_never_does(
        names, random, data):
    def request(listed: list[str]) -> dict:
        return {"tools": [{"description": f"Activates a skill (Available: {', '.join(map(repr, listed))}).",
                           "enum": listed}]}

    shuffled = names[:]
    random.shuffle(shuffled)
    loose = matching_form(request(names), in_any_order=True)
    assert matching_form(request(shuffled), in_any_order=True) == loose
    if names != shuffled:
        assert [d.kind for d in tolerated(request(names), request(shuffled))] == ["order of words", "order of items"]
    i = data.draw(st.integers(0, len(shuffled) - 1))
    other = data.draw(NAME.filter(lambda name: sorted(name) != sorted(shuffled[i]) and name not in names))
    assert matching_form(request([*shuffled[:i], other, *shuffled[i + 1:]]), in_any_order=True) != loose
