"""Issue 25 item 6: `reasonlog ui` signs its owner in with a one-time token in the address it opens (as Jupyter
does); the token works once, becomes a session cookie (HttpOnly, SameSite=Strict), is never logged or stored, and
everyone else still needs an API key once keys exist."""
from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from test_ingest import free_port

import reasonlog
from reasonlog.server.app import create_app
from reasonlog.store import open_store

TOKEN = "one-time-token-9f2c4e1a7b"


@pytest.fixture
def keyed(tmp_path):
    """A database with a session and a read key."""
    db = tmp_path / "t.db"
    rec = reasonlog.Recorder(db, writer="sync")
    with rec.session(agent="owner-test") as s:
        s.call(messages=[{"role": "user", "content": "hi"}], response={"role": "assistant", "content": "hello"})
    rec.close()
    store = open_store(db)
    key = store.create_api_key("read")["secret"]
    store.close()
    return db, key


def app_of(db, token=TOKEN):
    return create_app(lambda: open_store(db), login_token=token)


def test_the_token_signs_in_once_with_a_strict_http_only_cookie(keyed, caplog):
    caplog.set_level(logging.DEBUG)
    db, _ = keyed
    app = app_of(db)
    owner = TestClient(app)
    first = owner.get("/login", params={"token": TOKEN}, follow_redirects=False)
    assert (first.status_code, first.headers["location"]) == (303, "/")
    cookie = first.headers["set-cookie"]
    assert cookie.startswith("reasonlog_owner=") and TOKEN not in cookie
    assert {p.strip().lower() for p in cookie.split(";")[1:]} >= {"httponly", "samesite=strict", "path=/"}
    assert "owner-test" in owner.get("/").text  # the sessions page, no key asked
    again = TestClient(app).get("/login", params={"token": TOKEN}, follow_redirects=False)
    assert again.status_code == 401 and "used already" in again.text and "set-cookie" not in again.headers
    server_side = [r.getMessage() for r in caplog.records if not r.name.startswith("httpx")]  # not the client's
    assert server_side and not any(TOKEN in m for m in server_side)


@pytest.mark.slow
def test_without_the_token_a_key_is_still_demanded(keyed):
    db, key = keyed
    app = app_of(db)
    TestClient(app).get("/login", params={"token": TOKEN})  # the owner has signed in
    stranger = TestClient(app)
    page = stranger.get("/", follow_redirects=False)
    assert (page.status_code, page.headers["location"]) == (303, "/login?next=/")
    assert stranger.get("/login", params={"token": "guessed"}, follow_redirects=False).status_code == 401
    assert stranger.get("/usage.csv").status_code == 401
    forged = TestClient(app, cookies={"reasonlog_owner": TOKEN})
    assert forged.get("/", follow_redirects=False).status_code == 303
    assert stranger.get("/v1/sessions").status_code == 401  # the API never took the owner's cookie
    signed = stranger.post("/login", data={"key": key, "next": "/"}, follow_redirects=False)
    assert signed.status_code == 303 and "owner-test" in stranger.get("/").text


@pytest.mark.slow
def test_a_server_without_a_token_takes_none(keyed):
    db, _ = keyed
    client = TestClient(app_of(db, token=None))
    assert client.get("/login", params={"token": ""}, follow_redirects=False).status_code == 401
    assert client.get("/login", params={"token": "None"}, follow_redirects=False).status_code == 401


@pytest.mark.slow
def test_reasonlog_ui_opens_the_browser_with_a_token_that_works_once(keyed, tmp_path):
    """The real command: its browser is a script that asks the dashboard's front page at once, as a browser does
    (a refused connection is what a person saw when the browser came up before the server), then writes down the
    address it was given ($BROWSER)."""
    db, _ = keyed
    seen, answered = tmp_path / "opened.txt", tmp_path / "answered.txt"
    browser = tmp_path / "browser.sh"
    ask = ("import sys, urllib.request, urllib.error\n"
           "try:\n    urllib.request.urlopen(sys.argv[1].split('login?')[0], timeout=30); print('200')\n"
           "except urllib.error.HTTPError as e:\n    print(e.code)\n"
           "except OSError as e:\n    print(type(e).__name__, e)\n")
    (tmp_path / "ask.py").write_text(ask)
    browser.write_text(f'#!/bin/sh\n{sys.executable} {tmp_path / "ask.py"} "$1" > {answered}\n'
                       f'printf "%s" "$1" > {seen}\n')
    browser.chmod(browser.stat().st_mode | stat.S_IEXEC)
    port = free_port()
    env = {**os.environ, "BROWSER": str(browser), "REASONLOG_DB": str(db)}
    proc = subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db), "ui", "--port", str(port)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = _wait_for(seen)
        assert url.startswith(f"http://127.0.0.1:{port}/login?token=") and len(url.split("=", 1)[1]) >= 40
        assert answered.read_text().strip() == "200"  # the front page answered the browser's first try
        with httpx.Client() as owner:
            first = owner.get(url, follow_redirects=False)
            assert first.status_code == 303 and "httponly" in first.headers["set-cookie"].lower()
            assert "owner-test" in owner.get(f"http://127.0.0.1:{port}/").text
        assert httpx.get(url, follow_redirects=False).status_code == 401
        assert httpx.get(f"http://127.0.0.1:{port}/", follow_redirects=False).status_code == 303
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    token = url.split("=", 1)[1]
    assert token not in err and f"reasonlog dashboard on http://127.0.0.1:{port}/" in err
    assert all(token.encode() not in p.read_bytes() for p in Path(db).parent.iterdir() if p.is_file()
               and p.name.startswith(Path(db).name))


@pytest.mark.slow
def test_reasonlog_ui_without_a_browser_prints_the_sign_in_address(keyed):
    db, _ = keyed
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "reasonlog", "--db", str(db), "ui", "--no-browser", "--port",
                             str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        said = [proc.stderr.readline().strip() for _ in range(2)]  # the address, then how to sign in
        assert said[0].startswith(f"reasonlog dashboard on http://127.0.0.1:{port}/ ")
        assert said[1].startswith(f"open http://127.0.0.1:{port}/login?token=") and said[1].endswith(
            " (it signs you in once)")
        url = said[1].split()[1]
        deadline = time.monotonic() + 30
        while True:
            try:
                first = httpx.get(url, follow_redirects=False)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "reasonlog ui did not start"
                time.sleep(0.1)
        assert first.status_code == 303 and httpx.get(url, follow_redirects=False).status_code == 401
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def _wait_for(path: Path, within_s: float = 30.0) -> str:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.1)
    raise AssertionError("reasonlog ui opened no browser")
