#!/usr/bin/env python3
"""make_xlsx.py OUT.xlsx --sheet NAME --row 'a,b' [--row ...] [--total]"""
import argparse

from openpyxl import Workbook
from openpyxl.utils import get_column_letter


def cell(v):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--sheet", default="Sheet1")
    ap.add_argument("--row", action="append", default=[])
    ap.add_argument("--total", action="store_true", help="a SUM row under each numeric column")
    a = ap.parse_args()
    wb = Workbook()
    ws = wb.active
    ws.title = a.sheet
    rows = [[cell(v) for v in r.split(",")] for r in a.row]
    for r in rows:
        ws.append(r)
    if a.total and len(rows) > 1:
        total = ["Total"]
        for j in range(1, max(len(r) for r in rows)):
            col = get_column_letter(j + 1)
            total.append("=SUM(%s2:%s%d)" % (col, col, len(rows)))
        ws.append(total)
    for j in range(1, ws.max_column + 1):
        width = max(len(str(c.value or "")) for c in ws[get_column_letter(j)])
        ws.column_dimensions[get_column_letter(j)].width = width + 2
    wb.save(a.out)
    print(a.out)


if __name__ == "__main__":
    main()
