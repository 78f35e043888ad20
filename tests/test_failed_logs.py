"""Issue 38, 4: an error names a uv log that still exists. A failed uv run's log is kept under
the cache, so a caller that wrote it into a staging folder deleted on the way out (a bundle's
resolve) names a file that is there; where no copy can be kept, no log is named."""

from __future__ import annotations

import re
import shutil
import stat
from pathlib import Path

import pytest

from patcher.errors import PatcherError
from patcher.pipconfig import pip_sources
from patcher.venvs import FAILED_LOGS_KEPT, Uv

FAILING = {
    "unknown-subcommand": ["no-such-subcommand"],
    "missing-python": ["pip", "install", "--python", "{tmp}/none/bin/python", "x"],
    "venv-of-no-python": ["venv", "--python", "{tmp}/none/python", "{tmp}/v"],
    "no-index": ["pip", "install", "--python", "{tmp}/none", "--no-index", "nothing-0"],
    "bad-requirement": ["pip", "compile", "{tmp}/missing-requirements.in"],
}


def failed_run(tmp_path: Path, args: list[str]) -> str:
    """The error of a uv run that fails, its log written in a staging folder deleted after."""
    staging = tmp_path / ".out.staging"
    staging.mkdir()
    log = staging / "uv.log"
    try:
        with log.open("w") as out:
            Uv(out, log, pip_sources()).run([a.format(tmp=tmp_path) for a in args], "x.whl")
    except PatcherError as error:
        return str(error)
    finally:
        shutil.rmtree(staging)
    raise AssertionError("uv succeeded")


@pytest.mark.parametrize("case", FAILING)
def test_the_log_an_error_names_outlives_the_staging_folder(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))
    message = failed_run(tmp_path, FAILING[case])
    named = re.fullmatch(r"uv could not install x\.whl \(log: (.+)\)", message)
    assert named, message
    log = Path(named.group(1))
    assert log.is_file() and log.parent == tmp_path / "cache" / "logs"
    assert log.read_text().startswith("$ "), "the command line and uv's output"


def test_no_log_is_named_where_none_can_be_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "logs").write_text("a file where the folder would go")
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(cache))
    assert failed_run(tmp_path, FAILING["unknown-subcommand"]) == "uv could not install x.whl"


def test_only_the_newest_failed_logs_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATCHER_CACHE_DIR", str(tmp_path / "cache"))
    logs = tmp_path / "cache" / "logs"
    logs.mkdir(parents=True)
    for n in range(FAILED_LOGS_KEPT + 5):
        (logs / f"uv-20000101-0000{n:02d}-old.log").write_text("old")
    mine = logs / "notes.txt"
    mine.write_text("not a uv log")
    mine.chmod(stat.S_IRUSR)
    message = failed_run(tmp_path, FAILING["unknown-subcommand"])
    kept = sorted(logs.glob("uv-*.log"))
    assert len(kept) == FAILED_LOGS_KEPT and str(kept[-1]) in message
    assert mine.read_text() == "not a uv log"
