/* Fused Krylov kernel for lib/krylov.py (see its docstring for the maths and the contract).
 *
 * Given W (n x n, row-major, float64), the step factor s, and the first rows Q[0] (kq x n)
 * and P[0] (kp x n), it fills, for j = 1 .. T-1,
 *
 *     Q[j][r] = s * W   Q[j-1][r] + BQ[j][r]     (the Krylov sequence of W,   as rows)
 *     P[j][r] = s * W^T P[j-1][r] + BP[j][r]     (the Krylov sequence of W^T, as rows)
 *
 * where the optional addends BQ (T x kq x n) and BP (T x kp x n; row 0 of each unused, NULL
 * for none) make a sequence affine: the adjoint recursion of a backward pass,
 * V_k = s W^T V_{k+1} + G_k, run from the end.
 *
 * reading W ONCE per step for both sequences: row i of W gives the i-th entry of every
 * W q (a dot product) and adds p_i * (row i) to every W^T p (an axpy).  A product of W with a
 * few vectors is limited by the traffic of streaming W, so this halves the cost of two BLAS
 * matrix-vector products.  Rows are taken four at a time (four dot products share one read of
 * q, and each W^T p accumulator is read and written once per four rows).  Threads split the
 * rows; each thread accumulates its own partial W^T p, summed after a barrier.
 */
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#define RB 4

static void four_rows(const double *W, long n, long i0, double s,
                      const double *q, double *qn, const double *bq, long kq,
                      const double *p, double *z, long kp)
{
    const double *w0 = W + i0 * n, *w1 = w0 + n, *w2 = w1 + n, *w3 = w2 + n;
    long r0 = 0;
    if (kq >= 1 && kp >= 1) {               /* the first q and the first p share the pass */
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        double c0 = s * p[i0], c1 = s * p[i0 + 1], c2 = s * p[i0 + 2], c3 = s * p[i0 + 3];
        #pragma omp simd reduction(+:a0,a1,a2,a3)
        for (long k = 0; k < n; ++k) {
            double x = q[k];
            a0 += w0[k] * x; a1 += w1[k] * x; a2 += w2[k] * x; a3 += w3[k] * x;
            z[k] += c0 * w0[k] + c1 * w1[k] + c2 * w2[k] + c3 * w3[k];
        }
        qn[i0] = s * a0; qn[i0 + 1] = s * a1; qn[i0 + 2] = s * a2; qn[i0 + 3] = s * a3;
        if (bq) { qn[i0] += bq[i0]; qn[i0 + 1] += bq[i0 + 1]; qn[i0 + 2] += bq[i0 + 2]; qn[i0 + 3] += bq[i0 + 3]; }
        r0 = 1;
    }
    for (long r = r0; r < kq; ++r) {
        const double *qr = q + r * n;
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        #pragma omp simd reduction(+:a0,a1,a2,a3)
        for (long k = 0; k < n; ++k) {
            double x = qr[k];
            a0 += w0[k] * x; a1 += w1[k] * x; a2 += w2[k] * x; a3 += w3[k] * x;
        }
        double *o = qn + r * n + i0;
        o[0] = s * a0; o[1] = s * a1; o[2] = s * a2; o[3] = s * a3;
        if (bq) {
            const double *b = bq + r * n + i0;
            o[0] += b[0]; o[1] += b[1]; o[2] += b[2]; o[3] += b[3];
        }
    }
    for (long r = r0; r < kp; ++r) {
        const double *pr = p + r * n;
        double *zr = z + r * n;
        double c0 = s * pr[i0], c1 = s * pr[i0 + 1], c2 = s * pr[i0 + 2], c3 = s * pr[i0 + 3];
        #pragma omp simd
        for (long k = 0; k < n; ++k)
            zr[k] += c0 * w0[k] + c1 * w1[k] + c2 * w2[k] + c3 * w3[k];
    }
}

static void one_row(const double *W, long n, long i, double s,
                    const double *q, double *qn, const double *bq, long kq,
                    const double *p, double *z, long kp)
{
    const double *w = W + i * n;
    for (long r = 0; r < kq; ++r) {
        const double *qr = q + r * n;
        double a = 0;
        for (long k = 0; k < n; ++k) a += w[k] * qr[k];
        qn[r * n + i] = s * a + (bq ? bq[r * n + i] : 0.0);
    }
    for (long r = 0; r < kp; ++r) {
        double c = s * p[r * n + i];
        double *zr = z + r * n;
        for (long k = 0; k < n; ++k) zr[k] += c * w[k];
    }
}

/* Returns 0 on success, 1 when the scratch space could not be allocated.
 *
 * One barrier per step.  Thread t owns the rows [lo_t, hi_t) of W: it writes those entries of
 * every new q, and a partial W^T p over ALL entries into its own buffer.  After the barrier
 * it sums the partial buffers over the entries it owns; the next step needs only those
 * entries of p from it (p_i multiplies row i).  Two sets of partial buffers alternate, so a
 * thread that runs ahead into the next step never overwrites a buffer another thread is
 * still summing: to reuse a set it must pass the next barrier, which waits for that sum. */
int krylov_pair(const double *W, long n, double s, long T,
                double *Q, long kq, double *P, long kp,
                const double *BQ, const double *BP, int nthreads)
{
    if (T < 2) return 0;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > n / RB) nthreads = n / RB > 0 ? (int)(n / RB) : 1;
    double *part = NULL;
    size_t m = (size_t)(kp * n);
    if (kp > 0) {
        part = (double *)malloc(sizeof(double) * 2 * (size_t)nthreads * m);
        if (!part) return 1;
    }
    #pragma omp parallel num_threads(nthreads)
    {
        int tid = omp_get_thread_num(), nt = omp_get_num_threads();
        long nblk = n / RB;
        long lo = nblk * tid / nt * RB, hi = nblk * (tid + 1) / nt * RB;
        if (tid == nt - 1) hi = n;               /* the last thread also owns the leftover rows */
        long hi4 = lo + (hi - lo) / RB * RB;
        for (long j = 1; j < T; ++j) {
            const double *q = Q + (j - 1) * kq * n;
            double *qn = Q + j * kq * n;
            const double *p = P + (j - 1) * kp * n;
            double *set = part + (size_t)(j & 1) * (size_t)nt * m;
            double *z = kp > 0 ? set + (size_t)tid * m : NULL;
            const double *bq = BQ ? BQ + j * kq * n : NULL;
            if (kp > 0) memset(z, 0, sizeof(double) * m);
            for (long i = lo; i < hi4; i += RB) four_rows(W, n, i, s, q, qn, bq, kq, p, z, kp);
            for (long i = hi4; i < hi; ++i) one_row(W, n, i, s, q, qn, bq, kq, p, z, kp);
            #pragma omp barrier
            if (kp > 0) {                        /* the entries of the new p that this thread owns */
                double *pn = P + j * kp * n;
                const double *bn = BP ? BP + j * kp * n : NULL;
                for (long r = 0; r < kp; ++r)
                    for (long k = lo + r * n; k < hi + r * n; ++k) {
                        double v = bn ? bn[k] : 0.0;
                        for (int t = 0; t < nt; ++t) v += set[(size_t)t * m + k];
                        pn[k] = v;
                    }
            }
        }
    }
    free(part);
    return 0;
}
