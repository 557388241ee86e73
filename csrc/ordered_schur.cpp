// Batched ordered real Schur decomposition and multi-cluster reordering (CPU).
//   W: [M, n, n] float64 -> Q: [M, n, n], T: [M, n, n], eig: [M, n, 2] (re, im),
//   info: [M, 4] (reconstruction error, orthogonality error, failed swaps, sector failures)
// W = Q T Q^T, Q orthogonal, T quasi-upper-triangular with 1x1 / 2x2 (standard
// form) blocks, reordered by a per-row key with a stable "leftmost block within
// tol of the largest remaining key" rule (so ties never trigger swaps).
// Reference: symfast/ops/ordered_schur/reference.py (scipy.linalg.schur + a
// Python loop of dtrexc).
//
// LAPACK choice. We call SciPy's bundled LAPACK (OpenBLAS/reference LAPACK
// shipped inside every scipy wheel) through the function pointers SciPy exports
// as PyCapsules in `scipy.linalg.cython_lapack.__pyx_capi__` (and `cython_blas`
// for dgemm). The pointers are resolved here, in C++, by importing those
// modules once (under the GIL, on first use) rather than passed in from Python
// as integers: the capsule name carries the C signature and is checked by
// PyCapsule_GetPointer, nothing goes through ctypes, and the extension has no
// link-time dependency on any BLAS/LAPACK (scipy is already a dependency, so a
// fresh machine or pip's isolated build needs nothing extra; no second OpenBLAS
// whose thread pool could fight with scipy's or torch's).
#include <Python.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "common.h"

namespace symfast {
namespace {

using select2_t = int (*)(double*, double*);
using dgees_t = void (*)(char*, char*, select2_t, int*, double*, int*, int*, double*, double*, double*,
                         int*, double*, int*, int*, int*);
using dtrexc_t = void (*)(char*, int*, double*, int*, double*, int*, int*, int*, double*, int*);
using dgemm_t = void (*)(char*, char*, int*, int*, int*, double*, double*, int*, double*, int*, double*,
                         double*, int*);

struct Lapack {
  dgees_t dgees = nullptr;
  dtrexc_t dtrexc = nullptr;
  dgemm_t dgemm = nullptr;
};

void* capsule_ptr(const char* module, const char* name) {
  py::object capi = py::module_::import(module).attr("__pyx_capi__");
  py::object cap = capi[py::str(name)];
  PyObject* c = cap.ptr();
  void* p = PyCapsule_GetPointer(c, PyCapsule_GetName(c));
  if (p == nullptr) throw py::error_already_set();
  return p;
}

// Called with the GIL held (before any gil_scoped_release).
const Lapack& lapack() {
  static Lapack L;
  static bool ready = false;
  if (!ready) {
    L.dgees = reinterpret_cast<dgees_t>(capsule_ptr("scipy.linalg.cython_lapack", "dgees"));
    L.dtrexc = reinterpret_cast<dtrexc_t>(capsule_ptr("scipy.linalg.cython_lapack", "dtrexc"));
    L.dgemm = reinterpret_cast<dgemm_t>(capsule_ptr("scipy.linalg.cython_blas", "dgemm"));
    ready = true;
  }
  return L;
}

int select_none(double*, double*) { return 0; }

// Column-major n x n helpers.
inline double& at(double* a, int n, int i, int j) { return a[i + (size_t)j * n]; }

inline int block_size_at(const double* T, int n, int i) {
  return (i + 1 < n && T[(i + 1) + (size_t)i * n] != 0.0) ? 2 : 1;
}

// Stable reorder of the rows [lo, hi) of (T, Q) by the per-row key (descending):
// repeatedly take the leftmost remaining block whose key is within tol of the
// largest remaining key and move it (dtrexc) to the front of the unsorted part.
// Keys travel with their rows. A rejected swap (dtrexc INFO = 1) leaves the block
// where dtrexc stopped; it is counted and sorting continues past it.
int reorder_range(const Lapack& L, double* T, double* Q, int n, double* key, double tol, int lo, int hi,
                  double* work, bool wantq) {
  int fails = 0;
  int p = lo;
  char compq = wantq ? 'V' : 'N';
  while (p < hi) {
    double kmax = -INFINITY;
    for (int i = p; i < hi;) {
      kmax = std::max(kmax, key[i]);
      i += block_size_at(T, n, i);
    }
    int f = p;
    for (int i = p; i < hi;) {
      if (key[i] >= kmax - tol) {
        f = i;
        break;
      }
      i += block_size_at(T, n, i);
    }
    if (f != p) {
      int s = block_size_at(T, n, f);
      int ifst = f + 1, ilst = p + 1, info = 0;
      L.dtrexc(&compq, &n, T, &n, Q, &n, &ifst, &ilst, work, &info);
      int l = ilst - 1;
      if (info == 0 || info == 1) {
        // the block's rows [f, f+s) now sit at [l, l+s); the rows between shifted down
        if (l < f) std::rotate(key + l, key + f, key + f + s);
      }
      if (info != 0) ++fails;
    }
    p += block_size_at(T, n, p);
  }
  return fails;
}

// err_recon = ||Q T Q^T - A||_F / max(||A||_F, tiny), err_orth = ||Q^T Q - I||_F
void check_factorisation(const Lapack& L, const double* A, double* T, double* Q, int n, double* tmp,
                         double* tmp2, double* out) {
  char nn = 'N', tt = 'T';
  double one = 1.0, zero = 0.0;
  L.dgemm(&nn, &nn, &n, &n, &n, &one, Q, &n, T, &n, &zero, tmp, &n);     // Q T
  L.dgemm(&nn, &tt, &n, &n, &n, &one, tmp, &n, Q, &n, &zero, tmp2, &n);  // Q T Q^T
  double num = 0, den = 0;
  for (size_t k = 0; k < (size_t)n * n; ++k) {
    double d = tmp2[k] - A[k];
    num += d * d;
    den += A[k] * A[k];
  }
  L.dgemm(&tt, &nn, &n, &n, &n, &one, Q, &n, Q, &n, &zero, tmp, &n);  // Q^T Q
  double orth = 0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      double d = tmp[i + (size_t)j * n] - (i == j ? 1.0 : 0.0);
      orth += d * d;
    }
  out[0] = std::sqrt(num) / std::max(std::sqrt(den), 1e-300);
  out[1] = std::sqrt(orth);
}

// Eigenvalues read off the final T (2x2 blocks in standard form [a b; c a], bc < 0).
void block_eigs(const double* T, int n, double* eig) {
  for (int i = 0; i < n;) {
    if (block_size_at(T, n, i) == 1) {
      eig[2 * i] = T[i + (size_t)i * n];
      eig[2 * i + 1] = 0.0;
      i += 1;
    } else {
      double a = T[i + (size_t)i * n], b = T[i + (size_t)(i + 1) * n];
      double c = T[(i + 1) + (size_t)i * n], d = T[(i + 1) + (size_t)(i + 1) * n];
      double m = 0.5 * (a + d), disc = 0.25 * (a - d) * (a - d) + b * c;
      double im = std::sqrt(std::max(-disc, 0.0));
      eig[2 * i] = m;
      eig[2 * i + 1] = im;
      eig[2 * i + 2] = m;
      eig[2 * i + 3] = -im;
      i += 2;
    }
  }
}

void to_colmajor(const double* src, double* dst, int n) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) dst[i + (size_t)j * n] = src[(size_t)i * n + j];
}
void to_rowmajor(const double* src, double* dst, int n) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) dst[(size_t)i * n + j] = src[i + (size_t)j * n];
}

// W: [M, n, n] row-major. alpha > 0: move the R sector (|lambda| >= alpha rho)
// to the front first, then sort inside each sector; alpha <= 0: one sort.
py::tuple ordered_schur_f64(carray<double> W, double alpha, double tie_tol, int num_threads) {
  check_ndim(W, 3, "W");
  const int M = (int)W.shape(0), n = (int)W.shape(1);
  if (W.shape(2) != n) throw std::invalid_argument("W must be [M, n, n]");
  const Lapack& L = lapack();
  carray<double> Qo({M, n, n}), To({M, n, n}), Eo({M, n, 2}), Io({M, 4});
  carray<int64_t> Bo({M, 2});  // (size of R sector, 0) bookkeeping
  const double* wp = W.data();
  double *qp = Qo.mutable_data(), *tp = To.mutable_data(), *ep = Eo.mutable_data(), *ip = Io.mutable_data();
  int64_t* bp = Bo.mutable_data();
  {
    py::gil_scoped_release release;
#pragma omp parallel num_threads(clamp_threads(num_threads))
    {
      const size_t nn = (size_t)n * n;
      int lwork = std::max(1, 8 * n);
      std::vector<double> A(nn), T(nn), Q(nn), tmp(nn), tmp2(nn), wr(n), wi(n), key(n), work(lwork + n);
      std::vector<int> bwork(n);
#pragma omp for schedule(dynamic, 1)
      for (int m = 0; m < M; ++m) {
        to_colmajor(wp + m * nn, A.data(), n);
        std::memcpy(T.data(), A.data(), nn * sizeof(double));
        char jobvs = 'V', sort = 'N';
        int sdim = 0, info = 0, nl = n;
        L.dgees(&jobvs, &sort, &select_none, &nl, T.data(), &nl, &sdim, wr.data(), wi.data(), Q.data(), &nl,
                work.data(), &lwork, bwork.data(), &info);
        double* inf = ip + 4 * m;
        if (info != 0) {
          inf[0] = inf[1] = NAN;
          inf[2] = -1;
          inf[3] = info;
          continue;
        }
        double rho = 0;
        for (int i = 0; i < n; ++i) rho = std::max(rho, std::hypot(wr[i], wi[i]));
        int fails = 0, sector_fails = 0, nR = n;
        const double tol = tie_tol * rho;
        if (alpha > 0) {  // within tol of the cut counts as R (an orthogonal W at alpha = 1: all R)
          for (int i = 0; i < n; ++i) key[i] = std::hypot(wr[i], wi[i]) >= alpha * rho - tol ? 1.0 : 0.0;
          sector_fails = reorder_range(L, T.data(), Q.data(), n, key.data(), 0.5, 0, n, work.data(), true);
          nR = 0;
          while (nR < n && key[nR] > 0.5) ++nR;
          bool stuck = false;  // an R row left behind a C row
          for (int i = nR; i < n; ++i) stuck = stuck || key[i] > 0.5;
          if (stuck && sector_fails == 0) sector_fails = 1;
        }
        // moduli of the (moved) blocks, read off the current T
        std::vector<double> e(2 * n);
        block_eigs(T.data(), n, e.data());
        for (int i = 0; i < n; ++i) key[i] = std::hypot(e[2 * i], e[2 * i + 1]);
        fails += reorder_range(L, T.data(), Q.data(), n, key.data(), tol, 0, nR, work.data(), true);
        fails += reorder_range(L, T.data(), Q.data(), n, key.data(), tol, nR, n, work.data(), true);
        for (int j = 0; j < n; ++j)
          for (int i = j + 2; i < n; ++i) at(T.data(), n, i, j) = 0.0;
        check_factorisation(L, A.data(), T.data(), Q.data(), n, tmp.data(), tmp2.data(), inf);
        inf[2] = fails;
        inf[3] = sector_fails;
        bp[2 * m] = nR;
        bp[2 * m + 1] = 0;
        block_eigs(T.data(), n, ep + 2 * m * n);
        to_rowmajor(T.data(), tp + m * nn, n);
        to_rowmajor(Q.data(), qp + m * nn, n);
      }
    }
  }
  return py::make_tuple(Qo, To, Eo, Io, Bo);
}

// MATLAB ordschur semantics: clusters: [M, n] per-row labels (both rows of a 2x2
// block equal); the highest label ends top-left, then the next, ...; stable
// inside a label. U, T: [M, n, n] row-major real Schur pairs.
py::tuple ordschur_f64(carray<double> U, carray<double> T, carray<double> clusters, int num_threads) {
  check_ndim(U, 3, "U");
  check_ndim(T, 3, "T");
  check_ndim(clusters, 2, "clusters");
  const int M = (int)T.shape(0), n = (int)T.shape(1);
  const std::string sM = std::to_string(M), sn = std::to_string(n);
  if (T.shape(2) != n)
    throw std::invalid_argument("T must be [M, n, n], got [" + sM + ", " + sn + ", " + std::to_string(T.shape(2)) + "]");
  if (U.shape(0) != M || U.shape(1) != n || U.shape(2) != n)
    throw std::invalid_argument("U must be [M, n, n] = [" + sM + ", " + sn + ", " + sn + "] (T's shape), got [" +
                                std::to_string(U.shape(0)) + ", " + std::to_string(U.shape(1)) + ", " +
                                std::to_string(U.shape(2)) + "]");
  if (clusters.shape(0) != M || clusters.shape(1) != n)
    throw std::invalid_argument("clusters must be [M, n] = [" + sM + ", " + sn + "], got [" +
                                std::to_string(clusters.shape(0)) + ", " + std::to_string(clusters.shape(1)) + "]");
  const Lapack& L = lapack();
  carray<double> Qo({M, n, n}), To({M, n, n}), Eo({M, n, 2}), Io({M, 4});
  const double *up = U.data(), *tp_in = T.data(), *cp = clusters.data();
  double *qp = Qo.mutable_data(), *tp = To.mutable_data(), *ep = Eo.mutable_data(), *ip = Io.mutable_data();
  {
    py::gil_scoped_release release;
#pragma omp parallel num_threads(clamp_threads(num_threads))
    {
      const size_t nn = (size_t)n * n;
      std::vector<double> A(nn), Tm(nn), Q(nn), tmp(nn), tmp2(nn), key(n), work(n);
      char nn_ = 'N', tt = 'T';
      double one = 1.0, zero = 0.0;
      int nl = n;
#pragma omp for schedule(dynamic, 1)
      for (int m = 0; m < M; ++m) {
        to_colmajor(up + m * nn, Q.data(), n);
        to_colmajor(tp_in + m * nn, Tm.data(), n);
        // the matrix the pair represents, for the final check: A = U T U^T
        L.dgemm(&nn_, &nn_, &nl, &nl, &nl, &one, Q.data(), &nl, Tm.data(), &nl, &zero, tmp.data(), &nl);
        L.dgemm(&nn_, &tt, &nl, &nl, &nl, &one, tmp.data(), &nl, Q.data(), &nl, &zero, A.data(), &nl);
        for (int i = 0; i < n; ++i) key[i] = cp[(size_t)m * n + i];
        int fails = reorder_range(L, Tm.data(), Q.data(), n, key.data(), 0.5, 0, n, work.data(), true);
        double* inf = ip + 4 * m;
        check_factorisation(L, A.data(), Tm.data(), Q.data(), n, tmp.data(), tmp2.data(), inf);
        inf[2] = fails;
        inf[3] = 0;
        block_eigs(Tm.data(), n, ep + 2 * m * n);
        to_rowmajor(Tm.data(), tp + m * nn, n);
        to_rowmajor(Q.data(), qp + m * nn, n);
      }
    }
  }
  return py::make_tuple(Qo, To, Eo, Io);
}

}  // namespace

// Bindings, called from module.cpp.
void bind_ordered_schur(py::module_& m) {
  m.def("ordered_schur_f64", &ordered_schur_f64, py::arg("W").noconvert(), py::arg("alpha"), py::arg("tie_tol"),
        py::arg("num_threads") = 1,
        "Batched ordered real Schur [M,n,n] -> (Q, T, eig[M,n,2], info[M,4], sector[M,2])");
  m.def("ordschur_f64", &ordschur_f64, py::arg("U").noconvert(), py::arg("T").noconvert(), py::arg("clusters").noconvert(),
        py::arg("num_threads") = 1, "Batched multi-cluster reorder of real Schur pairs (MATLAB ordschur)");
}

}  // namespace symfast
