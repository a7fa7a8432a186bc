"""Check the files of the sdist and the wheel against the tracked files.

The sdist holds every tracked file but the CI scripts and ``.gitignore``, and
only the files setuptools generates besides. The wheel holds the tracked files of
the package, its data included, and its ``.dist-info``: no tests, docs or
benchmarks, no bytecode.

Usage: python .ci/check_dist.py SDIST WHEEL
"""

import subprocess
import sys
import tarfile
import zipfile
from fnmatch import fnmatch

# Repository tooling, not source.
NOT_IN_SDIST = [".ci/*", ".gitignore"]
GENERATED_IN_SDIST = ["PKG-INFO", "setup.cfg", "*.egg-info/*"]


def tracked_files():
    out = subprocess.run(
        ["git", "ls-files", "-z"], check=True, capture_output=True, text=True
    ).stdout
    return {name for name in out.split("\0") if name}


def sdist_files(path):
    with tarfile.open(path) as tar:
        # Every member lies under the folder NAME-VERSION/.
        return {
            member.name.split("/", 1)[1]
            for member in tar.getmembers()
            if member.isfile()
        }


def wheel_files(path):
    with zipfile.ZipFile(path) as wheel:
        return {name for name in wheel.namelist() if not name.endswith("/")}


def matches(name, patterns):
    return any(fnmatch(name, pattern) for pattern in patterns)


def compare(label, found, expected, allowed_extra):
    errors = [f"{label}: missing {name}" for name in sorted(expected - found)]
    errors += [
        f"{label}: unexpected {name}"
        for name in sorted(found - expected)
        if not matches(name, allowed_extra)
    ]
    return errors


def main(sdist, wheel):
    tracked = tracked_files()
    errors = compare(
        "sdist",
        sdist_files(sdist),
        {name for name in tracked if not matches(name, NOT_IN_SDIST)},
        GENERATED_IN_SDIST,
    )
    errors += compare(
        "wheel",
        wheel_files(wheel),
        {name for name in tracked if name.startswith("sklearn_attn/")},
        ["sklearn_attn-*.dist-info/*"],
    )
    for error in errors:
        print(error, file=sys.stderr)
    if errors:
        print("fix MANIFEST.in or the package data of pyproject.toml", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
