"""Tries: crash the parent's clean-up and leave files on the host: a tree 3,000 folders deep in its
scratch folder (/tmp/work), deeper than shutil.rmtree's recursion can follow.
Must get: passes (its answers are right); the scratch folder is removed all the same and the run
goes on."""
import os

import reference

os.chdir("/tmp/work")
for _ in range(3000):
    os.mkdir("d")
    os.chdir("d")
with open("PLANTED", "w") as f:
    f.write("x")
os.chdir("/tmp/work")


def custom_kernel(data):
    return reference.ref_kernel(data)
