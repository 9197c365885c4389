"""Tries: put a spreadsheet formula at the start of its failure's reason, which is printed, stored
and exported: it writes its own "error" reply to the harness's channel with the formula as the
failure's kind (the reason starts with the kind), then exits.
Must get: rejected as a protocol failure (an unknown kind is a malformed message), and no cell of
the CSV export starts with "="."""
import json
import os
import stat
import struct

FORGED = json.dumps({"op": "error", "kind": '=HYPERLINK("http://example.invalid/"&"', "message": 'x","PASS")'}).encode()


def custom_kernel(data):
    for fd in range(3, 64):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, struct.pack("!I", len(FORGED)) + FORGED)
        except OSError:
            pass
    os._exit(0)
