"""The single-block Schur ablations linearised at the intact model's fixed point (`ablated_linearisation`)."""
import pytest
import torch

from symfast.schur import families as fam
from symfast.schur import rnn
from symfast.schur.blocks import BLOCKS, ablate, schur_blocks
from symfast.schur.fixedpoints import ablated_linearisation, find_fixed_points, jacobians, readout_alignment, slow_basis, step_map


def _tanh_with_fixed_point(H: int = 6, seed: int = 0) -> tuple:
    """A dense tanh RNN (gain 2) made to have a nonzero fixed point h* of h = tanh(W h): a rank-one
    correction puts one near a chosen state, and Levenberg-Marquardt from there pins it to rounding."""
    g = torch.Generator().manual_seed(seed)
    W = 2.0 * torch.randn(H, H, generator=g, dtype=torch.float64) / H ** 0.5
    h0 = 0.8 * (2 * torch.rand(H, generator=g, dtype=torch.float64) - 1)
    W = W + torch.outer(torch.atanh(h0) - W @ h0, h0) / float(h0 @ h0)
    model = rnn.TanhRNN(2, H, 2, recurrent="dense")
    with torch.no_grad():
        model.rnn.weight_hh_l0.copy_(W)
    fp = find_fixed_points(step_map(model), h0[None])
    assert bool(fp.is_fixed[0])
    return model, fp.points[0]


def test_tanh_ablated_jacobian_is_the_ablated_tanh_derivative_at_the_intact_fixed_point():
    """At a fixed point h* of F(h) = tanh(W h): J = diag(1 - h*^2) W, and the ablated map F~(h) = tanh(W~ h),
    linearised at the same h* (not its fixed point), has J~ = diag(1 - tanh(W~ h*)^2) W~ for every block."""
    model, h = _tanh_with_fixed_point()
    W = model.recurrent_weight(torch.float64).detach()
    assert float((torch.tanh(W @ h) - h).abs().max()) < 1e-14 and float(h.norm()) > 0.5
    lin = ablated_linearisation(model, h, alpha=0.6)
    W_ab, mass = ablate(schur_blocks(W, alpha=0.6), [(b,) for b in BLOCKS])
    assert torch.allclose(lin.jacobian, torch.diag(1 - h ** 2) @ W, rtol=0, atol=1e-12)
    for k, b in enumerate(BLOCKS):
        assert mass[k]["removed_rel_T"] > 1e-2, b  # every block carries mass here: the check is not vacuous
        want = torch.diag(1 - torch.tanh(W_ab[k] @ h) ** 2) @ W_ab[k]
        assert torch.allclose(lin.jacobians_ablated[k], want, rtol=0, atol=1e-12), b
        assert float((lin.jacobians_ablated[k] - lin.jacobian).abs().max()) > 1e-2, b
        ev = torch.linalg.eigvals(want).abs()
        assert lin.rho_ablated[k] == pytest.approx(float(ev.max()), abs=1e-12)
        assert lin.n_slow_ablated[k] == int((ev >= lin.cut).sum())
    assert lin.cut == pytest.approx(0.6 * float(torch.linalg.eigvals(lin.jacobian).abs().max()), rel=1e-12)


def test_empty_block_leaves_the_jacobian_unchanged():
    """An orthogonal W has every eigenvalue on the unit circle: R is everything, T_C->R and T_CC are empty."""
    model = rnn.TanhRNN(2, 6, 2, recurrent="orthogonal", generator=torch.Generator().manual_seed(1))
    h = 0.3 * torch.randn(6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    lin = ablated_linearisation(model, h, alpha=0.9)
    for b in ("T_C->R", "T_CC"):
        k = lin.blocks.index(b)
        assert lin.removed_rel_T[k] == 0.0
        assert torch.allclose(lin.jacobians_ablated[k], lin.jacobian, rtol=0, atol=1e-13)
        assert lin.n_slow_ablated[k] == lin.n_slow and lin.rho_ablated[k] == pytest.approx(lin.rho, abs=1e-13)
        assert lin.alignment_ablated[k] == pytest.approx(lin.alignment, abs=1e-12)


def _ssm_with_spectrum(C: torch.Tensor) -> fam.LinearSSM:
    """A = Q diag(15/16, 7/8, 1/4, 1/8) Q^T with Q the orthogonal Hadamard matrix / 2 (exact in float32);
    readout C (rows in the eigenbasis Q)."""
    Q = 0.5 * torch.tensor([[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]], dtype=torch.float64)
    model = fam.LinearSSM(1, 4, C.shape[0], structure="dense")
    with torch.no_grad():
        model.A.copy_(Q @ torch.diag(torch.tensor([15 / 16, 7 / 8, 1 / 4, 1 / 8], dtype=torch.float64)) @ Q.T)
        model.C.copy_(C @ Q.T)
    return model


def test_readout_alignment_is_one_on_the_slow_subspace_and_zero_off_it():
    """Slow modes at alpha = 0.9: |lambda| >= 0.84375, the first two eigenvectors. A readout in their span
    is fully aligned, one in the other two eigenvectors' span not at all, one split evenly 1/sqrt(2)."""
    h = torch.zeros(4, dtype=torch.float64)
    on = torch.tensor([[1.0, 2.0, 0, 0], [0, -1.0, 0, 0]], dtype=torch.float64)
    off = torch.tensor([[0, 0, 1.0, 0], [0, 0, 3.0, -2.0]], dtype=torch.float64)
    half = torch.tensor([[1.0, 0, 0, 1.0]], dtype=torch.float64)
    for C, want in ((on, 1.0), (off, 0.0), (half, 2 ** -0.5)):
        lin = ablated_linearisation(_ssm_with_spectrum(C), h, alpha=0.9)
        assert lin.n_slow == 2 and lin.alignment == pytest.approx(want, abs=1e-12)
    assert readout_alignment(on, slow_basis(torch.eye(4, dtype=torch.float64), 2.0)) == 0.0  # no mode above the cut


def test_linear_ssm_ablation_keeps_spectrum_slow_modes_and_alignment():
    """For a linear map J~ = W~: removing coupling blocks keeps the Schur diagonal and the leading Schur
    vectors, so rho, the slow-mode count and the alignment are unchanged though J~ != J."""
    model = fam.LinearSSM(2, 6, 2, structure="dense", generator=torch.Generator().manual_seed(2))
    lin = ablated_linearisation(model, torch.zeros(6, dtype=torch.float64), alpha=0.8)
    assert torch.allclose(lin.jacobian, model.recurrent_weight(torch.float64).detach(), rtol=0, atol=1e-14)
    for k in range(len(BLOCKS)):
        if lin.removed_rel_T[k] > 1e-3:
            assert float((lin.jacobians_ablated[k] - lin.jacobian).abs().max()) > 1e-4
        assert lin.rho_ablated[k] == pytest.approx(lin.rho, abs=1e-10)
        assert lin.n_slow_ablated[k] == lin.n_slow
        assert lin.alignment_ablated[k] == pytest.approx(lin.alignment, abs=1e-8)
    assert max(lin.removed_rel_T) > 1e-3


@pytest.mark.parametrize("kind, gate", [("gru", "n"), ("gru", "z"), ("lstm", "g")])
def test_gated_intact_jacobian_and_step_recurrent_agree_with_the_model(kind, gate):
    """The intact J of a gate view is the model's own dF/dh, and step_recurrent with an ablated matrix
    is the first step of rollout_recurrent with it."""
    model = fam.GatedRNN(kind, 2, 4, 2, bias=True, generator=torch.Generator().manual_seed(4))
    view = model.at_gate(gate)
    h = 0.2 * torch.randn(model.state_size, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    lin = ablated_linearisation(view, h, alpha=0.9)
    assert torch.allclose(lin.jacobian, jacobians(step_map(model), h[None])[0], rtol=0, atol=1e-14)
    assert lin.jacobians_ablated.shape == (3, model.state_size, model.state_size)
    W_ab, _ = ablate(schur_blocks(view.recurrent_weight(torch.float64).detach(), alpha=0.9), [("T_RR",)])
    x = torch.randn(3, 1, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    y, hs = view.rollout_recurrent(W_ab, x, return_hidden=True)
    s = view.step_recurrent(torch.zeros(3, model.state_size, dtype=torch.float64), x[:, 0], W_ab[0])
    assert torch.allclose(s[:, :4], hs[0, :, 0], rtol=0, atol=1e-14)


def test_bad_input():
    model = fam.LinearSSM(1, 4, 1)
    with pytest.raises(ValueError, match="point must be one state"):
        ablated_linearisation(model, torch.zeros(5))
    with pytest.raises(ValueError, match="unknown block"):
        ablated_linearisation(model, torch.zeros(4), blocks=("T_XX",))
    with pytest.raises(ValueError, match=r"W must be \[4, 4\]"):
        model.step_recurrent(torch.zeros(1, 4), torch.zeros(1, 1), torch.zeros(3, 3))
