"""Writes digits.txt: scikit-learn's bundled 8x8 handwritten digits (1,797 images).

Run: python3 examples/data/export_digits.py  (needs scikit-learn)
Each line is the label, a space, and the 64 pixel values (0..16, row-major) written as one
character each in base 17 ("0".."9", "a".."g").
"""
import pathlib

from sklearn.datasets import load_digits

DIGITS = "0123456789abcdefg"


def main():
    d = load_digits()
    lines = [
        f"{label} " + "".join(DIGITS[int(v)] for v in image)
        for image, label in zip(d.data, d.target)
    ]
    pathlib.Path(__file__).with_name("digits.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
