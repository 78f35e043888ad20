"""The command line on real 0.16.0 code: diff, apply, matrix, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import git
import pytest
from conftest import copy_tree, one_error_line

from patcher import patchset as patchsets
from patcher.cli.parser import main


@pytest.mark.network
def test_diff_writes_a_unified_diff_and_nothing_else(capsys):
    assert main(["diff", "--vllm", "0.16.0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--- a/vllm/")
    files = [line[6:] for line in out.splitlines() if line.startswith("+++ b/")]
    assert files == [
        "vllm/config/speculative.py",
        "vllm/model_executor/models/deepseek_v2.py",
        "vllm/model_executor/models/kimi_k25.py",
        "vllm/v1/spec_decode/eagle.py",
    ]


@pytest.mark.network
def test_source_dir_and_git_ref_give_the_same_diff_as_the_release(tree_0_16, tmp_path, capsys):
    assert main(["diff", "--vllm", "0.16.0"]) == 0
    from_index = capsys.readouterr().out
    assert main(["diff", "--source", str(tree_0_16)]) == 0
    assert capsys.readouterr().out == from_index
    repo = git_repo(tree_0_16, tmp_path / "repo")
    assert main(["diff", "--git", repo.working_dir, "--ref", "v0.16.0"]) == 0
    assert capsys.readouterr().out == from_index


@pytest.mark.network
def test_apply_patches_in_place_and_a_second_apply_changes_nothing(tree_0_16, tmp_path, capsys):
    root = copy_tree(tree_0_16, tmp_path / "vllm-tree")
    assert main(["apply", "--source", str(root)]) == 0
    out, err = capsys.readouterr()
    assert "verdict: needs-patch" in err and out.startswith("patched 4 file(s)")
    speculative = (root / "vllm/config/speculative.py").read_text()
    assert '"kimi_k2",' in speculative
    before = {p: p.read_bytes() for p in root.rglob("*.py")}
    assert main(["apply", "--source", str(root)]) == 0
    assert "verdict: upstream" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in root.rglob("*.py")} == before
    assert not list(root.rglob("*.patcher"))


@pytest.mark.network
def test_apply_refuses_a_tree_it_cannot_patch_and_writes_nothing(tree_0_16, tmp_path, capsys):
    root = copy_tree(tree_0_16, tmp_path / "odd")
    forward = root / "vllm/model_executor/models/deepseek_v2.py"
    forward.write_text(
        forward.read_text().replace(
            "for layer in islice(self.layers, self.start_layer, self.end_layer):",
            "for layer in self.pick_layers():",
        )
    )
    before = {p: p.read_bytes() for p in root.rglob("*.py")}
    assert main(["apply", "--source", str(root)]) == 2
    assert "eagle3-interface failed" in one_error_line(capsys)
    assert {p: p.read_bytes() for p in root.rglob("*.py")} == before


@pytest.mark.network
def test_unknown_version_names_the_nearest_releases(capsys):
    assert main(["diff", "--vllm", "0.16.5"]) == 2
    err = one_error_line(capsys)
    assert "0.16.0" in err and "0.17.0" in err


def test_directory_that_is_not_vllm(tmp_path, capsys):
    assert main(["apply", "--source", str(tmp_path)]) == 2
    assert "not a vLLM source tree" in one_error_line(capsys)


def test_wheel_that_is_not_a_zip(tmp_path, capsys):
    bogus = tmp_path / "vllm-0.16.0-cp38-abi3-manylinux_2_31_x86_64.whl"
    bogus.write_bytes(b"PK but not really")
    assert main(["diff", "--wheel", str(bogus)]) == 2
    assert "not a wheel" in one_error_line(capsys)


@pytest.mark.network
def test_matrix_flags_drift_and_writes_json_and_markdown(tmp_path, capsys):
    wrong = write_patchset(tmp_path / "wrong.toml", *DECLARED_UPSTREAM_SINCE_0_16)
    report, table = tmp_path / "m.json", tmp_path / "m.md"
    code = main(
        [
            "matrix",
            "--versions",
            "0.14.1,0.16.0,0.18.0",
            "--patchset",
            str(wrong),
            "--json",
            str(report),
            "--markdown",
            str(table),
        ]
    )
    assert code == 1
    rows = json.loads(report.read_text())["releases"]
    assert [(r["vllm"], r["verdict"], r["drift"]) for r in rows] == [
        ("0.14.1", "unsupported", False),
        ("0.16.0", "needs-patch", True),
        ("0.18.0", "upstream", False),  # read by range, settled: every Python member searched
    ]
    assert rows[1]["patches"] == {
        "eagle3-whitelist": "applied",
        "mm-image-token": "applied",
        "eagle3-interface": "applied",
        "eagle-target-backbone": "not-needed",
    }
    assert (
        "| 0.16.0 | applied | applied | applied | not-needed | needs-patch (drift) | upstream |"
        in (table.read_text())
    )
    assert "drifted" in capsys.readouterr().err


@pytest.mark.network
def test_matrix_without_drift_exits_zero(capsys):
    assert main(["matrix", "--versions", "0.16.0,0.33.0"]) == 0
    assert "needs-patch" in capsys.readouterr().out


def git_repo(tree: Path, into: Path) -> git.Repo:
    """A repository whose tag v0.16.0 holds the 0.16.0 files, as a vLLM checkout would."""
    repo = git.Repo.init(copy_tree(tree, into))
    repo.index.add([str(p) for p in Path(repo.working_dir).rglob("*.py")])
    repo.index.commit(
        "0.16.0", author=git.Actor("t", "t@localhost"), committer=git.Actor("t", "t@localhost")
    )
    repo.create_tag("v0.16.0")
    return repo


@pytest.mark.network
def test_apply_to_git_commits_on_a_new_branch_and_leaves_the_work_tree(tree_0_16, tmp_path, capsys):
    repo = git_repo(tree_0_16, tmp_path / "repo")
    work_tree = {p: p.read_bytes() for p in Path(repo.working_dir).rglob("*.py")}
    head = repo.head.commit.hexsha
    args = ["apply", "--git", repo.working_dir, "--ref", "v0.16.0", "--branch", "kimi-eagle3"]
    assert main(args) == 0
    assert "on branch kimi-eagle3" in capsys.readouterr().out
    commit = repo.commit("kimi-eagle3")
    assert [p.hexsha for p in commit.parents] == [head]
    assert sorted(commit.stats.files) == [
        "vllm/config/speculative.py",
        "vllm/model_executor/models/deepseek_v2.py",
        "vllm/model_executor/models/kimi_k25.py",
        "vllm/v1/spec_decode/eagle.py",
    ]
    assert (
        main(
            ["diff", "--git", repo.working_dir, "--ref", "kimi-eagle3", "--vllm-version", "0.16.0"]
        )
        == 0
    )
    assert capsys.readouterr().out == ""  # the branch needs no patch: it has it
    assert repo.head.commit.hexsha == head and not repo.is_dirty()
    assert {p: p.read_bytes() for p in Path(repo.working_dir).rglob("*.py")} == work_tree
    assert main(args) == 2
    assert "exists already" in one_error_line(capsys)


def write_patchset(path: Path, *replacements: tuple[str, str]) -> Path:
    """The default patchset with each ``(old, new)`` replaced once (``old`` must occur)."""
    text = (patchsets.builtin_dir() / "kimi-k2.5-eagle3.toml").read_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new, 1)
    path.write_text(text)
    return path


DECLARED_UPSTREAM_SINCE_0_16 = (
    ('versions = ">=0.18.0"', 'versions = ">=0.16.0"'),
    ('versions = ">=0.15.0,<0.18.0"', 'versions = ">=0.15.0,<0.16.0"'),
)


@pytest.mark.network
def test_an_empty_diff_says_why_on_stderr(tmp_path, capsys):
    assert main(["diff", "--vllm", "0.14.1"]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert (
        "vllm 0.14.1 is unsupported for kimi-k2.5-eagle3: no KimiK25ForConditionalGeneration"
        in (err)
    )
    assert main(["diff", "--vllm", "0.18.0"]) == 0
    out, err = capsys.readouterr()
    # issue 28: read by range, the release settles: every absence searched for, none unknown
    assert out == "" and "vllm 0.18.0 needs no patch for kimi-k2.5-eagle3" in err
    assert "eagle3-whitelist present" in err and "eagle-target-backbone not-needed" in err
    assert "unknown" not in err
    empty = tmp_path / "empty.toml"
    empty.write_text('name = "empty"\npatches = []\n\n[model]\ntypes = ["kimi_k2"]\n')
    assert main(["diff", "--vllm", "0.16.0", "--patchset", str(empty)]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "the patchset empty has no patches" in err


@pytest.mark.network
def test_a_tree_version_too_long_to_parse_is_one_line(tree_0_16, tmp_path, capsys):
    root = copy_tree(tree_0_16, tmp_path / "long")
    (root / "vllm/_version.py").write_text(f"__version__ = '{'9' * 5000}'\n")
    assert main(["diff", "--source", str(root)]) == 2
    assert "is not a valid version" in one_error_line(capsys)
    assert main(["diff", "--source", str(tree_0_16), "--vllm-version", "9" * 5000]) == 2
    assert "is not a valid version" in one_error_line(capsys)


@pytest.mark.network
def test_apply_fails_where_it_applies_nothing_or_drifts(tree_0_16, tmp_path, capsys):
    bare = copy_tree(tree_0_16, tmp_path / "no-kimi")
    (bare / "vllm/model_executor/models/kimi_k25.py").unlink()
    before = {p: p.read_bytes() for p in bare.rglob("*.py")}
    assert main(["apply", "--source", str(bare)]) == 2
    assert "nothing applied: vllm 0.16.0 is unsupported" in one_error_line(capsys)
    assert {p: p.read_bytes() for p in bare.rglob("*.py")} == before

    drift = write_patchset(tmp_path / "drift.toml", *DECLARED_UPSTREAM_SINCE_0_16)
    tree = copy_tree(tree_0_16, tmp_path / "drift")
    before = {p: p.read_bytes() for p in tree.rglob("*.py")}
    assert main(["apply", "--source", str(tree), "--patchset", str(drift)]) == 1
    out, err = capsys.readouterr()
    assert "patched" not in out
    assert "vllm 0.16.0 came out needs-patch (eagle3-whitelist applied" in err
    assert "but kimi-k2.5-eagle3 declares upstream for it; nothing written" in err
    assert {p: p.read_bytes() for p in tree.rglob("*.py")} == before


def network(argv: list[str], message: str):
    """A case that reads the index's list of releases before it refuses."""
    return pytest.param(argv, message, marks=pytest.mark.network)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["apply", "--source", "/nonexistent", "--branch", "b"], "--branch goes with --git"),
        (["apply", "--source", "/nonexistent", "--ref", "v0.16.0"], "--ref goes with --git"),
        (["apply", "--git", "/nonexistent", "--ref", "v", "--branch", "b", "--force"], "--force"),
        (["diff", "--vllm", "0.16.0", "--vllm-version", "0.16.0"], "--vllm-version goes with"),
        (["matrix", "--versions", "0.16.0", "--since", "0.15.0"], "--versions and --since"),
        (["matrix", "--since", "garbage"], "--since 'garbage' is not a valid version"),
        # past Python's 4300-digit int limit Version() raises a plain ValueError
        (["matrix", "--since", "9" * 5000], "is not a valid version"),
        # these list the index's releases before they can refuse
        network(["matrix", "--since", "99.0"], "no release on the index since 99.0"),
        network(["diff", "--vllm", ""], "'' is not a valid version"),
        network(["diff", "--vllm", "9" * 5000], "is not a valid version"),
        network(["matrix", "--versions", "0.16.0," + "9" * 5000], "is not a valid version"),
        network(
            ["build-wheel", "--vllm", "0.16.0", "--local-label", "9" * 5000],
            "local label of 5000 characters: at most 100",
        ),
    ],
)
def test_flags_that_conflict_or_select_nothing_are_one_line_errors(argv, message, capsys):
    assert main(argv) == 2
    assert message in one_error_line(capsys)


def test_ctrl_c_is_left_to_patcher_not_to_the_matrix_worker_processes(tmp_path):
    """Ctrl-C reaches the whole process group: the forkserver, still importing patcher for
    its preload, and its workers each printed a KeyboardInterrupt traceback under patcher's
    one line. They ignore SIGINT; patcher itself stops them."""
    probe = (
        "import signal\n"
        "from multiprocessing import forkserver\n"
        "from patcher.matrix import process_pool\n"
        "with process_pool() as pool:\n"
        "    worker = pool.submit(signal.getsignal, signal.SIGINT).result()\n"
        "    server = forkserver._forkserver._forkserver_pid\n"
        "    status = open(f'/proc/{server}/status').read().split('SigIgn:')[1].split()[0]\n"
        "    print(worker == signal.SIG_IGN, bool(int(status, 16) & (1 << (signal.SIGINT - 1))))\n"
        "    print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    )
    # away from the source tree, which `python -c` would import instead of the installed patcher
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["True", "True", "True"], done.stderr


def test_a_git_branch_without_vllm_version_asks_for_it(tmp_path, capsys):
    """issue 22: ``--ref kimi`` (a branch) failed with "'kimi' is not a valid version" and did
    not say that --vllm-version gives it. A real repository with a branch of that name."""
    root = tmp_path / "repo"
    (root / "vllm").mkdir(parents=True)
    (root / "vllm/__init__.py").write_text("")
    repo = git.Repo.init(root)
    repo.index.add(["vllm/__init__.py"])
    repo.index.commit("a", author=git.Actor("t", "t@localhost"), committer=git.Actor("t", "t@x"))
    repo.create_head("kimi")
    assert main(["diff", "--git", str(root), "--ref", "kimi"]) == 2
    error = one_error_line(capsys)
    assert f"{root}@kimi: the ref is not a release tag" in error
    assert "say which release it holds with --vllm-version" in error
