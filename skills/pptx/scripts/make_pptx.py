#!/usr/bin/env python3
"""make_pptx.py OUT.pptx --title T [--subtitle S] [--slide 'Title|a;b;c' ...]"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pptx_lib import Deck  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--title", required=True)
    ap.add_argument("--subtitle", default="")
    ap.add_argument("--slide", action="append", default=[])
    a = ap.parse_args()
    deck = Deck()
    deck.title_slide(a.title, a.subtitle)
    for s in a.slide:
        title, _, bullets = s.partition("|")
        deck.bullet_slide(title, [b for b in bullets.split(";") if b])
    deck.save(a.out)
    print(a.out)


if __name__ == "__main__":
    main()
