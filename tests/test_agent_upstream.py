"""The upstream the coding agents' fixtures were made with (tests/agent_upstream.py) answers the real openai SDK as a
provider would: a tool call to the agent's own shell tool when asked to run a command, the recorded text otherwise,
streamed or not, with the recorded usage."""
from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer

import openai
import pytest
from agent_upstream import Handler

SHELL = {"type": "function", "function": {"name": "run_shell_command", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}


@pytest.fixture
def client():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="sk-fake")
    server.shutdown()


def test_a_request_to_run_a_command_gets_the_agents_shell_tool(client):
    reply = client.chat.completions.create(model="gpt-4.1-nano", tools=[SHELL], messages=[
        {"role": "user", "content": "Please run the shell command: echo hello"}])
    (call,) = reply.choices[0].message.tool_calls
    assert (call.function.name, call.function.arguments) == ("run_shell_command", '{"command": "echo hello"}')
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.choices[0].finish_reason) == (
        339, 83, "tool_calls")


def test_anything_else_gets_the_recorded_text_streamed(client):
    stream = client.chat.completions.create(model="gpt-4.1-nano", stream=True, tools=[SHELL],
                                            stream_options={"include_usage": True},
                                            messages=[{"role": "user", "content": "Thanks, that is all"}])
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("**Holiday Name:** Harmony Day") and chunks[-1].usage.completion_tokens == 300


CLINE_TOOLS = [
    {"type": "function", "function": {"name": "execute_command", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}, "requires_approval": {"type": "boolean"}},
        "required": ["command", "requires_approval"]}}},
    {"type": "function", "function": {"name": "attempt_completion", "parameters": {
        "type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"]}}}]


def test_cline_gets_its_required_yes_no_arguments_and_ends_through_its_completion_tool(client):
    reply = client.chat.completions.create(model="deepseek-reasoner", tools=CLINE_TOOLS, messages=[
        {"role": "user", "content": "<task>\nPlease run the shell command: echo hello\n</task>"}])
    (call,) = reply.choices[0].message.tool_calls
    assert (call.function.name, call.function.arguments) == (
        "execute_command", '{"command": "echo hello", "requires_approval": false}')
    done = client.chat.completions.create(model="deepseek-reasoner", tools=CLINE_TOOLS, messages=[
        {"role": "user", "content": "[execute_command] Result: hello"}])
    (call,) = done.choices[0].message.tool_calls
    assert call.function.name == "attempt_completion"
    assert json.loads(call.function.arguments)["result"].startswith("**Holiday Name:** Harmony Day")
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (339, 83)


def test_a_tool_that_takes_a_command_but_needs_more_is_not_the_shell(client):
    background = {"type": "function", "function": {"name": "background_process", "parameters": {
        "type": "object", "properties": {"action": {"type": "string"}, "command": {"type": "string"}},
        "required": ["action"]}}}
    reply = client.chat.completions.create(model="deepseek-reasoner", tools=[background, SHELL], messages=[
        {"role": "user", "content": "Please run the shell command: echo hello"}])
    (call,) = reply.choices[0].message.tool_calls
    assert (call.function.name, call.function.arguments) == ("run_shell_command", '{"command": "echo hello"}')
