import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from symfast.report import Claim, Section, read_claims, run_details, write_claims, write_report  # noqa: E402


def test_claim_rejects_unknown_verdict():
    with pytest.raises(ValueError, match="verdict must be one of"):
        Claim("readout", "c", "e", "m", "probably")


def test_claims_round_trip(tmp_path):
    claims = [Claim("schur", "-T_RR hurts most", "largest dFVU", "0.12 [0.1, 0.2]", "held", "5 of 5 seeds"),
              Claim("readout", "D3 hidden by Dyadic", "r120 not observed", "observed", "missed", "")]
    write_claims(tmp_path / "claims.csv", claims)
    assert read_claims(tmp_path / "claims.csv") == claims
    assert read_claims(tmp_path / "absent.csv") == []


def test_report_markdown_and_html(tmp_path):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    fig.savefig(tmp_path / "fig.png")
    plt.close(fig)
    claims = [Claim("readout", "a", "x", "x", "held"), Claim("readout", "b", "y", "z", "missed"),
              Claim("schur", "c", "p", "q", "not comparable", "different task")]
    table = pd.DataFrame({"element": ["r0", "m0"], "score": [0.0, float("nan")]})
    sec = Section("Readout", ["Explains the run."], [("Scores", table, {"score": "relative Gram change"})],
                  [(str(tmp_path / "fig.png"), "a line")], command="symfast readout", seconds=3.2)
    md_path, html_path = write_report(str(tmp_path), "symfast reproduce", run_details(5.0), claims, [sec])
    md = open(md_path).read()
    assert "1 of 2 comparable claims held (1 not comparable)" in md
    assert "| r0 | 0 |" in md and "| m0 | – |" in md  # NaN is shown as a dash, not 'nan'
    assert "- `score`: relative Gram change" in md
    assert "![a line](fig.png)" in md
    assert "commit" in md and "wall time" in md
    page = open(html_path).read()
    assert "data:image/png;base64," in page and "class='missed'" in page



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
    from symfast.readout.claims import readout_claims

    obs = {("dyadic", "r0"): True, ("dyadic", "m0"): True}
    obs.update({("triaxis", e): True for e in ("r0", "r120", "r240", "m0", "m60", "m120")})
    claims = {c.claim: c for c in readout_claims(_readout_table(obs))}
    assert all(c.verdict == "held" for c in claims.values()), claims
    assert claims["Every liftable true symmetry is observed (G_obs = G_lift ∩ G_true)"].measured == \
        "matched in 2 of 2 cases"


def test_readout_claims_report_misses_and_violations():
    from symfast.readout.claims import readout_claims

    obs = {("dyadic", "r0"): True, ("dyadic", "m0"): True, ("dyadic", "r90"): True}  # r90: a false positive
    obs.update({("triaxis", e): True for e in ("r0", "r120", "m0", "m60", "m120")})  # r240 missed
    claims = {c.claim: c for c in readout_claims(_readout_table(obs))}
    assert claims["Only liftable true symmetries are observed (G_obs ⊆ G_lift ∩ G_true)"].verdict == "missed"
    full = claims["Every liftable true symmetry is observed (G_obs = G_lift ∩ G_true)"]
    assert full.verdict == "missed" and "missed r240" in full.note and "extra r90" in full.note
    assert claims["A three-axis PE reveals the triangle's full D3"].measured == "5 of 6 observed"
    assert claims["Liftable non-symmetries are rejected"].verdict == "missed"
    assert claims["A dyadic PE hides the triangle's 120° rotations"].verdict == "held"


def test_reproduce_readout_section_shows_the_new_figures_with_captions(tmp_path):
    from symfast.cli import main
    from symfast.commands.reproduce import FIGURE_CAPTIONS, _readout_section

    sub = tmp_path / "readout"
    assert main(["readout", "--shapes", "triangle,square", "--pe", "dyadic", "--seeds", "4", "--steps", "3",
                 "--points", "32", "--hidden", "8", "--sweep", "4", "--out", str(sub), "--quiet"]) == 0
    sec = Section("Readout")
    claims = _readout_section(str(sub), sec)
    md = open(write_report(str(tmp_path), "t", {}, claims, [sec])[0]).read()
    for name in ("summary_grid.png", "heatmap.png", "sweep.png", "fields.png", "loss.png"):
        assert (sub / name).stat().st_size > 0, name
        assert f"![{FIGURE_CAPTIONS[name]}](readout/{name})" in md, name


def test_reproduce_layerwise_verdict_rows(tmp_path):
    import json

    from symfast.commands.reproduce import _layerwise_claims

    row = {"model": "mlp", "activation": "tanh", "weight_error": 0.3, "random": 1.2, "accuracy": [0.9, 0.9, 0.1]}
    results = {"suite": [dict(row, variant="equivariant"), dict(row, variant="control", weight_error=1.0)]}
    (tmp_path / "layerwise").mkdir()
    (tmp_path / "layerwise" / "results.json").write_text(json.dumps(results))
    claims = _layerwise_claims(str(tmp_path / "layerwise"))
    md = open(write_report(str(tmp_path), "t", {}, claims, [])[0]).read()
    assert ("| layerwise | Flip-invariant networks are layerwise equivariant: the recovered layer-1 action fits | "
            "layer-1 weight error < 0.5 x random permutations in 1 of 1 settings | 1 of 1: mlp/tanh 0.25 | held |"
            ) in md
    assert "| layerwise | Projecting onto the recovered actions keeps accuracy; random actions do not |" in md
    assert _layerwise_claims(str(tmp_path / "absent")) == []
