"""What changes vLLM: one libcst codemod per module (``registry`` names them for patchsets).

Shared pieces: ``base`` (what every codemod reports and reads), ``options`` (what a patchset
gives each), ``_cst`` (matchers and builders).
"""
