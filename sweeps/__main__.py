"""``python -m sweeps <entry> [scale=ci] [--serial] [override …]``: run one paper entry point (``sweeps/entries.yaml``)
and print its wall time; ``python -m sweeps --list``: every entry with its scales."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from sweeps._runner import run
from sweeps.entries import ENTRIES, PREPARE, get, store_root

USAGE = "usage: python -m sweeps <entry> [scale=<scale>] [--serial] [override ...] | --list"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        print(__doc__.splitlines()[0] if __doc__ else "")
        return 0 if args else 2
    if args[0] == "--list":
        for e in ENTRIES.values():
            print(f"{e.name:<28} {' '.join(e.scales):<34} {e.what}")
        return 0
    try:
        entry = get(args[0])
        scale, cmd = entry.command(args[1:])  # an unknown scale is refused before any work
    except (KeyError, ValueError) as err:
        print(err.args[0] if err.args else err, file=sys.stderr)
        return 2
    if entry.prepare:
        rc = PREPARE[entry.prepare](store_root())
        if rc:
            return rc
    return run(entry.name, scale, cmd)


if __name__ == "__main__":
    sys.exit(main())
