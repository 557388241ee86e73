import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from symfast.report import (Claim, Section, counts_line, equivalence_verdict, ranking_verdict,  # noqa: E402
                            read_claims, run_details, write_claims, write_report)
from symfast.report.claim import MIN_SEEDS, TOLERANCE  # noqa: E402


def test_claim_rejects_unknown_verdict():
    with pytest.raises(ValueError, match="verdict must be one of"):
        Claim("readout", "c", "e", "m", "probably")


def test_claims_round_trip(tmp_path):
    claims = [Claim("schur", "-T_RR hurts most", "largest dFVU", "0.12 [0.1, 0.2]", "held", "5 of 5 seeds"),
              Claim("readout", "D3 hidden by Dyadic", "r120 not observed", "observed", "by construction", "",
                    "no exact lift"),
              Claim("schur", "copy -T_RR", "0.876", "0.8 [0.7, 0.9], n = 2", "not comparable", "", "too few seeds")]
    write_claims(tmp_path / "claims.csv", claims)
    assert read_claims(tmp_path / "claims.csv") == claims
    assert read_claims(tmp_path / "absent.csv") == []
    (tmp_path / "old.csv").write_text("study,claim,expected,measured,verdict,note\nschur,c,e,m,held,\n")
    assert read_claims(tmp_path / "old.csv") == [Claim("schur", "c", "e", "m", "held")]  # written before `reason`


# ---- equivalence, not inclusion ----

def test_paper_value_inside_a_wide_interval_is_not_held():
    # flip-flop -T_CC: ours 0.0098 [-0.035, 0.054] vs the paper's 0.0496 used to read "held"
    assert equivalence_verdict(0.0496, -0.035, 0.054, 2, "dfvu") == ("not comparable",
                                                                      "too few seeds (n = 2 < 3 converged)")
    v = equivalence_verdict(0.0496, -0.035, 0.054, 5, "dfvu")
    assert v.verdict == "not comparable" and v.reason.startswith("interval too wide")


@pytest.mark.parametrize("paper,lo,hi,kind,want", [
    (0.0945, 0.085, 0.105, "dfvu", "held"),      # inside ±25 %
    (0.0945, 0.060, 0.069, "dfvu", "missed"),    # entirely below 0.0709
    (0.0945, 0.070, 0.080, "dfvu", "not comparable"),  # straddles the lower edge
    (1.73, 1.40, 2.10, "dfvu", "held"),          # the band scales with the value: ±0.43
    (1.73, 1.00, 1.20, "dfvu", "missed"),
    (0.0, -0.005, 0.009, "dfvu", "held"),        # ~0: the absolute floor 0.01
    (0.0, 0.02, 0.05, "dfvu", "missed"),
    (0.876, 0.84, 0.92, "accuracy", "held"),     # absolute: ±0.05
    (0.876, 0.60, 0.70, "accuracy", "missed"),
    (0.876, 0.80, 0.90, "accuracy", "not comparable"),
    (21.1, 17.0, 25.0, "sensitivity", "held"),
], ids=lambda x: str(x))
def test_equivalence_verdict_bands(paper, lo, hi, kind, want):
    assert equivalence_verdict(paper, lo, hi, MIN_SEEDS, kind).verdict == want


def test_equivalence_verdict_needs_convergence_seeds_and_an_interval():
    assert equivalence_verdict(0.5, 0.49, 0.51, 10, "accuracy", converged=False) == ("not comparable", "not converged")
    assert equivalence_verdict(0.5, 0.49, 0.51, MIN_SEEDS - 1, "accuracy").reason.startswith("too few seeds")
    assert equivalence_verdict(0.5, float("nan"), 0.51, 10, "accuracy").reason.startswith("interval too wide")
    with pytest.raises(ValueError, match="kind must be one of"):
        equivalence_verdict(0.5, 0.4, 0.6, 5, "fvu")
    assert set(TOLERANCE) == {"dfvu", "sensitivity", "accuracy"}
    assert TOLERANCE["accuracy"].relative == 0 and TOLERANCE["dfvu"].relative > 0  # absolute vs relative


def test_ranking_verdict_needs_separated_intervals_and_three_seeds():
    sep = {"-T_C->R": (0.08, 0.11), "-T_CC": (0.03, 0.06), "-T_RR": (-0.01, 0.01)}
    assert ranking_verdict(sep, "-T_C->R", 3).verdict == "held"
    assert ranking_verdict(sep, "-T_CC", 3).verdict == "missed"
    assert ranking_verdict(sep, "-T_C->R", 2).verdict == "not comparable"
    assert ranking_verdict(sep, "-T_C->R", 5, converged=False).reason == "not converged"
    overlap = dict(sep, **{"-T_CC": (0.05, 0.09)})
    v = ranking_verdict(overlap, "-T_C->R", 5)
    assert v.verdict == "not comparable" and "-T_CC" in v.reason
    with pytest.raises(ValueError):
        ranking_verdict(sep, "-T_XX", 3)


def test_report_markdown_and_html(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    fig.savefig(tmp_path / "fig.png")
    plt.close(fig)
    claims = [Claim("readout", "a", "x", "x", "held"), Claim("readout", "b", "y", "z", "missed"),
              Claim("readout", "G_obs ⊆ G_lift", "x", "x", "by construction", "", "only exact lifts are scored"),
              Claim("schur", "c", "p", "q", "not comparable", "different task", "task definition differs"),
              Claim("schur", "-T_RR", "p", "q", "order-dependent", "", "block order inside R")]
    table = pd.DataFrame({"element": ["r0", "m0"], "score": [0.0, float("nan")]})
    sec = Section("Readout", ["Explains the run."], [("Scores", table, {"score": "relative Gram change"})],
                  [(str(tmp_path / "fig.png"), "a line")], command="symfast readout", seconds=3.2)
    md_path, html_path = write_report(str(tmp_path), "symfast reproduce", run_details(5.0), claims, [sec])
    md = open(md_path).read()
    first = md.splitlines()[2]  # the line under the title: counts per study and class
    assert first.startswith("Verdicts — readout: 1 held, 1 missed, 1 by construction; schur: 1 not comparable, "
                            "1 order-dependent. Tested: 2 of 5 rows (1 held, 1 missed)")
    assert "| G_obs ⊆ G_lift | x | x | by construction: only exact lifts are scored |  |" in md
    assert "not comparable: task definition differs" in md
    assert "| r0 | 0 |" in md and "| m0 | – |" in md  # NaN is shown as a dash, not 'nan'
    assert "- `score`: relative Gram change" in md
    assert "![a line](fig.png)" in md
    assert "commit" in md and "wall time" in md
    page = open(html_path).read()
    assert "data:image/png;base64," in page and "class='missed'" in page and "class='byconstruction'" in page
    assert counts_line(claims) in page


def test_long_verdict_lists_are_collapsible_and_every_number_has_its_row(tmp_path):
    claims = [Claim("schur", f"cross-task: number {k}", f"paper {k}", "–", "not comparable", "", "not converged")
              for k in range(30)] + [Claim("layerwise", "fit", "x", "x", "held")]
    md_path, html_path = write_report(str(tmp_path), "t", {}, claims, [], preamble=["What --quick can test."])
    md, page = open(md_path).read(), open(html_path).read()
    assert "<details><summary>schur: 30 rows</summary>" in md and "**layerwise: 1 rows**" in md
    assert all(f"| cross-task: number {k} |" in md for k in range(30))
    assert "<details><summary>schur: 30 rows</summary><table>" in page
    assert page.count("not comparable: not converged") == 30
    assert "What --quick can test." in md and "What --quick can test." in page



def _readout_table(observed: dict) -> pd.DataFrame:
    """A readout table for triangle under dyadic and triaxis; `observed` maps (pe, element) -> bool."""
    rows = []
    d3 = {"r0", "r120", "r240", "m0", "m60", "m120"}
    lift = {"dyadic": {"r0", "r90", "r180", "r270", "m0", "m45", "m90", "m135"},
            "triaxis": {"r0", "r60", "r120", "r180", "r240", "r300", "m0", "m30", "m60", "m90", "m120", "m150"}}
    for pe in ("dyadic", "triaxis"):
        for e in sorted(lift["dyadic"] | lift["triaxis"]):
            rows.append(dict(shape="triangle", pe=pe, element=e, liftable=e in lift[pe], true_symmetry=e in d3,
                             observed=observed.get((pe, e), False)))
    return pd.DataFrame(rows)


def test_readout_claims_hold_on_the_expected_pattern():
    from symfast.readout.claims import EQUALITY, STRONGER, readout_claims

    obs = {("dyadic", "r0"): True, ("dyadic", "m0"): True}
    obs.update({("triaxis", e): True for e in ("r0", "r120", "r240", "m0", "m60", "m120")})
    claims = {c.claim: c for c in readout_claims(_readout_table(obs))}
    construction = {k for k, c in claims.items() if c.verdict == "by construction"}
    assert construction == {"Weights show only symmetries the encoding lifts exactly (G_obs ⊆ G_lift)",
                            "A dyadic PE hides the triangle's 120° rotations"}
    assert all(c.reason for k, c in claims.items() if k in construction)
    assert all(c.verdict == "held" for k, c in claims.items() if k not in construction), claims
    assert claims[EQUALITY].measured == "matched in 2 of 2 cases"
    # the equality is symfast's reading, the inclusion the paper's: the row says both
    assert "symfast's stronger reading" in EQUALITY and STRONGER in claims[EQUALITY].note
    assert "the paper claims only the inclusion G_obs ⊆ G_lift ∩ G_true" in STRONGER


def test_readout_claims_report_misses_and_violations():
    from symfast.readout.claims import EQUALITY, readout_claims

    obs = {("dyadic", "r0"): True, ("dyadic", "m0"): True, ("dyadic", "r90"): True}  # r90: a false positive
    obs.update({("triaxis", e): True for e in ("r0", "r120", "m0", "m60", "m120")})  # r240 missed
    claims = {c.claim: c for c in readout_claims(_readout_table(obs))}
    only_true = claims["Only true symmetries are observed (G_obs ⊆ G_true, the testable half of G_obs ⊆ G_lift ∩ G_true)"]
    assert only_true.verdict == "missed" and only_true.measured.startswith("1 of 12 liftable non-symmetries observed: r90")
    full = claims[EQUALITY]
    assert full.verdict == "missed" and "missed r240" in full.note and "extra r90" in full.note
    assert claims["A three-axis PE reveals the triangle's full D3"].measured == "5 of 6 observed"
    assert claims["A dyadic PE hides the triangle's 120° rotations"].verdict == "by construction"


def _rff_table(r180_observed: dict, n_models: int = 16) -> pd.DataFrame:
    rows = []
    for shape, seen in r180_observed.items():
        for e in ("r0", "r180", "m0"):
            rows.append(dict(shape=shape, pe="rff", element=e, liftable=e != "m0", true_symmetry=True,
                             observed=e == "r0" or (e == "r180" and seen), n_models=n_models))
    return pd.DataFrame(rows)


def test_rff_rows_say_what_they_test():
    from symfast.readout.claims import readout_claims

    claims = {c.claim: c for c in readout_claims(_rff_table({"square": True, "rectangle": False, "hexagon": True}))}
    assert claims["Random Fourier features observe at most {r0, r180}"].verdict == "by construction"
    r180 = claims["Random Fourier features observe r180 where it is a true symmetry"]
    assert r180.measured.startswith("r180 observed for 2 of 3 (67%): square hexagon")
    assert "Adam" in r180.note and "(cos, sin)" in r180.note and "this run alone: missed" in r180.note
    # the calibration replicates at the default budget disagree (seeds 0-31 held, 1000-1031 missed)
    assert r180.label.startswith("not comparable: replicates disagree: seeds 0-31 held, seeds 1000-1031 missed")
    held = {c.claim: c for c in readout_claims(_rff_table({"square": True}))}
    assert held["Random Fourier features observe r180 where it is a true symmetry"].reason.startswith(
        "replicates disagree")


def test_rff_r180_is_read_on_its_own_only_at_a_budget_where_replicates_agree():
    """The recorded replicates agree from 64 seeds x 1500 steps: a run there keeps its own verdict; at
    the default 32 x 1500, with fewer steps, or with the steps unknown it reads "replicates disagree"."""
    from symfast.readout import claims as rc

    def r180(seeds, steps):
        return {c.claim: c for c in rc.readout_claims(_rff_table({"square": False}, n_models=seeds),
                                                     steps=steps)}[rc.RFF_R180]
    assert r180(64, 1500).verdict == "missed" and r180(128, 3000).verdict == "missed"
    for seeds, steps in ((32, 1500), (64, 1000), (64, None), (48, 3000)):
        assert r180(seeds, steps).reason.startswith("replicates disagree"), (seeds, steps)
    assert "they agree from 64 seeds x 1500 steps" in r180(32, 1500).reason


def test_readout_claims_below_the_calibrated_budget_are_not_comparable():
    from symfast.readout.claims import readout_claims

    few = readout_claims(_rff_table({"square": False}, n_models=4))
    assert not any(c.tested for c in few)
    assert {c.verdict for c in few} == {"by construction", "not comparable"}
    assert {c.label for c in few if c.verdict == "not comparable"} == {"not comparable: too few seeds"}
    short = readout_claims(_rff_table({"square": False}, n_models=16), steps=30)
    assert {c.reason for c in short if c.verdict == "not comparable"} == {"not converged"}
    assert any(c.tested for c in readout_claims(_rff_table({"square": False}), steps=1500))


def test_reproduce_readout_section_shows_the_new_figures_with_captions(tmp_path):
    from symfast.cli import main
    from symfast.commands.reproduce import FIGURE_CAPTIONS, _readout_section

    sub = tmp_path / "readout"
    assert main(["readout", "--shapes", "triangle,square", "--pe", "dyadic", "--seeds", "4", "--steps", "3",
                 "--points", "32", "--hidden", "8", "--sweep", "4", "--out", str(sub), "--quiet"]) == 0
    sec = Section("Readout")
    claims = _readout_section(str(sub), sec)
    phi = [c for c in claims if "observable Phi" in c.claim]
    assert len(phi) == 1 and phi[0].verdict == "not comparable" and phi[0].reason.startswith("no case")
    assert "35 searched cells" in phi[0].measured  # the calibration grid, searched without training
    md = open(write_report(str(tmp_path), "t", {}, claims, [sec])[0]).read()
    from symfast.readout.readout import MODEL_AGGREGATE_LIMIT
    assert MODEL_AGGREGATE_LIMIT in md  # the measured single-model rates, beside the ensemble's verdicts
    for name in ("summary_grid.png", "heatmap.png", "sweep.png", "fields.png", "loss.png"):
        assert (sub / name).stat().st_size > 0, name
        assert f"![{FIGURE_CAPTIONS[name]}](readout/{name})" in md, name


def test_reproduce_layerwise_verdict_rows(tmp_path):
    import json

    from symfast.commands.reproduce import _layerwise_claims

    row = {"model": "mlp", "activation": "tanh", "weight_error": 0.3, "random": 1.2, "accuracy": [0.9, 0.9, 0.1]}
    results = {"suite": [dict(row, variant="equivariant"), dict(row, variant="control", weight_error=1.0)],
               "settings": {"quick": False, "steps": 1500, "seed_offset": 1000, "data": "digits"}}
    (tmp_path / "layerwise").mkdir()
    (tmp_path / "layerwise" / "results.json").write_text(json.dumps(results))
    claims = _layerwise_claims(str(tmp_path / "layerwise"))
    md = open(write_report(str(tmp_path), "t", {}, claims, [])[0]).read()
    assert ("| Flip-invariant networks are layerwise equivariant: the recovered layer-1 action fits (proven: tanh, "
            "sigmoid, polynomial activations) | layer-1 weight error < 0.5 x random permutations in 1 of 1 settings | "
            "1 of 1: mlp/tanh 0.25 | held |") in md
    assert "| Projecting onto the recovered actions keeps accuracy; random actions do not |" in md
    assert _layerwise_claims(str(tmp_path / "absent")) == []


def _layerwise_results(settings=None) -> dict:
    row = {"model": "mlp", "activation": "tanh", "weight_error": 0.3, "random": 1.2, "accuracy": [0.9, 0.9, 0.1]}
    relu = dict(row, activation="relu", weight_error=0.9)
    out = {"suite": [dict(row, variant="equivariant"), dict(row, variant="control", weight_error=1.0),
                     dict(relu, variant="equivariant"), dict(relu, variant="control", weight_error=1.0)]}
    return dict(out, settings=settings) if settings is not None else out


def test_layerwise_rows_separate_proven_from_conjectural_and_read_held_out_seeds():
    from symfast.layerwise.claims import REPLICATE_SEED, layerwise_claims

    held_out = {c.claim: c for c in layerwise_claims(_layerwise_results(
        {"quick": False, "steps": 1500, "seed_offset": REPLICATE_SEED}))}
    proven = [c for k, c in held_out.items() if "(proven: tanh, sigmoid, polynomial activations)" in k]
    conj = [c for k, c in held_out.items() if "(conjectural: ReLU" in k]
    assert len(proven) == 1 and proven[0].verdict == "held" and proven[0].measured == "1 of 1: mlp/tanh 0.25"
    assert len(conj) == 1 and conj[0].verdict == "missed" and "conjectured, not proven" in conj[0].note
    in_sample = layerwise_claims(_layerwise_results({"quick": False, "steps": 1500, "seed_offset": 0}))
    assert not any(c.tested for c in in_sample) and {c.reason for c in in_sample} == {"not held out"}


def test_layerwise_verdicts_are_read_on_fresh_seeds_only_never_on_the_pilot():
    """The bars were fixed on the pilot seed 0: a suite on it, or one whose seed is not recorded, gives no
    verdict; a suite on a fresh seed is tested. Every row says the paper's CIFAR-10 setting is not used,
    and a row comparing with a paper number on other data is "not comparable: task definition differs"."""
    from symfast.layerwise.claims import PILOT_SEEDS, fresh_seeds, layerwise_claims, stand_in

    assert PILOT_SEEDS == (0,)
    assert fresh_seeds([1000]) == (True, "") and not fresh_seeds([0])[0] and not fresh_seeds([3, 0])[0]
    assert "pilot" in fresh_seeds([0])[1] and "not recorded" in fresh_seeds(None)[1]
    for settings in ({"quick": False, "steps": 1500, "seed_offset": 0}, None):
        rows = layerwise_claims(_layerwise_results(settings))
        assert rows and not any(c.tested for c in rows) and {c.reason for c in rows} == {"not held out"}
    fresh = layerwise_claims(_layerwise_results({"quick": False, "steps": 1500, "seed_offset": 1001,
                                                 "data": "digits"}))
    assert {c.verdict for c in fresh} == {"held", "missed"}
    assert all("the paper's CIFAR-10 setting is not used: this suite trained on digits" in c.note for c in fresh)
    numbered = Claim("layerwise", "antisymmetric filters appear", "paper 0.5", "0.1", "missed", "n = 3")
    out = stand_in([numbered, fresh[0]], "patches")
    assert out[0].label == "not comparable: task definition differs" and out[0].note.startswith("on ours: missed")
    assert out[1].verdict == fresh[0].verdict
    assert stand_in([numbered], "cifar10") == [numbered]


def test_quick_run_with_unconverged_models_yields_no_held_or_missed(tmp_path, monkeypatch):
    """A report built from the claims of a run whose models did not converge: every study's rows
    must come out "not comparable" (none held, missed, order-dependent or by construction)."""
    import json

    import symfast.schur.claims
    from symfast.commands.reproduce import _layerwise_claims, _schur_claims
    from symfast.readout.claims import readout_claims

    schur = tmp_path / "schur"
    schur.mkdir()
    pd.DataFrame({"table": ["cross-task", "copy"], "setting": ["flipflop orthogonal H=64 alpha=0.9"] * 2,
                  "subset": ["-T_CC", "-T_RR"], "metric": ["dfvu", "replay_acc"], "paper": [0.0496, 0.876],
                  "ours": [0.0098, 0.2], "lo": [-0.035, 0.1], "hi": [0.054, 0.3], "n": [2, 2],
                  "verdict": ["held", "differs"], "reason": ["", ""]}).to_csv(schur / "schur_paper_comparison.csv",
                                                                              index=False)
    pd.DataFrame({"task": ["flipflop", "copy"], "seed": [0, 0], "fvu": [0.3, 0.9],
                  "converged": [False, True]}).to_csv(schur / "schur_models.csv", index=False)
    # whatever the comparison table says, the study's verdict rows may claim held / missed:
    fake = [Claim("schur", "flip-flop -T_CC", "paper 0.0496", "0.0098 [-0.035, 0.054], n = 2", "held"),
            Claim("schur", "copy -T_RR", "paper 0.876", "0.2 [0.1, 0.3], n = 2", "missed"),
            Claim("schur", "Cayley: every ablation a no-op", "1.00", "1.00", "by construction", "", "W is normal"),
            Claim("schur", "flip-flop -T_RR", "paper 0", "0.01", "order-dependent", "", "orderings overlap")]
    monkeypatch.setattr(symfast.schur.claims, "schur_claims", lambda path: list(fake))
    layer = tmp_path / "layerwise"
    layer.mkdir()
    (layer / "results.json").write_text(json.dumps(_layerwise_results({"quick": True, "steps": 400,
                                                                        "seed_offset": 1000})))
    readout = readout_claims(_rff_table({"square": True}, n_models=6), steps=120)
    unconverged = _schur_claims(str(schur), include_unconverged=True) + _layerwise_claims(str(layer))
    claims = readout + unconverged
    assert len(claims) >= 8
    assert [c for c in claims if c.verdict in ("held", "missed", "order-dependent")] == []
    assert [c for c in unconverged if c.label != "not comparable: not converged"] == []
    assert {c.reason for c in claims if c.verdict == "not comparable"} == {"not converged", "too few seeds"}
    md = open(write_report(str(tmp_path), "symfast reproduce --quick", {}, claims, [])[0]).read()
    assert "(0 held, 0 missed)" in md.splitlines()[2]
    # the same comparison with every model converged keeps the study's verdicts
    pd.DataFrame({"task": ["flipflop"], "seed": [0], "fvu": [0.004], "converged": [True]}).to_csv(
        schur / "schur_models.csv", index=False)
    assert [c.verdict for c in _schur_claims(str(schur), include_unconverged=True)] == \
        ["held", "missed", "by construction", "order-dependent"]


def test_not_comparable_for_other_reasons_keeps_rows_that_are_not_readings():
    from symfast.report.claim import not_comparable

    rows = [Claim("s", "a", "", "", "held"), Claim("s", "b", "", "", "by construction", "", "true by definition"),
            Claim("s", "c", "", "", "order-dependent", "", "orderings"),
            Claim("s", "d", "", "", "not comparable", "", "task definition differs")]
    out = not_comparable(rows, "not held out")
    assert [c.label for c in out] == ["not comparable: not held out", "by construction: true by definition",
                                      "not comparable: not held out", "not comparable: task definition differs"]


@pytest.mark.parametrize("mean, lo, hi, n, kind, want", [
    (0.804, 0.277, 1.33, 2, "replay_acc", "0.804 [0.277, 1 clipped] (n = 2)"),
    (0.2, -0.1, 0.5, 3, "accuracy", "0.2 [0 clipped, 0.5] (n = 3)"),
    (0.2, -0.1, 0.5, 3, "dfvu", "0.2 [-0.1, 0.5] (n = 3)"),          # a dFVU may be negative
    (0.843, 0.843, 0.843, 2, None, "0.843 (n = 2, no spread)"),
    (0.5, float("nan"), float("nan"), 1, None, "0.5 (n = 1)"),
    (float("nan"), 0.0, 1.0, 0, None, "–"),
], ids=["acc-above-1", "acc-below-0", "unbounded", "one-point", "no-interval", "no-mean"])
def test_format_interval_clips_bounded_quantities_and_shows_n(mean, lo, hi, n, kind, want):
    from symfast.report.claim import format_interval

    assert format_interval(mean, lo, hi, n, kind) == want


def test_marginal_decisions_are_those_near_alpha():
    from symfast.report.claim import MARGINAL_REL, is_marginal

    assert is_marginal(0.051, 0.05) and is_marginal(0.049, 0.05)
    assert is_marginal(0.05 * (1 + MARGINAL_REL), 0.05)
    assert not is_marginal(0.07, 0.05) and not is_marginal(0.001, 0.05) and not is_marginal(float("nan"), 0.05)


def test_replicate_verdict_rule():
    """One replicate held, another missed: "not comparable: replicates disagree", even against a pooled
    verdict; agreeing replicates keep their verdict (or the pooled one); an untested replicate leaves the
    claim untested, naming it."""
    from symfast.report.claim import (NOT_COMPARABLE_REASONS, REPLICATES_DISAGREE, Verdict, replicate_verdict,
                                      replicates_disagree)

    assert REPLICATES_DISAGREE in NOT_COMPARABLE_REASONS
    v = replicate_verdict(["held", "missed"], pooled=Verdict("held", "pooled"), names=["seeds 0-31", "seeds 1000-1031"])
    assert v == ("not comparable", "replicates disagree: seeds 0-31 held, seeds 1000-1031 missed")
    assert replicates_disagree([Verdict("missed", "x"), "held"]) and not replicates_disagree(["held", "held"])
    assert not replicates_disagree(["held", "not comparable"])
    assert replicate_verdict([Verdict("held", "a"), Verdict("held", "b")]) == ("held", "a")
    assert replicate_verdict(["missed", "missed"], pooled=Verdict("missed", "p")) == ("missed", "p")
    assert replicate_verdict([Verdict("held", "a"), Verdict("not comparable", "too few seeds")]) == \
        ("not comparable", "replicate 2: too few seeds")
    with pytest.raises(ValueError):
        replicate_verdict([])
    with pytest.raises(ValueError):
        replicate_verdict(["held"], names=["a", "b"])
