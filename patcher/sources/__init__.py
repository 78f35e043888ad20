"""Where vLLM code comes from: a release on the index, a wheel file, a directory or a git ref."""
