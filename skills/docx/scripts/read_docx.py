#!/usr/bin/env python3
"""read_docx.py FILE.docx: print its paragraphs and table cells, one per line."""
import sys

from docx import Document

doc = Document(sys.argv[1])
for p in doc.paragraphs:
    print(p.text)
for t in doc.tables:
    for row in t.rows:
        print("\t".join(c.text for c in row.cells))
