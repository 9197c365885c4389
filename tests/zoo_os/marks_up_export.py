"""Tries: make its failure render as something else where results are read: an exception whose
message is raw HTML with a script handler, a Markdown link labelled PASS to a javascript: URL, and
rich's emoji shortcodes (":white_check_mark:").
Must get: rejected; the Markdown export shows the message as text (no raw tag, no link), and the
terminal table prints the shortcodes as typed, not as pictograms."""


def custom_kernel(data):
    raise ValueError("<img src=x onerror=alert(document.domain)> [PASS](javascript:alert(1)) "
                     ":white_check_mark: :white_check_mark:")
