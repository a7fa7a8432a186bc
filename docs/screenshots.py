"""Screenshot key pages of the built documentation and check that the maths rendered.

Usage (from the repository root)::

    python docs/screenshots.py --build docs/_build/html --out docs/_build/screenshots

``--build`` first builds the site (``python -m sphinx -n -W --keep-going -b html docs
HTML_DIR``, the gallery included); without it the script reads an existing build.

Each page is opened in headless Chromium (Debian's ``chromium`` package) with the
network off, so the page must render from the built site alone. The script writes one
PNG per page and, from the page's DOM after its scripts ran, counts the formulas that
MathJax typeset and those left as raw TeX; it exits with status 1 if any page has raw
TeX, a formula that failed to typeset, or no typeset maths where maths is expected.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# (page, whether it shows maths): the index, one user-guide page per family, an API
# page and the gallery.
PAGES = [
    ("index.html", False),
    ("user_guide/random_features.html", True),
    ("user_guide/potts.html", True),
    ("user_guide/contacts.html", False),
    ("user_guide/attention.html", True),
    ("user_guide/implicit_bias.html", True),
    ("api.html", False),
    ("generated/sklearn_attn.RandomFeatureAttentionRegressor.html", True),
    ("generated/sklearn_attn.datasets.make_potts_sequences.html", True),
    ("auto_examples/index.html", False),
]

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    # No network: every script, font and image must come from the built site.
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    # Time for MathJax to typeset before the DOM is read or the picture taken.
    "--virtual-time-budget=15000",
]

# Sphinx writes inline maths as \( ... \) and display maths as \[ ... \] inside
# elements of class "math"; MathJax replaces them by <mjx-container> elements.
_RAW_TEX = re.compile(r'class="math[^"]*">\s*\\[(\[]')


def chromium(args, profile):
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        sys.exit("chromium not found (Debian: apt-get install chromium)")
    command = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def check_page(path, page, out_dir, width, height, profile):
    url = path.resolve().as_uri()
    name = page.removesuffix(".html").replace("/", "-").replace(".", "_")
    png = out_dir / f"{name}.png"
    chromium([f"--window-size={width},{height}", f"--screenshot={png}", url], profile)
    dom = chromium(["--dump-dom", url], profile).stdout
    return {
        "typeset": dom.count("<mjx-container"),
        "raw": len(_RAW_TEX.findall(dom)),
        "errors": dom.count("<mjx-merror"),
        "png": png,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html_dir", type=Path, help="the built site (docs/_build/html)")
    parser.add_argument(
        "--build", action="store_true", help="build the site into html_dir first"
    )
    parser.add_argument("--out", type=Path, default=Path("docs/_build/screenshots"))
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2000)
    args = parser.parse_args(argv)
    if args.build:
        docs = Path(__file__).resolve().parent
        command = [sys.executable, "-m", "sphinx", "-n", "-W", "--keep-going", "-q"]
        subprocess.run([*command, "-b", "html", docs, args.html_dir], check=True)
    args.out.mkdir(parents=True, exist_ok=True)
    failed = False
    with tempfile.TemporaryDirectory() as profile:
        for page, has_maths in PAGES:
            path = args.html_dir / page
            if not path.exists():
                print(f"{page}: missing")
                failed = True
                continue
            result = check_page(path, page, args.out, args.width, args.height, profile)
            missing_maths = has_maths and not result["typeset"]
            bad = bool(result["raw"] or result["errors"] or missing_maths)
            failed |= bad
            print(
                f"{page}: {result['typeset']} formulas typeset, "
                f"{result['raw']} raw TeX, {result['errors']} errors "
                f"-> {result['png']}{'  FAIL' if bad else ''}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
