"""Run in a release's verify venv: vLLM's own ``supports_eagle3()`` for each architecture named
on stdin (a JSON list), one JSON line each on stdout.

Stand-in: torchvision, torchaudio and timm. A verify venv leaves them out (each is pinned to the
CUDA torch, and no CPU build for torch 2.13.0 is on this machine's index), and most multimodal
model modules import them at module level, for image and audio processing the class's EAGLE-3
interface does not touch. After vLLM's registry (and transformers, which looks for torchvision
once, at import) is loaded, an import of them gets an empty stand-in module whose every name is
one stub class, so the model module defines its classes as it does with the real packages.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import sys
import types
from typing import Any

STUBBED = ("torchvision", "torchaudio", "timm")


class Anything(type):
    """A class that is every attribute, call, subscript and union of itself."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return cls

    def __call__(cls, *args: object, **kwargs: object) -> Any:
        return cls

    def __getitem__(cls, item: object) -> Any:
        return cls

    def __or__(cls, other: object) -> Any:
        return cls

    __ror__ = __or__


class Stub(metaclass=Anything):
    pass


class StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return Stub


class StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name: str, path: object, target: object = None) -> Any:
        if name.partition(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def main() -> None:
    from vllm.model_executor.models import ModelRegistry
    from vllm.model_executor.models.interfaces import supports_eagle3

    sys.meta_path.insert(0, StubFinder())  # after transformers has found no torchvision
    for architecture in json.load(sys.stdin):
        try:
            cls = ModelRegistry.models[architecture].load_model_cls()
            answer, why = bool(supports_eagle3(cls)), ""
        except Exception as error:  # an import this CPU venv cannot do: reported, not compared
            answer, why = None, f"{type(error).__name__}: {error}".splitlines()[0][:300]
        line = {"architecture": architecture, "supports_eagle3": answer, "why": why}
        print("supports_eagle3 " + json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
