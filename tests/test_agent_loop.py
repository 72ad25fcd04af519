"""Hand-written agent loops: tool executions, XML tool tags, sliding-window facts, several agents, sub-agents."""
from __future__ import annotations

import pytest

import reasonlog
from reasonlog.parts import xml_tool_calls
from reasonlog.query import timeline


def test_a_tool_loop_records_each_execution_and_the_final_action(recorder, store_of):
    with recorder.session(agent="Alice", run="game-1") as s:
        history = [{"role": "user", "content": "Place your first settlement."}]
        ask = [{"type": "tool_use", "id": "call_1", "name": "find_best_nodes", "input": {"min_pips": 11}}]
        s.call(messages=history, response=ask, stop_reason="tool_use",
               usage=reasonlog.Usage(input_tokens=2172, output_tokens=1073, reasoning_tokens=1032))
        with s.tool("find_best_nodes", {"min_pips": 11}, tool_use_id="call_1") as t:
            t.result = {"total_found": 6, "nodes": [20, 11]}
        with pytest.raises(KeyError):
            with s.tool("inspect_node", {"node": 99}, tool_use_id="call_2"):
                raise KeyError("node 99")
        history += [{"role": "assistant", "content": ask},
                    {"role": "user",
                     "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "6 nodes"}]}]
        final = s.call(messages=history, response='{"action": "place_settlement", "node": 20}',
                       usage=reasonlog.Usage(input_tokens=3000, output_tokens=40))
        s.outcome("move", {"action": "place_settlement", "node": 20}, call_id=final)
        sid = s.id
    session = store_of().get_session(sid)
    ok, failed = session["tool_results"]
    assert (ok["name"], ok["input"], ok["content"], ok["is_error"]) == \
        ("find_best_nodes", {"min_pips": 11}, {"total_found": 6, "nodes": [20, 11]}, False)
    assert ok["duration_ms"] >= 0 and failed["is_error"] and "node 99" in failed["content"]
    assert session["outcomes"][0]["call_id"] == final
    # totals are the per-call usage, never a cumulative figure added on top
    assert (session["input_tokens"], session["output_tokens"]) == (5172, 1113)


def test_xml_tags_named_by_the_user_become_tool_calls(recorder, store_of):
    with recorder.session(agent="retriever", xml_tools=["semantic_search"]) as s:
        text = "Let me look. <semantic_search><query>NVDA earnings</query></semantic_search>"
        call = s.call(messages=[{"role": "user", "content": "What did NVDA earn?"}], response=text)
        calls = [p for p in xml_tool_calls(text, ["semantic_search"], call) if p.kind == "tool_use"]
        s.tool_result(calls[0].tool_use_id, "Q3 revenue 35.1B", name="semantic_search", duration_ms=40)
        sid = s.id
    items = timeline(store_of().get_session(sid))
    parts = items[-1]["parts"]
    assert [p["kind"] for p in parts] == ["text", "tool_use"]
    assert parts[1]["name"] == "semantic_search" and parts[1]["input"] == {"query": "NVDA earnings"}
    assert parts[1]["result"]["content"] == "Q3 revenue 35.1B"


def test_without_named_tags_the_text_stays_text(recorder, store_of):
    with recorder.session(agent="plain") as s:
        s.call(messages=[{"role": "user", "content": "q"}], response="<semantic_search>x</semantic_search>")
        sid = s.id
    assert [p["kind"] for p in timeline(store_of().get_session(sid))[-1]["parts"]] == ["text"]


def test_sliding_window_facts_are_derived_when_not_stated(recorder, store_of):
    history = []
    with recorder.session(agent="windowed") as s:
        for i in range(6):
            history.append({"role": "user", "content": f"turn {i}"})
            reply = {"role": "assistant", "content": [{"type": "text", "text": f"reply {i}"}]}
            stated = {"context_limit": 4} if i == 5 else None
            s.call(messages=history[-4:], response=reply, context_facts=stated,
                   usage=reasonlog.Usage(input_tokens=10, cache_read_tokens=5))
            history.append(reply)
        sid = s.id
    facts = [c["context_facts"] for c in store_of().get_session(sid)["calls"]]
    assert [f["turns_in_context"] for f in facts] == [1, 3, 4, 4, 4, 4]
    assert [f["turns_removed"] for f in facts] == [0, 0, 1, 3, 5, 7]
    assert [f["tokens_in_session"] for f in facts] == [15, 30, 45, 60, 75, 90]
    assert facts[0]["derived"] and facts[5]["context_limit"] == 4 and not facts[5]["derived"]


def test_several_agents_in_one_run_and_a_linked_sub_agent(recorder, store_of):
    with recorder.session(agent="tech_lead", run="orch-1") as lead:
        spawn = lead.call(messages=[{"role": "user", "content": "build it"}],
                          response=[{"type": "tool_use", "id": "t1", "name": "Task", "input": {"role": "developer"}}])
        with recorder.session(agent="developer", run="orch-1", parent=lead, parent_call=spawn) as dev:
            dev.call(messages=[{"role": "user", "content": "write the code"}], response="done")
        with recorder.session(agent="qa", run="orch-1") as qa:
            qa.call(messages=[{"role": "user", "content": "test it"}], response="passed")
    sessions = store_of().list_sessions(reasonlog.SessionFilter(run="orch-1"))
    by_agent = {s["agent"]: s for s in sessions}
    assert set(by_agent) == {"tech_lead", "developer", "qa"}
    assert by_agent["developer"]["parent_session_id"] == by_agent["tech_lead"]["id"]
    assert by_agent["developer"]["parent_call_id"] == spawn


def test_responses_api_items_resent_one_by_one_are_not_shown_twice(recorder, store_of):
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "need the price"}]}
    call = {"type": "function_call", "call_id": "fc_1", "name": "get_price", "arguments": '{"symbol": "NVDA"}'}
    output = {"type": "function_call_output", "call_id": "fc_1", "output": "180.5"}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "NVDA is 180.5"}]}
    user = {"role": "user", "content": "Price of NVDA?"}
    with recorder.session(agent="responses") as s:
        s.call(request={"model": "gpt-5", "input": [user]},
               response={"role": "assistant", "content": [reasoning, call]})
        s.call(request={"model": "gpt-5", "input": [user, reasoning, call, output]},
               response={"role": "assistant", "content": [answer]})
        sid = s.id
    session = store_of().get_session(sid)
    assert [m["role"] for m in session["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert session["messages"][2]["content"] == output
    items = [i for i in timeline(session) if i["kind"] == "message"]  # calls have their own lines
    tool = next(p for p in items[1]["parts"] if p["kind"] == "tool_use")
    assert tool["result"]["content"] == "180.5"
