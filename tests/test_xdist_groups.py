"""The suite runs on every core (``pytest -n auto --dist loadgroup``, issue 29): the tests that
share a module's fixture (a venv, a server, a wheel built once) and the serving tests are given
one ``xdist_group`` each by tests/conftest.py, so a shared thing is built once, on one worker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent

PLUGIN = """
import json, pytest
class Groups:
    def pytest_collection_finish(self, session):
        found = {}
        for item in session.items:
            mark = item.get_closest_marker("xdist_group")
            found[item.nodeid] = mark.args[0] if mark else None
        print("GROUPS " + json.dumps(found))
raise SystemExit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *ARGS],
                             plugins=[Groups()]))
"""


def groups(*files: str) -> dict[str, str | None]:
    code = PLUGIN.replace("*ARGS", ", ".join(repr(f) for f in files))
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=TESTS, check=False
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("GROUPS "))
    found: dict[str, str | None] = json.loads(line.removeprefix("GROUPS "))
    return found


def test_tests_sharing_a_module_fixture_share_a_group_and_the_others_have_none():
    found = groups("test_named_outputs.py", "test_cli.py")
    shared = {g for node, g in found.items() if "test_named_outputs.py::" in node}
    assert "test_named_outputs" in shared  # its loopback index, started once a module
    assert {g for node, g in found.items() if "test_cli.py::" in node} == {None}


def test_the_serving_tests_run_on_one_worker():
    found = groups("test_serving_cpu.py", "test_replica_weights.py")
    assert set(found.values()) == {"serving"}
