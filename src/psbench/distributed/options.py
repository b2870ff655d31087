"""The ``engine`` config group and the checks of ``engine=dist`` that need no torch.

:func:`check_dist` refuses, before any process starts, what real processes cannot run: λ above
``engine.max_learners``, a learner delay for a learner that does not exist, a PS tree topology,
nccl, a ``master_addr`` that is not an address of this host, TernGrad scaler sharing among c > 1
learners of an update (the negotiation round between an update's learners is not executed), and an
``engine.schedule`` file that is not a readable schedule.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

from psbench.errors import ConfigError, require
from psbench.schema import MAX_THREADS, Group, Key, boolean, integer, is_num, mapping, number, one_of, text

#: the process limit: engine.max_learners may be lowered, never raised above this
HARD_MAX_LEARNERS = 256
MODES = ("free_run", "replay")
BACKENDS = ("gloo", "nccl")
LAUNCHES = ("spawn", "external")
#: gloo's timeouts are C ints of milliseconds: a week is far below their bound and above any wait a run needs
_SECONDS = number(0, 7 * 86400, lo_open=True, unit="seconds, at most a week")


def check_dist(cfg: Mapping[str, Any]) -> None:
    """Refuse an ``engine=dist`` config that real processes cannot run (``cfg`` resolved, keys checked)."""
    e, lam = cfg["engine"], cfg["learners"]
    require(
        cfg.get("resume") is None, "resume", cfg.get("resume"), "null with engine=dist (dist runs are not checkpointed)"
    )
    stop = (cfg.get("trainer") or {}).get("stop_after_updates")
    require(stop is None, "trainer.stop_after_updates", stop, "null with engine=dist")
    require(
        lam <= e["max_learners"],
        "learners",
        lam,
        f"at most engine.max_learners={e['max_learners']} learner processes with engine=dist",
    )
    for k, v in (e.get("learner_delay_s") or {}).items():
        require(
            str(k).isdigit() and int(k) < lam,
            f"engine.learner_delay_s.{k}",
            v,
            f"seconds in [0, 86400] for a learner index in [0, {lam})",
        )
    _check_local_address(str(e.get("master_addr") or "127.0.0.1"))
    if e["backend"] == "nccl":
        raise ConfigError("engine.backend", "nccl", "gloo (the PS data plane is gloo-only; nccl also needs a GPU)")
    require(
        cfg["topology"]["name"] == "rudra_base",
        "topology.name",
        cfg["topology"]["name"],
        "rudra_base with engine=dist (the PS tree is not executed yet)",
    )
    comp = cfg.get("compression") or {}
    if comp.get("name") == "terngrad" and comp.get("share_scalers"):
        from psbench.ps.options import build_protocol

        c = build_protocol(cfg).gradients_per_update
        require(
            c == 1,
            "compression.share_scalers",
            True,
            f"false with engine=dist and c = {c} gradients per update (the scaler negotiation round between "
            "an update's learners is not executed on real processes; c = 1 protocols share trivially)",
        )
    if e["mode"] == "replay" and e["schedule"] is not None:
        _check_schedule(e["schedule"])


def _check_local_address(addr: str) -> None:
    """The PS listens on ``engine.master_addr``: it must be an address of this host (else connecting to it hangs)."""
    try:
        infos = socket.getaddrinfo(addr, 0, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as s:
            s.bind(infos[0][4][:2])
    except OSError as e:
        raise ConfigError(
            "engine.master_addr",
            addr,
            f"an address of this host, where the PS listens ({e.strerror or e}); learners elsewhere connect to it",
        ) from None


def _check_schedule(path: str) -> None:
    from psbench.ps.schedule import Schedule

    try:
        Schedule.load(path)
    except Exception as err:
        reason = " ".join(str(err).split())[:200] or type(err).__name__
        raise ConfigError(
            "engine.schedule",
            path,
            f"null or a schedule.npz written by psbench (Schedule.save): {type(err).__name__}: {reason}",
        ) from None


def _delays(v: Any) -> bool:
    return is_num(v) and 0 <= v <= 86400


ENGINE = Group(
    {
        "sim": {},
        "dist": {
            "mode": one_of(*MODES),
            "schedule": text(null="simulate this config's schedule first", what="the path of a schedule.npz"),
            "backend": one_of(*BACKENDS),
            "launch": one_of(*LAUNCHES),
            "master_addr": text(what="a host name or address"),
            "port": integer(0, 65535, words="in [0, 65535] (0: any free port)"),
            "max_learners": integer(1, HARD_MAX_LEARNERS),
            "connect_timeout_s": _SECONDS,
            "timeout_s": _SECONDS,
            "tolerate_failures": boolean(),
            "learner_threads": integer(1, MAX_THREADS),
            "learner_delay_s": mapping(
                Key(_delays, "seconds in [0, 86400]"),
                null=True,
                what="{learner index: extra seconds in [0, 86400] per gradient}",
            ),
        },
    },
    check=lambda cfg: check_dist(cfg) if cfg["engine"]["name"] == "dist" else None,
)
