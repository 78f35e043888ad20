"""Small vLLM-shaped wheels for the verify unit tests: METADATA plus a few modules."""

from __future__ import annotations

import zipfile
from pathlib import Path

BASE_REQUIRES = (
    "transformers<5,>=4.56.0",
    "xgrammar==0.1.29; platform_machine == 'x86_64' or platform_machine == 'aarch64'",
    "compressed-tensors==0.13.0",
    "torch==2.9.1",
    "torchvision==0.24.1",
    "flashinfer-python==0.6.3",
    "nvidia-cutlass-dsl>=4.4.0",
    "ray[cgraph]>=2.48.0",
    "pandas; extra == 'bench'",
    "never-here; platform_machine == 'not-a-machine'",
)


def fake_wheel(
    folder: Path,
    modules: dict[str, str] | None = None,
    requires: tuple[str, ...] = BASE_REQUIRES,
    version: str = "0.16.0",
    requires_python: str = ">=3.10,<3.14",
) -> Path:
    """A wheel whose METADATA lists ``requires`` and whose files are ``modules``."""
    info = f"vllm-{version}.dist-info"
    metadata = "\n".join(
        [
            "Metadata-Version: 2.1",
            "Name: vllm",
            f"Version: {version}",
            f"Requires-Python: {requires_python}",
            *(f"Requires-Dist: {line}" for line in requires),
            "",
            "",
        ]
    )
    files = {"vllm/__init__.py": "", **(modules or {}), f"{info}/METADATA": metadata}
    path = folder / f"vllm-{version}-cp38-abi3-manylinux_2_31_x86_64.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path
