"""Every shell command of the README, as written (issue 18 item 1; the Python blocks are in test_readme.py).

Each command line of a ```sh block is run by bash in a folder of its own, with REASONLOG_DB a fresh database
there and HOME a home holding Claude Code transcripts, after the README's words for what you fill in are
bound: SESSION and CALL to ids of the demo's run, PATH to a file, R / A / M / D / S to its run, agent, model,
day and status. A synopsis line (`db path | status | upgrade`, `stats --by day|model|agent|run`, options in
brackets) runs each form it stands for. Servers (`serve`, `ui`) run until they answer /healthz and the README's
`curl` asks them; `watch` runs until it has imported.

Checked for form only, and why:
- installs (`python3 -m venv .venv && .venv/bin/pip install -e …`, `pip install -e '.[…]'`): they would reinstall
  the environment the suite runs in; each extra they name must exist in pyproject.toml, and the command after
  them is run. `.ci/extras` installs every extra for real, in fresh venvs.
- `.venv/bin/pytest -q -n auto`: the suite itself.
- `--summarizer anthropic` / `--summarizer openai --base-url http://127.0.0.1:11434/v1` (a model provider or an
  Ollama server) and `serve --host 0.0.0.0` (beyond loopback; tests only use 127.0.0.1), `--db postgresql://
  …db.internal…` (a host that is not this machine): parsed by the real command-line parser, which must accept
  every option they give.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import pytest
from conftest import FIXTURES
from serving import free_port, get

import reasonlog
from reasonlog.cli.main import Context, cli

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    """Each command line of the README's sh blocks: continuations joined, comments and blank lines left out."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", (ROOT / "README.md").read_text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command and not command.startswith("#"):
                commands.append(" ".join(command.split()))
    return commands


@pytest.fixture(scope="session")  # not torn down when a worker runs another module's tests between two commands
def place(tmp_path_factory):
    """A folder with a database of the demo's run, a home with Claude Code transcripts, and the README's words."""
    folder = tmp_path_factory.mktemp("readme-commands")
    home = folder / "home"
    shutil.copytree(FIXTURES / "claude-code-transcripts" / "spotter", home / ".claude" / "projects" / "spotter")
    env = {**os.environ, "HOME": str(home), "REASONLOG_DB": str(folder / "readme.db"), "BROWSER": "true",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "120"}
    subprocess.run(["reasonlog", "demo"], env=env, cwd=folder, check=True, capture_output=True)
    store = reasonlog.open_store(folder / "readme.db", read_only=True)
    session = store.get_session(store.list_sessions(reasonlog.SessionFilter())[0]["id"])
    calls = [c["id"] for c in session["calls"]]
    (folder / "compact.json").write_text(json.dumps({"summary": "Parse the quotes before the commas.",
                                                     "key_decisions": ["escape first"]}))
    (folder / "reasoning.md").write_text("Why: the CSV reader split quoted commas.\n")
    (folder / "mine.txt").write_text("Say in two sentences what this agent did:\n{transcript}\n")
    words = {"SESSION": session["id"], "CALL": calls[1], "CALL_A": calls[0], "CALL_B": calls[2],
             "PATH": str(folder / "backup.db"), "R": session["run"], "A": session["agent"], "M": session["model"],
             "D": session["started_at"][:10], "S": "completed", "k=v": f"date={session['labels']['date']}"}
    return {"folder": folder, "env": env, "words": words}


def bound(command: str, words: dict) -> str:
    """The command with the README's placeholders bound (whole words only: `SESSION#N` stays a form)."""
    return re.sub(r"(?<![\w-])(SESSION|CALL_A|CALL_B|CALL|PATH|R|A|M|D|S|k=v)(?![\w=])",
                  lambda m: shlex.quote(words[m.group(1)]), command)


def sh(place, command: str, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["bash", "-c", bound(command, place["words"])], env=place["env"], cwd=place["folder"],
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, (command, done.stderr)
    if ok:
        assert done.returncode == 0, (command, done.stdout, done.stderr)
    return done


def parses(command: str) -> None:
    """The command line, as the real parser reads it: every option it gives must be one the command takes."""
    args = shlex.split(command)[1:]
    if args[0] == "--db":  # the one option before a command's name
        args = args[2:]
    command_, path = cli, []
    while isinstance(command_, click.Group):
        path.append(args[0])
        command_ = command_.commands[args.pop(0)]
    command_.make_context(" ".join(path), args, parent=click.Context(cli, obj=Context(None)))


def installs_known_extras(command: str) -> None:
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    targets = re.findall(r"pip install -e '?\.(?:\[([\w,-]+)\])?'?", command)
    assert targets, command
    for named in targets:
        assert set(filter(None, named.split(","))) <= extras, (command, extras)


def serving(place, command: str, then=None) -> str:
    """Run a server command on a free port until it answers /healthz, then `then(base)`; its output."""
    port = free_port()
    args = bound(command, place["words"]) + f" --port {port}"
    server = subprocess.Popen(["bash", "-c", f"exec {args}"], env=place["env"], cwd=place["folder"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            if get(base + "/healthz")[0] == 200 or server.poll() is not None:
                break
            subprocess.run(["sleep", "0.1"])
        assert get(base + "/healthz") == (200, '{"status":"ok"}'), server.communicate(timeout=10)
        if then is not None:
            then(base)
    finally:
        server.terminate()
        out, err = server.communicate(timeout=20)
    assert "Traceback" not in err, err
    return err


# ------------------------------------------------------------------------------------------ each command


def start_demo(place, command):
    installs_known_extras(command)
    assert "Recorded run" in sh(place, command.rpartition("&& ")[2].replace(".venv/bin/", "")).stdout


def start_tests(place, command):
    installs_known_extras(command)
    assert command.endswith("&& .venv/bin/pytest -q -n auto")


def imports_claude_code(place, command):
    assert sh(place, command).stdout.startswith("Imported 6 file(s): 7 sessions, 243 calls")


def imports_default_folders(place, command):
    """With no path, every agent's default folder that exists: here the Claude Code transcripts in ~/.claude."""
    out = sh(place, command).stdout
    assert re.search(r"^claude-code: .*\.claude/projects$", out, re.M), out


def lists_formats(place, command):
    assert "claude-code" in sh(place, command).stdout


def watches(place, command):
    """`watch` runs until its first pass has imported and noted what it follows, then is stopped."""
    watcher = subprocess.Popen(["bash", "-c", f"exec {command}"], env=place["env"], cwd=place["folder"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    marker = Path(place["env"]["REASONLOG_DB"] + ".watch.json")
    try:
        for _ in range(300):
            if marker.exists() or watcher.poll() is not None:
                break
            subprocess.run(["sleep", "0.1"])
        assert marker.exists(), watcher.communicate(timeout=10)
        assert str(Path(place["env"]["HOME"]) / ".claude" / "projects") in json.loads(marker.read_text())["folders"]
    finally:
        watcher.terminate()
        _, err = watcher.communicate(timeout=20)
    assert "Traceback" not in err


def serves_and_answers_curl(place, command):
    installs_known_extras(command)
    serve = command.split("&& ", 1)[1]
    curl = next(c for c in readme_commands() if c.startswith("curl "))

    def asks(base):
        day = sh(place, curl.replace("http://127.0.0.1:8080", base).replace("2025-10-02", place["words"]["D"])
                 .replace("gpt-5", place["words"]["M"]))
        body = json.loads(day.stdout)
        expected = json.loads(sh(place, "reasonlog sessions --json --model M --label k=v").stdout)
        assert sorted(s["session_id"] for s in body["sessions"]) == sorted(s["id"] for s in expected)
        assert body["count"] == len(expected) > 0 and all(s["conversation"] for s in body["sessions"])

    serving(place, serve, asks)


def curl_is_asked_by_serve(place, command):
    assert command.startswith("curl 'http://127.0.0.1:8080/reasoning?")  # run against the server just above


def creates_a_key(place, command):
    assert sh(place, command).stdout.startswith("rlk_")


def lists_keys(place, command):
    assert "dashboard" in sh(place, command).stdout


def revokes_by_id_or_prefix(place, command):
    sh(place, "reasonlog keys create --scope read --name spare")
    keys = json.loads(sh(place, "reasonlog keys list --json").stdout)[-2:]
    for key, field in zip(keys, ("prefix", "id"), strict=True):  # one by its prefix, one by its id
        done = sh(place, command.replace("ID_OR_PREFIX", shlex.quote(key[field])))
        assert done.stdout.strip() == f"revoked {key[field]}"
    assert all(k["revoked_at"] for k in json.loads(sh(place, "reasonlog keys list --json").stdout)[-2:])


def form_only(place, command):
    with contextlib.chdir(place["folder"]):  # where the files it names are
        parses(command.rpartition("&& ")[2])


def install_form(place, command):
    installs_known_extras(command)


def opens_the_dashboard(place, command):
    assert "reasonlog dashboard on http://127.0.0.1:" in serving(place, command)


def exports_html(place, command):
    sh(place, command)
    assert (place["folder"] / "session.html").read_text().lstrip().lower().startswith("<!doctype html>")


def saves_a_record(place, command):
    assert re.fullmatch(r"saved approach [0-9A-Z]{6} \d+t\n", sh(place, command).stdout)


def shows_records(place, command):
    assert "Parse the quotes" in sh(place, command).stdout


def names_missing_phases(place, command):
    done = sh(place, command, ok=False)  # exit 1: a session of the demo's run saved no phase at all
    assert done.returncode == 1 and "understanding, completion" in done.stdout, done


def evaluates(place, command):
    """The check file the README names, run over the demo's sessions: each is scored, and found by its score."""
    (place["folder"] / "checks.py").write_text("def task_done(session):\n    return 1.0\n")
    sh(place, "reasonlog evaluate checks.py:task_done --sessions all")
    sh(place, command)
    assert place["words"]["SESSION"] in sh(place, "reasonlog sessions --score 'task_done>=1' --json").stdout


def tails(place, command):
    """`tail` follows until Ctrl-C, which ends it cleanly (exit 0, no traceback), in each of its forms."""
    for form in ("reasonlog tail SESSION", "reasonlog tail --agent A"):
        done = sh(place, f"timeout --preserve-status -s INT 3 {form}")
        assert "stopped" in done.stdout + done.stderr, (form, done.stdout, done.stderr)


def each_form(*forms):
    def run_forms(place, command):
        for form in forms:
            sh(place, form)
    return run_forms


def recounts(place, command):
    """The usage kept as calls are written is rebuilt, and `db check` finds it equal to the calls' sums."""
    sh(place, command)
    sh(place, "reasonlog db check")


def annotates(place, command):
    sh(place, command)
    shown = json.loads(sh(place, "reasonlog show SESSION --json").stdout)["session"]["annotations"]
    assert [(a["kind"], a["name"], a["value"], a["by"]) for a in shown[-2:]] == [
        ("note", None, "wrong ticker", "ana"), ("score", "task_done", 0.4, "ana")]


def finds_by_score(place, command):
    sh(place, "reasonlog annotate SESSION --note n --score task_done=0.4")
    found = json.loads(sh(place, command + " --json").stdout)
    assert [s["id"] for s in found] == [place["words"]["SESSION"]]


def shows_a_session(place, command):
    assert command.endswith(" [--full]")
    sh(place, "reasonlog show SESSION")
    sh(place, "reasonlog show SESSION --full")


def exports_and_imports(place, command):
    sh(place, command.replace("[SESSION...]", "SESSION"))
    sh(place, command.replace("[SESSION...] ", ""))
    assert "already present" in sh(place, "reasonlog import all.jsonl").stdout


def backs_up(place, command):
    assert sh(place, command).stdout.startswith("backed up ")


def prunes(place, command):
    sh(place, "reasonlog prune --older-than 30d --run R --agent A --dry-run")
    sh(place, "reasonlog prune --older-than 30d --yes")


def proxy_forms(place, command):
    """`reasonlog run -- claude …` needs the Claude Code CLI and its provider: parsed here (tests/test_proxy_clis.py
    runs the real CLI through it against a local upstream)."""
    installs_known_extras(command)
    form_only(place, command)


def prints_the_mcp_config(place, command):
    """The block Claude Code reads from .mcp.json, naming this installation's reasonlog (tests/test_mcp.py runs it
    with the real CLI)."""
    installs_known_extras(command)
    sh(place, command.rpartition("&& ")[2])
    server = json.loads((place["folder"] / ".mcp.json").read_text())["mcpServers"]["reasonlog"]
    assert server["args"][-1] == "mcp" and Path(server["command"]).is_absolute()


def proxy_starts(place, command):
    """The proxy starts (on a free port: no request is made, so nothing goes to a provider) and says so."""
    args = bound(command, place["words"]).replace("--port 8788", "") + f" --port {free_port()}"
    proxy = subprocess.Popen(["bash", "-c", f"exec {args}"], env=place["env"], cwd=place["folder"],
                             stderr=subprocess.PIPE, text=True)
    try:
        said = proxy.stderr.readline()
    finally:
        proxy.terminate()
        _, err = proxy.communicate(timeout=20)
    assert said.startswith("reasonlog proxy on http://127.0.0.1:") and "Traceback" not in err, said + err


def serves_and_summarises(place, command):
    serving(place, command)


def _replaying(place, command: str, *forms: tuple[str, str]) -> list[dict]:
    """Each (form, recorded answer) of a `replay --send` line against a stand-in for the provider on 127.0.0.1,
    which answers every request with that payload; the JSON each form printed."""
    from sdk_server import FixtureServer, Reply, load_json

    assert command.startswith("reasonlog replay ") and " --send" in command
    keyed = {**place, "env": {**place["env"], "OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test"}}
    reports = []
    for form, answer in forms:
        with FixtureServer() as upstream:
            body = load_json("openai-chat" if answer.startswith("openai") else "anthropic-messages", answer)
            upstream.default = Reply(200, json.dumps(body).encode(), "application/json")
            reports.append(json.loads(sh(keyed, f"{form} --base-url {upstream.url} --json").stdout))
    return reports


def replays_a_call(place, command):
    """The README's session is the demo's Claude agent: sent as recorded, then to an OpenAI model, translated."""
    same, named, other = _replaying(
        place, command, ("reasonlog replay CALL --send", "anthropic-text.json"),
        ("reasonlog replay CALL --send --model M", "anthropic-text.json"),
        ("reasonlog replay CALL --send --model gpt-4.1-nano --provider openai", "openai-text.json"))
    assert same["calls"][0]["replay"]["text"].startswith("Hello! I'm doing well")
    assert named["calls"][0]["replay"]["model"] == place["words"]["M"]
    assert other["calls"][0]["replay"]["text"].startswith("**Holiday Name:** Galaxy Day")


def replays_a_session(place, command):
    report, = _replaying(place, command, ("reasonlog replay SESSION --send --model M --concurrency 4 --max-cost 1",
                                          "anthropic-text.json"))
    assert report["totals"]["calls"] == len(report["calls"]) == 7 and report["totals"]["errors"] == 0


def summarises(place, command):
    assert re.search(r"^summarised \d+; failed 0$", sh(place, command).stderr, re.M)


def _embedding(place) -> contextlib.AbstractContextManager:
    """The place with its embeddings asked of a local OpenAI-shaped server (the local model's own tests are in
    test_semantic_cli.py; here a command line is checked as written, without loading a model twice)."""
    from embeddings_server import EmbeddingsServer

    @contextlib.contextmanager
    def served():
        with EmbeddingsServer() as server:
            yield {**place, "env": {**place["env"], "REASONLOG_EMBEDDINGS_URL": server.url,
                                    "REASONLOG_EMBEDDINGS_MODEL": "bow"}}
    return served()


def embeds(place, command):
    installs_known_extras(command)
    with _embedding(place) as served:
        done = sh(served, command.rpartition("&& ")[2])
    assert re.fullmatch(r"\d+ new units; \d+ texts embedded in [\d.]+ s \([\d,.]+ a second\)\n|0 new units; 0 texts"
                        r" embedded in [\d.]+ s\n", done.stdout), done.stdout


def searches_by_meaning(place, command):
    with _embedding(place) as served:
        sh(served, "reasonlog embed")
        out = sh(served, command).stdout
    lines = out.splitlines()  # two lines a hit (where, then the call and snippet), then the count
    assert lines[-1] == f"{(len(lines) - 1) // 2} hits, best first (hybrid)" and len(lines) % 2 == 1 < len(lines)


COMMANDS = {
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/reasonlog demo": start_demo,
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/pytest -q -n auto": start_tests,
    "pip install -e '.[proxy]' && reasonlog run -- claude -p \"fix the failing test\"": proxy_forms,
    "reasonlog proxy --port 8788": proxy_starts,
    'reasonlog run --replay SESSION -- claude -p "fix the failing test"': form_only,  # run: test_replay_clis.py
    'reasonlog run --from SESSION#3 --model claude-haiku-4-5 -- claude -p "…"': form_only,
    "reasonlog proxy --replay SESSION": proxy_starts,
    "reasonlog import ~/.claude/projects": imports_claude_code,
    "reasonlog import": imports_default_folders,
    "reasonlog import --list-formats": lists_formats,
    "reasonlog watch": watches,
    "pip install -e '.[server]' && reasonlog serve": serves_and_answers_curl,
    "curl 'http://127.0.0.1:8080/reasoning?date=2025-10-02&model=gpt-5&include_full_conversation=true'":
        curl_is_asked_by_serve,
    "reasonlog keys create --scope read --name dashboard": creates_a_key,
    "reasonlog keys list": lists_keys,
    "reasonlog keys revoke ID_OR_PREFIX": revokes_by_id_or_prefix,
    "reasonlog serve --host 0.0.0.0": form_only,
    "pip install -e '.[server,postgres]'": install_form,
    "reasonlog --db postgresql://reasonlog@db.internal/reasonlog serve --host 0.0.0.0 --workers 4 --keep-days 90":
        form_only,
    "pip install -e '.[server,postgres,mirror]'": install_form,
    "reasonlog --db postgresql://reasonlog@db.internal/reasonlog mirror push clickhouse://ch.internal:9000/reasonlog"
    " --watch": form_only,  # run: test_mirror_cli.py
    "reasonlog --db postgresql://reasonlog@db.internal/reasonlog serve --mirror clickhouse://ch.internal:9000/reasonlog":
        form_only,
    "reasonlog ui": opens_the_dashboard,
    "reasonlog export --format html SESSION -o session.html": exports_html,
    "reasonlog reason save --session orch-42 --agent developer --group DEL-INIT --phase approach --content-file "
    "compact.json --details-file reasoning.md": saves_a_record,
    "reasonlog reason show --session orch-42": shows_records,
    "reasonlog reason missing --phases understanding,completion": names_missing_phases,
    "reasonlog sessions [--run R] [--agent A] [--model M] [--label k=v] [--date D | --since D --until D] "
    "[--status S]": each_form("reasonlog sessions",
                              "reasonlog sessions --run R --agent A --model M --label k=v --date D --status S",
                              "reasonlog sessions --run R --agent A --model M --label k=v --since D --until D"
                              " --status S"),
    "reasonlog show SESSION [--full]": shows_a_session,
    "reasonlog stats --by day|model|agent|run": each_form(*(f"reasonlog stats --by {by}"
                                                            for by in ("day", "model", "agent", "run"))),
    "reasonlog replay CALL": each_form("reasonlog replay CALL", "reasonlog replay CALL --json"),
    "reasonlog diff CALL_A CALL_B": each_form("reasonlog diff CALL_A CALL_B"),
    'reasonlog search "some phrase"': each_form('reasonlog search "some phrase"', 'reasonlog search "buy"'),
    'reasonlog annotate SESSION --note "wrong ticker" --score task_done=0.4 --by ana': annotates,
    "reasonlog sessions --score 'task_done<0.5' --has-note": finds_by_score,
    "reasonlog evaluate checks.py:task_done --sessions agent=coder": evaluates,
    "reasonlog evaluate --judge openai --sessions status=failed": form_only,  # run: test_evaluate.py
    "reasonlog tail [SESSION | --agent A]": tails,
    "reasonlog export [SESSION...] -o all.jsonl": exports_and_imports,
    "reasonlog export --format exchange-jsonl SESSION": each_form("reasonlog export --format exchange-jsonl SESSION"),
    "reasonlog db path | status | upgrade": each_form("reasonlog db path", "reasonlog db status",
                                                      "reasonlog db upgrade"),
    "reasonlog db backup PATH": backs_up,
    "reasonlog db check": each_form("reasonlog db check"),
    "reasonlog db recount": recounts,
    "reasonlog prune --older-than 30d [--run R] [--agent A] [--dry-run]": prunes,
    "pip install -e '.[semantic]' && reasonlog embed": embeds,
    'reasonlog search "the agent gave up on the migration"': searches_by_meaning,
    "pip install -e '.[mcp]' && reasonlog mcp --print-config claude > .mcp.json": prints_the_mcp_config,
    "reasonlog replay CALL --send [--model M] [--provider anthropic|openai|gemini] [--base-url URL]": replays_a_call,
    "reasonlog replay SESSION --send --model M [--concurrency 4] [--max-cost USD] [--json]": replays_a_session,
    "reasonlog summarize": summarises,
    "reasonlog summarize --messages --run R": summarises,
    "reasonlog summarize --summarizer anthropic --model claude-haiku-4-5": form_only,
    "reasonlog summarize --summarizer openai --base-url http://127.0.0.1:11434/v1 --model same": form_only,
    "reasonlog summarize --summarizer anthropic --prompt-file mine.txt --stale": form_only,
    "reasonlog serve --summarize offline": serves_and_summarises,
}


def test_every_shell_command_of_the_readme_is_run_here():
    assert readme_commands() == list(COMMANDS)


@pytest.mark.parametrize("command", list(COMMANDS), ids=lambda c: c[:60])
@pytest.mark.slow
@pytest.mark.xdist_group("readme-commands")  # one folder, in README order: a key listed after it is made
def test_the_readme_command_works_as_written(request, place, command):
    if request.config.getoption("dist", "no") == "loadgroup":  # else two workers would each hold half the commands
        assert request.node.nodeid.endswith("@readme-commands"), \
            "pytest-xdist ignored xdist_group (pytest 9.2 with xdist 3.8): the commands would not run in one worker"
    COMMANDS[command](place, command)


# ------------------------------------------------------------------------------------------ Python blocks
# Every ```python block of the README and docs/ runs as written, in a fresh interpreter and folder, with its
# providers a stand-in on 127.0.0.1 (tests/docs_upstream.py), which the Claude Code CLI the Claude Agent SDK bundles
# is pointed at too. A block that is deliberately a fragment says so in the sentence before it with FRAGMENT,
# and runs after the block above it, as a reader would run it.

FRAGMENT = "(continues the block above)"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# What each block records, read back from every database it wrote: (its sessions, their calls).
RECORDS = {"README.md#1": (1, 1), "README.md#2": (1, 0), "README.md#3": (1, 1), "README.md#4": (1, 1),
           "README.md#5": (1, 1), "integrations.md#1": (1, 2), "integrations.md#2": (1, 3),
           "integrations.md#3": (1, 1), "integrations.md#4": (0, 0), "review.md#1": (1, 1)}


def python_blocks() -> dict[str, str]:
    """Each doc's Python blocks by `doc#N`, a fragment joined to the block above it."""
    blocks: dict[str, str] = {}
    for doc in DOCS:
        text, end, previous = doc.read_text(), 0, ""
        for n, m in enumerate(re.finditer(r"```python\n(.*?)```", text, re.S), 1):
            code = m.group(1)
            if FRAGMENT in text[end:m.start()].split("\n\n")[-1]:
                code = previous + "\n" + code
            blocks[f"{doc.name}#{n}"] = previous = code
            end = m.end()
    return blocks


def test_every_python_block_of_the_docs_is_run_here():
    assert list(python_blocks()) == list(RECORDS)


@pytest.mark.parametrize("block", list(RECORDS))
@pytest.mark.slow
def test_the_docs_python_block_runs_as_written(tmp_path, block):
    from docs_upstream import DocsUpstream

    code = python_blocks()[block]
    (tmp_path / "block.py").write_text(code)
    with DocsUpstream() as upstream:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("REASONLOG_", "ANTHROPIC_", "OPENAI_"))},
               "HOME": str(tmp_path), "REASONLOG_DB": str(tmp_path / "readme.db"),
               "ANTHROPIC_BASE_URL": upstream.url, "ANTHROPIC_API_KEY": "sk-ant-test",
               "OPENAI_BASE_URL": upstream.url + "/v1", "OPENAI_API_KEY": "sk-test",
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        done = subprocess.run([sys.executable, "block.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    recorded = [reasonlog.open_store(db, read_only=True).list_sessions(reasonlog.SessionFilter(limit=None))
                for db in sorted(tmp_path.glob("*.db"))]
    sessions = [s for found in recorded for s in found]
    assert (len(sessions), sum(s["call_count"] for s in sessions)) == RECORDS[block], sessions
