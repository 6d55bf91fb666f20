#!/usr/bin/env python3
"""make_docx.py OUT.docx --title T [--paragraph P ...] [--table 'a,b;c,d']"""
import argparse

from docx import Document


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--title", required=True)
    ap.add_argument("--paragraph", action="append", default=[])
    ap.add_argument("--table", help="rows separated by ';', cells by ','")
    a = ap.parse_args()
    doc = Document()
    doc.add_heading(a.title, level=1)
    for p in a.paragraph:
        doc.add_paragraph(p)
    if a.table:
        rows = [r.split(",") for r in a.table.split(";")]
        t = doc.add_table(rows=len(rows), cols=max(len(r) for r in rows))
        for i, r in enumerate(rows):
            for j, cell in enumerate(r):
                t.rows[i].cells[j].text = cell
    doc.save(a.out)
    print(a.out)


if __name__ == "__main__":
    main()
