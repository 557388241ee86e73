"""Fixed and slow points on systems whose answer is known, and the linearisation of every family there."""
import math

import pytest
import torch

from symfast.schur import families as fam
from symfast.schur import rnn
from symfast.schur.fixedpoints import find_fixed_points, jacobians, step_map, visited_states

TASK = rnn.FlipFlop(T=20)


def _h_star(w: float) -> float:
    """The positive root of h = tanh(w h) (w > 1) by Newton's method in float64."""
    h = 1.0
    for _ in range(100):
        h -= (math.tanh(w * h) - h) / (w * (1 - math.tanh(w * h) ** 2) - 1)
    return h


@pytest.mark.parametrize("w", [1.5, 3.0])
def test_two_unit_attractor_fixed_points_and_jacobians(w):
    """W = w I (w > 1), no input: h = tanh(W h) has the 9 fixed points {-h*, 0, h*}^2 with h* = tanh(w h*);
    the Jacobian there is diag(w (1 - h_i^2)): w at a zero coordinate, w (1 - h*^2) < 1 at +-h*."""
    model = rnn.TanhRNN(1, 2, 1, recurrent="dense")
    with torch.no_grad():
        model.rnn.weight_hh_l0.copy_(w * torch.eye(2))
    grid = torch.linspace(-1, 1, 7, dtype=torch.float64)
    fp = find_fixed_points(step_map(model), torch.cartesian_prod(grid, grid))
    hs = _h_star(w)
    want = torch.cartesian_prod(*(torch.tensor([-hs, 0.0, hs], dtype=torch.float64),) * 2)
    assert len(fp) == 9 and fp.is_fixed.all() and (fp.q <= 1e-24).all()
    for p in want:
        err = (fp.points - p).norm(dim=1)
        k = int(err.argmin())
        assert float(err[k]) < 1e-8, (p, fp.points[k])
        lam = w * (1 - fp.points[k] ** 2)
        assert torch.allclose(fp.jacobians[k], torch.diag(lam), atol=1e-12)
        analytic = torch.sort(w * (1 - p ** 2), descending=True).values
        assert torch.allclose(fp.eigvals[k].real, analytic, atol=1e-10) and fp.eigvals[k].imag.abs().max() < 1e-14
    stable = (fp.points.abs() > 0.5).all(1)
    assert int(stable.sum()) == 4 and torch.allclose(fp.eigvals[stable].abs(), torch.tensor(w * (1 - hs ** 2)).double())
    assert w * (1 - hs ** 2) < 1  # the designed attractors are stable, the origin (eigenvalue w) is not
    sb = fp.schur(int(fp.q.argmin()), alpha=0.9)  # the origin: J = w I
    assert torch.allclose(sb.Q @ sb.T @ sb.Q.T, fp.jacobians[int(fp.q.argmin())], atol=1e-14)
    assert float(sb.N.norm()) == 0.0 and sb.n_R == 2


def test_slow_point_is_found_and_not_called_fixed():
    """F(h) = h + 0.01 + h^2 never has F(h) = h; q = (0.01 + h^2)^2 / 2 has its minimum 5e-5 at h = 0."""
    fp = find_fixed_points(lambda h: h + 0.01 + h ** 2, torch.linspace(-1, 1, 5, dtype=torch.float64)[:, None])
    assert len(fp) == 1 and not bool(fp.is_fixed[0])
    assert abs(float(fp.points[0, 0])) < 1e-8 and float(fp.q[0]) == pytest.approx(5e-5, rel=1e-12)
    assert float(fp.jacobians[0, 0, 0]) == pytest.approx(1.0, abs=1e-8)


def test_linear_ssm_fixed_point_and_jacobian_are_exact():
    """h = A h + B x0 has the one fixed point (I - A)^-1 B x0, where the Jacobian is A."""
    model = fam.LinearSSM(3, 8, 3, structure="dense", generator=torch.Generator().manual_seed(0))
    x0 = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64)
    fp = find_fixed_points(step_map(model, x0), visited_states(model, TASK, 8))
    A = model.recurrent_weight(torch.float64).detach()
    want = torch.linalg.solve(torch.eye(8, dtype=torch.float64) - A, model.B.detach().double() @ x0)
    assert len(fp) == 1 and bool(fp.is_fixed[0])
    assert float((fp.points[0] - want).abs().max()) < 1e-12
    assert torch.allclose(fp.jacobians[0], A, atol=1e-14)


@pytest.mark.parametrize("kind, bias", [("gru", False), ("gru", True), ("lstm", False), ("lstm", True)])
def test_gated_fixed_points_are_fixed_and_jacobians_match_finite_differences(kind, bias):
    model = fam.GatedRNN(kind, 3, 6, 3, bias=bias, generator=torch.Generator().manual_seed(1))
    F = step_map(model)
    fp = find_fixed_points(F, visited_states(model, TASK, 24, seed=2))
    assert len(fp) >= 1 and fp.points.shape[1] == model.state_size
    for k in range(len(fp)):
        h = fp.points[k:k + 1]
        if bool(fp.is_fixed[k]):
            assert float((F(h) - h).abs().max()) < 1e-11
        eps = 1e-6
        E = torch.eye(model.state_size, dtype=torch.float64) * eps
        fd = ((F(h + E) - F(h - E)) / (2 * eps)).T  # column j: dF/dh_j
        assert torch.allclose(fp.jacobians[k], fd.detach(), atol=1e-8)
        ev = torch.linalg.eigvals(fp.jacobians[k])
        assert torch.allclose(fp.eigvals[k].abs(), torch.sort(ev.abs(), descending=True).values, atol=1e-12)
        sb = fp.schur(k)
        assert torch.allclose(sb.Q @ sb.T @ sb.Q.T, fp.jacobians[k], atol=1e-12)


def test_jacobians_batch_and_bad_input():
    W = torch.randn(4, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    h = torch.randn(3, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    J = jacobians(lambda v: torch.tanh(v @ W.T), h)
    want = (1 - torch.tanh(h @ W.T) ** 2).unsqueeze(-1) * W
    assert torch.allclose(J, want, atol=1e-14)
    with pytest.raises(ValueError, match=r"starts must be \[K, D\]"):
        find_fixed_points(torch.tanh, torch.zeros(4))
    with pytest.raises(ValueError, match="NaN or Inf"):
        find_fixed_points(torch.tanh, torch.full((2, 2), float("nan")))
    with pytest.raises(ValueError, match=r"F must map states \[K, D\] to \[K, D\]; given \[2, 2\] it returned \[2\]"):
        find_fixed_points(lambda v: v.sum(1), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="q_tol must be > 0"):
        find_fixed_points(torch.tanh, torch.zeros(2, 2), q_tol=0)
    model = fam.LinearSSM(3, 4, 3)
    with pytest.raises(ValueError, match=r"x must be \[3\]"):
        step_map(model, torch.zeros(2))
    with pytest.raises(ValueError, match="no step"):
        step_map(object())
    with pytest.raises(ValueError, match="visits only 40"):
        visited_states(model, TASK, 41, batch=2)
    fp = find_fixed_points(torch.tanh, torch.zeros(1, 2))
    with pytest.raises(IndexError, match="point 1 out of range: 1 points"):
        fp.schur(1)
