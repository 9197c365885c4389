"""The task: its spec, its inputs and reference, the check's verdict."""
