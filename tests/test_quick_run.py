"""The quick run (`pytest -m "not slow"`, the README's) touches every test module: a module whose tests are all
marked `slow` needs a quick one beside them (a few examples of its property, one case of its kind)."""
from __future__ import annotations

from conftest import QUICK_MODULES


def test_every_test_module_has_a_test_the_quick_run_runs(request):
    """Of the modules collected in this run (all of them in a whole or quick run), those with no quick test."""
    quick = request.config.stash[QUICK_MODULES]
    assert len(quick) >= 1 and "tests/test_quick_run.py" in quick
    assert sorted(module for module, has_quick in quick.items() if not has_quick) == []
