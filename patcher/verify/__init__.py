"""CPU verification: run vLLM's own code from the official and the patched wheel.

Each check shows one barrier to EAGLE-3 for Kimi-K2.5 before and after patching; the
checks themselves live in :mod:`patcher.verify.probe`, which runs inside a venv per wheel.
"""
