"""``python -m psbench``: the ``psbench`` command (:func:`psbench.cli.main`)."""

from psbench.cli import main

if __name__ == "__main__":
    main()
