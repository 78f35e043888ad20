"""A Kimi-K2.5 replica's image processor, loaded by transformers as the checkpoint's remote code.

Written beside a replica's config for the vLLM releases that ship no Kimi-K2.5 processor of their
own (0.15.x-0.17.x): their ``kimi_k25.py`` loads one with ``AutoImageProcessor`` and
``trust_remote_code``, through ``auto_map`` in ``preprocessor_config.json``, as the real K2.5
checkpoint's own processor is loaded. It is patcher's code, not Moonshot's: it cuts each image
(or each frame of a video chunk) into square patches on a grid that the vision tower's 2x2 merge
divides, and counts the tokens the merged grid gives. Random-weight replicas only need the
shapes right.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch
from transformers.feature_extraction_utils import BatchFeature
from transformers.image_processing_utils import BaseImageProcessor


class ReplicaMediaProcessor(BaseImageProcessor):
    model_input_names: ClassVar[list[str]] = ["pixel_values", "grid_thws"]

    def __init__(self, media_proc_cfg: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        config = dict(media_proc_cfg or {})
        self.media_proc_cfg = config
        self.patch_size = int(config.get("patch_size", 14))
        self.merge = int(config.get("merge_kernel_size", 2))
        self.num_frames_per_chunk = int(config.get("temporal_merge_kernel_size", 4))
        self.image_patches = int(config.get("in_patch_limit", 1024))
        self.frame_patches = int(config.get("in_patch_limit_each_frame", 256))
        self.side_patches = int(config.get("patch_limit_on_one_side", 64))
        self.mean = np.array(config.get("image_mean", [0.5, 0.5, 0.5]), dtype=np.float32)
        self.std = np.array(config.get("image_std", [0.5, 0.5, 0.5]), dtype=np.float32)

    def grid(self, image: Any, budget: int) -> tuple[int, int]:
        """Patch rows and columns for ``image``: within ``budget``, multiples of the merge."""
        width, height = image.size
        rows, cols = height / self.patch_size, width / self.patch_size
        by_count = math.sqrt(budget / max(rows * cols, 1.0))
        scale = min(1.0, by_count, self.side_patches / max(rows, cols))
        fit = lambda n: max(self.merge, int(n * scale) // self.merge * self.merge)  # noqa: E731
        return fit(rows), fit(cols)

    def frames(self, chunk: dict[str, Any]) -> tuple[list[Any], int]:
        if chunk["type"] == "image":
            return [chunk["image"]], self.image_patches
        return list(chunk["video_chunk"]), self.frame_patches

    def media_tokens_calculator(self, chunk: dict[str, Any]) -> int:
        frames, budget = self.frames(chunk)
        rows, cols = self.grid(frames[0], budget)
        return (rows // self.merge) * (cols // self.merge)

    def split_video_chunks(self, video: list[Any]) -> list[list[Any]]:
        n = self.num_frames_per_chunk
        return [video[i : i + n] for i in range(0, len(video), n)]

    def patches(self, image: Any, rows: int, cols: int) -> torch.Tensor:
        size = self.patch_size
        resized = image.convert("RGB").resize((cols * size, rows * size))
        pixels = (np.asarray(resized, dtype=np.float32) / 255.0 - self.mean) / self.std
        grid = pixels.reshape(rows, size, cols, size, 3).transpose(0, 2, 4, 1, 3)
        return torch.from_numpy(np.ascontiguousarray(grid.reshape(rows * cols, 3, size, size)))

    def preprocess(self, chunks: list[dict[str, Any]], **kwargs: Any) -> BatchFeature:
        pixel_values, grid_thws = [], []
        for chunk in chunks:
            frames, budget = self.frames(chunk)
            rows, cols = self.grid(frames[0], budget)
            pixel_values += [self.patches(frame, rows, cols) for frame in frames]
            grid_thws.append([len(frames), rows, cols])
        return BatchFeature(
            {"pixel_values": torch.cat(pixel_values), "grid_thws": torch.tensor(grid_thws)}
        )
