"""Where patched code goes: a unified diff, a tree patched in place, a wheel."""
