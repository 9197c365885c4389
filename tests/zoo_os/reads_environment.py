"""Tries: read the operator's secrets from the environment the worker inherits (a token in any
variable) and publish them through its failure reason, which is printed and stored.
Must get: no variable of the parent's but the GPU stack's and Python's (harness/parent/launch.py,
ENV_NAMES and ENV_PREFIXES): the reason it raises lists none of the test's planted ones."""
import os


def custom_kernel(data):
    secrets = [k for k in sorted(os.environ) if any(w in k for w in ("TOKEN", "SECRET", "KEY", "PASSWORD"))]
    raise ValueError(f"environment of {len(os.environ)} variables, secrets: [{';'.join(secrets)}]")
