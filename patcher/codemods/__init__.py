"""What changes vLLM: one libcst codemod per module (``registry`` names them for patchsets).

Shared pieces: ``base`` (what every codemod reports and reads), ``options`` (what a patchset
gives each), ``_cst`` (matchers, builders, and edits of a module's classes by name),
``_templates`` (``SupportsEagle3`` as both interface codemods write it).
"""
