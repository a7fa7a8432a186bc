"""The documentation figures' house style, ``docs/figures.mplstyle``.

sphinx-gallery calls :func:`reset` before it runs each example (``reset_modules`` in
``conf.py``, after its own reset of matplotlib to the defaults), so every example
draws in the style; :func:`style` gives the style sheet to the other figures of the
build.
"""

from __future__ import annotations

from pathlib import Path

STYLE = Path(__file__).resolve().parents[1] / "figures.mplstyle"


def style():
    """The path of the style sheet, for ``matplotlib.style.use`` or ``context``."""
    return str(STYLE)


def reset(gallery_conf, fname):
    """Apply the house style (sphinx-gallery's ``reset_modules`` signature)."""
    import matplotlib.style

    matplotlib.style.use(style())
