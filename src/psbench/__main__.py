"""The ``psbench`` command and ``python -m psbench`` (:func:`psbench.cli.main`).

Signals are taken over before anything else is imported: a SIGINT, SIGTERM or SIGHUP while psbench starts up is
held until the job's run dir exists, so even a job stopped in its first instant leaves its ``summary.json``
(:func:`psbench.lifecycle.install`).
"""

from psbench import lifecycle


def main() -> None:
    lifecycle.install(hold=True)
    from psbench.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
