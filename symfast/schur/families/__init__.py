"""Schur diagnostics beyond the single tanh RNN: linear state-space models, GRUs and LSTMs.

Every family exposes the matrix a Schur ablation acts on (`recurrent_weight`) and rolls out its
ablated variants with every other weight fixed (`rollout_recurrent`), so
`symfast.schur.schur_ablation` runs on it unchanged (sectors, coupling blocks, orderings,
invariant variants, controls); `step` is the state update `symfast.schur.fixedpoints` linearises.

    family  construction        ablated matrix
    tanh    dense|orthogonal|   W in h_t = tanh(W h_{t-1} + U x_t)
            normal|cayley
    ssm     dense|diagonal      A in h_t = A h_{t-1} + B x_t (diagonal: normal by construction)
    gru     nobias|bias         W_hn (candidate; default), or W_hr, W_hz: `GatedRNN.at_gate`
    lstm    nobias|bias         W_hg (cell input; default), or W_hi, W_hf, W_ho
"""
from symfast.schur.families.gated import DEFAULT_GATE, GATES, GatedRNN, GateView
from symfast.schur.families.ssm import STRUCTURES, LinearSSM, rotation_blocks
from symfast.schur.families.train import FAMILIES, FAMILY_CONSTRUCTIONS, make_model, train_family

__all__ = ["LinearSSM", "STRUCTURES", "rotation_blocks", "GatedRNN", "GateView", "GATES", "DEFAULT_GATE",
           "FAMILIES", "FAMILY_CONSTRUCTIONS", "make_model", "train_family"]
