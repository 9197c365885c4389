"""The trusted parent: runs a file's evaluation, never its code."""
