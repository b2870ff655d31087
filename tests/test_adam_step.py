"""analysis.adam_step: by how much TernGrad's noise shortens Adam's steps (TernGrad Table 1's diagnosis)."""

import torch
from analysis import adam_step

from psbench.compression.pipeline import LearnerCompression

TERNGRAD = {"name": "terngrad", "clip": 2.5, "wire": "2bit", "share_scalers": True, "localize": True}


class Scaled(torch.nn.Module):
    """A linear classifier times one learnable scalar: a one-element tensor, which TernGrad ternarizes exactly
    (s = max|g| = |g|, so P(b = 1) = 1) when one learner sends it."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(64, 10)
        self.scale = torch.nn.Parameter(torch.tensor(1.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale


def ratios(digits, learners: int) -> dict[str, float]:
    net = Scaled()
    shapes = {n: p.shape for n, p in net.named_parameters()}
    x = digits.x_train.reshape(len(digits.x_train), -1)
    return adam_step.step_ratios(net, x, digits.y_train, LearnerCompression(TERNGRAD, shapes), learners, 16, 32)


def test_ternary_noise_shortens_adams_step_except_where_ternarizing_is_exact(digits):
    one = ratios(digits, 1)
    assert one["scale"] == 1.0  # one learner's one-element tensor: g̃ = g exactly, v unchanged
    assert one["linear.weight"] < 0.9 and one["linear.bias"] < 1.0 and one[adam_step.ALL] < 0.9


def test_more_learners_average_the_ternary_noise_and_lengthen_the_step(digits):
    # v_fp32 / v_TernGrad = (g² + σ²/N) / (g² + (σ² + τ²)/N) rises towards 1 with N (σ² the mini-batch noise, τ² the
    # ternary one, which the shared scaler, the max over N learners, raises only a little)
    assert ratios(digits, 1)[adam_step.ALL] < ratios(digits, 8)[adam_step.ALL] < 1.0


def test_the_command_refuses_fp32_gradients_in_one_line(capsys):
    assert adam_step.main(["compression=none"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["compression: none has nothing to compare with fp32; use compression=terngrad"]
