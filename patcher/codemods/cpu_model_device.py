"""cpu-model-device: a test harness that lets a model class built for CUDA be built on CPU.

Not a fix for users: part of the CPU serving harness (see ``cpu_spec_decode``). vLLM 0.15.x's
``KimiK25ForConditionalGeneration.__init__`` sets ``self.device = torch.cuda.current_device()``,
which raises on a machine without CUDA before the first token, even without a drafter. The
harness sets the CPU device there. From 0.16.0 the class asks ``current_platform`` instead.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from patcher.codemods._marks import MARK
from patcher.codemods.base import FileCodemod, Outcome, Status, Tree, summarize

CUDA_DEVICE = m.SimpleStatementLine(
    body=[
        m.Assign(
            targets=[m.AssignTarget(m.Attribute(value=m.Name("self"), attr=m.Name("device")))],
            value=m.Call(
                func=m.Attribute(
                    value=m.Attribute(value=m.Name("torch"), attr=m.Name("cuda")),
                    attr=m.Name("current_device"),
                )
            ),
        )
    ]
)
CPU_DEVICE = cst.parse_statement(f'self.device = torch.device("cpu")  # {MARK}: no CUDA here\n')
HARNESS_DEVICE = m.SimpleStatementLine(
    trailing_whitespace=m.TrailingWhitespace(comment=m.Comment(m.MatchIfTrue(lambda c: MARK in c)))
)


class CpuModelDevice(FileCodemod):
    DESCRIPTION = "Test harness: a model class that asks CUDA for its device is built on CPU."
    CANDIDATE_FILES = ("vllm/model_executor/models/kimi_k25.py",)

    def transform(self, tree: Tree) -> Outcome:
        paths = tree.files(self)
        if not paths:
            return Outcome(Status.UNSUPPORTED, "no vllm/model_executor/models/kimi_k25.py")
        applied, present = [], []
        for path, module in tree.modules_mentioning(paths, "device"):
            if m.findall(module, CUDA_DEVICE):
                tree.update(
                    path, cst.ensure_type(m.replace(module, CUDA_DEVICE, CPU_DEVICE), cst.Module)
                )
                applied.append(f"{path}: self.device is the CPU, not torch.cuda.current_device()")
            elif m.findall(module, HARNESS_DEVICE):
                present.append(path)
        return summarize(
            applied,
            present,
            "self.device is already the CPU",
            "no self.device = torch.cuda.current_device()",
        )
