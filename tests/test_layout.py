"""The house's layout, as the development guide draws it: who may import whom.

Layers, lowest first: the shared core (the top-level private modules), the three
libraries (``attention``, ``random_features``, ``potts``), the contacts
application, the dataset generators, the reproductions, and the command line. A
module imports from its own package, from lower layers, and never from a higher
one; the libraries do not import each other. Across packages it imports public
names only, from the package itself (``from ..potts import gibbs_sample``) or from
a core module, never from another package's private modules. A module of over 700
lines says at its top why it is one topic ("One topic").

The checks read the source (``ast``), imports inside functions included.
"""

import ast
from pathlib import Path

import pytest

import sklearn_attn

PACKAGE = Path(sklearn_attn.__file__).resolve().parent

LAYERS = {
    "core": 0,
    "attention": 1,
    "random_features": 1,
    "potts": 1,
    "contacts": 2,
    "datasets": 3,
    "experiments": 4,
    "__main__": 5,
    "__init__": 5,  # the package's own namespace re-exports the libraries
}
LIBRARIES = {"attention", "random_features", "potts"}
MAX_LINES = 700

# The one import that runs upwards: deprecated aliases of names that moved from
# the Potts library to the contacts application, resolved only when used.
UPWARD_ALLOWED = {("sklearn_attn.potts", "sklearn_attn.contacts")}


def _module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(module):
    """The top-level package of a dotted name, or "core" for the private
    top-level modules."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    if parts[1] in LAYERS:
        return parts[1]
    return "core"


def _imports():
    """``(module, target module, imported name or None)`` for every import."""
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        is_package = path.name == "__init__.py"
        here = module.split(".") if is_package else module.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    yield module, target, alias.name
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    yield module, alias.name, None
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", getattr(node.func, "id", None))
                == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                yield module, node.args[0].value, None


IMPORTS = [
    (module, target, name)
    for module, target, name in _imports()
    if target.split(".")[0] == "sklearn_attn"
]


def test_the_walk_sees_the_imports():
    # The walk itself can fail silently; anchor it on imports known to exist.
    assert ("sklearn_attn.contacts._command", "sklearn_attn.potts", "apc") in IMPORTS
    assert ("sklearn_attn.potts", "sklearn_attn.contacts", None) in IMPORTS


def test_no_import_runs_upwards():
    upward = []
    for module, target, _ in IMPORTS:
        source, destination = _package_of(module), _package_of(target)
        if source == destination or target == "sklearn_attn":
            continue
        same_layer_libraries = source in LIBRARIES and destination in LIBRARIES
        if LAYERS[destination] > LAYERS[source] or same_layer_libraries:
            if (module, target) not in UPWARD_ALLOWED:
                upward.append(f"{module} imports {target}")
    assert not upward, "\n".join(upward)


def test_no_private_name_crosses_packages():
    crossing = []
    for module, target, name in IMPORTS:
        source, destination = _package_of(module), _package_of(target)
        if source == destination or destination == "__init__":
            continue
        private_name = name is not None and name.startswith("_")
        private_module = destination != "core" and any(
            part.startswith("_") for part in target.split(".")[2:]
        )
        if private_name or private_module:
            crossing.append(f"{module} imports {name} from {target}")
    assert not crossing, "\n".join(crossing)


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_long_modules_say_why_they_are_one_topic(path):
    text = path.read_text(encoding="utf-8")
    n_lines = text.count("\n")
    if n_lines > MAX_LINES:
        docstring = ast.get_docstring(ast.parse(text)) or ""
        assert "One topic" in docstring, (
            f"{path.name} has {n_lines} lines: split it, or say at its top why "
            "it is one topic"
        )
