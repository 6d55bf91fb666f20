#!/usr/bin/env python3
"""html_to_pdf.py IN.html OUT.pdf: render HTML + CSS with weasyprint."""
import sys

from weasyprint import HTML

HTML(filename=sys.argv[1]).write_pdf(sys.argv[2])
print(sys.argv[2])
