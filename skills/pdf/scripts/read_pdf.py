#!/usr/bin/env python3
"""read_pdf.py FILE.pdf: print each page's text."""
import sys

from pypdf import PdfReader

for page in PdfReader(sys.argv[1]).pages:
    print(page.extract_text())
