"""Tries: drop a `kernelguard.py` (which the parent imports for its static scan) and a
`sitecustomize.py` where Python looks first: the project root, the working folder, the
submission's folder, the first writable entry of sys.path.
Must get: rejected (zeros); no file created anywhere outside the worker's private scratch."""
import os
import pathlib
import sys

import reference
import torch

PAYLOAD = "import os\nos.environ['PLANTED'] = '1'\n"
places = [pathlib.Path(reference.__file__).parent, pathlib.Path(__file__).parent, *map(pathlib.Path, sys.path[:8])]
for folder in places:
    for name in ("kernelguard.py", "sitecustomize.py"):
        try:
            (folder / name).write_text(PAYLOAD)
            print("planted", folder / name)
        except OSError as exc:
            print("could not plant", folder / name, exc.strerror)


def custom_kernel(data):
    q = data[0]
    return torch.zeros(q.shape[0], q.shape[1], 512, dtype=torch.bfloat16, device=q.device)
