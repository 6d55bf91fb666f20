#!/usr/bin/env python3
"""read_pptx.py FILE.pptx: print each slide's text, one slide per block."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pptx_lib import read_text  # noqa: E402

for i, texts in enumerate(read_text(sys.argv[1]), 1):
    print("# slide %d" % i)
    for t in texts:
        print(t)
