#!/usr/bin/env python3
"""read_xlsx.py FILE.xlsx: print every sheet's rows, tab-separated."""
import sys

from openpyxl import load_workbook

wb = load_workbook(sys.argv[1])
for ws in wb.worksheets:
    print("# " + ws.title)
    for row in ws.iter_rows(values_only=True):
        print("\t".join("" if v is None else str(v) for v in row))
