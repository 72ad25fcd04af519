"""The suite never touches the user's own data folder (issue 18 item 2): it runs in a home of its own, and a run
that changes the user's real folder fails."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import platformdirs
from conftest import REAL_DATA, TEST_HOME

import reasonlog
from reasonlog.reasoning import artifacts

TESTS = Path(__file__).resolve().parent


def test_the_suite_runs_in_a_home_of_its_own():
    data = Path(platformdirs.user_data_dir("reasonlog", appauthor=False))
    assert data.is_relative_to(TEST_HOME) and not data.is_relative_to(REAL_DATA)
    assert reasonlog.store.default_db_path().is_relative_to(TEST_HOME)
    assert artifacts.default_root().is_relative_to(TEST_HOME)
    assert Path.home() == TEST_HOME and "REASONLOG_DB" not in os.environ


INNER_CONFTEST = f'''
import importlib.util

_spec = importlib.util.spec_from_file_location("reasonlog_conftest", {str(TESTS / "conftest.py")!r})
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
globals().update({{k: v for k, v in vars(_module).items() if not k.startswith("__") and k != "pytest_plugins"}})
'''

INNER_TESTS = '''
import platformdirs
from pathlib import Path

from conftest import REAL_DATA


def test_writes_where_tests_should():
    folder = Path(platformdirs.user_data_dir("reasonlog", appauthor=False)) / "artifacts"
    folder.mkdir(parents=True)
    (folder / "fine.md").write_text("in the test home")


def test_writes_into_the_users_folder():
    (REAL_DATA / "artifacts").mkdir(parents=True)
    (REAL_DATA / "artifacts" / "leaked.md").write_text("<script>window.__xss=7</script>")
'''


def test_a_run_that_writes_into_the_users_data_folder_fails(tmp_path):
    """A pytest run whose "user" has a home in tmp_path: the test that writes into that user's data folder makes
    the run fail, naming the folder and the file; the one that writes into the test home does not."""
    inner, user_home = tmp_path / "inner", tmp_path / "user"
    inner.mkdir()
    user_home.mkdir()
    (inner / "conftest.py").write_text(INNER_CONFTEST)
    (inner / "test_inner.py").write_text(INNER_TESTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME=str(user_home), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")  # quicker: no plugin is needed
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(inner)],
                            cwd=inner, env=env, capture_output=True, text=True, timeout=120)
    users = user_home / ".local" / "share" / "reasonlog"
    assert result.returncode == 1, result.stdout
    assert f"the tests changed the user's data folder {users}: artifacts, artifacts/leaked.md" in result.stdout
    assert "2 passed, 1 error" in result.stdout
    assert (users / "artifacts" / "leaked.md").exists() and not (users / "artifacts" / "fine.md").exists()
