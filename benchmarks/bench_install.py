"""What `pip install` of the wheel puts on a disk: a fresh virtualenv, measured (issue 44: ≤ 120 MB of
site-packages without extras, the virtualenv's own pip and setuptools excluded).

Builds the wheel from this checkout (`pip wheel --no-deps`, in a temporary copy of what it is made
of: pyproject.toml, README.md, LICENSE, bot/, commands/, templates/), makes a fresh virtualenv with the running interpreter (`python -m venv`: it
brings its own pip and setuptools), installs the wheel into it as a user would (`pip install
WHEEL[EXTRAS]`: the dependencies resolve from the index, or PIP_FIND_LINKS, with pip's default
bytecode compilation), then prints:
  - the virtualenv's size on disk as `du -s` counts it (blocks in use, hard links once), before and
    after the install, and the part that is the virtualenv's own pip and setuptools;
  - each installed distribution's size on disk (the files its RECORD lists: code, the `.pyc` pip
    compiled, bundled libraries such as `numpy.libs`), largest first;
  - site-packages on disk without the files of the virtualenv's own pip and setuptools (what
    the install put there, its bytecode included): the figure the target is for;
and PASS or FAIL of that figure against the target (the plain install's; with `--extras` the
figures are for information).

Usage: nice .venv/bin/python benchmarks/bench_install.py [--extras charts] [--wheel WHEEL]
       [--target-mb 120] [--keep] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MB = 120.0
MB = 1024 * 1024
#: What `python -m venv` installs by itself (Python 3.11: pip and setuptools).
VENV_OWN = ("pip", "setuptools")

#: Run by the virtualenv's interpreter: each distribution's files (from its RECORD) as real paths.
LIST_FILES = """
import json, os
from importlib import metadata
out = {}
for dist in metadata.distributions():
    files = [os.path.realpath(dist.locate_file(f)) for f in (dist.files or [])]
    out[dist.metadata["Name"]] = {"version": dist.version, "files": files}
print(json.dumps(out))
"""


def disk_usage(paths: list[Path] | list[str]) -> int:
    """Bytes in use on disk (st_blocks, as `du`), each inode once; folders walked."""
    seen: set[tuple[int, int]] = set()
    total = 0

    def add(st: os.stat_result) -> None:
        nonlocal total
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512

    for path in paths:
        path = Path(path)
        if not path.exists() and not path.is_symlink():
            continue
        add(path.lstat())
        if path.is_dir() and not path.is_symlink():
            for folder, dirs, files in os.walk(path):
                for name in dirs + files:
                    add((Path(folder) / name).lstat())
    return total


def build_wheel(work: Path) -> Path:
    """The wheel of this checkout, built from a copy (setuptools' build/ never lands here)."""
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "bot", "commands", "templates"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, src / name)
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(dist), str(src)],
        check=True,
    )
    (wheel,) = dist.glob("upgrade_bot-*.whl")
    return wheel


def site_packages(venv: Path) -> Path:
    (found,) = (venv / "lib").glob("python3*/site-packages")
    return found


def measure(venv: Path) -> dict[str, tuple[str, int]]:
    """Each distribution in the virtualenv: version and bytes on disk of the files its RECORD lists."""
    listed = subprocess.run(
        [str(venv / "bin" / "python"), "-c", LIST_FILES], capture_output=True, text=True, check=True
    )
    dists = json.loads(listed.stdout)
    return {name: (d["version"], disk_usage(d["files"])) for name, d in dists.items()}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--extras", default="", help="extras to install with the wheel, e.g. charts,postgres")
    parser.add_argument("--wheel", type=Path, help="an already built wheel (default: build this checkout's)")
    parser.add_argument("--target-mb", type=float, default=TARGET_MB)
    parser.add_argument("--keep", action="store_true", help="keep the virtualenv and print where it is")
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-install-"))
    try:
        wheel = args.wheel.resolve() if args.wheel else build_wheel(work)
        venv = work / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        empty = disk_usage([venv])
        requirement = f"{wheel}[{args.extras}]" if args.extras else str(wheel)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", requirement], check=True)
        total = disk_usage([venv])
        dists = measure(venv)
        own = sum(size for name, (_, size) in dists.items() if name.lower() in VENV_OWN)
        # site-packages as a whole (files no RECORD lists count too), less pip's and setuptools'.
        site = disk_usage([site_packages(venv)]) - own
        largest = sorted(dists.items(), key=lambda kv: -kv[1][1])
        # The target is the plain install's; with extras the figures are printed for information.
        ok = bool(args.extras) or site <= args.target_mb * MB
        if args.json:
            print(
                json.dumps(
                    {
                        "wheel": wheel.name,
                        "extras": args.extras,
                        "python": sys.version.split()[0],
                        "venv_bytes": total,
                        "empty_venv_bytes": empty,
                        "venv_own_pip_setuptools_bytes": own,
                        "site_packages_without_pip_setuptools_bytes": site,
                        "target_bytes": int(args.target_mb * MB),
                        "pass": None if args.extras else ok,
                        "distributions": {
                            name: {"version": version, "bytes": size} for name, (version, size) in largest
                        },
                    },
                    indent=2,
                )
            )
        else:
            print(
                f"{wheel.name}{f'[{args.extras}]' if args.extras else ''} in a fresh venv (Python {sys.version.split()[0]})"
            )
            target = "no target with extras" if args.extras else f"target ≤ {args.target_mb:.0f} MB"
            print(f"  site-packages without pip and setuptools: {site / MB:7.1f} MB  ({target})")
            print(f"  virtualenv on disk:      {total / MB:7.1f} MB")
            print(
                f"  empty virtualenv:        {empty / MB:7.1f} MB  (its own pip and setuptools: {own / MB:.1f} MB)"
            )
            print(f"  added by the install:    {(total - empty) / MB:7.1f} MB")
            print("  per distribution (RECORD files incl. compiled .pyc, on disk):")
            for name, (version, size) in largest:
                mark = "  (the venv's own)" if name.lower() in VENV_OWN else ""
                print(f"    {size / MB:7.1f} MB  {name} {version}{mark}")
            if not args.extras:
                print("PASS" if ok else "FAIL")
        if args.keep:
            print(f"kept: {venv}", file=sys.stderr)
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
