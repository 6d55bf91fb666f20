#!/usr/bin/env python3
"""make_pdf.py OUT.pdf --title T [--paragraph P ...]: A4, DejaVu (full Romanian coverage)."""
import argparse

from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--title", required=True)
    ap.add_argument("--paragraph", action="append", default=[])
    a = ap.parse_args()
    pdfmetrics.registerFont(TTFont("DejaVu", FONT))
    pdfmetrics.registerFont(TTFont("DejaVu-Bold", BOLD))
    styles = getSampleStyleSheet()
    body = styles["BodyText"].clone("body", fontName="DejaVu", fontSize=11, leading=15)
    head = styles["Title"].clone("head", fontName="DejaVu-Bold")
    story = [Paragraph(a.title, head), Spacer(1, 12)]
    story += [Paragraph(p, body) for p in a.paragraph]
    SimpleDocTemplate(a.out, pagesize=A4, title=a.title).build(story)
    print(a.out)


if __name__ == "__main__":
    main()
