"""Tensor parallelism on CPU, offline: the flags and the thread binding vLLM's CPU docs ask for,
the baseline kept at one rank, and more ranks than cores refused in one line before any work.

The served run is ``nox -s acceptance-tp2`` (heavy: three compiled servers); here nothing runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import one_error_line

from patcher.cache import CACHE_ENV
from patcher.cli.parser import main
from patcher.errors import PatcherError
from patcher.serving.cpu import CPU_ENV, THREADS_BIND, CpuSetup, RunPlan, threads_bind
from patcher.serving.venv import ServingVenv
from patcher.torches import LOCAL_DISK, TorchChoice

TORCH = TorchChoice("torch==2.13.0+cpu", "torch==2.13.0+cpu", LOCAL_DISK)
VENV = ServingVenv(Path("/nonexistent/venv"), Path("v.whl"), "0" * 64, False, 0.0, TORCH)


@pytest.mark.parametrize(
    ("ranks", "cores", "bound"),
    [
        (2, (0, 1), "0|1"),  # this machine: vLLM's auto refuses two ranks on one NUMA node
        (1, (0, 1), "0,1"),
        (2, (0, 1, 2, 3), "0,1|2,3"),
        (3, (0, 1, 2, 3, 4), "0,1|2,3|4"),
        (2, (4, 5, 8, 9), "4,5|8,9"),  # the ids this process may use, not 0..n-1
    ],
)
def test_each_rank_gets_its_own_contiguous_share_of_the_cores(ranks, cores, bound):
    assert threads_bind(ranks, cores) == bound


def test_more_ranks_than_cores_is_refused():
    with pytest.raises(PatcherError, match=r"^--tp 3 needs a core per rank: .* on 2 \(0,1\)$"):
        threads_bind(3, (0, 1))


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_two_ranks_serve_with_the_mp_executor_and_bound_threads():
    setup = CpuSetup("m", "d", env=dict(CPU_ENV), tensor_parallel_size=2, cores=(0, 1))
    argv = setup.command(Path("python"), 8000, speculative=True)
    assert option(argv, "--tensor-parallel-size") == "2"
    assert option(argv, "--distributed-executor-backend") == "mp"
    assert setup.server_env() == {**CPU_ENV, THREADS_BIND: "0|1"}
    assert setup.parallel_note() == (
        "the EAGLE-3 runs at tensor parallel size 2 (VLLM_CPU_OMP_THREADS_BIND=0|1, "
        "--distributed-executor-backend mp), the baseline at 1"
    )


def test_one_rank_serves_as_before_without_parallel_flags_or_binding():
    setup = CpuSetup("m", "d", env=dict(CPU_ENV), cores=(0, 1))
    argv = setup.command(Path("python"), 8000, speculative=True)
    assert "--tensor-parallel-size" not in argv and "--distributed-executor-backend" not in argv
    assert setup.server_env() == CPU_ENV and setup.parallel_note() is None


def test_the_baseline_keeps_one_rank_while_the_eagle3_runs_take_the_setups():
    setup = CpuSetup("m", "d", tensor_parallel_size=2, cores=(0, 1))
    baseline = RunPlan("baseline", VENV, False, tensor_parallel_size=1).setup_of(setup)
    eagle3 = RunPlan("patched+eagle3", VENV, True).setup_of(setup)
    control = RunPlan("control+eagle3", VENV, True, drafter="blind").setup_of(setup)
    assert baseline.tensor_parallel_size == 1 and THREADS_BIND not in baseline.server_env()
    assert eagle3.tensor_parallel_size == control.tensor_parallel_size == 2
    assert (eagle3.drafter, control.drafter) == ("d", "blind")


@pytest.mark.parametrize("acceptance", [[], ["--acceptance", "--patchset=glm4-moe-eagle3"]])
def test_cpu_serving_with_more_ranks_than_cores_stops_before_any_work(acceptance, tmp_path, capsys):
    cores = len(os.sched_getaffinity(0))
    cache = tmp_path / "cache"
    argv = ["serve-bench", "--device=cpu", "--vllm=0.32.0", f"--tp={cores + 1}", *acceptance]
    argv.append(f"--log-dir={tmp_path / 'logs'}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(cache))
        assert main(argv) == 2
    assert f"--tp {cores + 1} needs a core per rank" in one_error_line(capsys)
    assert not cache.exists() and not (tmp_path / "logs").exists()


def test_cpu_serving_takes_tp_as_far_as_the_index(tmp_path, capsys):
    """``--tp`` was a GPU-only flag, refused with ``--device cpu``; two ranks now go on to the
    work (here the offline guard's closed index)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(tmp_path / "cache"))
        argv = ["serve-bench", "--device=cpu", "--vllm=0.32.0", "--tp=2", "--with-patched"]
        # the closed index is a network failure: exit 3 (issue 41)
        assert main([*argv, "--patchset=glm4-moe-eagle3", f"--log-dir={tmp_path}/l"]) == 3
    error = one_error_line(capsys)
    assert "goes with" not in error and "needs a core per rank" not in error
    assert "127.0.0.1:9" in error
