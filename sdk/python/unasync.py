#!/usr/bin/python3
"""Generate sbx/_sync_client.py (Sbx) from sbx/_async_client.py (AsyncSbx), the way
httpcore's unasync does: the two clients are one source, so they cannot drift apart.

    /usr/bin/python3 sdk/python/unasync.py          write sbx/_sync_client.py
    /usr/bin/python3 sdk/python/unasync.py --check  exit 1 if it is not up to date
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "sbx", "_async_client.py")
DST = os.path.join(HERE, "sbx", "_sync_client.py")

# Whole-token replacements, applied in order.
SUBS = [
    (r"\basync def\b", "def"),
    (r"\basync for\b", "for"),
    (r"\basync with\b", "with"),
    (r"\bawait ", ""),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\b__aiter__\b", "__iter__"),
    (r"\baclose\b", "close"),
    (r"\baread\b", "read"),
    (r"\baiter_bytes\b", "iter_bytes"),
    (r"\baiter_lines\b", "iter_lines"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bhttpx\.AsyncClient\b", "httpx.Client"),
    (r"\bimport asyncio\b", "import time"),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\b_Async([A-Z]\w*)", r"_\1"),
    (r"\bAsync([A-Z]\w*)", r"\1"),
    (r"`async with ", "`with "),
]

HEADER = ('"""Generated from _async_client.py by sdk/python/unasync.py: do not edit.\n\n'
          'Sbx, the synchronous client (the same surface as AsyncSbx)."""\n')


def convert(text):
    # Replace the source's docstring (which explains the generation) with the header.
    body = text.split('"""', 2)[2].lstrip("\n")
    for pat, rep in SUBS:
        body = re.sub(pat, rep, body)
    return HEADER + "\n" + body


def main(argv):
    with open(SRC) as f:
        out = convert(f.read())
    if argv == ["--check"]:
        with open(DST) as f:
            if f.read() != out:
                print("sbx/_sync_client.py is stale: run /usr/bin/python3 sdk/python/unasync.py",
                      file=sys.stderr)
                return 1
        return 0
    with open(DST, "w") as f:
        f.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
