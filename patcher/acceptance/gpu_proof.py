"""The EAGLE-3 proof on one GPU, from an offline bundle: standard library only at top level.

Run on the GPU machine with the machine's own Python (torch and transformers there), after
``install.py unpack`` put the bundle's tree in place; nothing is fetched:

    python3 gpu_proof.py --bundle ROOT --tiny DIR --big DIR --out DIR --deadline SECONDS

Each step writes ``DIR/proof.json`` anew as it ends, so a run cut off at its deadline keeps what
it proved. The steps, in order of what they prove:

1. ``official`` and each prefix of the chain (``install.py swap``): vLLM's GPU runner must refuse
   EAGLE-3 in the words the step expects (barrier 1 in the speculative config, barrier 3 in
   ``GPUModelRunner.load_model``).
2. ``patched`` on the tiny trained target and drafter (``--tiny``: the CPU acceptance proof's
   training, float32): the baseline without a drafter, then EAGLE-3 with CUDA graphs; acceptance
   length and by position from vLLM's own counters, and greedy identity token for token.
3. ``speedup`` on a target of at least 1B parameters, pre-trained here on the GPU on the same
   synthetic corpus (``--big``: its replica's configs and tokenizer), a drafter trained on its
   states, both served with CUDA graphs at concurrency 1 in bfloat16: output tokens/s with and
   without EAGLE-3. Divergences in bfloat16 are reported with the baseline's top-2 margin.

``python3 gpu_proof.py --dry-run ...`` runs the same sequence with every GPU step stood in for
(named as such in the report): the control flow, the deadline and the report are what it tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BARRIER_1 = "is only supported for"
BARRIER_3 = "Model does not support EAGLE3 interface"
RESULT = "proof.json"
NEAR_TIE = 0.1
"""A divergence whose baseline top-2 logprob margin is under this is a near-tie of bf16."""


@dataclass(frozen=True)
class Options:
    """The command line's values, resolved once in ``main``."""

    bundle: Path
    tiny: Path
    big: Path | None
    out: Path
    big_tokens: int
    tiny_eager: bool
    dry_run: bool


class Report:
    def __init__(self, out: Path, deadline: float) -> None:
        self.out = out
        self.started = time.monotonic()
        self.deadline = deadline
        self.data: dict[str, Any] = {
            "steps": {},
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    def left(self) -> float:
        return self.deadline - (time.monotonic() - self.started)

    def step(self, name: str, result: dict[str, Any]) -> None:
        result["elapsed_s"] = round(time.monotonic() - self.started, 1)
        self.data["steps"][name] = result
        self.write()
        print(f"[{result['elapsed_s']:6.1f}s] {name}: {json.dumps(result)[:600]}", flush=True)

    def write(self) -> None:
        tmp = self.out / f".{RESULT}.tmp"
        tmp.write_text(json.dumps(self.data, indent=1) + "\n")
        os.replace(tmp, self.out / RESULT)


def swap(bundle: Path, label: str, dry_run: bool) -> str:
    if dry_run:
        return f"(stand-in) {label}"
    install = bundle / "install.py"
    done = subprocess.run(
        [sys.executable, str(install), "swap", str(bundle), label],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"swap to {label}: {done.stderr.strip()}")
    return done.stdout.strip()


def run_engine(
    bundle: Path, spec: dict[str, Any], log: Path, timeout: float, dry_run: bool
) -> dict[str, Any]:
    """One vLLM engine in a process of its own, with the bundle's tree first on the path."""
    if dry_run:
        return stand_in(spec)
    spec_file = log.with_suffix(".spec.json")
    spec_file.write_text(json.dumps(spec))
    result_file = log.with_suffix(".result.json")
    result_file.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": f"{bundle / 'site'}:{HERE}",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "engine",
        str(spec_file),
        str(result_file),
    ]
    started = time.monotonic()
    with log.open("w") as sink:
        try:
            done = subprocess.run(
                command,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
                timeout=max(5.0, timeout),
                check=False,
            )
            code = done.returncode
        except subprocess.TimeoutExpired:
            return {"outcome": "timeout", "seconds": round(time.monotonic() - started, 1)}
    if result_file.exists():
        result = json.loads(result_file.read_text())
    else:
        result = {"outcome": "crashed", "exit": code}
    text = log.read_text(errors="replace")
    for words in (BARRIER_1, BARRIER_3):
        for line in text.splitlines():
            if words in line:
                result.setdefault("vllm_said", line.strip()[:400])
                break
    if result.get("outcome") != "served" and "vllm_said" not in result:
        tail = [line for line in text.splitlines() if line.strip()][-3:]
        result["log_tail"] = tail
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def stand_in(spec: dict[str, Any]) -> dict[str, Any]:
    """What the dry run has in place of an engine: named as a stand-in, shaped as a result."""
    count = len(spec["prompts"])
    tokens = [[1] * spec["max_tokens"] for _ in range(count)]
    result: dict[str, Any] = {
        "outcome": "served",
        "stand_in": True,
        "token_ids": tokens,
        "load_s": 0.0,
    }
    if spec.get("expect_refusal"):
        return {"outcome": "died", "stand_in": True, "vllm_said": spec["expect_refusal"]}
    result["timed"] = {"tokens": count * spec["max_tokens"], "seconds": 1.0}
    if spec.get("drafter"):
        result["spec_decode"] = {
            "drafts": 10,
            "draft_tokens": 30,
            "accepted": 25,
            "per_position": [9, 8, 8],
        }
    if spec.get("logprobs"):
        result["margins"] = [[1.0] * spec["max_tokens"] for _ in range(count)]
    return result


def engine_main(spec_file: Path, result_file: Path) -> int:
    """Inside the engine's process: load, warm up, generate, read vLLM's own counters."""
    spec = json.loads(spec_file.read_text())
    started = time.monotonic()
    from vllm import LLM, SamplingParams

    kwargs: dict[str, Any] = {
        "model": spec["model"],
        "tokenizer": spec["model"],
        "dtype": spec["dtype"],
        "max_model_len": spec["max_model_len"],
        "gpu_memory_utilization": spec.get("gpu_memory_utilization", 0.5),
        "enforce_eager": spec.get("enforce_eager", False),
        "disable_log_stats": False,
        "seed": 0,
        "max_num_seqs": 8,
    }
    kwargs.update(spec.get("forces", {}))
    if not kwargs["enforce_eager"]:  # a few batch sizes: concurrency 1 needs no more
        kwargs["compilation_config"] = {"cudagraph_capture_sizes": [1, 2, 4, 8, 16]}
    if spec.get("drafter"):
        kwargs["speculative_config"] = {
            "method": "eagle3",
            "model": spec["drafter"],
            "num_speculative_tokens": spec["k"],
        }
    try:
        llm = LLM(**kwargs)
    except Exception as error:  # the refusal is the result
        said = [
            line.strip()
            for line in str(error).splitlines()
            if line.strip() and "errors.pydantic.dev" not in line  # pydantic's pointer, no cause
        ]
        result_file.write_text(
            json.dumps({"outcome": "died", "error": (said[-1] if said else repr(error))[:400]})
        )
        raise
    load_s = time.monotonic() - started
    params = SamplingParams(
        temperature=0.0,
        max_tokens=spec["max_tokens"],
        min_tokens=spec["max_tokens"],
        ignore_eos=True,
        logprobs=2 if spec.get("logprobs") else None,
    )
    prompts = [p if isinstance(p, str) else {"prompt_token_ids": p} for p in spec["prompts"]]
    llm.generate(prompts[:1], params, use_tqdm=False)  # warm-up, left out of the counters
    before = counters(llm)
    outputs = []
    began = time.monotonic()
    for prompt in prompts:  # concurrency 1: one request at a time
        outputs += llm.generate([prompt], params, use_tqdm=False)
    seconds = time.monotonic() - began
    after = counters(llm)
    result: dict[str, Any] = {
        "outcome": "served",
        "load_s": round(load_s, 1),
        "token_ids": [list(o.outputs[0].token_ids) for o in outputs],
        "timed": {
            "tokens": sum(len(o.outputs[0].token_ids) for o in outputs),
            "seconds": round(seconds, 3),
        },
    }
    if spec.get("drafter"):
        result["spec_decode"] = {
            key: (
                [
                    a - b
                    for a, b in zip(after[key], padded(before[key], len(after[key])), strict=True)
                ]
                if isinstance(after[key], list)
                else after[key] - before[key]
            )
            for key in after
        }
    if spec.get("logprobs"):
        margins = []
        for output in outputs:
            row = []
            for step in output.outputs[0].logprobs or []:
                values = sorted((lp.logprob for lp in step.values()), reverse=True)
                row.append(round(values[0] - values[1], 4) if len(values) > 1 else None)
            margins.append(row)
        result["margins"] = margins
    result_file.write_text(json.dumps(result))
    return 0


def padded(values: list[int], length: int) -> list[int]:
    return values + [0] * (length - len(values))


def counters(llm: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_position": []}
    names = {
        "vllm:spec_decode_num_drafts": "drafts",
        "vllm:spec_decode_num_draft_tokens": "draft_tokens",
        "vllm:spec_decode_num_accepted_tokens": "accepted",
    }
    for metric in llm.get_metrics():
        if metric.name.startswith("vllm:spec_decode_num_accepted_tokens_per_pos"):
            found["per_position"] = list(getattr(metric, "values", []))
            continue
        for prefix, key in names.items():
            if metric.name in (prefix, f"{prefix}_total"):
                found[key] = getattr(metric, "value", 0)
    return found


def acceptance(result: dict[str, Any]) -> dict[str, Any]:
    spec = result.get("spec_decode") or {}
    drafts = spec.get("drafts") or 0
    return {
        "acceptance_length": round(1 + spec.get("accepted", 0) / drafts, 3) if drafts else None,
        "drafts": drafts,
        "accepted": spec.get("accepted"),
        "by_position": [round(v / drafts, 3) for v in spec.get("per_position", [])]
        if drafts
        else [],
    }


def identity(baseline: dict[str, Any], eagle: dict[str, Any]) -> dict[str, Any]:
    """Token for token; each divergence with the baseline's top-2 margin where it was asked."""
    same = 0
    divergences = []
    margins = baseline.get("margins")
    for index, (a, b) in enumerate(zip(baseline["token_ids"], eagle["token_ids"], strict=True)):
        if a == b:
            same += 1
            continue
        at = next(
            (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )
        margin = margins[index][at] if margins and at < len(margins[index]) else None
        divergences.append({"prompt": index, "position": at, "baseline_top2_margin": margin})
    near_ties = all(
        d["baseline_top2_margin"] is not None and d["baseline_top2_margin"] < NEAR_TIE
        for d in divergences
    )
    return {
        "identical": f"{same}/{len(baseline['token_ids'])}",
        "divergences": divergences,
        "every_divergence_a_near_tie": near_ties if divergences else None,
    }


def compared(baseline: dict[str, Any], eagle: dict[str, Any]) -> dict[str, Any]:
    """The EAGLE-3 run's result; where both served, its acceptance and identity beside."""
    result = {k: v for k, v in eagle.items() if k not in ("token_ids", "spec_decode")}
    if eagle.get("outcome") == "served" and baseline.get("outcome") == "served":
        result.update(acceptance(eagle))
        result.update(identity(baseline, eagle))
    return result


def tokens_per_second(result: dict[str, Any]) -> float | None:
    timed = result.get("timed")
    return round(timed["tokens"] / timed["seconds"], 1) if timed and timed["seconds"] else None


def prompts_of(folder: Path) -> list[list[int]]:
    return json.loads((folder / "prompts.json").read_text())


def chain(args: Options, report: Report, manifest: dict[str, Any], forces: dict[str, str]) -> None:
    order = [entry["label"] for entry in manifest["states"]["order"]]
    tiny = args.tiny
    prompts = prompts_of(tiny)
    for label in order[:-1]:
        expect = BARRIER_1 if label == "official" else BARRIER_3
        swap(args.bundle, label, args.dry_run)
        spec = {
            "model": str(tiny / "target"),
            "drafter": str(tiny / "drafter"),
            "k": 3,
            "dtype": "float32",
            "max_model_len": 256,
            "prompts": prompts,
            "max_tokens": 24,
            "forces": forces,
            "enforce_eager": True,  # a refusal at load: nothing to compile for
            **({"expect_refusal": expect} if args.dry_run else {}),
        }
        result = run_engine(
            args.bundle, spec, args.out / f"{label}.log", min(240.0, report.left()), args.dry_run
        )
        said = result.get("vllm_said") or result.get("error") or ""
        result["expected"] = expect
        result["passed"] = result.get("outcome") != "served" and expect in said
        report.step(label, result)


def tiny_patched(args: Options, report: Report, forces: dict[str, str]) -> None:
    swap(args.bundle, "patched", args.dry_run)
    tiny = args.tiny
    base = {
        "model": str(tiny / "target"),
        "k": 3,
        "dtype": "float32",
        "max_model_len": 256,
        "prompts": prompts_of(tiny),
        "max_tokens": 24,
        "forces": forces,
        "enforce_eager": args.tiny_eager,
    }
    baseline = run_engine(
        args.bundle, base, args.out / "tiny-baseline.log", min(240.0, report.left()), args.dry_run
    )
    report.step("tiny-baseline", {k: v for k, v in baseline.items() if k != "token_ids"})
    eagle = run_engine(
        args.bundle,
        {**base, "drafter": str(tiny / "drafter")},
        args.out / "tiny-eagle3.log",
        min(240.0, report.left()),
        args.dry_run,
    )
    result = compared(baseline, eagle)
    if "identical" in result:
        result["float32"] = True
        result["cuda_graphs"] = not args.tiny_eager
        result["passed"] = (result["acceptance_length"] or 0) >= 3.0 and result["identical"].split(
            "/"
        )[0] == result["identical"].split("/")[1]
    else:
        result["passed"] = False
    report.step("tiny-patched", result)


def big(args: Options, report: Report, forces: dict[str, str]) -> None:
    folder = args.big
    assert folder is not None  # main adds the step only with --big
    started = time.monotonic()
    trained: dict[str, Any]
    if args.dry_run:
        trained = {"stand_in": True}
    else:
        env = {**os.environ, "PYTHONPATH": f"{HERE}:{HERE.parent / 'replica'}"}
        command = [
            sys.executable,
            str(HERE / "train_gpu.py"),
            str(folder),
            "--out",
            str(args.out / "big-training.json"),
        ]
        with (args.out / "big-training.log").open("w") as sink:
            try:
                done = subprocess.run(
                    command,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    env=env,
                    timeout=max(5.0, min(240.0, report.left() - 120)),
                    check=False,
                )
            except subprocess.TimeoutExpired:
                report.step("big-training", {"outcome": "timeout"})
                return
        if done.returncode != 0:
            tail = (
                (args.out / "big-training.log")
                .read_text(errors="replace")
                .strip()
                .splitlines()[-3:]
            )
            report.step("big-training", {"outcome": "failed", "log_tail": tail})
            return
        trained = json.loads((args.out / "big-training.json").read_text())
    trained["seconds"] = round(time.monotonic() - started, 1)
    report.step("big-training", trained)
    prompts = trained.get("prompts") or ["stand-in prompt"] * 4
    base = {
        "model": str(folder / "target"),
        "k": 3,
        "dtype": "bfloat16",
        "max_model_len": 512,
        "prompts": prompts,
        "max_tokens": args.big_tokens,
        "forces": forces,
        "logprobs": True,
    }
    baseline = run_engine(
        args.bundle, base, args.out / "big-baseline.log", min(200.0, report.left()), args.dry_run
    )
    report.step(
        "big-baseline",
        {k: v for k, v in baseline.items() if k not in ("token_ids", "margins")}
        | {"tokens_per_s": tokens_per_second(baseline)},
    )
    eagle = run_engine(
        args.bundle,
        {**base, "drafter": str(folder / "drafter"), "logprobs": False},
        args.out / "big-eagle3.log",
        min(200.0, report.left()),
        args.dry_run,
    )
    result = compared(baseline, eagle)
    if "identical" in result:
        result["cuda_graphs"] = True
        result["tokens_per_s"] = tokens_per_second(eagle)
        result["baseline_tokens_per_s"] = tokens_per_second(baseline)
        if result["tokens_per_s"] and result["baseline_tokens_per_s"]:
            result["speedup"] = round(result["tokens_per_s"] / result["baseline_tokens_per_s"], 3)
    report.step("big-speedup", result)


def environment(report: Report, dry_run: bool) -> None:
    if dry_run:
        report.step("machine", {"stand_in": True})
        return
    facts: dict[str, Any] = {}
    try:
        facts["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        facts["nvidia_smi"] = f"unavailable: {error}"
    probe = (
        "import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, "
        "torch.version.cuda, transformers.__version__)"
    )
    facts["python_torch_cuda_transformers"] = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    ).stdout.strip()
    report.step("machine", facts)


def main(argv: list[str]) -> int:
    if argv[:1] == ["engine"]:
        return engine_main(Path(argv[1]), Path(argv[2]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, required=True, help="the unpacked bundle's folder")
    parser.add_argument("--tiny", type=Path, required=True)
    parser.add_argument("--big", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--deadline", type=float, default=480.0, help="seconds for everything")
    parser.add_argument("--big-tokens", type=int, default=128)
    parser.add_argument(
        "--tiny-eager", action="store_true", help="the tiny target's runs without CUDA graphs"
    )
    parser.add_argument("--skip", default="", help="comma-separated: chain, tiny, big")
    parser.add_argument("--dry-run", action="store_true", help="every GPU step stood in for")
    parsed = parser.parse_args(argv)
    args = Options(
        parsed.bundle,
        parsed.tiny,
        parsed.big,
        parsed.out,
        parsed.big_tokens,
        parsed.tiny_eager,
        parsed.dry_run,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    report = Report(args.out, parsed.deadline)
    manifest = json.loads((args.bundle / "manifest.json").read_text())
    forces = dict(manifest.get("forces", {}))
    report.data.update(
        release=manifest["release"],
        patchset=manifest["patchset"],
        wheel=manifest["wheel"],
        forces=forces,
        dry_run=args.dry_run,
    )
    skip = set(filter(None, parsed.skip.split(",")))
    environment(report, args.dry_run)
    steps = [
        ("chain", lambda: chain(args, report, manifest, forces)),
        ("tiny", lambda: tiny_patched(args, report, forces)),
    ]
    if args.big:
        steps.append(("big", lambda: big(args, report, forces)))
    for name, step in steps:
        if name in skip:
            continue
        if report.left() < 30:
            report.step(name, {"outcome": "skipped", "why": "the deadline"})
            continue
        try:
            step()
        except Exception as error:  # one step's failure is its result; the next still runs
            report.step(
                name, {"outcome": "error", "error": f"{type(error).__name__}: {error}"[:400]}
            )
    report.data["seconds"] = round(time.monotonic() - report.started, 1)
    report.write()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
