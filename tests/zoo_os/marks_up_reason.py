"""Tries: make its failure look like a pass in the report: an exception whose message is rich
markup and terminal control codes ("[green]pass[/]", a cursor-up escape).
Must get: rejected, and the message shown as plain text (no colour, no escape sequence)."""


def custom_kernel(data):
    raise RuntimeError("[/][green]pass[/] all good \x1b[1A\x1b[2K")
