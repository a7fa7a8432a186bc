"""Screenshot the built documentation; check that its maths rendered, nothing clipped.

Usage (from the repository root)::

    python docs/screenshots.py docs/_build/html --all --out docs/_build/screenshots

``--build`` first builds the site (``python -m sphinx -n -W --keep-going -b html docs
HTML_DIR``, the gallery included); without it the script reads an existing build.
``--all`` checks every page of the site; without it, a few key pages.

Each page is opened in headless Chromium (Debian's ``chromium`` package) with the
network off, so the page must render from the built site alone, in a window
``--width`` pixels wide (1,400 by default, a laptop's browser). The script writes one
PNG of the whole page and, from the page's DOM after its scripts ran (MathJax
included), checks:

* the maths: the formulas MathJax typeset, those left as raw TeX and those that failed
  to typeset;
* the layout: every element of the article (and of the sidebars) whose content is
  wider than its box: a table, a display equation, a heading, a code block or
  anything else that either is cut off (``overflow: hidden``), needs a horizontal
  scroll bar to be read in full (``overflow: auto``, which hides part of it until
  scrolled) or runs out of the text column into the sidebar; and a page wider than
  the window;
* raw reStructuredText: double backquotes left in the text, outside code.

It exits with status 1 if any page has raw TeX, a formula that failed to typeset, no
typeset maths where maths is expected, a clipped element, a page wider than the
window or raw markup.

The layout is measured by a small script added to a copy of each page (the copy lies
in a temporary copy of the site, so that its relative links still resolve); the
script waits for MathJax, walks the article and writes what it found into the DOM,
which Chromium's ``--dump-dom`` returns. The screenshots are taken of the pages as
built.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# (page, whether it shows maths): the key pages, checked without --all: the index,
# one user-guide page per family, an API page and the gallery.
PAGES = [
    ("index.html", False),
    ("user_guide/random_features.html", True),
    ("user_guide/potts.html", True),
    ("user_guide/contacts.html", False),
    ("user_guide/attention.html", True),
    ("user_guide/implicit_bias.html", True),
    ("user_guide/claims.html", False),
    ("api.html", False),
    ("generated/sklearn_attn.RandomFeatureAttentionRegressor.html", True),
    ("generated/sklearn_attn.datasets.make_potts_sequences.html", True),
    ("auto_examples/index.html", False),
]

# Pages of the site that are no reading matter: search needs its index loaded by
# script, and the general index is a list of links.
SKIPPED = {"search.html", "genindex.html"}

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

# Chromium does not draw a screenshot taller than this; longer pages are cut here
# (the layout check still covers the whole page).
MAX_HEIGHT = 16000

# Sphinx writes inline maths as \( ... \) and display maths as \[ ... \] inside
# elements of class "math"; MathJax replaces them by <mjx-container> elements.
_RAW_TEX = re.compile(r'class="math[^"]*">\s*\\[(\[]')

# Added to the copy of each page. Once the page has loaded and MathJax has typeset,
# it looks at every element of the article and of each sidebar: one whose overflow
# is not "visible" and whose content is wider than its box hides part of that
# content ("hidden" when cut off, "scroll" when a scroll bar is needed); one that
# sticks out of its root (the article, a sidebar) to the left or the right, with no
# such box around it, runs into its neighbour or off the page ("spill"). Only the
# outermost offender of a subtree is reported. MathJax's assistive MathML (read by
# screen readers, drawn nowhere) is left out.
_MEASURE = r"""
<script>
(function () {
  var KINDS = [
    ["sidebar", ".bd-sidebar-primary, .bd-sidebar-secondary"], ["table", "table"],
    ["math", "div.math, mjx-container"], ["heading", "h1, h2, h3, h4, h5, h6"],
    ["code", "pre, div.highlight"],
    ["signature", "dt"], ["figure", "figure, img"]
  ];
  function kind(el) {
    var i;
    for (i = 0; i < KINDS.length; i++) {
      if (el.closest(KINDS[i][1])) return KINDS[i][0];
    }
    // A scrolling box around one thing: the theme's table container, say.
    for (i = 0; i < KINDS.length; i++) {
      if (el.querySelector(KINDS[i][1])) return KINDS[i][0];
    }
    return el.tagName.toLowerCase();
  }
  function label(el) {
    var text = (el.textContent || "").replace(/\s+/g, " ").trim().slice(0, 70);
    var name = el.tagName.toLowerCase();
    if (el.className && typeof el.className === "string") {
      name += "." + el.className.trim().split(/\s+/).join(".");
    }
    return name + ": " + text;
  }
  function skipped(el) {
    // Inside a formula only the formula's own box counts: MathJax draws stretchy
    // delimiters from glyphs that overflow their (clipping) pieces by design.
    if (el.parentElement && el.parentElement.closest("mjx-container")) return true;
    return el.closest(".visually-hidden, .sr-only, [hidden]");
  }
  function check() {
    // MathJax's assistive MathML, drawn nowhere, still counts in its box's scroll
    // width; taken out of the layout, it cannot pass for an overflow.
    var quiet = document.createElement("style");
    quiet.textContent = "mjx-assistive-mml { display: none !important; }";
    document.head.appendChild(quiet);
    var article = document.querySelector(".bd-article") ||
      document.querySelector("main") || document.body;
    var found = [];
    // The article, and the sidebars beside it (the page's table of contents lists
    // the long API names too); each root is measured with what it holds.
    var roots = [article].concat(Array.prototype.slice.call(
      document.querySelectorAll(".bd-sidebar-primary, .bd-sidebar-secondary")));
    roots.forEach(function (root) { measure(root, found); });
    return found;
  }
  function measure(root, found) {
    var rootStyle = getComputedStyle(root);
    if (rootStyle.display === "none" || rootStyle.visibility === "hidden") return;
    var box = root.getBoundingClientRect();
    var all = [root].concat(Array.prototype.slice.call(root.querySelectorAll("*")));
    for (var i = 0; i < all.length; i++) {
      var el = all[i];
      if (skipped(el)) continue;
      var inside = found.some(function (f) { return f.el.contains(el); });
      if (inside) continue;
      var style = getComputedStyle(el);
      if (style.display === "none" || style.visibility === "hidden") continue;
      var inline = style.display === "inline" || style.display === "contents";
      if (!inline && style.overflowX !== "visible" &&
          el.scrollWidth > el.clientWidth + 1) {
        var scrolls = style.overflowX === "auto" || style.overflowX === "scroll";
        found.push({el: el, how: scrolls ? "scroll" : "hidden",
                    by: el.scrollWidth - el.clientWidth});
        continue;
      }
      var rect = el.getBoundingClientRect();
      if (rect.width === 0) continue;
      var by = Math.max(rect.right - box.right, box.left - rect.left);
      if (by > 1) {
        // Inside a box that clips, the box itself is what counts.
        var clip = el.parentElement, clipped = false;
        while (clip && clip !== root) {
          if (getComputedStyle(clip).overflowX !== "visible") { clipped = true; break; }
          clip = clip.parentElement;
        }
        if (!clipped) found.push({el: el, how: "spill", by: Math.round(by)});
      }
    }
  }
  function report() {
    var article = document.querySelector(".bd-article") ||
      document.querySelector("main") || document.body;
    var box = article.getBoundingClientRect();
    var found = check();
    var raw = [];
    var walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      var node = walker.currentNode;
      if (node.nodeValue.indexOf("``") >= 0 &&
          !node.parentElement.closest("pre, code, .highlight, script, style")) {
        raw.push(node.nodeValue.trim().slice(0, 70));
      }
    }
    var result = {
      width: window.innerWidth,
      article: Math.round(box.width),
      height: document.documentElement.scrollHeight,
      page_scroll: document.documentElement.scrollWidth > window.innerWidth + 1,
      clipped: found.map(function (f) {
        var top = Math.round(f.el.getBoundingClientRect().top + window.scrollY);
        return {kind: kind(f.el), how: f.how, by: f.by, top: top, what: label(f.el)};
      }),
      raw_markup: raw
    };
    var out = document.createElement("pre");
    out.id = "layout-report";
    out.hidden = true;
    out.textContent = JSON.stringify(result);
    document.body.appendChild(out);
  }
  window.addEventListener("load", function () {
    var mj = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
    Promise.resolve(mj).then(function () { return document.fonts.ready; })
      .then(function () { setTimeout(report, 300); });
  });
})();
</script>
"""

_REPORT = re.compile(r'<pre id="layout-report"[^>]*>(.*?)</pre>', re.DOTALL)


def chromium(args, profile):
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        sys.exit("chromium not found (Debian: apt-get install chromium)")
    command = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180)


def measure(copy, width):
    """The maths counts and the layout report of one page (a measuring copy)."""
    with tempfile.TemporaryDirectory() as profile:
        dom = chromium(
            [f"--window-size={width},900", "--dump-dom", copy.as_uri()], profile
        ).stdout
    found = _REPORT.search(dom)
    if found is None:
        layout = {"error": "no layout report (the page's scripts did not finish)"}
    else:
        layout = json.loads(html.unescape(found.group(1)))
        dom = dom[: found.start()] + dom[found.end() :]
    return {
        "typeset": dom.count("<mjx-container"),
        "raw": len(_RAW_TEX.findall(dom)),
        "errors": dom.count("<mjx-merror"),
        "layout": layout,
    }


def screenshot(path, png, width, height):
    with tempfile.TemporaryDirectory() as profile:
        size = f"--window-size={width},{min(height, MAX_HEIGHT)}"
        chromium([size, f"--screenshot={png}", path.resolve().as_uri()], profile)


def check_page(html_dir, site_copy, page, out_dir, width, screenshots=True):
    result = measure(site_copy / page, width)
    layout = result["layout"]
    if screenshots:
        name = page.removesuffix(".html").replace("/", "-").replace(".", "_")
        result["png"] = out_dir / f"{name}.png"
        screenshot(html_dir / page, result["png"], width, layout.get("height", 2000))
    return result


def all_pages(html_dir):
    pages = []
    for path in sorted(html_dir.rglob("*.html")):
        page = path.relative_to(html_dir).as_posix()
        if page.split("/")[0] in {"_static", "_sources", "_downloads", "_images"}:
            continue
        if page not in SKIPPED:
            pages.append(page)
    return pages


def copy_site(html_dir, pages, into):
    """A copy of the site whose pages to check carry the measuring script."""
    shutil.copytree(html_dir, into)
    for page in pages:
        path = into / page
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("</body>", _MEASURE + "</body>", 1), "utf-8")
    return into


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html_dir", type=Path, help="the built site (docs/_build/html)")
    parser.add_argument(
        "--build", action="store_true", help="build the site into html_dir first"
    )
    parser.add_argument(
        "--all", action="store_true", help="check every page, not only the key ones"
    )
    parser.add_argument("--out", type=Path, default=Path("docs/_build/screenshots"))
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument(
        "--no-screenshots", action="store_true", help="check only, write no PNG"
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="pages checked at a time (default 2)"
    )
    parser.add_argument(
        "--json", type=Path, help="also write every page's results to this file"
    )
    args = parser.parse_args(argv)
    if args.build:
        docs = Path(__file__).resolve().parent
        command = [sys.executable, "-m", "sphinx", "-n", "-W", "--keep-going", "-q"]
        subprocess.run([*command, "-b", "html", docs, args.html_dir], check=True)
    maths = dict(PAGES)
    pages = all_pages(args.html_dir) if args.all else [page for page, _ in PAGES]
    missing = [page for page in pages if not (args.html_dir / page).exists()]
    for page in missing:
        print(f"{page}: missing")
    pages = [page for page in pages if page not in missing]
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        site_copy = copy_site(args.html_dir, pages, Path(tmp) / "site")
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = {
                page: pool.submit(
                    check_page,
                    args.html_dir,
                    site_copy,
                    page,
                    args.out,
                    args.width,
                    not args.no_screenshots,
                )
                for page in pages
            }
            results = {page: future.result() for page, future in futures.items()}
    failed = bool(missing)
    counts = {"clipped": 0, "table or equation": 0, "wide": 0, "raw markup": 0}
    for page, result in results.items():
        layout = result["layout"]
        clipped = layout.get("clipped", [])
        raw_markup = layout.get("raw_markup", [])
        wide = layout.get("page_scroll", False)
        missing_maths = maths.get(page, False) and not result["typeset"]
        bad = bool(
            result["raw"]
            or result["errors"]
            or missing_maths
            or clipped
            or wide
            or raw_markup
            or "error" in layout
        )
        failed |= bad
        counts["clipped"] += bool(clipped)
        counts["table or equation"] += any(
            item["kind"] in ("table", "math") for item in clipped
        )
        counts["wide"] += wide
        counts["raw markup"] += bool(raw_markup)
        shot = f" -> {result['png']}" if "png" in result else ""
        print(
            f"{page}: {result['typeset']} formulas typeset, {result['raw']} raw TeX, "
            f"{result['errors']} errors, {len(clipped)} clipped{shot}"
            f"{'  FAIL' if bad else ''}"
        )
        if "error" in layout:
            print(f"    {layout['error']}")
        if wide:
            print(f"    the page is wider than the window ({args.width} px)")
        for item in clipped:
            where = f"{item['kind']} ({item['how']}, {item['by']} px)"
            print(f"    {where}: {item['what']}")
        for text in raw_markup:
            print(f"    raw markup: {text}")
    print(
        f"{len(results)} pages at {args.width} px: {counts['clipped']} with a clipped "
        f"element ({counts['table or equation']} with a clipped table or equation), "
        f"{counts['wide']} wider than the window, {counts['raw markup']} with raw "
        "markup"
    )
    if args.json:
        records = {
            page: {k: str(v) if k == "png" else v for k, v in result.items()}
            for page, result in results.items()
        }
        args.json.write_text(json.dumps(records, indent=1), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
