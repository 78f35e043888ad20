"""Where vLLM code comes from: a release on the index, a wheel file, a directory or a git ref."""

from patcher.sources.base import Source
from patcher.sources.directory import DirectorySource
from patcher.sources.git import GitSource
from patcher.sources.index_wheel import IndexWheelSource
from patcher.sources.wheel import WheelSource

__all__ = ["DirectorySource", "GitSource", "IndexWheelSource", "Source", "WheelSource"]
