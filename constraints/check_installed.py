"""Checks that the installed packages match a constraints file (default: verl 0.9.1's GPU stack next to this file).

    python constraints/check_installed.py                      # the GPU stack: exit 1 on any mismatch
    python constraints/check_installed.py FILE --allow-missing flash-attn

Prints one line per constrained package (installed version, wanted, ok/MISMATCH/MISSING). A local version label
(``2.11.0+cu130``) satisfies a plain pin (``==2.11.0``), as in pip. Exit status 1 when a package has another
version or is missing (unless allowed), 0 otherwise. Standard library and ``packaging`` only.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

DEFAULT = Path(__file__).with_name("gpu-verl-0.9.1.txt")


def read_constraints(path: Path) -> list[Requirement]:
    """The requirements of a pip constraints file (comments and blank lines skipped); ValueError names the line."""
    out = []
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            out.append(Requirement(line))
        except ValueError as e:
            raise ValueError(f"{path}:{n}: not a requirement: {line!r} ({e})") from None
    return out


def check(path: Path, allow_missing: set[str] = frozenset()) -> list[tuple[str, str | None, str, str]]:
    """``(name, installed or None, wanted, status)`` per constrained package; status ``ok`` | ``MISMATCH`` |
    ``MISSING`` | ``missing (allowed)``."""
    allowed = {canonicalize_name(a) for a in allow_missing}
    rows = []
    for req in read_constraints(path):
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            status = "missing (allowed)" if canonicalize_name(req.name) in allowed else "MISSING"
            rows.append((req.name, None, str(req.specifier), status))
            continue
        ok = req.specifier.contains(have, prereleases=True)
        rows.append((req.name, have, str(req.specifier), "ok" if ok else "MISMATCH"))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("constraints", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--allow-missing", action="append", default=[], metavar="NAME",
                    help="a package that may be absent (repeatable)")
    args = ap.parse_args(argv)
    rows = check(args.constraints, set(args.allow_missing))
    width = max(len(r[0]) for r in rows) if rows else 0
    for name, have, want, status in rows:
        print(f"{name:<{width}}  {have or '-':<16} {want:<24} {status}")
    bad = [r for r in rows if r[3] in ("MISMATCH", "MISSING")]
    if bad:
        print(f"{len(bad)} package(s) differ from {args.constraints}: "
              + ", ".join(f"{n} {h or 'missing'} (want {w})" for n, h, w, _ in bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
