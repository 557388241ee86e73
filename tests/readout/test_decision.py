"""The decision rule on synthetic score/null arrays whose answer is known."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from symfast.readout.decision import decide, holm, null_pvalues, pairings, resolution, split_halves


def chi_scores(rng, shape, dof=200, scale=0.01):
    """Scores of a Gaussian asymmetric part: scale * ||N(0, I_dof)|| / sqrt(dof)."""
    return scale * np.linalg.norm(rng.standard_normal((*shape, dof)), axis=-1) / np.sqrt(dof)


def test_holm_matches_hand_computed_example():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    rejected, adjusted, level = holm(p, 0.05)
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, max(0.06, 0.04*1) = 0.06
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02])
    assert rejected.tolist() == [True, False, False, True]
    np.testing.assert_allclose(level, [0.05 / 3, 0.05 / 1, 0.05 / 2, 0.05 / 4])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=20), st.floats(0.001, 0.5))
def test_holm_rejects_a_prefix_of_the_sorted_pvalues(p, alpha):
    p = np.array(p)
    rejected, adjusted, _ = holm(p, alpha)
    order = np.argsort(p, kind="stable")
    r = rejected[order]
    assert not np.any(~r[:-1] & r[1:]), "a rejection after a non-rejection"
    assert np.all(adjusted >= p) and np.all(adjusted <= 1)
    assert np.all(np.diff(adjusted[order]) >= 0)
    # Holm is never less powerful than Bonferroni
    assert np.all(rejected[p * len(p) <= alpha])


def test_pvalues_are_uniform_under_the_null():
    rng = np.random.default_rng(0)
    reps, N = 3000, 64
    null = chi_scores(rng, (reps, N))
    score = chi_scores(rng, (reps,))
    p = np.array([null_pvalues(score[i:i + 1], null[i][:, None])[0][0] for i in range(reps)])
    assert stats.kstest(p, "uniform").pvalue > 1e-3
    assert abs((p <= 0.05).mean() - 0.05) < 0.015


def test_family_wise_rate_is_controlled():
    """Under H0 for every element, P(any rejection) <= alpha (Holm over 16 dependent elements)."""
    rng = np.random.default_rng(1)
    reps, N, E, alpha = 1500, 64, 16, 0.05
    any_rejected = 0
    for _ in range(reps):
        shared = chi_scores(rng, (N + 1, 1), scale=0.005)  # dependence through a shared component
        null_score = np.sqrt(chi_scores(rng, (N + 1, E)) ** 2 + shared ** 2)
        d = decide(null_score[0], null_score[1:], alpha)
        any_rejected += (~d.observed).any()
    rate = any_rejected / reps
    assert rate <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / reps), rate


def test_false_elements_rejected_true_kept():
    rng = np.random.default_rng(2)
    N, E = 64, 16
    null = chi_scores(rng, (N, E))
    truth = np.arange(E) % 3 == 0
    score = chi_scores(rng, (E,)) + np.where(truth, 0.0, 0.01)  # false elements: + one null rms
    d = decide(score, null, 0.05)
    assert d.observed.tolist() == truth.tolist()
    assert np.all(d.margin[truth] > 0) and np.all(d.margin[~truth] < 0)
    assert np.all(d.p_value[~truth] < 1e-6)
    assert np.all(d.z[~truth] > 10)


def test_family_mask_and_degenerate_null():
    null = np.zeros((8, 3))
    null[:, 2] = np.linspace(0.1, 0.2, 8)
    score = np.array([1e-16, 0.5, 0.15])
    d = decide(score, null, 0.05, family=[True, True, False])
    assert d.observed.tolist() == [True, False, False]  # exact zero null: within rounding or not
    assert np.isnan(d.p_value[2]) and np.isnan(d.margin[2])


def test_alpha_tradeoff_monotone():
    rng = np.random.default_rng(3)
    null = chi_scores(rng, (64, 16))
    score = chi_scores(rng, (16,)) * np.linspace(1.0, 1.3, 16)
    kept = [decide(score, null, a).observed.sum() for a in (0.001, 0.01, 0.05, 0.2)]
    assert kept == sorted(kept, reverse=True)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="alpha"):
        decide(np.ones(3), np.ones((4, 3)), alpha=1.5)
    with pytest.raises(ValueError, match=r"null \[N, E\]"):
        decide(np.ones(3), np.ones((4, 2)))
    with pytest.raises(ValueError, match="NaN"):
        decide(np.array([np.nan, 1, 1]), np.ones((4, 3)))
    with pytest.raises(ValueError, match="2 null draws"):
        decide(np.ones(3), np.ones((1, 3)))
    with pytest.raises(ValueError, match="family"):
        decide(np.ones(3), np.ones((4, 3)), family=[True])


def test_few_distinct_splits_widen_the_threshold():
    assert [split_halves(s) for s in (2, 3, 4, 5, 8)] == [1, 3, 3, 15, 35]
    assert [pairings(s) for s in (2, 3, 4, 5, 6, 8)] == [1, 3, 3, 15, 15, 105]
    rng = np.random.default_rng(4)
    null = chi_scores(rng, (64, 4))
    score = null.max(0)  # above the null mean, where heavier tails mean larger p-values
    wide, narrow = decide(score, null, n_eff=3), decide(score, null)
    assert np.all(wide.threshold > narrow.threshold) and np.all(wide.p_value >= narrow.p_value)
    with pytest.raises(ValueError, match="n_eff"):
        decide(score, null, n_eff=1)


@pytest.mark.parametrize("S", [4, 5])
def test_pair_null_has_as_many_distinct_draws_as_pairings(S):
    """aggregate="model" passes `pairings(S)` as n_eff: the pair null must have that many distinct noise draws
    (models of equal norm, so the pair's orientation, which only picks the normalising model, does not count)."""
    import torch

    from symfast.readout.observables import pair_null

    g = torch.Generator().manual_seed(S)
    a = torch.randn(S, 3, 3, generator=g, dtype=torch.float64)
    rho = torch.linalg.qr(torch.randn(1, 3, 3, generator=g, dtype=torch.float64))[0]
    phi = a + a.transpose(1, 2)
    null = pair_null(phi / phi.flatten(1).norm(dim=1)[:, None, None], rho, 400, g)[:, 0].numpy()
    assert len(np.unique(null.round(12))) == pairings(S)


def test_resolution_is_the_asymmetry_rejected_with_power_one_minus_alpha():
    # a planted asymmetry A of norm a plus Gaussian seed noise: the score is ||A + n||
    rng = np.random.default_rng(7)
    dof, scale, alpha, reps = 200, 0.01, 0.05, 400

    def rejection_rate(a):
        rejected, r = 0, []
        for _ in range(reps):
            null = chi_scores(rng, (64, 1), dof, scale)
            u = rng.standard_normal(dof)
            noise = scale * rng.standard_normal(dof) / np.sqrt(dof)
            score = np.array([np.linalg.norm(a * u / np.linalg.norm(u) + noise)])
            d = decide(score, null, alpha)
            rejected += not d.observed[0]
            r.append(d.resolution[0])
        return rejected / reps, float(np.median(r))

    _, r = rejection_rate(0.0)
    assert 0 < r < scale  # a fraction of the noise level: the noise's norm varies little in 200 dimensions
    power_at_r, _ = rejection_rate(r)
    power_at_half, _ = rejection_rate(r / 2)
    assert power_at_r >= 1 - alpha - 3 * np.sqrt(alpha * (1 - alpha) / reps), power_at_r
    assert power_at_half < 0.5, power_at_half  # below the resolution, most asymmetries pass as symmetric


def test_resolution_falls_as_one_over_sqrt_seeds():
    rng = np.random.default_rng(8)
    r = [np.median([decide(chi_scores(rng, (1,), scale=s), chi_scores(rng, (64, 1), scale=s), 0.05).resolution[0]
                    for _ in range(50)]) for s in (0.02, 0.01)]  # noise halves when the seeds quadruple
    assert r[1] == pytest.approx(r[0] / 2, rel=0.1)


def test_resolution_outside_the_family_and_for_degenerate_nulls():
    rng = np.random.default_rng(9)
    null = chi_scores(rng, (32, 3))
    d = decide(chi_scores(rng, (3,)), null, family=[True, False, True])
    assert np.isnan(d.resolution[1]) and np.isfinite(d.resolution[[0, 2]]).all()
    flat = decide(np.zeros(2), np.zeros((8, 2)))
    assert flat.observed.all() and np.array_equal(flat.resolution, flat.threshold)
    with pytest.raises(ValueError, match="threshold"):
        resolution(null, np.ones(2), 0.05)
    with pytest.raises(ValueError, match="alpha"):
        resolution(null, np.ones(3), 1.5)
