// Batched linear sum assignment on the CPU (neuron matching for many models at once).
//   cost: [P, n, n] float64 -> col: [P, n] int64, the column assigned to each row, minimising
//   sum_i cost[p, i, col[p, i]] for every problem p independently.
// Algorithm: Jonker-Volgenant initialisation (column reduction + augmenting row reduction),
// then shortest augmenting paths with dual variables (Crouse 2016, as in SciPy's
// linear_sum_assignment) for the remaining rows; one problem per OpenMP task.
// Each problem is solved sequentially in a fixed order: results do not depend on threads.
// Reference: scipy.optimize.linear_sum_assignment (symfast/ops/matching/__init__.py, backend="reference").
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "common.h"

namespace symfast {

// Hidden-action family of a matching problem, exported to Python as _C.MatchMode.
enum MatchMode { PERM = 0, SIGN = 1, SCALE = 2 };

// The observable's products, one instance per instruction set: matching_isa::{avx512, avx2, generic}.
#define SYMFAST_KERNEL_NS matching_isa
#define SYMFAST_KERNEL_BODY "matching_impl.h"
#include "isa_instances.h"

namespace {

// ---- the three families as compile-time policies (pytorch_scatter's reducer.h pattern) ----
// For rows a (|a|^2 = a2) and b (|b|^2 = b2) with inner product g:
//   cost(a2, b2, g): min over the family's scalars s of ||a - s b||^2, clamped at 0
//     PERM  s = 1:      a2 + b2 - 2 g
//     SIGN  s = +-1:    a2 + b2 - 2 |g|
//     SCALE s = c > 0:  a2 - max(g, 0)^2 / b2   (a2 when b2 = 0)
//   scale(g, b2, ok): the optimal s of a matched pair; ok = false where SCALE's optimum is c = 0
//     (non-positive overlap): the action then keeps s = 1 and the pair's residual is a2.
template <MatchMode MODE>
struct Family;

template <>
struct Family<PERM> {
  static inline double cost(double a2, double b2, double g) { return std::max(a2 + b2 - 2 * g, 0.0); }
  static inline double scale(double, double, bool* ok) {
    *ok = true;
    return 1.0;
  }
};

template <>
struct Family<SIGN> {
  static inline double cost(double a2, double b2, double g) { return std::max(a2 + b2 - 2 * std::abs(g), 0.0); }
  static inline double scale(double g, double, bool* ok) {
    *ok = true;
    return g < 0 ? -1.0 : 1.0;
  }
};

template <>
struct Family<SCALE> {
  static inline double cost(double a2, double b2, double g) {
    const double o = std::max(g, 0.0);
    return std::max(a2 - (b2 > 0 ? o * o / b2 : 0.0), 0.0);
  }
  static inline double scale(double g, double b2, bool* ok) {
    *ok = g > 0 && b2 > 0;
    return *ok ? g / b2 : 1.0;
  }
};

void check_mode(int mode) {
  if (mode < PERM || mode > SCALE) throw std::invalid_argument("mode must be 0 (perm), 1 (sign) or 2 (scale)");
}

// Runs __VA_ARGS__ (a lambda) with `static constexpr MatchMode MODE` set to the run-time `mode`:
// the mode is switched once here, never inside a kernel's loops.
#define SYMFAST_DISPATCH_MATCH_MODE(mode, ...)                                                      \
  [&] {                                                                                           \
    switch (mode) {                                                                               \
      case PERM: {                                                                                \
        static constexpr MatchMode MODE = PERM;                                                   \
        return __VA_ARGS__();                                                                     \
      }                                                                                           \
      case SIGN: {                                                                                \
        static constexpr MatchMode MODE = SIGN;                                                   \
        return __VA_ARGS__();                                                                     \
      }                                                                                           \
      case SCALE: {                                                                               \
        static constexpr MatchMode MODE = SCALE;                                                  \
        return __VA_ARGS__();                                                                     \
      }                                                                                           \
      default:                                                                                    \
        throw std::invalid_argument("mode must be 0 (perm), 1 (sign) or 2 (scale)");              \
    }                                                                                             \
  }()

struct LsaWork {
  std::vector<double> u, v, spc;
  std::vector<int64_t> path, col4row, row4col, remaining;
  std::vector<char> SR, SC;
  explicit LsaWork(int64_t n)
      : u(n), v(n), spc(n), path(n), col4row(n), row4col(n), remaining(n), SR(n), SC(n) {}
};

int64_t augmenting_path(int64_t n, const double* cost, LsaWork& w, int64_t i, double* p_min) {
  const double inf = std::numeric_limits<double>::infinity();
  double min_val = 0;
  int64_t num_remaining = n;
  for (int64_t it = 0; it < n; ++it) w.remaining[it] = n - it - 1;
  std::fill(w.SR.begin(), w.SR.end(), 0);
  std::fill(w.SC.begin(), w.SC.end(), 0);
  std::fill(w.spc.begin(), w.spc.end(), inf);
  int64_t sink = -1;
  while (sink == -1) {
    int64_t index = -1;
    double lowest = inf;
    w.SR[i] = 1;
    const double* row = cost + i * n;
    const double base = min_val - w.u[i];
    for (int64_t it = 0; it < num_remaining; ++it) {
      const int64_t j = w.remaining[it];
      const double r = base + row[j] - w.v[j];
      if (r < w.spc[j]) {
        w.path[j] = i;
        w.spc[j] = r;
      }
      if (w.spc[j] < lowest || (w.spc[j] == lowest && w.row4col[j] == -1)) {
        lowest = w.spc[j];
        index = it;
      }
    }
    min_val = lowest;
    if (index < 0 || min_val == inf) return -1;  // infeasible (non-finite costs)
    const int64_t j = w.remaining[index];
    if (w.row4col[j] == -1)
      sink = j;
    else
      i = w.row4col[j];
    w.SC[j] = 1;
    w.remaining[index] = w.remaining[--num_remaining];
  }
  *p_min = min_val;
  return sink;
}

// Jonker-Volgenant initialisation: column reduction, then two passes of augmenting row
// reduction (JV 1987), which assign most rows cheaply while keeping the duals feasible
// (c_ij - u_i - v_j >= 0, tight on assigned pairs); leaves the rest free (col4row = -1).
void jv_init(int64_t n, const double* cost, LsaWork& w) {
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t j = n - 1; j >= 0; --j) {  // column reduction
    int64_t imin = 0;
    for (int64_t i = 1; i < n; ++i)
      if (cost[i * n + j] < cost[imin * n + j]) imin = i;
    w.v[j] = cost[imin * n + j];
    if (w.col4row[imin] == -1) {
      w.col4row[imin] = j;
      w.row4col[j] = imin;
    }
  }
  std::vector<int64_t>& free_rows = w.remaining;  // reused as scratch (augmenting_path refills it)
  std::vector<int64_t> next;
  int64_t nfree = 0;
  for (int64_t i = 0; i < n; ++i)
    if (w.col4row[i] == -1) free_rows[nfree++] = i;
  for (int pass = 0; pass < 2 && nfree > 0; ++pass) {
    next.clear();
    int64_t k = 0, budget = 8 * n;
    while (k < nfree) {
      if (--budget < 0) {  // floating-point ping-pong guard: leave the rest to the augmentation
        for (; k < nfree; ++k) next.push_back(free_rows[k]);
        break;
      }
      const int64_t i = free_rows[k++];
      const double* row = cost + i * n;
      double u1 = row[0] - w.v[0], u2 = inf;
      int64_t j1 = 0, j2 = -1;
      for (int64_t j = 1; j < n; ++j) {
        const double h = row[j] - w.v[j];
        if (h < u2) {
          if (h >= u1) {
            u2 = h;
            j2 = j;
          } else {
            u2 = u1;
            u1 = h;
            j2 = j1;
            j1 = j;
          }
        }
      }
      int64_t i0 = w.row4col[j1];
      const bool strict = j2 >= 0 && u1 < u2;
      if (strict)
        w.v[j1] -= u2 - u1;
      else if (i0 >= 0 && j2 >= 0) {
        j1 = j2;
        i0 = w.row4col[j1];
      }
      if (i0 >= 0) {
        w.col4row[i0] = -1;
        if (strict)
          free_rows[--k] = i0;
        else
          next.push_back(i0);
      }
      w.col4row[i] = j1;
      w.row4col[j1] = i;
    }
    nfree = static_cast<int64_t>(next.size());
    std::copy(next.begin(), next.end(), free_rows.begin());
  }
}

// Returns false when the problem is infeasible. Fast path: when every row's minimum lies in a
// different column that assignment is optimal (it attains the lower bound sum_i min_j c_ij) --
// the common case for near-exact symmetries. Otherwise JV initialisation, then shortest
// augmenting paths for the rows it left free.
bool solve_one(int64_t n, const double* cost, int64_t* out, LsaWork& w) {
  std::fill(w.path.begin(), w.path.end(), -1);
  std::fill(w.col4row.begin(), w.col4row.end(), -1);
  std::fill(w.row4col.begin(), w.row4col.end(), -1);
  bool distinct = true;
  for (int64_t i = 0; i < n; ++i) {
    const double* row = cost + i * n;
    int64_t best = 0;
    for (int64_t j = 1; j < n; ++j)
      if (row[j] < row[best]) best = j;
    if (!std::isfinite(row[best])) return false;
    if (w.row4col[best] != -1) distinct = false;
    w.row4col[best] = i;
    out[i] = best;
  }
  if (distinct) return true;
  std::fill(w.row4col.begin(), w.row4col.end(), -1);
  jv_init(n, cost, w);
  for (int64_t i = 0; i < n; ++i)
    w.u[i] = w.col4row[i] >= 0 ? cost[i * n + w.col4row[i]] - w.v[w.col4row[i]] : 0.0;
  for (int64_t cur = 0; cur < n; ++cur) {
    if (w.col4row[cur] != -1) continue;
    double min_val = 0;
    const int64_t sink = augmenting_path(n, cost, w, cur, &min_val);
    if (sink < 0) return false;
    w.u[cur] += min_val;
    for (int64_t i = 0; i < n; ++i)
      if (w.SR[i] && i != cur) w.u[i] += min_val - w.spc[w.col4row[i]];
    for (int64_t j = 0; j < n; ++j)
      if (w.SC[j]) w.v[j] -= min_val - w.spc[j];
    int64_t j = sink;
    while (true) {
      const int64_t i = w.path[j];
      w.row4col[j] = i;
      std::swap(w.col4row[i], j);
      if (i == cur) break;
    }
  }
  for (int64_t i = 0; i < n; ++i) out[i] = w.col4row[i];
  return true;
}

carray<int64_t> lsa_batched(carray<double> cost, int num_threads) {
  check_ndim(cost, 3, "cost");
  const int64_t P = cost.shape(0), n = cost.shape(1);
  if (cost.shape(2) != n) throw std::invalid_argument("cost must be [P, n, n] (square problems)");
  carray<int64_t> out({P, n});
  const double* cp = cost.data();
  int64_t* op = out.mutable_data();
  int64_t bad = -1;
  {
    py::gil_scoped_release release;
#pragma omp parallel num_threads(clamp_threads(num_threads))
    {
      LsaWork w(n);
#pragma omp for schedule(dynamic, 16)
      for (int64_t p = 0; p < P; ++p) {
        if (!solve_one(n, cp + p * n * n, op + p * n, w)) {
#pragma omp critical
          bad = p;
        }
      }
    }
  }
  if (bad >= 0) throw std::invalid_argument("cost matrix " + std::to_string(bad) + " is infeasible (NaN/inf)");
  return out;
}

// Neuron matching from precomputed inner products, for P problems at once:
//   gram: [P, n, n] <a_i, b_j> (float32 or float64), a2: [P, n] |a_i|^2, b2: [P, n] |b_j|^2,
//   mode: a MatchMode (0 perm / 1 sign / 2 scale)
//   -> (index [P, n] int64, scale [P, n] float64): P B has rows scale_i * b_{index_i}.
// The cost matrix (Family<MODE>::cost; symfast/ops/matching/__init__.py::cost_matrices in
// PyTorch) is built per problem in a thread-local buffer, so only the Gram matrices cross memory.
// Returns the index of an infeasible problem (NaN/inf inner products), or -1.
template <typename T, MatchMode MODE>
int64_t match_gram_kernel(int64_t P, int64_t n, const T* gp, const double* ap, const double* bp, int64_t* ip,
                          double* sp, int num_threads) {
  using F = Family<MODE>;
  int64_t bad = -1;
#pragma omp parallel num_threads(clamp_threads(num_threads))
  {
    LsaWork w(n);
    std::vector<double> cost(n * n);
#pragma omp for schedule(dynamic, 8)
    for (int64_t p = 0; p < P; ++p) {
      const T* g = gp + p * n * n;
      const double* a = ap + p * n;
      const double* b = bp + p * n;
      for (int64_t i = 0; i < n; ++i) {
        double* c = cost.data() + i * n;
        const T* gi = g + i * n;
        for (int64_t j = 0; j < n; ++j) c[j] = F::cost(a[i], b[j], double(gi[j]));
      }
      int64_t* out = ip + p * n;
      if (!solve_one(n, cost.data(), out, w)) {
#pragma omp critical
        bad = p;
        continue;
      }
      double* s = sp + p * n;
      for (int64_t i = 0; i < n; ++i) {
        bool ok;
        s[i] = F::scale(double(g[i * n + out[i]]), b[out[i]], &ok);
      }
    }
  }
  return bad;
}

template <typename T>
py::tuple match_gram(carray<T> gram, carray<double> a2, carray<double> b2, int mode, int num_threads) {
  check_ndim(gram, 3, "gram");
  check_ndim(a2, 2, "a2");
  check_ndim(b2, 2, "b2");
  const int64_t P = gram.shape(0), n = gram.shape(1);
  if (gram.shape(2) != n) throw std::invalid_argument("gram must be [P, n, n]");
  if (a2.shape(0) != P || a2.shape(1) != n || b2.shape(0) != P || b2.shape(1) != n)
    throw std::invalid_argument("a2 and b2 must be [P, n]");
  check_mode(mode);
  carray<int64_t> index({P, n});
  carray<double> scale({P, n});
  const T* gp = gram.data();
  const double* ap = a2.data();
  const double* bp = b2.data();
  int64_t* ip = index.mutable_data();
  double* sp = scale.mutable_data();
  int64_t bad = -1;
  {
    py::gil_scoped_release release;
    bad = SYMFAST_DISPATCH_MATCH_MODE(mode, [&] { return match_gram_kernel<T, MODE>(P, n, gp, ap, bp, ip, sp, num_threads); });
  }
  if (bad >= 0) throw std::invalid_argument("problem " + std::to_string(bad) + " has NaN/inf inner products");
  return py::make_tuple(index, scale);
}

// The whole matching observable for signed-permutation lifts, in cache, per (model, lift):
//   W: [M, H, k] (first layers, rows = neurons), src/sign: [G, k] with (W R_g)[:, t] = sign[g, t] W[:, src[g, t]]
//   -> (index [M, G, H] int64, scale [M, G, H] float64, rel2 [M, G] float64), where
//   rel2 = min_P ||W R_g - P W||_F^2 / ||W||_F^2 with residuals summed from the rows (exact zeros stay 0).
// Reference: symfast/ops/matching/reference.py (per model, SciPy).
// Returns the index m * G + g of an infeasible problem (NaN/inf), or -1.
template <typename T, MatchMode MODE>
int64_t match_signed_lifts_kernel(int64_t M, int64_t H, int64_t k, int64_t G, const T* wp, const int64_t* srcp,
                                  const double* sgp, int64_t* ip, double* sp, double* rp, int num_threads, Isa isa) {
  using F = Family<MODE>;
  int64_t bad = -1;
#pragma omp parallel num_threads(clamp_threads(num_threads))
  {
    LsaWork w(H);
    std::vector<double> wt(k * H), a(H * k), gram(H * H), cost(H * H), b2(H), a2(H);
#pragma omp for schedule(dynamic, 1)
    for (int64_t m = 0; m < M; ++m) {
      const T* Wm = wp + m * H * k;
      double norm2 = 0;
      for (int64_t j = 0; j < H; ++j) {  // W^T and row norms once per model, reused for all lifts
        double acc = 0;
        for (int64_t t = 0; t < k; ++t) {
          const double x = Wm[j * k + t];
          wt[t * H + j] = x;
          acc += x * x;
        }
        b2[j] = acc;
        norm2 += acc;
      }
      for (int64_t g = 0; g < G; ++g) {
        const int64_t pg = m * G + g;
        const int64_t* sg = srcp + g * k;
        const double* sv = sgp + g * k;
        for (int64_t i = 0; i < H; ++i) {
          double acc = 0;
          for (int64_t t = 0; t < k; ++t) {
            const double x = sv[t] * wt[sg[t] * H + i];
            a[i * k + t] = x;
            acc += x * x;
          }
          a2[i] = acc;
        }
        SYMFAST_ISA_CALL(isa, matching_isa, gram_rows(a.data(), wt.data(), gram.data(), H, k));
        for (int64_t i = 0; i < H; ++i) {
          const double* gi = gram.data() + i * H;
          double* c = cost.data() + i * H;
          for (int64_t j = 0; j < H; ++j) c[j] = F::cost(a2[i], b2[j], gi[j]);
        }
        int64_t* out = ip + pg * H;
        if (!solve_one(H, cost.data(), out, w)) {
#pragma omp critical
          bad = pg;
          continue;
        }
        double* s = sp + pg * H;
        double total = 0;
        for (int64_t i = 0; i < H; ++i) {
          const int64_t j = out[i];
          bool ok;
          s[i] = F::scale(gram[i * H + j], b2[j], &ok);
          if (!ok) {  // c = 0 is the optimum for a non-overlapping pair
            total += a2[i];
            continue;
          }
          double r = 0;
          for (int64_t t = 0; t < k; ++t) {
            const double d = a[i * k + t] - s[i] * wt[t * H + j];
            r += d * d;
          }
          total += r;
        }
        rp[pg] = norm2 > 0 ? total / norm2 : total;
      }
    }
  }
  return bad;
}

template <typename T>
py::tuple match_signed_lifts(carray<T> W, carray<int64_t> src, carray<double> sign, int mode, int num_threads,
                             const std::string& isa_request) {
  check_ndim(W, 3, "W");
  check_ndim(src, 2, "src");
  check_ndim(sign, 2, "sign");
  const int64_t M = W.shape(0), H = W.shape(1), k = W.shape(2), G = src.shape(0);
  if (src.shape(1) != k || sign.shape(0) != G || sign.shape(1) != k)
    throw std::invalid_argument("src and sign must be [G, k] with k = W.shape[2]");
  check_mode(mode);
  const Isa isa = resolve_isa(isa_request);
  const int64_t* srcp = src.data();
  for (int64_t i = 0; i < G * k; ++i)
    if (srcp[i] < 0 || srcp[i] >= k) throw std::invalid_argument("src index out of range");
  carray<int64_t> index({M, G, H});
  carray<double> scale({M, G, H});
  carray<double> rel2({M, G});
  const T* wp = W.data();
  const double* sgp = sign.data();
  int64_t* ip = index.mutable_data();
  double* sp = scale.mutable_data();
  double* rp = rel2.mutable_data();
  int64_t bad = -1;
  {
    py::gil_scoped_release release;
    bad = SYMFAST_DISPATCH_MATCH_MODE(
        mode, [&] { return match_signed_lifts_kernel<T, MODE>(M, H, k, G, wp, srcp, sgp, ip, sp, rp, num_threads, isa); });
  }
  if (bad >= 0) throw std::invalid_argument("problem " + std::to_string(bad) + " is infeasible (NaN/inf)");
  return py::make_tuple(index, scale, rel2);
}

}  // namespace

// Bindings, called from module.cpp.
void bind_matching(py::module_& m) {
  py::enum_<MatchMode>(m, "MatchMode", "Matching modes (the `mode` code): permutations, signed, positively scaled")
      .value("perm", PERM)
      .value("sign", SIGN)
      .value("scale", SCALE);
  def_f32_f64(m, "match_signed_lifts", &match_signed_lifts<float>, &match_signed_lifts<double>,
              "Matching observable for signed-permutation lifts of {dtype} W [M, H, k] (costs in float64): "
              "-> (index [M, G, H] int64, scale [M, G, H] f64, rel2 [M, G] f64)",
              py::arg("W").noconvert(), py::arg("src").noconvert(), py::arg("sign").noconvert(), py::arg("mode"),
              py::arg("num_threads") = 1, py::arg("isa") = "auto");
  def_f32_f64(m, "match_gram", &match_gram<float>, &match_gram<double>,
              "Batched neuron matching from {dtype} Gram matrices (costs in float64): "
              "-> (index [P, n] int64, scale [P, n] float64)",
              py::arg("gram").noconvert(), py::arg("a2").noconvert(), py::arg("b2").noconvert(), py::arg("mode"),
              py::arg("num_threads") = 1);
  m.def("lsa_batched", &lsa_batched, py::arg("cost").noconvert(), py::arg("num_threads") = 1,
        "Batched linear sum assignment: cost [P, n, n] float64 -> [P, n] int64 column per row");
}

}  // namespace symfast
