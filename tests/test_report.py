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

