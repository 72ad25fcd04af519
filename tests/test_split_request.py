"""The writer splits every call's request into its messages, system prompt and tools (stored by reference) and the
parameters kept inline (store/rows.py `split_request`), and `join_request` gives the request back as sent. The
split is written as plain loops: the same as the set-and-generator form it replaced, for any request."""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reasonlog import providers
from reasonlog.store.rows import DEFAULT_SHAPE, TOOLS_KEY, Split, join_request, split_request

KEYS = [*providers.MESSAGE_KEYS, *providers.SYSTEM_KEYS, TOOLS_KEY, "model", "max_tokens", "previous_response_id"]
VALUES = st.one_of(st.none(), st.text(max_size=3), st.integers(), st.tuples(st.integers()),
                   st.lists(st.dictionaries(st.sampled_from(["role", "content"]), st.text(max_size=3)), max_size=2),
                   st.dictionaries(st.sampled_from(["type", "text"]), st.text(max_size=3), max_size=2))


def split_as_it_was(request: dict) -> Split:
    found = next((k for k in providers.MESSAGE_KEYS if isinstance(request.get(k), list)), None)
    if found is None and isinstance(request.get(providers.STRING_INPUT), str):
        return split_request(request)  # (that path is unchanged)
    msg_key = found or "messages"
    sys_key = next((k for k in providers.SYSTEM_KEYS if k in request), "system")
    tools = request.get(TOOLS_KEY)
    tools = tools if isinstance(tools, list) else None
    taken = {sys_key} | ({found} if found else set()) | ({TOOLS_KEY} if tools is not None else set())
    params = {k: v for k, v in request.items() if k not in taken}
    shape: dict[str, Any] = {"messages": msg_key, "system": sys_key}
    if found is None:
        shape["no_messages"] = True
    return Split(params, request.get(sys_key), request[found] if found else [], tools,
                 None if shape == DEFAULT_SHAPE else shape, has_system=sys_key in request)


@settings(max_examples=1000, deadline=None)
@given(request=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=8))
def test_any_request_splits_as_before_and_joins_back_as_sent(request):
    split, before = split_request(request), split_as_it_was(request)
    assert split == before
    assert list(split.params) == list(before.params)  # the parameters in their order
    joined = join_request(split.params, split.shape, split.system, split.has_system, split.messages, split.tools)
    if not (split.shape or {}).get("string"):
        assert joined == request
