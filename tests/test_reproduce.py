"""`symfast reproduce` end to end on stand-in studies (no training): Ctrl-C is an interruption (exit 130,
the finished studies' verdicts kept), the Schur section shows compact tables (no printed dump; no-op
settings in one line), the layerwise suite's Markdown is rendered, and a figure whose extra is missing
is left out with one line."""
import os

import pandas as pd

import symfast.commands.layerwise
import symfast.commands.schur
from symfast.cli import main
from symfast.report import Claim, write_claims


def _fake_schur(args) -> int:
    out = args.out
    os.makedirs(out, exist_ok=True)
    rows = [dict(task=t, construction=c, hidden=64, seed=s, fvu=0.01, converged=True)
            for t in ("flipflop", "sine") for c in ("orthogonal", "cayley") for s in (0, 1, 2)]
    pd.DataFrame(rows).to_csv(os.path.join(out, "schur_models.csv"), index=False)
    summ = []
    for t in ("flipflop", "sine"):
        for c in ("orthogonal", "cayley"):
            for a in (0.85, 0.9, 0.95):
                for sub in ("-T_RR", "-T_C->R", "-T_CC", "-T_RR,-T_C->R,-T_CC", "-T_RR,-T_CC"):
                    noop = c == "cayley"
                    summ.append(dict(task=t, construction=c, hidden=64, alpha=a, subset=sub, n=3,
                                     dfvu_mean=0.0 if noop else 0.05, dfvu_lo=0.0 if noop else 0.04,
                                     dfvu_hi=0.0 if noop else 0.06, rand_dfvu_mean_mean=0.3,
                                     removed_rel_T_mean=0.0 if noop else 0.2, noop_mean=1.0 if noop else 0.0))
    pd.DataFrame(summ).to_csv(os.path.join(out, "schur_ablation_summary.csv"), index=False)
    write_claims(os.path.join(out, "claims.csv"), [Claim("schur", "-T_C->R hurts most", "largest ΔFVU",
                                                         "0.05 [0.04, 0.06]", "missed", "")])
    print("\n".join(f"printed table line {k}" for k in range(170)))
    return 0


def _fake_layerwise(args) -> int:
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "suite.md"), "w") as f:
        f.write("## Flip-invariant classifiers\n\n| model | sym/anti/paired (weights) |\n|---|---|\n| mlp | 7/0/0 |\n\n"
                f"figure: {args.out}/regimes.png\n")
    return 0


def _interrupt(args) -> int:
    raise KeyboardInterrupt


def test_ctrl_c_is_an_interruption_not_a_failure(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(symfast.commands.schur, "run", _fake_schur)
    monkeypatch.setattr(symfast.commands.layerwise, "run", _interrupt)
    out = tmp_path / "rep"
    assert main(["reproduce", "--only", "schur,layerwise", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert "layerwise: interrupted" in err and "FAILED" not in err and "rerun the same command" in err
    md = (out / "report.md").read_text()
    assert "FAILED" not in md and "(interrupted" in md and "interrupted during layerwise" in md
    assert "| schur | -T_C->R hurts most |" in md  # the finished study's verdicts are kept


def test_schur_tables_layerwise_markdown_and_no_printed_dump(tmp_path, monkeypatch):
    monkeypatch.setattr(symfast.commands.schur, "run", _fake_schur)
    monkeypatch.setattr(symfast.commands.layerwise, "run", _fake_layerwise)
    out = tmp_path / "rep"
    assert main(["reproduce", "--only", "schur,layerwise", "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    assert "printed table line" not in md and "printed table line" not in page and "<pre>" not in page
    assert "| flipflop | orthogonal | 64 | -T_C->R | 3 | 0.05 [0.04, 0.06] |" in md
    assert "cayley, H = 64 (flipflop, sine): every ablation is a no-op" in md
    assert "| flipflop | cayley |" not in md.split("Effect of zeroing")[1].split("##")[0]
    assert "-T_RR,-T_CC" not in md  # only the single blocks and all three
    assert "### Flip-invariant classifiers" in md and "<td>7/0/0</td>" in page
    assert "measured 0.05 [0.04, 0.06], outside the expected largest ΔFVU" in md  # a miss says why
    assert "## Glossary" in md and "`d_D`" in md and "`cross-task`" in md


def test_a_figure_that_needs_a_missing_extra_is_left_out_with_a_line(tmp_path, monkeypatch):
    import symfast.commands.reproduce as rep
    from symfast.report import Section

    sub = tmp_path / "readout3d"
    sub.mkdir()
    for name in ("sdf_slices.png", "level_sets.png"):  # a stale level_sets.png from an older run
        (sub / name).write_bytes(b"\x89PNG fake")
    monkeypatch.setattr(rep, "_missing_extra", lambda name: name == "level_sets.png")
    sec = Section("3D")
    rep._gather("readout3d", str(sub), sec, [])
    names = [os.path.basename(p) for p, _ in sec.figures]
    assert names == ["sdf_slices.png"]
    assert sec.notes == [rep.MISSING_FIGURES["level_sets.png"][1]]


def _fake_layerwise_with_exactness(args) -> int:
    if not (args.exactness or args.identifiability):
        return _fake_layerwise(args)
    os.makedirs(args.out, exist_ok=True)
    name = ("identifiability at matched error (tanh): saturated units fit better" if getattr(args, "matched", False)
            else "identifiability effect (tanh): saturated units fit better" if args.identifiability else
            "attention exactness (teacher): head permutation" if args.model == "attention" else
            "exactness (tanh): layer-1 error closes")
    write_claims(os.path.join(args.out, "claims.csv"), [
        Claim("layerwise", name, "slope > 0.5", "0.21 [0.1, 0.3]", "missed", "")])
    return 0


def test_exactness_verdicts_join_the_layerwise_section_and_quick_says_it_skipped(tmp_path, monkeypatch):
    import symfast.commands.reproduce as rep

    monkeypatch.setattr(symfast.commands.layerwise, "run", _fake_layerwise_with_exactness)
    out = tmp_path / "quick"
    assert main(["reproduce", "--quick", "--only", "layerwise", "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "Skipped at --quick: the exactness sweep" in md and "layer-1 error closes" not in md
    assert "Skipped at --quick: the attention exactness sweep" in md and "head permutation |" not in md
    assert "Skipped at --quick: the identifiability sweep" in md and "saturated units fit better" not in md
    assert not (out / "layerwise" / "exactness").exists()
    assert not (out / "layerwise" / "exactness_attention").exists()
    assert not (out / "layerwise" / "identifiability").exists()
    assert "Skipped at --quick: the identifiability comparison at matched" in md
    assert not (out / "layerwise" / "identifiability_matched").exists()
    out = tmp_path / "full"  # the full run's argv, stood in for by the fake command
    assert main(["reproduce", "--only", "layerwise", "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "| layerwise | exactness (tanh): layer-1 error closes |" in md and "Skipped at --quick" not in md
    assert "symfast layerwise --exactness --polish 1e5,1e7 --polish-iters 1500 --polish-history 1000 --out" in md
    assert "symfast layerwise --exactness --model attention --out" in md
    assert "| layerwise | attention exactness (teacher): head permutation |" in md
    assert [f[0] for f in rep.FOLLOW_UPS["layerwise"]] == ["exactness", "exactness_attention", "identifiability",
                                                           "identifiability_matched"]
    assert "symfast layerwise --identifiability --out" in md
    assert "| layerwise | identifiability effect (tanh): saturated units fit better |" in md
    assert "symfast layerwise --identifiability --matched --out" in md
    assert "| layerwise | identifiability at matched error (tanh): saturated units fit better |" in md


class _Payload:
    """A pickle that runs code when unpickled: it writes the file named in `marker`."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_reproduce_reads_results_folders_as_data_never_as_code(tmp_path):
    """A results folder written by someone else: its ensemble files are read without unpickling code."""
    import torch

    from symfast.commands.reproduce import _trained_steps

    sub = tmp_path / "readout"
    sub.mkdir()
    torch.save({"config": {"steps": 7}}, sub / "ensemble_a.pt")
    torch.save({"config": {"steps": 5}}, sub / "ensemble_b.pt")
    assert _trained_steps(str(sub)) == 5
    marker = tmp_path / "ran"
    torch.save({"config": {"steps": 3}, "x": _Payload(str(marker))}, sub / "ensemble_c.pt")
    assert _trained_steps(str(sub)) is None  # not readable as data: steps unknown
    assert not marker.exists()
