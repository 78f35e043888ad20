"""patcher: structure-matched source patches for vLLM, with a compatibility matrix."""

__version__ = "0.1.0"
