"""What the PS tells its learner processes (``<run dir>/dist_spec.json``), typed and checked at the PS.

:class:`LearnerSpec` is the one description of a learner's job: where the PS listens, the model's config node and
shapes, the training-data file, the sample stream's seed, μ·H, threads, delays, a local-step protocol's
:class:`Window` and the codec. The PS builds it with its fields (a misspelt one is a ``TypeError`` there, and mypy's),
checks its values (:meth:`LearnerSpec.check`) and writes it with :meth:`LearnerSpec.save`, which reads the file back
with the learners' own parser (:meth:`LearnerSpec.load`): a spec no learner could read fails the PS before any process
starts, not a learner after spawning. Torch-free.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from psbench.errors import RunFailure


@dataclass(frozen=True)
class Window:
    """A local-step protocol's window (:mod:`psbench.ps.local`): H steps of the learners' optimizer on μ samples
    each, then a commit (the elastic difference with ρ for ``aeasgd``)."""

    local_steps: int
    batch_size: int
    elastic: bool
    rho: float | None
    optimizer: Mapping[str, Any]


@dataclass(frozen=True)
class LearnerSpec:
    """One learner's job (module docstring); ``rank_offset`` turns torchrun's ranks 0…λ−1 into 1…λ."""

    addr: str
    port: int
    world_size: int
    timeout_s: float
    connect_timeout_s: float
    model: Mapping[str, Any]  # the model's config node, as the run built its net (psbench.models.net.build_net)
    input_shape: list[int]
    output_size: int
    task: str
    python_path: list[str]  # where a user's _target_ modules import from, as in the PS
    data_file: str
    seed: int
    samples_per_gradient: int
    threads: int
    delay_s: Mapping[str, float]  # learner index → extra seconds per gradient
    rank_offset: int
    window: Window | None
    compression: Mapping[str, Any] | None

    def check(self) -> None:
        """Values a learner could not run with (a :class:`~psbench.errors.RunFailure` naming each field)."""
        learners, w = self.world_size - 1, self.window
        window_ok = w is None or w.local_steps * w.batch_size == self.samples_per_gradient
        bad = [
            f"{name}={getattr(self, name)!r}"
            for name, ok in (
                ("port", 0 < self.port < 65536),
                ("world_size", learners >= 1),
                ("timeout_s", self.timeout_s > 0),
                ("connect_timeout_s", self.connect_timeout_s > 0),
                ("samples_per_gradient", self.samples_per_gradient >= 1),
                ("threads", self.threads >= 1),
                ("output_size", self.output_size >= 1),
                ("task", self.task in ("classification", "regression")),
                ("delay_s", all(k.isdigit() and int(k) < learners and v >= 0 for k, v in self.delay_s.items())),
                ("data_file", Path(self.data_file).is_file()),
            )
            if not ok
        ]
        if not window_ok:
            assert w is not None
            spg = self.samples_per_gradient
            bad.append(f"window: H·μ = {w.local_steps}·{w.batch_size} ≠ samples_per_gradient={spg}")
        if bad:
            raise RunFailure(f"engine=dist: the learners' spec is not one they can run: {', '.join(bad)}")

    def save(self, path: Path) -> Path:
        """Write the spec as JSON, then read it back as a learner does: the same spec, or a RunFailure."""
        path.write_text(json.dumps(asdict(self), indent=1))
        if LearnerSpec.load(path) != self:
            raise RunFailure(f"engine=dist: {path} does not read back as the spec written")
        return path

    @classmethod
    def load(cls, path: str | Path) -> LearnerSpec:
        """The spec in ``path`` (every field, no other; ``window`` a :class:`Window`)."""
        data = json.loads(Path(path).read_text())
        names = {f.name for f in fields(cls)}
        if set(data) != names:
            missing, extra = sorted(names - set(data)), sorted(set(data) - names)
            raise ValueError(f"{path}: not a learner spec (missing {missing}, unknown {extra})")
        window = data["window"]
        return cls(**{**data, "window": None if window is None else Window(**window)})
