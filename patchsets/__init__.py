"""The built-in patchsets: TOML data, shipped as the package ``patcher.patchsets``."""
