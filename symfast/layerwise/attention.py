"""Latent actions of multi-head attention blocks equivariant to an orthogonal map of token features.

A block MHA(X) = sum_h softmax(X Wq_h (X Wk_h)^T / sqrt(k)) X Wv_h Wo_h, X [n, d] (tokens as rows;
no positional encoding, so it is also equivariant to token permutations). Its parameter symmetries
("Identifiable Equivariant Networks are Layerwise Equivariant", Shahverdi, Marchetti, Bökman, Kohn):
permutations of heads, and per head an invertible A_h on the query/key space
(Wq -> Wq A, Wk -> Wk A^-T) and B_h on the value space (Wv -> Wv B, Wo -> B^-1 Wo). The
identifiable quantities per head are M_h = Wq_h Wk_h^T and N_h = Wv_h Wo_h ([d, d]).

If MHA(X rho^T) = MHA(X) rho^T, the latent action is a head permutation pi with
rho^T M_h rho = M_pi(h), rho^T N_h rho = N_pi(h), and the gauges A_h, B_h with
Wq_pi(h) = rho^T Wq_h A_h, Wv_pi(h) = rho^T Wv_h B_h. `recover_attention_action` finds pi by one
linear assignment on the gauge-invariant costs and A_h, B_h by least squares;
`recover_attention_action_reference` is the per-pair loop with SciPy, for the tests.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from symfast.ops.matching import assign

__all__ = ["Attention", "attention_forward", "AttentionAction", "recover_attention_action",
           "recover_attention_action_reference", "planted_attention", "train_attention", "attention_experiment",
           "format_attention", "permutation_param_error"]


def _t(x, name):
    t = torch.as_tensor(np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64))
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} has NaN or inf entries")
    return t


@dataclass
class Attention:
    """Multi-head attention weights: Wq, Wk, Wv [heads, d, k]; Wo [heads, k, d] (float64 tensors)."""

    Wq: torch.Tensor
    Wk: torch.Tensor
    Wv: torch.Tensor
    Wo: torch.Tensor

    def __post_init__(self):
        self.Wq, self.Wk, self.Wv, self.Wo = (_t(w, n) for w, n in zip((self.Wq, self.Wk, self.Wv, self.Wo),
                                                                       ("Wq", "Wk", "Wv", "Wo")))
        Hh, d, k = self.Wq.shape if self.Wq.ndim == 3 else (None, None, None)
        if Hh is None or self.Wk.shape != (Hh, d, k) or self.Wv.ndim != 3 or self.Wv.shape[:2] != (Hh, d) \
                or self.Wo.shape != (Hh, self.Wv.shape[2], d):
            raise ValueError(f"need Wq, Wk [heads, d, k], Wv [heads, d, kv], Wo [heads, kv, d]; got "
                             f"{[list(w.shape) for w in (self.Wq, self.Wk, self.Wv, self.Wo)]}")

    @property
    def heads(self) -> int:
        return int(self.Wq.shape[0])

    def M(self) -> torch.Tensor:
        """[heads, d, d] query-key forms Wq Wk^T."""
        return self.Wq @ self.Wk.transpose(1, 2)

    def N(self) -> torch.Tensor:
        """[heads, d, d] value-output maps Wv Wo."""
        return self.Wv @ self.Wo

    def __call__(self, X) -> torch.Tensor:
        return attention_forward(X, self.Wq, self.Wk, self.Wv, self.Wo)


def attention_forward(X, Wq, Wk, Wv, Wo) -> torch.Tensor:
    """MHA on X [..., n, d] -> [..., n, d] (differentiable; scores scaled by 1/sqrt(k))."""
    X = torch.as_tensor(X)
    q = torch.einsum("...nd,hdk->...hnk", X, Wq)
    kk = torch.einsum("...nd,hdk->...hnk", X, Wk)
    v = torch.einsum("...nd,hdk->...hnk", X, Wv)
    a = torch.softmax(q @ kk.transpose(-1, -2) / np.sqrt(Wq.shape[-1]), -1)
    return torch.einsum("...hnk,hkd->...nd", a @ v, Wo)


@dataclass
class AttentionAction:
    """Recovered latent action of one group element on an attention block.

    Attributes:
        index: [heads] head permutation (head h of g.X acts as head index[h] of X);
        A: [heads, k, k] query/key gauges; B: [heads, kv, kv] value gauges;
        qk_error, ov_error: ||rho^T M_h rho - M_pi(h)|| / ||M|| summed over heads (and for N);
        param_error: relative residual of Wq, Wk, Wv, Wo under (pi, A, B);
        baseline: the qk + ov error for random head permutations (mean over draws).
    """

    index: np.ndarray
    A: np.ndarray
    B: np.ndarray
    qk_error: float
    ov_error: float
    param_error: float
    baseline: float

    def counts(self) -> dict:
        """Heads fixed by the action vs in longer cycles."""
        fixed = int((self.index == np.arange(len(self.index))).sum())
        return {"fixed": fixed, "cycled": len(self.index) - fixed}


def _head_costs(att: Attention, rho: torch.Tensor):
    M, N = att.M(), att.N()
    Mg, Ng = rho.T @ M @ rho, rho.T @ N @ rho
    fm, fn = Mg.reshape(att.heads, -1), Ng.reshape(att.heads, -1)
    gm, gn = M.reshape(att.heads, -1), N.reshape(att.heads, -1)
    cm = torch.cdist(fm, gm) ** 2 / max(float(gm.pow(2).sum()), 1e-300)
    cn = torch.cdist(fn, gn) ** 2 / max(float(gn.pow(2).sum()), 1e-300)
    return cm, cn


def _gauges(att: Attention, rho: torch.Tensor, index: np.ndarray):
    """Least-squares A_h, B_h and the relative parameter residual."""
    rq, rk, rv = (torch.einsum("ed,hek->hdk", rho, w) for w in (att.Wq, att.Wk, att.Wv))  # rho^T W
    idx = torch.as_tensor(index)
    A = torch.linalg.lstsq(rq, att.Wq[idx]).solution
    B = torch.linalg.lstsq(rv, att.Wv[idx]).solution
    res = (rq @ A - att.Wq[idx]).pow(2).sum() + (rv @ B - att.Wv[idx]).pow(2).sum()
    # pinv: a rank-deficient head has a non-unique gauge (not identifiable); the residual then shows it
    res = res + (rk @ torch.linalg.pinv(A).transpose(1, 2) - att.Wk[idx]).pow(2).sum()
    res = res + (torch.linalg.pinv(B) @ att.Wo @ rho - att.Wo[idx]).pow(2).sum()
    tot = sum(w.pow(2).sum() for w in (att.Wq, att.Wk, att.Wv, att.Wo))
    return A.numpy(), B.numpy(), float(torch.sqrt(res / tot))



def permutation_param_error(att: Attention, rho, index) -> float:
    """Relative parameter residual of Wq, Wk, Wv, Wo under the head permutation `index` and its
    least-squares gauges (as `AttentionAction.param_error`): the level a given, e.g. random, permutation
    reaches."""
    rho = _check_rho(rho, att.Wq.shape[1])
    index = np.asarray(index)
    if sorted(index.tolist()) != list(range(att.heads)):
        raise ValueError(f"index must be a permutation of 0..{att.heads - 1}, got {index.tolist()}")
    return _gauges(att, rho, index)[2]

def _check_rho(rho, d):
    r = _t(rho, "rho")
    if r.shape != (d, d):
        raise ValueError(f"rho must be [{d}, {d}], got {list(r.shape)}")
    if (r.T @ r - torch.eye(d, dtype=r.dtype)).abs().max() > 1e-6:
        raise ValueError("rho must be orthogonal")
    return r


def recover_attention_action(att: Attention, rho, random_draws: int = 16, seed: int = 0) -> AttentionAction:
    """Head permutation and query/key and value gauges making the block equivariant under rho [d, d].

    One batched cost matrix [heads, heads] (cdist of the flattened rho^T M rho against M, plus N) and one
    assignment; gauges by batched least squares.
    """
    rho = _check_rho(rho, att.Wq.shape[1])
    cm, cn = _head_costs(att, rho)
    index = assign((cm + cn)[None].numpy())[0]
    A, B, perr = _gauges(att, rho, index)
    ar = np.arange(att.heads)
    rng = np.random.default_rng(seed)
    base = [float((cm + cn)[ar, rng.permutation(att.heads)].sum()) for _ in range(random_draws)]
    return AttentionAction(index, A, B, float(cm[ar, index].sum()) ** 0.5, float(cn[ar, index].sum()) ** 0.5,
                           perr, float(np.mean(np.sqrt(base))))


def recover_attention_action_reference(Wq, Wk, Wv, Wo, rho) -> dict:
    """Plain loops over head pairs with NumPy and SciPy: index, qk_error, ov_error (same definitions)."""
    Wq, Wk, Wv, Wo, rho = (np.asarray(w, np.float64) for w in (Wq, Wk, Wv, Wo, rho))
    H = Wq.shape[0]
    M = [Wq[h] @ Wk[h].T for h in range(H)]
    N = [Wv[h] @ Wo[h] for h in range(H)]
    m2, n2 = sum((m ** 2).sum() for m in M), sum((n ** 2).sum() for n in N)
    cm, cn = np.zeros((H, H)), np.zeros((H, H))
    for h in range(H):
        for j in range(H):
            cm[h, j] = ((rho.T @ M[h] @ rho - M[j]) ** 2).sum() / m2
            cn[h, j] = ((rho.T @ N[h] @ rho - N[j]) ** 2).sum() / n2
    _, col = linear_sum_assignment(cm + cn)
    return {"index": col, "qk_error": float(np.sqrt(cm[np.arange(H), col].sum())),
            "ov_error": float(np.sqrt(cn[np.arange(H), col].sum()))}


def planted_attention(d: int, heads: int, k: int, rho, seed: int = 0, n_fixed: int = 2):
    """A random block equivariant under the involution rho: heads in pairs (h, h') with
    Wq_h' = rho^T Wq_h A, ... (random gauges), plus `n_fixed` heads fixed by the action (columns of
    Wq, Wk, Wv that are rho-even or rho-odd, Wo rows matching), heads then shuffled.

    Returns:
        (Attention, index): index the planted head permutation.
    """
    rng = np.random.default_rng(seed)
    rho = np.asarray(rho, np.float64)
    if np.abs(rho @ rho - np.eye(d)).max() > 1e-10 or np.abs(rho.T @ rho - np.eye(d)).max() > 1e-10:
        raise ValueError("planted_attention needs an orthogonal involution rho")
    if (heads - n_fixed) % 2 or n_fixed < 0:
        raise ValueError("heads - n_fixed must be even and non-negative")
    g = lambda *s: rng.normal(0, 1 / np.sqrt(s[-2]), s)  # noqa: E731
    gauge = lambda: np.eye(k) + 0.3 * rng.normal(size=(k, k))  # noqa: E731
    Ws, index = [], []
    for p in range((heads - n_fixed) // 2):
        q, kk, v, o = g(d, k), g(d, k), g(d, k), g(k, d)
        A, B = gauge(), gauge()
        Ws.append((q, kk, v, o))
        Ws.append((rho.T @ q @ A, rho.T @ kk @ np.linalg.inv(A).T, rho.T @ v @ B, np.linalg.inv(B) @ o @ rho))
        index += [2 * p + 1, 2 * p]
    n_plus = int(round((d + np.trace(rho)) / 2))  # dimension of rho's +1 eigenspace
    if k > d:
        raise ValueError(f"k = {k} > d = {d}: the heads would be rank deficient (gauges not identifiable)")
    for f in range(n_fixed):  # rho^T W = W D with D = diag(+-1): (W + s rho W) / 2
        n_minus = int(rng.integers(max(0, k - n_plus), min(k, d - n_plus) + 1))  # full rank per eigenspace
        D = rng.permutation(np.r_[-np.ones(n_minus), np.ones(k - n_minus)])
        sym = lambda w: (w + rho @ w * D[None, :]) / 2  # noqa: E731
        for _ in range(20):  # redraw the rare rank-deficient head (its gauge would not be identifiable)
            q, kk, v = sym(g(d, k)), sym(g(d, k)), sym(g(d, k))
            if min(np.linalg.svd(m, compute_uv=False)[-1] for m in (q, kk, v)) > 1e-6:
                break
        o0 = g(k, d)
        o = (o0 + D[:, None] * (o0 @ rho)) / 2  # D o rho = o
        Ws.append((q, kk, v, o))
        index.append(len(index))
    perm = rng.permutation(heads)
    inv = np.argsort(perm)
    Ws = [Ws[p] for p in perm]
    index = inv[np.asarray(index)[perm]]
    att = Attention(*(np.stack([w[i] for w in Ws]) for i in range(4)))
    return att, index


def train_attention(rho, d: int = 4, heads: int = 4, k: int = 2, n: int = 8, equivariance_weight: float = 1.0,
                    steps: int = 600, lr: float = 1e-2, batch: int = 64, seed: int = 0) -> Attention:
    """Fit an MHA block to the equivariant smoothing task Y_i = sum_j softmax_j(-|x_i - x_j|^2) x_j
    (equivariant under every orthogonal map of the features), with the loss weight * |f(X rho^T) - f(X) rho^T|^2.
    """
    torch.manual_seed(seed)
    rho_t = torch.as_tensor(np.asarray(rho, np.float64), dtype=torch.float32)
    params = [torch.nn.Parameter(torch.randn(*s) / np.sqrt(s[-2])) for s in
              ((heads, d, k), (heads, d, k), (heads, d, k), (heads, k, d))]
    opt = torch.optim.Adam(params, lr=lr)
    gen = torch.Generator().manual_seed(seed)
    old = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add overhead
    try:
        _fit(params, opt, gen, rho_t, n, d, batch, steps, equivariance_weight)
    finally:
        torch.set_num_threads(old)
    return Attention(*(p.detach() for p in params))


def _fit(params, opt, gen, rho_t, n, d, batch, steps, equivariance_weight):
    for _ in range(steps):
        X = torch.randn(batch, n, d, generator=gen)
        Y = torch.softmax(-torch.cdist(X, X) ** 2, -1) @ X
        out = attention_forward(X, *params)
        loss = (out - Y).pow(2).sum(-1).mean()
        if equivariance_weight > 0:
            loss = loss + equivariance_weight * (attention_forward(X @ rho_t.T, *params) - out @ rho_t.T
                                                 ).pow(2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def attention_experiment(steps: int = 600, seed: int = 0) -> list:
    """Equivariant vs control blocks on the smoothing task, rho = swap of features (0, 1), (2, 3)."""
    rho = np.eye(4)[[1, 0, 3, 2]]
    rows = []
    for variant, w in (("equivariant", 1.0), ("control", 0.0)):
        att = train_attention(rho, equivariance_weight=w, steps=steps, seed=seed)
        act = recover_attention_action(att, rho, seed=seed)
        X = torch.randn(256, 8, 4, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
        Y = torch.softmax(-torch.cdist(X, X) ** 2, -1) @ X
        out = att(X)
        eq = float((att(X @ torch.as_tensor(rho).T) - out @ torch.as_tensor(rho).T).norm() / out.norm())
        rows.append({"variant": variant, "qk_error": act.qk_error, "ov_error": act.ov_error,
                     "param_error": act.param_error, "random": act.baseline, "end_to_end": eq,
                     "task_error": float((out - Y).norm() / Y.norm()), "heads": act.counts(),
                     "index": act.index.tolist()})
    return rows


def format_attention(rows: list) -> str:
    """Markdown table of `attention_experiment` rows."""
    # Imported here: the protocol needs pandas, the attention blocks themselves do not.
    from symfast.layerwise.protocol import rows_markdown

    return rows_markdown(
        ["variant", "qk error", "ov error", "parameter error", "random heads", "end-to-end err", "task err",
         "heads fixed/cycled"],
        [(r["variant"], *(f"{r[k]:.3f}" for k in ("qk_error", "ov_error", "param_error", "random", "end_to_end",
                                                   "task_error")), f"{r['heads']['fixed']}/{r['heads']['cycled']}")
         for r in rows])
