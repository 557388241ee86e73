"""The studies' prose in the report: what each study does (its introduction), what each
column of its summary tables means (glossaries) and what each figure shows (captions).

Papers are cited by title and arXiv id; `symfast reproduce` puts these beside its tables and figures.
"""
from __future__ import annotations

__all__ = ["INTROS", "QUICK_SCOPE", "READOUT_GLOSSARY", "READOUT3D_GLOSSARY", "SCHUR_GLOSSARY", "LAYERWISE_GLOSSARY",
           "GLOSSARY", "FIGURE_CAPTIONS", "MISSING_FIGURES"]

# The header of a `symfast reproduce --quick` report: what its small budgets can and cannot test.
QUICK_SCOPE = (
    "This is a --quick run. It can test: that every study runs end to end; the by-construction rows "
    "(properties of the encodings, the same at any budget); and the 2D readout's hierarchy rows, whose "
    "budget (16 seeds x 400 steps) lies inside the range where the decision rule's error rates were "
    "measured (from 8 seeds x 300 steps). It cannot test: any published number of the Schur paper "
    "(its models are trained for a fraction of the paper's budget and kept even when they miss their "
    "convergence target), the 3D readout (6 seeds x 120 steps, below the calibrated range) or the "
    "layerwise thresholds (set on the full 1500-step suite). Those rows are 'not comparable' with the "
    "reason; run `symfast reproduce` without --quick for verdicts.")

INTROS = {  # study -> (title, introduction)
    'readout': (
        'Symmetry readout from neural-field weights',
        'Seed ensembles of Fourier-encoded MLPs are fitted to the signed distance functions of shapes '
        'with known symmetry groups (Chiba, Sugiyama, Uranishi, arXiv 2607.03108). For every candidate '
        'element g of O(2) the readout scores how much the seed-mean first-layer Gram W1ᵀW1 changes under '
        'the exact lift ρ(g) of g through the encoding, and compares the score with a split-half noise '
        'floor of the seeds. G_obs (observed) must lie inside G_lift ∩ G_true: elements the encoding '
        'lifts exactly and that are true symmetries of the shape.'
    ),
    'readout3d': (
        'Symmetry readout on solids (3D)',
        'The readout on 3D neural fields: seed ensembles fitted to the SDFs of the cube, tetrahedron, '
        "octahedron and icosahedron under four encodings of R³ (dyadic3: x, y, z axes; cube4: the cube's "
        "four three-fold axes; ico6: the icosahedron's six five-fold axes; rff3: random features). "
        'Candidates are the 144 elements of O_h ∪ I_h. The expected G_obs per (solid, encoding) is G_lift '
        "∩ G_true, computed from the exact lifts and the solid's declared group; e.g. a dyadic PE lifts "
        "O_h only, so it structurally hides the icosahedron's five-fold rotations, as it hides the "
        "triangle's 120° rotations in 2D."
    ),
    'schur': (
        'Schur ablations of recurrent weights',
        'Tanh RNNs are trained on four tasks; the recurrent matrix is put into ordered real Schur form W '
        '= Q T Qᵀ, its eigenvalues split into a leading sector R (|λ| ≥ α ρ(W)) and the rest C, and the '
        'coupling blocks T_RR, T_C→R and T_CC of the strictly block-upper part are zeroed, alone and '
        'together, with input and readout weights fixed ("Task-Restricted Symmetries in Recurrent Weight '
        'Space", arXiv 2606.18457). ΔFVU is the change in the fraction of variance unexplained; the '
        'random control perturbs W by a random matrix of the same Frobenius norm.'
    ),
    'layerwise': (
        'Layerwise equivariance: latent actions of MLPs, CNNs and attention',
        'Networks trained to be invariant or equivariant to a horizontal flip of their input images '
        'should carry, when their parameters are identifiable, a group action on every hidden layer that '
        'makes each layer equivariant ("Identifiable Equivariant Networks are Layerwise Equivariant", '
        'Shahverdi, Marchetti, Bökman, Kohn). The action is recovered layer by layer as a signed (tanh) '
        'or positively scaled (ReLU) permutation of neurons by linear assignment; its weight-level error '
        'is read against random permutations.'
    ),
}

READOUT_GLOSSARY = {
    "G_obs": "elements whose score passes the decision rule (observed in the weights)",
    "G_lift_and_true": "elements the encoding lifts exactly and that are true symmetries of the shape",
    "match": "whether G_obs equals G_lift ∩ G_true (symfast's stronger reading; the paper claims the inclusion)",
    "violations": "observed elements outside G_lift ∩ G_true",
    "true_not_liftable": "true symmetries of the shape that the encoding cannot lift exactly",
    "passes_best_lift": "elements that pass the same test under their best orthogonal (Procrustes) lift",
    "hidden_under_best_lift": "true, non-liftable elements that fail even under their best orthogonal lift: "
                              "hidden by the encoding, not only by the exact-lift requirement",
    "approx_violations": "elements passing under their best lift that are not true symmetries",
    "observable": "prefixK: Gram of the weight prefix W_K ... W_1 (prefix1 is the first-layer Gram)",
}

READOUT3D_GLOSSARY = {
    "G_true": "declared symmetries of the solid among the candidates", "G_lift": "elements the encoding lifts exactly",
    "G_lift_and_true": "the expected G_obs", "G_obs": "elements observed (decision rule, exact lifts)",
    "match": "G_obs equals G_lift ∩ G_true (symfast's stronger reading; the paper claims the inclusion)",
    "true_not_liftable": "true symmetries without an exact lift",
    "hidden_under_best_lift": "of those, failing even under their best orthogonal lift",
    "liftable_false": "liftable non-symmetries", "liftable_false_rejected": "of those, rejected",
}

SCHUR_GLOSSARY = {
    "task / construction / H": "RNN task, initialisation of W (orthogonal: random orthogonal; cayley: Cayley "
                               "transform of a skew matrix, kept orthogonal) and hidden size",
    "converged": "models that reached the task's convergence target (held-out FVU or replay accuracy) of the seeds",
    "subset": "blocks zeroed: -T_RR, -T_C->R, -T_CC, or all three",
    "ΔFVU [95% CI]": "FVU(ablated) - FVU(trained), mean over seeds with a 95% t-interval (copy task: replay "
                     "accuracy after the ablation instead)",
    "random control": "the same for a random perturbation of W of equal Frobenius norm (mean over draws and seeds)",
    "d_D": "rollout distance to the trained model, in units of the target variance (median over seeds)",
    "mass/||T||": "removed Schur mass ||T - T~||_F / ||T||_F (mean over seeds)",
    "eps-stabilisers": "seeds whose ablation keeps behaviour (d_D <= eps) of the seeds",
    "target (symfast)": "the held-out FVU (or copy replay accuracy) a full model needs to enter the tables",
    "paper's full model": "the paper's own full model on that task: the stricter target",
    "reach ours": "trained models that reach our target",
    "reach the paper's": "trained models as good as the paper's full model (a subset of those reaching ours)",
}

LAYERWISE_GLOSSARY = {
    "L1 weight err": "layer-1 weight-level error ||W1 ρ_in - ρ_1 W1||_F / ||W1||_F of the recovered action ρ_1",
    "random": "the same error with a random permutation (best signs / scales) in place of ρ_1",
    "L1 data err": "data-level error: how far h(gx) is from ρ_1 h(x) on held-out images, relative",
    "end-to-end err": "how far the trained network is from invariant (classifier) or equivariant (autoencoder)",
    "sym/anti/paired (weights)": "layer-1 units fixed by the flip with sign +1 (s+) / with sign -1 (s−) / swapped in pairs, "
                       "each counted only when its weight-level matching residual is below the threshold "
                       "(the rest are unmatched); the filter figures use the same counts",
    "accuracy / projected / random proj.": "test accuracy (autoencoder: relative MSE) of the trained network, "
                                           "after projecting its weights onto the recovered actions, and onto "
                                           "random pairings",
    "near-linear": "fraction of tanh units whose pre-activations stay in tanh's near-linear range",
}

# Every abbreviation of the report, in one place (the report's closing section).
GLOSSARY = {
    "held / missed": "tested verdicts: the measurement could have come out either way; a missed row says why",
    "not comparable / by construction / order-dependent": "rows that are not tests: not testable in this run, "
                                                          "cannot fail, or depend on a choice the paper leaves open",
    "G_obs, G_lift, G_true": "elements observed in the weights; elements the encoding lifts exactly; true "
                             "symmetries of the shape",
    "implied": "liftable non-symmetries that every Gram invariant under G_lift ∩ G_true is also invariant under: "
               "no Gram-type observable can tell them from G_lift ∩ G_true",
    "Holm-adjusted p-value": "p-value of 'g is a symmetry of the weights', corrected for testing many g "
                             "(Holm's step-down method); g is observed when it lies above the level alpha",
    "prefixK": "Gram of the weight prefix W_K ... W_1 (prefix1 = the first-layer Gram W1ᵀW1)",
    "dyadic / triaxis / rff / dyadic3 / cube4 / ico6 / rff3": "encodings of the input: sinusoids along the "
                                                              "coordinate axes / three axes 120° apart / random "
                                                              "Fourier features / the 3D analogues",
    "O_h, I_h": "full symmetry groups of the cube (48 elements) and of the icosahedron (120 elements)",
    "FVU, ΔFVU (dfvu)": "fraction of variance unexplained by the RNN's output; its change under an ablation",
    "cross-task": "the paper's table of single-block ΔFVU across the four tasks (orthogonal W, H = 64)",
    "T, Q, N": "ordered real Schur form W = Q T Qᵀ; N the strictly block-upper part of T (the coupling)",
    "R, C, α, ρ(W), n_R": "leading sector R (|λ| ≥ α ρ(W)) and the rest C; α the sector cut; ρ(W) the "
                          "spectral radius; n_R the number of eigenvalues in R",
    "T_RR, T_C→R, T_CC": "the coupling blocks within R, from C into R, and within C",
    "d_D": "rollout distance to the trained model, in units of the target variance (d_D of the target = FVU)",
    "ε-stabiliser (eps-stabiliser), no-op": "an ablation with d_D ≤ ε (behaviour kept); an ablation that removes "
                                            "nothing (the block is empty or zero)",
    "mass/||T|| (removed_rel_T)": "removed Schur mass ||T - T~||_F / ||T||_F",
    "pc_overlap, readout_overlap, manifold_overlap": "damage predictors: how much of the removed operator dW acts "
                                                     "on the top principal components of the hidden states / is "
                                                     "seen by the readout / acts on the visited states",
    "Spearman ρ": "rank correlation of a predictor with ΔFVU across (task, seed, block), 95% bootstrap interval",
    "s+, s−, paired, unmatched": "a layer-1 unit the flip maps to itself (s+), to minus itself (s−), to "
                                 "another unit (paired), or none of these within the threshold (unmatched)",
    "L1": "the first hidden layer",
}

# Captions of the 3D readout's figures, in the order they are shown.
READOUT3D_CAPTIONS = {
    "heatmap3d.png": "The decision per candidate element (columns) and solid (rows), one panel per encoding: colour "
                     "= Holm-adjusted p-value of 'g is a symmetry of the weights', as in the 2D heatmap (black line "
                     "on the colour bar: alpha; above it: observed). Columns are grouped into the blocks O_h ∩ I_h, "
                     "O_h only and I_h only, and within a block by class (r: rotation by deg, s: rotoreflection, "
                     "m: mirror, i: inversion, e: identity; element names in readout.csv). White dot: observed; "
                     "amber square: true symmetry of the solid; grey x: no exact lift; red x: observed but false.",
    "level_sets.png": "Fitted zero-level surface f = 0 of one model (marching cubes) beside the true solid; a panel "
                      "without a surface says 'no zero crossing' in red (the fitted field never changes sign).",
    "sdf_slices.png": "SDF slice z = 0: true, fitted and fitted - true, with the zero contour (black); a fitted panel "
                      "whose field never changes sign in the slice is flagged 'no zero crossing' in red.",
    "sweep.png": "Rotation sweep about the z axis: score over its lift-only null against the angle (dips = "
                 "symmetries), dotted: the decision threshold over the same null (below it: passes), dashed: "
                 "residual of the least-squares lift; every panel shares the y axes.",
}

# A figure that cannot be drawn without an optional extra: one line in the report instead (never another figure).
MISSING_FIGURES = {
    "level_sets.png": ("skimage", "Zero-level surfaces (`level_sets.png`) not drawn: scikit-image is not installed "
                                  "(`pip install 'symfast[plot3d]'`)."),
}

# Captions of the figures (by file name), in the order they are shown; figures not listed follow.
_FILTERS = ("grouped by the orbit of the recovered flip action on the first hidden layer, by the rule of the suite's "
            "sym/anti/paired (weights) column (the title repeats its counts): a unit is labelled only when its "
            "weight-level matching residual is below the threshold; 'i s+': the mirrored filter equals the filter "
            "(symmetric); 'i s−': it equals minus the filter (antisymmetric); 'i↔j': the flip swaps units i and j "
            "(paired); 'i' alone: unmatched, no sign claimed. Grey pixels are never lit by the data.")
FIGURE_CAPTIONS = {
    # readout
    "summary_grid.png": "Observed vs expected over the whole grid: per shape and (encoding, observable), how many "
                        "of the expected elements (G_lift ∩ G_true) were observed, which were missed, and any "
                        "extra (a violation of G_obs ⊆ G_lift ∩ G_true).",
    "heatmap.png": "The decision per element: colour = Holm-adjusted p-value of 'g is a symmetry of the weights', "
                   "the colour bar's black line is the level alpha (above: observed). Amber boxes mark true symmetries; "
                   "hatching marks elements without an exact lift, so a hatched box is a true symmetry the "
                   "encoding hides.",
    "sweep.png": "Rotation sweep: score over its lift-only null against the rotation angle (dips = symmetries); "
                 "dotted: the decision threshold over the same null (a dip below it passes the test); dashed: "
                 "residual of the least-squares lift (0 where the encoding lifts the rotation exactly); every "
                 "panel shares the y axes.",
    "fields.png": "Fitted zero-level sets f = 0 of the first members (dashed) beside the true boundary (black), "
                  "per shape and encoding: what the weights being read actually represent. A member whose field "
                  "has no zero crossing in the square is named in red in its panel (nothing to draw).",
    "loss.png": "Readout training loss per (encoding, shape): median over the ensemble's members, band = min to max.",
    # schur
    "schur_ablation.png": "Effect of zeroing each coupling block (T_RR, T_C→R, T_CC, alone and together) per "
                          "(task, construction, H), for every sector cut α: ΔFVU with 95% t-intervals over seeds and "
                          "single seeds as dots, next to the equal-norm random control (open squares); right: "
                          "eigenvalues λ of every seed over ρ(W) with the cuts α ρ (R: |λ| ≥ α ρ, C: the rest). "
                          "Settings whose every ablation is a no-op (W normal, e.g. Cayley) are not drawn; the "
                          "title names them in one line. Panel notes state empty sectors.",
    "schur_T.png": "|entries| of the ordered real Schur form T (first seed per setting); blue lines separate the "
                   "R sector (|lambda| >= alpha rho) from C, so T_RR is the upper triangle of the top-left "
                   "block, T_C->R the top-right block and T_CC the upper triangle of the bottom-right block.",
    "schur_loss.png": "RNN training loss per (task, construction, H): median over seeds of a running mean, "
                      "band = min to max.",
    "schur_stabilisers.png": "Share of seeds where each ablation is an ε-stabiliser (behaviour kept: rollout "
                             "distance d_D ≤ ε, in units of the target variance), per sector cut α; one "
                             "colour-blind-safe (Okabe-Ito) colour per share, named in the legend; grey: no-op "
                             "(nothing removed).",
    "schur_subspace.png": "Which predictor ranks the damage of an ablation: Spearman ρ with ΔFVU across (task, "
                          "seed, block) with 95% bootstrap intervals, and the scatter behind each. Predictors, for "
                          "the removed operator dW = W - W~: removed_rel_T = ||T - T~||_F / ||T||_F (removed Schur "
                          "mass); pc_overlap = ||dW P_pc||_F / ||dW||_F (P_pc: top principal components of the "
                          "hidden states); readout_overlap = ||P_V dW||_F / ||dW||_F (P_V: the readout's row space); "
                          "manifold_overlap = ||dW h||_F / (||dW||_F ||h||_F) over the visited states h.",
    # layerwise
    "filters_equivariant.png": "First-layer filters of the flip-equivariant MLP classifier, " + _FILTERS,
    "filters_control.png": "First-layer filters of the control MLP (no equivariance loss), " + _FILTERS,
    "filters_cnn_equivariant.png": "First-layer kernels of the flip-equivariant CNN, " + _FILTERS,
    "filters_cnn_control.png": "First-layer kernels of the control CNN, " + _FILTERS,
    "regimes.png": "Autoencoders with the equivariance loss: layer-1 error of the recovered action against the "
                   "near-linear fraction of tanh units, and the units per orbit type, per input scale s and "
                   "weight decay wd.",
    "exactness.png": "Exactness sweep (invariant MLPs along a sweep of the penalty weight): layer-1 and layer-2 "
                     "weight error of the recovered action and the random baseline against the end-to-end error on "
                     "held-out covering inputs (top row) and on fresh samples of the covering law alone (bottom "
                     "row), log-log, one panel per activation; filled: fit seeds, open: the held-out seeds the "
                     "verdict rows are read on.",
    "identifiability.png": "Identifiability sweep (invariant MLPs over input scales s x weight decays wd, read at "
                           "a fixed penalty weight): layer-1 weight error / random baseline of the identifiable "
                           "sub-model against the fraction of layer-1 pre-activations in the near-linear range, one "
                           "panel per activation; shaded: the two groups the verdict compares (below 0.2: "
                           "identifiable, above 0.8: near-linear); filled: fit seeds, open: held-out seeds, grey "
                           "crosses: nets that did not train.",
    "exactness_attention.png": "Exactness sweep for attention (4-head blocks along a sweep of the penalty weight): "
                               "parameter error of the recovered head action (red: not the true head permutation), "
                               "its gauge-free head-matching error (orange) and the parameter error of random head "
                               "permutations against the end-to-end error on held-out Gaussian "
                               "tokens, log-log, one panel per task; filled: fit seeds, open: held-out seeds.",
}
