"""The serving commands' command lines and printed tables; only ``patcher.cli`` imports this."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from patcher.cache import atomic_write
from patcher.serving import benchmark, host
from patcher.serving.load import DEFAULT_PROMPTS, Load, percentile, read_prompts
from patcher.serving.report import BenchReport
from patcher.serving.setup import VLLM_SERVE, ServeSetup, Timeouts
from patcher.terminal import err, out


def print_report(report: BenchReport, console: Console) -> None:
    title = f"Kimi-K2.5 EAGLE-3 on vllm {report.vllm_version or '(not installed here)'}"
    table = Table(
        title=title,
        title_justify="left",
        box=box.HEAVY_HEAD if console.is_terminal else None,
    )
    table.add_column("")
    table.add_column("baseline", justify="right")
    table.add_column("eagle3", justify="right")
    runs = (report.baseline, report.eagle3)
    table.add_row("server start-up", *(f"{run.startup_seconds:.0f} s" for run in runs))
    table.add_row("output tokens", *(str(sum(run.output_tokens)) for run in runs))
    table.add_row("wall time", *(f"{run.wall_seconds:.2f} s" for run in runs))
    table.add_row("output tokens/s", *(f"{run.tokens_per_second:.1f}" for run in runs))
    for label, fraction in (("latency p50", 0.5), ("latency p90", 0.9)):
        table.add_row(label, *(f"{percentile(run.latencies, fraction):.2f} s" for run in runs))
    spec = report.spec_decode
    table.add_row("acceptance rate", "", f"{spec.acceptance_rate:.1%}")
    table.add_row("mean acceptance length", "", f"{spec.mean_acceptance_length:.2f}")
    table.add_row(
        "acceptance by position",
        "",
        " ".join(f"{rate:.2f}" for rate in spec.per_position_acceptance),
    )
    table.caption = (
        f"speedup {report.speedup:.2f}x; {report.identical_outputs}/{len(report.load.prompts)} "
        f"greedy outputs identical; {len(report.load.prompts)} prompts, "
        f"max_tokens {report.load.max_tokens}, concurrency {report.load.concurrency}"
    )
    console.print(table)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def command_serve_bench(args: argparse.Namespace) -> int:
    prompts = read_prompts(args.prompts) if args.prompts else DEFAULT_PROMPTS
    setup = ServeSetup(
        model=args.model,
        drafter=args.drafter,
        tensor_parallel_size=args.tp,
        num_speculative_tokens=args.num_speculative_tokens,
        port=args.port,
        max_model_len=args.max_model_len,
        trust_remote_code=args.trust_remote_code,
        extra_vllm_args=tuple(shlex.split(args.vllm_args)),
        server_program=VLLM_SERVE,
    )
    load = Load(prompts, args.max_tokens, args.concurrency, args.api)
    host.check_gpus(setup.tensor_parallel_size)
    report = benchmark.run_benchmark(
        setup,
        load,
        args.log_dir,
        Timeouts(health=args.health_timeout),
        lambda message: err.print(message, markup=False, soft_wrap=True),
    )
    print_report(report, out)
    if args.json:
        atomic_write(args.json, report.to_json().encode())
    return 0


def add_parsers(commands: argparse._SubParsersAction) -> None:
    """Register the serving commands on the ``patcher`` command's subparsers."""
    bench = commands.add_parser(
        "serve-bench",
        help="serve Kimi-K2.5 with and without EAGLE-3 on 8 GPUs: speedup and acceptance",
    )
    bench.add_argument("--model", required=True, help="the Kimi-K2.5 checkpoint: a path or hub id")
    bench.add_argument("--drafter", required=True, help="the EAGLE-3 drafter: a path or hub id")
    bench.add_argument("--tp", type=positive_int, default=8, help="tensor parallel size")
    bench.add_argument("--num-speculative-tokens", type=positive_int, default=3)
    bench.add_argument(
        "--prompts",
        type=Path,
        metavar="FILE",
        help='JSONL, one {"prompt": "..."} a line (default: 8 reasoning and coding prompts)',
    )
    bench.add_argument("--max-tokens", type=positive_int, default=512)
    bench.add_argument("--concurrency", type=positive_int, default=1)
    bench.add_argument(
        "--api",
        choices=["chat", "completions"],
        default="chat",
        help="chat applies the model's chat template (default); completions sends raw text",
    )
    bench.add_argument("--max-model-len", type=positive_int, default=32768)
    bench.add_argument("--trust-remote-code", action=argparse.BooleanOptionalAction, default=True)
    bench.add_argument(
        "--vllm-args",
        default="",
        metavar="'FLAGS'",
        help="more `vllm serve` flags for both servers, as one string: "
        "--vllm-args='--gpu-memory-utilization 0.92'",
    )
    bench.add_argument("--port", type=positive_int, default=8000)
    bench.add_argument(
        "--health-timeout",
        type=positive_float,
        default=Timeouts.health,
        metavar="SECONDS",
        help="how long a server may take to load (default: %(default)g)",
    )
    bench.add_argument(
        "--log-dir", type=Path, default=Path("reports/serve-bench/logs"), help="the servers' logs"
    )
    bench.add_argument("--json", type=Path, metavar="FILE", help="the report as JSON")
    bench.set_defaults(run=command_serve_bench)
