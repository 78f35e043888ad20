"""serve-bench on CPU: tests/fake_vllm_server.py stands in for vLLM on 8 GPUs, on loopback."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import socket
import stat
import sys
import time
from pathlib import Path

import pytest

from patcher.cli import terminal
from patcher.cli.commands import serve_bench
from patcher.errors import PatcherError
from patcher.serving import benchmark as bench_run
from patcher.serving import host, metrics, process
from patcher.serving.load import Answer, Load, complete, read_prompts
from patcher.serving.metrics import SpecDecodeCounters
from patcher.serving.setup import VLLM_SERVE, ServeSetup, Timeouts

FAKE_SERVER = (sys.executable, str(Path(__file__).with_name("fake_vllm_server.py")))
FAST = Timeouts(health=20, health_poll=0.05, stop_grace=5, request=10, metrics_settle=0.01)
PROMPTS = tuple(f"prompt {i}" for i in range(6))
MAX_TOKENS = 30  # the stand-in accepts 2 of 3 drafts: 10 full passes of 3 tokens a request


def fake_setup(port: int, **changes) -> ServeSetup:
    """The real command line, run by the stand-in instead of vLLM."""
    return ServeSetup(
        model="/models/kimi-k2.5",
        drafter="/models/eagle3",
        port=port,
        server_program=FAKE_SERVER,
        **changes,
    )


def alive(pid: int) -> bool:
    """Running, not a zombie: an orphaned worker may wait for a reaper that never comes."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"


def assert_all_gone(pid_file: Path) -> None:
    pids = [int(line) for line in pid_file.read_text().split()]
    assert pids
    deadline = time.monotonic() + 3
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [pid for pid in pids if alive(pid)] == []


@pytest.fixture(scope="module")
def benchmark(tmp_path_factory):
    """One whole serve-bench against the stand-in, each server with a 'worker' child."""
    tmp = tmp_path_factory.mktemp("serve-bench")
    pid_file = tmp / "pids"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FAKE_VLLM_PID_FILE", str(pid_file))
        env.setenv("FAKE_VLLM_WORKER", "1")
        env.setenv("FAKE_VLLM_SECONDS_PER_PASS", "0.004")
        load = Load(PROMPTS, max_tokens=MAX_TOKENS, concurrency=2)
        messages: list[str] = []
        report = bench_run.run_benchmark(
            fake_setup(process.free_port()), load, tmp / "logs", FAST, messages.append
        )
    return report, pid_file, tmp / "logs", messages


# --- commands ---


def test_the_eagle3_command_carries_the_speculative_config_as_json():
    setup = ServeSetup(model="/m/kimi", drafter="/m/eagle3", num_speculative_tokens=4)
    command = setup.command(speculative=True)
    assert command[:5] == [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", "/m/kimi"]
    config = json.loads(command[command.index("--speculative-config") + 1])
    assert config == {"method": "eagle3", "model": "/m/eagle3", "num_speculative_tokens": 4}
    assert command[command.index("--tensor-parallel-size") + 1] == "8"
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert "--trust-remote-code" not in command  # issue 41: off, as vLLM's own default
    trusted = ServeSetup(model="/m/kimi", drafter="/m/eagle3", trust_remote_code=True)
    assert "--trust-remote-code" in trusted.command(speculative=True)


@pytest.mark.parametrize(("flags", "trusted"), [([], False), (["--trust-remote-code"], True)])
def test_remote_code_runs_only_when_asked_and_the_report_says_so(flags, trusted, monkeypatch):
    """issue 41: ``serve-bench --device gpu`` passed ``--trust-remote-code`` by default, where
    vLLM's own default is off and remote code is code from the model's folder."""
    seen = {}

    def record(setup, load, log_dir, timeouts, progress):
        seen["setup"] = setup
        raise PatcherError("stop here")

    monkeypatch.setattr(host, "check_gpus", lambda needed: None)
    monkeypatch.setattr(bench_run, "run_benchmark", record)
    args = parse(["--model=/m/k", "--drafter=/m/d", *flags])
    with pytest.raises(PatcherError, match="stop here"):
        args.run(args)
    assert seen["setup"].trust_remote_code is trusted
    assert ("--trust-remote-code" in seen["setup"].command(speculative=False)) is trusted


def test_the_baseline_command_is_the_same_without_speculation():
    setup = ServeSetup(
        model="/m/kimi",
        drafter="/m/eagle3",
        tensor_parallel_size=4,
        max_model_len=None,
        trust_remote_code=False,
        extra_vllm_args=("--gpu-memory-utilization", "0.9"),
    )
    baseline = setup.command(speculative=False)
    eagle3 = setup.command(speculative=True)
    assert "--speculative-config" not in baseline
    assert eagle3[: len(baseline) - 2] == baseline[:-2]
    assert baseline[baseline.index("--tensor-parallel-size") + 1] == "4"
    assert "--max-model-len" not in baseline
    assert "--trust-remote-code" not in baseline
    assert baseline[-2:] == eagle3[-2:] == ["--gpu-memory-utilization", "0.9"]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="patcher")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_bench.arguments(commands.add_parser("serve-bench"))
    return parser.parse_args(["serve-bench", *argv])


def test_the_command_line_reaches_the_setup(tmp_path, monkeypatch):
    seen = {}

    def record(setup, load, log_dir, timeouts, progress):
        seen.update(setup=setup, load=load, log_dir=log_dir, timeouts=timeouts)
        raise PatcherError("stop here")

    monkeypatch.setattr(host, "check_gpus", lambda needed: seen.update(gpus=needed))
    monkeypatch.setattr(bench_run, "run_benchmark", record)
    (tmp_path / "p.jsonl").write_text('{"prompt": "a"}\n\n{"prompt": "b"}\n')
    args = parse(
        [
            "--model=/m/k",
            "--drafter=/m/d",
            "--tp=4",
            "--num-speculative-tokens=5",
            f"--prompts={tmp_path / 'p.jsonl'}",
            "--max-tokens=64",
            "--concurrency=3",
            "--api=completions",
            "--no-trust-remote-code",
            "--vllm-args=--gpu-memory-utilization 0.92 --enforce-eager",
            "--port=9001",
            "--health-timeout=120",
            f"--log-dir={tmp_path / 'logs'}",
        ]
    )
    with pytest.raises(PatcherError, match="stop here"):
        args.run(args)
    setup, load = seen["setup"], seen["load"]
    assert seen["gpus"] == 4
    assert (setup.model, setup.drafter, setup.tensor_parallel_size) == ("/m/k", "/m/d", 4)
    assert (setup.num_speculative_tokens, setup.port, setup.trust_remote_code) == (5, 9001, False)
    assert setup.extra_vllm_args == ("--gpu-memory-utilization", "0.92", "--enforce-eager")
    assert setup.server_program == VLLM_SERVE
    assert load == Load(("a", "b"), max_tokens=64, concurrency=3, api="completions")
    assert seen["timeouts"].health == 120
    assert seen["log_dir"] == tmp_path / "logs"


@pytest.mark.parametrize(
    "flag",
    [
        "--concurrency=0",
        "--health-timeout=nan",  # never passes: a server that never gets healthy hangs it
        "--health-timeout=inf",
        "--port=65536",  # create_connection raised OverflowError, a traceback
        "--vllm-args='unclosed",  # shlex.split raised ValueError, a traceback
    ],
)
def test_bad_values_are_refused_by_the_parser(flag, capsys):
    with pytest.raises(SystemExit) as exit_:
        parse(["--model=m", "--drafter=d", flag])
    assert exit_.value.code == 2
    assert f"argument {flag.split('=')[0]}: " in capsys.readouterr().err


def test_a_prompts_file_with_a_bad_line_names_the_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "fine"}\n["not", "an", "object"]\n')
    with pytest.raises(PatcherError, match=r"p\.jsonl:2: not a"):
        read_prompts(path)
    path.write_text("\n")
    with pytest.raises(PatcherError, match="no prompts"):
        read_prompts(path)
    path.write_bytes(b'{"prompt": "\xff"}\n')
    with pytest.raises(PatcherError, match=r"p\.jsonl: not UTF-8 text"):
        read_prompts(path)


@pytest.mark.parametrize("which", ["json", "log-dir"])
def test_an_output_that_cannot_be_written_is_refused_before_the_gpus(tmp_path, monkeypatch, which):
    """Not after a 30-minute benchmark: a --json folder failed only at the very end."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    (tmp_path / "a-file").write_text("")
    bad = {"json": tmp_path, "log-dir": tmp_path / "a-file"}[which]
    args = parse(["--model=/m/k", "--drafter=/m/d", f"--{which}={bad}"])
    with pytest.raises(PatcherError, match=f"^cannot write (to )?{bad}: it is (not )?a directory"):
        args.run(args)


# --- metrics ---

VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="kimi-k2.5"} 0.0
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="kimi-k2.5"} 30.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="kimi-k2.5"} 10.0
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="kimi-k2.5"} 1.7640e+09
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="kimi-k2.5"} 90.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="kimi-k2.5"} 30.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="x"} 60.0
vllm:spec_decode_num_accepted_tokens_total{model_name="a } b, c=\\"d\\"",engine="1"} 20.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="x",position="1"} 20.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="x",position="0"} 28.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="x",position="2"} 12.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="x",position="0"} 8.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="x",position="1"} 8.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="x",position="2"} 4.0
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="0",model_name="x",position="0"} 1e9
"""


def test_spec_counters_are_summed_over_engines_with_any_labels():
    counters = metrics.spec_decode_counters(VLLM_METRICS)
    assert counters == SpecDecodeCounters(40.0, 120.0, 80.0, (36.0, 28.0, 16.0))


def test_counters_without_the_total_suffix_are_read_too():
    text = """\
vllm:spec_decode_num_drafts 5
vllm:spec_decode_num_draft_tokens{engine="0"} 15 1764000000000
vllm:spec_decode_num_accepted_tokens 9.0
"""
    assert metrics.spec_decode_counters(text) == SpecDecodeCounters(5.0, 15.0, 9.0, ())


def test_a_server_without_spec_counters_has_none_and_a_partial_set_is_an_error():
    assert metrics.spec_decode_counters("vllm:num_requests_running 0.0\n") is None
    partial = 'vllm:spec_decode_num_drafts_total{engine="0"} 3.0\n'
    with pytest.raises(
        PatcherError,
        match="lacks vllm:spec_decode_num_draft_tokens, vllm:spec_decode_num_accepted_tokens",
    ):
        metrics.spec_decode_counters(partial)


def test_acceptance_is_computed_from_what_the_load_added():
    before = SpecDecodeCounters(10.0, 30.0, 20.0, (9.0, 7.0, 4.0))
    after = SpecDecodeCounters(50.0, 150.0, 100.0, (45.0, 35.0, 20.0))
    delta = metrics.load_delta(before, after)
    assert delta == SpecDecodeCounters(40.0, 120.0, 80.0, (36.0, 28.0, 16.0))
    assert delta.acceptance_rate == pytest.approx(2 / 3)
    assert delta.mean_acceptance_length == pytest.approx(3.0)
    assert delta.per_position_acceptance == pytest.approx((0.9, 0.7, 0.4))
    assert metrics.load_delta(None, after) == after


def test_a_load_without_drafts_or_counters_is_an_error():
    same = SpecDecodeCounters(10.0, 30.0, 20.0)
    with pytest.raises(PatcherError, match="proposed no draft tokens"):
        metrics.load_delta(same, same)
    with pytest.raises(PatcherError, match="has no vllm:spec_decode_num_drafts_total: it is not"):
        metrics.load_delta(same, None)


# --- the whole benchmark against the stand-in ---


def test_the_speedup_is_the_ratio_of_the_two_runs_on_the_stand_in(benchmark):
    """The stand-in (for vLLM on 8 GPUs) makes 3 tokens a pass with EAGLE-3, 1 without. The
    speedup is the report's arithmetic on the two runs' own timings; how large it comes out is
    the machine's load, so no bound on it is asserted here (speed is nox -s bench's)."""
    report, _, _, _ = benchmark
    assert report.speedup == pytest.approx(
        report.eagle3.tokens_per_second / report.baseline.tokens_per_second
    )
    assert sum(report.eagle3.output_tokens) == sum(report.baseline.output_tokens) == 6 * 30
    assert report.identical_outputs == len(PROMPTS)
    assert len(report.baseline.latencies) == len(report.eagle3.latencies) == len(PROMPTS)


def test_acceptance_is_what_the_stand_in_defines_without_the_warm_up(benchmark):
    """The stand-in for vLLM on 8 GPUs accepts 2 of 3 draft tokens; warm-up drafts are left out."""
    spec = benchmark[0].spec_decode
    assert (spec.drafts, spec.draft_tokens, spec.accepted_tokens) == (60.0, 180.0, 120.0)
    assert spec.acceptance_rate == pytest.approx(2 / 3)
    assert spec.mean_acceptance_length == pytest.approx(3.0)
    assert spec.per_position_acceptance == (1.0, 1.0, 0.0)


def test_no_server_or_worker_outlives_the_benchmark(benchmark):
    """Both stand-ins for vLLM on 8 GPUs, and the 'worker' each started, are gone."""
    _, pid_file, logs, messages = benchmark
    assert len(pid_file.read_text().split()) == 4
    assert_all_gone(pid_file)
    assert sorted(path.name for path in logs.iterdir()) == ["baseline.log", "eagle3.log"]
    assert messages[0].startswith("starting ") and "--speculative-config" in messages[0]


def test_the_report_as_json_and_as_a_table(benchmark):
    report = benchmark[0]
    data = json.loads(report.to_json())
    assert data["speedup"] == round(report.speedup, 3)
    assert data["spec_decode"]["acceptance_rate"] == round(2 / 3, 4)
    assert data["spec_decode"]["mean_acceptance_length"] == 3.0
    assert data["eagle3"]["output_tokens"] == data["baseline"]["output_tokens"] == 180
    assert data["load"] == {
        "prompts": 6,
        "max_tokens": 30,
        "concurrency": 2,
        "api": "chat",
        "temperature": 0,
        "image_in_first_request": False,
    }
    assert "--speculative-config" in data["commands"]["eagle3"]
    assert "--speculative-config" not in data["commands"]["baseline"]
    assert data["trust_remote_code"] is report.setup.trust_remote_code
    text = io.StringIO()
    console = terminal.Console(stderr=False)
    console.file = text  # not a terminal: the plain table
    serve_bench.print_report(report, console)
    printed = text.getvalue()
    assert "66.7%" in printed and "3.00" in printed and "1.00 1.00 0.00" in printed
    assert f"speedup {report.speedup:.2f}x" in printed and "6/6 greedy outputs identical" in printed
    trusted = dataclasses.replace(
        report, setup=dataclasses.replace(report.setup, trust_remote_code=True)
    )
    for shown, said in ((report, False), (trusted, True)):
        text = io.StringIO()
        console.file = text
        serve_bench.print_report(shown, console)
        assert ("--trust-remote-code on" in text.getvalue()) is said
        assert json.loads(shown.to_json())["trust_remote_code"] is said


def test_the_command_prints_the_table_and_writes_the_json(benchmark, tmp_path, monkeypatch, capsys):
    """The report of the stand-in for vLLM on 8 GPUs, through the command's own output."""
    report = benchmark[0]
    monkeypatch.setattr(host, "check_gpus", lambda needed: None)
    monkeypatch.setattr(bench_run, "run_benchmark", lambda *args: report)
    (tmp_path / "r").mkdir()  # a missing folder is an error, but under reports/ and dist/
    args = parse(["--model=/m/k", "--drafter=/m/d", f"--json={tmp_path / 'r' / 'bench.json'}"])
    assert args.run(args) == 0
    written = json.loads((tmp_path / "r" / "bench.json").read_text())
    data = json.loads(report.to_json())  # the report, in every document's shape (issue 41)
    served = data.pop("vllm_version")  # the release served is a row: package and vllm
    row = {"package": "vllm", "vllm": served, "patchset": None, "verdict": None, "proofs": {}}
    releases = [] if served is None else [row]
    assert written == {
        "schema": "patcher.report/1",
        "command": "serve-bench",
        "releases": releases,
        **data,
    }
    assert f"speedup {report.speedup:.2f}x" in capsys.readouterr().out


def test_completions_and_the_wrong_model_name(tmp_path):
    """One stand-in for vLLM on 8 GPUs, without speculation: raw completions, and a 404."""
    setup = fake_setup(process.free_port())
    with process.running_server(
        setup.command(speculative=False), tmp_path / "s.log", setup.port, FAST
    ) as server:
        answer = complete(server.base_url, "kimi-k2.5", "completions", "x", 3, 5)
        assert answer == Answer(completion_tokens=3, prompt_tokens=10, output="t0 t1 t2")
        with pytest.raises(PatcherError, match="HTTP 404"):
            complete(server.base_url, "other", "chat", "x", 3, 5)
        assert metrics.read_counters(server.base_url) is None


# --- failures and cleanup ---


def test_a_server_that_dies_while_loading_fails_fast_with_its_last_words(tmp_path, monkeypatch):
    """The stand-in for vLLM on 8 GPUs crashes during start-up, as an OOM would."""
    monkeypatch.setenv("FAKE_VLLM_EXIT_AT_START", "torch.OutOfMemoryError: CUDA out of memory")
    monkeypatch.setenv("FAKE_VLLM_PID_FILE", str(tmp_path / "pids"))
    monkeypatch.setenv("FAKE_VLLM_WORKER", "1")
    start = time.monotonic()
    with pytest.raises(PatcherError) as failure:
        bench_run.run_benchmark(fake_setup(process.free_port()), Load(), tmp_path / "logs", FAST)
    assert time.monotonic() - start < 5
    message = str(failure.value)
    assert "exited with code 1 before it was healthy" in message
    assert "Traceback (most recent call last): | torch.OutOfMemoryError" in message
    assert str(tmp_path / "logs" / "eagle3.log") in message
    assert "\n" not in message
    assert_all_gone(tmp_path / "pids")


def test_a_server_that_never_gets_healthy_times_out_and_is_stopped(tmp_path, monkeypatch):
    """The stand-in for vLLM on 8 GPUs listens but never answers, like a checkpoint loading."""
    monkeypatch.setenv("FAKE_VLLM_READY_AFTER", "600")
    monkeypatch.setenv("FAKE_VLLM_PID_FILE", str(tmp_path / "pids"))
    setup = fake_setup(process.free_port())
    timeouts = Timeouts(health=1.0, health_poll=0.05, stop_grace=5)
    start = time.monotonic()
    with (
        pytest.raises(PatcherError, match=r"not healthy after 1 s: INFO fake vllm: loading"),
        process.running_server(
            setup.command(speculative=True), tmp_path / "s.log", setup.port, timeouts
        ),
    ):
        pytest.fail("the server cannot be healthy")
    assert time.monotonic() - start < 4
    assert_all_gone(tmp_path / "pids")


def test_a_server_that_ignores_sigterm_is_killed_with_its_workers(tmp_path, monkeypatch):
    """The stand-in for vLLM on 8 GPUs and its worker ignore SIGTERM: SIGKILL after the grace."""
    monkeypatch.setenv("FAKE_VLLM_IGNORE_SIGTERM", "1")
    monkeypatch.setenv("FAKE_VLLM_WORKER", "1")
    monkeypatch.setenv("FAKE_VLLM_PID_FILE", str(tmp_path / "pids"))
    setup = fake_setup(process.free_port())
    timeouts = Timeouts(health=20, health_poll=0.05, stop_grace=0.3)
    with process.running_server(
        setup.command(speculative=False), tmp_path / "s.log", setup.port, timeouts
    ):
        stopping = time.monotonic()
    assert time.monotonic() - stopping >= 0.3
    assert_all_gone(tmp_path / "pids")


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with (
            pytest.raises(PatcherError, match=f"port {port} on 127.0.0.1 is in use"),
            process.running_server(["false"], tmp_path / "s.log", port, FAST),
        ):
            pass
    assert not (tmp_path / "s.log").exists()


# --- GPUs ---


def fake_nvidia_smi(bin_dir: Path, script: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + script)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)


def test_this_machine_is_refused_in_one_line_before_any_server_starts(tmp_path, monkeypatch):
    """No nvidia-smi (and no torch) here: serve-bench stops before launching vLLM."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    args = parse(["--model=/m/k", "--drafter=/m/d", f"--log-dir={tmp_path / 'logs'}"])
    with pytest.raises(PatcherError) as refusal:
        args.run(args)
    assert str(refusal.value) == "needs 8 GPUs, found 0 (no nvidia-smi on PATH, no torch)"
    assert not (tmp_path / "logs").exists()


def test_gpus_are_counted_from_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    gpu = 'echo "GPU {0}: NVIDIA H200 (UUID: GPU-{0})"\n'
    fake_nvidia_smi(tmp_path / "bin", "".join(gpu.format(i) for i in range(4)))
    with pytest.raises(PatcherError, match=r"^needs 8 GPUs, found 4 \(nvidia-smi\)$"):
        host.check_gpus(8)
    host.check_gpus(4)
    fake_nvidia_smi(tmp_path / "bin", "echo 'NVIDIA-SMI has failed: no driver' >&2\nexit 9\n")
    with pytest.raises(PatcherError, match=r"found 0 \(nvidia-smi -L exited 9: NVIDIA-SMI has"):
        host.check_gpus(8)


def test_the_cpu_report_says_remote_code_runs(tmp_path, monkeypatch):
    """The CPU runs keep ``--trust-remote-code`` (a replica's remote code is patcher's own, and
    a Kimi-K2.5 replica cannot load without it): the report's notes say so (issue 41)."""
    from types import SimpleNamespace

    from patcher.serving import cpu

    monkeypatch.setattr(cpu, "serve_once", lambda *args: SimpleNamespace(run=None))
    setup = cpu.CpuSetup(model="/m/k", drafter="/m/d")
    assert "--trust-remote-code" in setup.command(Path("/p/python"), 1, speculative=False)
    plan = cpu.RunPlan("baseline", SimpleNamespace(), speculative=False)  # type: ignore[arg-type]
    report = cpu.run_cpu(setup, Load(("a",)), [plan], tmp_path)
    assert cpu.REMOTE_CODE_NOTE in report.notes
    assert "--trust-remote-code on" in cpu.REMOTE_CODE_NOTE
