/* Fused element-wise kernels of the gated RNN's training step, for lib/gated.py.
 *
 * The training step of K stacked gated RNNs (Zucchet et al. 2023, eq. 2) is, feature-major
 * (every activation a matrix of neurons x columns, the columns ordered (t, b), C = T B):
 *
 *     z_m = W_in_m X,  z_x = W_in_x X,  h_t = lam * h_{t-1} + z_m * z_x     (input gates, scan)
 *     o = [W_out_m; W_out_x] h,  y = D (o_m * o_x)                           (output gates, readout)
 *
 * The output gates are two (n x n) by (n x C) products, left to BLAS.  Everything else is
 * element-wise or a product with a tiny inner dimension (d_x = d + 1, d_out = d), which BLAS runs
 * far below its speed; here each is one pass over its rows:
 *
 *   gates_scan        z_m, z_x (recomputed, never stored), their product and the recurrence
 *   gates_scan_back   the adjoint recurrence a_t += lam a_{t+1} (in place), dL/dlam =
 *                     sum_{t >= 1} a_t h_{t-1}, and dL/dW_in = (a * z_x, a * z_m) X^T with z_m,
 *                     z_x recomputed
 *   readout           y = D (o_m * o_x)
 *   readout_back      dL/do = (g_p * o_x, g_p * o_m) with g_p = D^T g_y, and dL/dD = g_y (o_m * o_x)^T
 *
 * Shapes (row-major, contiguous): X (K, dx, C), W_in (K, 2n, dx) (rows 0..n-1 are W_in_m),
 * lam (K, n), h and a (K, n, C), o and gO (K, 2n, C), D (K, dout, n), y and gy (K, dout, C),
 * gW_in (K, 2n, dx), glam (K, n), gD (K, dout, n).  Each function exists for float ("_f32")
 * and double ("_f64"); they return 0, or 1 when scratch memory could not be had.
 * Threads split the (member, neuron) rows (readout: the members).
 */
#include <stdlib.h>
#include <string.h>

enum { SCAN, SCAN_BACK, READOUT_BACK };   /* the row-wise passes of rows_f32 / rows_f64 */

#define DEFINE_KERNELS(T, SUF)                                                                    \
                                                                                                  \
/* z_m and z_x of neuron row (wm, wx) for every column: dx axpys over the columns */              \
static void zrow_##SUF(const T *Xk, const T *wm, const T *wx, long dx, long C, T *zm, T *zx)      \
{                                                                                                 \
    for (long c = 0; c < C; ++c) { zm[c] = 0; zx[c] = 0; }                                        \
    for (long j = 0; j < dx; ++j) {                                                               \
        const T *xj = Xk + j * C;                                                                 \
        const T a = wm[j], b = wx[j];                                                             \
        _Pragma("omp simd")                                                                       \
        for (long c = 0; c < C; ++c) { zm[c] += a * xj[c]; zx[c] += b * xj[c]; }                  \
    }                                                                                             \
}                                                                                                 \
                                                                                                  \
/* one neuron row (member k, neuron i) of each pass; zm, zx: scratch rows of C entries */     \
static void scan_row_##SUF(const T *Xk, const T *wm, const T *wx, T l, T *hr, long dx, long Tn, long B, \
                           T *zm, T *zx)                                                          \
{                                                                                                 \
    zrow_##SUF(Xk, wm, wx, dx, Tn * B, zm, zx);                                                   \
    _Pragma("omp simd")                                                                           \
    for (long b = 0; b < B; ++b) hr[b] = zm[b] * zx[b];                                           \
    for (long t = 1; t < Tn; ++t) {                                                               \
        T *cur = hr + t * B;                                                                      \
        const T *prev = cur - B, *pm = zm + t * B, *px = zx + t * B;                              \
        _Pragma("omp simd")                                                                       \
        for (long b = 0; b < B; ++b) cur[b] = pm[b] * px[b] + l * prev[b];                        \
    }                                                                                             \
}                                                                                                 \
                                                                                                  \
static void scan_back_row_##SUF(const T *Xk, const T *wm, const T *wx, T l, const T *hr, T *ar,   \
                                T *gm, T *gx, T *gl_out, long dx, long Tn, long B, T *zm, T *zx)  \
{                                                                                                 \
    const long C = Tn * B;                                                                        \
    T gl = 0;                                                                                     \
    for (long t = Tn - 2; t >= 0; --t) {     /* a_{t+1} is final: it meets h_t */                 \
        T *cur = ar + t * B;                                                                      \
        const T *nxt = cur + B, *ht = hr + t * B;                                                 \
        _Pragma("omp simd reduction(+:gl)")                                                       \
        for (long b = 0; b < B; ++b) { gl += nxt[b] * ht[b]; cur[b] += l * nxt[b]; }              \
    }                                                                                             \
    *gl_out = gl;                                                                                 \
    zrow_##SUF(Xk, wm, wx, dx, C, zm, zx);                                                        \
    _Pragma("omp simd")                                                                           \
    for (long c = 0; c < C; ++c) { const T g = ar[c], m = zm[c]; zm[c] = g * zx[c]; zx[c] = g * m; } \
    for (long j = 0; j < dx; ++j) {                                                               \
        const T *xj = Xk + j * C;                                                                 \
        T sm = 0, sx = 0;                                                                         \
        _Pragma("omp simd reduction(+:sm,sx)")                                                    \
        for (long c = 0; c < C; ++c) { sm += zm[c] * xj[c]; sx += zx[c] * xj[c]; }               \
        gm[j] = sm; gx[j] = sx;                                                                   \
    }                                                                                             \
}                                                                                                 \
                                                                                                  \
static void readout_back_row_##SUF(const T *om, const T *ox, const T *Dk, const T *gyk, T *gm,    \
                                   T *gx, T *gDk, long n, long dout, long C, T *gp)               \
{                                                                                                 \
    for (long c = 0; c < C; ++c) gp[c] = 0;                                                       \
    for (long q = 0; q < dout; ++q) {                                                             \
        const T dq = Dk[q * n], *gq = gyk + q * C;                                                \
        T s = 0;                                                                                  \
        _Pragma("omp simd reduction(+:s)")                                                        \
        for (long c = 0; c < C; ++c) { gp[c] += dq * gq[c]; s += gq[c] * om[c] * ox[c]; }         \
        gDk[q * n] = s;                                                                           \
    }                                                                                             \
    _Pragma("omp simd")                                                                           \
    for (long c = 0; c < C; ++c) { gm[c] = gp[c] * ox[c]; gx[c] = gp[c] * om[c]; }                \
}                                                                                                 \
                                                                                                  \
/* the three row-wise passes over the K n (member, neuron) rows, split among threads, each        \
   thread with its own two scratch rows of C entries */                                          \
static int rows_##SUF(int pass, const T *X, const T *Win, const T *lam, T *h, T *a, T *gWin, T *glam, \
                      const T *o, const T *D, const T *gy, T *gO, T *gD,                          \
                      long K, long n, long dx, long dout, long Tn, long B, int threads)           \
{                                                                                                 \
    const long C = Tn * B;                                                                        \
    int fail = 0;                                                                                 \
    _Pragma("omp parallel num_threads(threads) if(threads > 1) reduction(|:fail)")                \
    {                                                                                             \
        T *zm = malloc(2 * C * sizeof(T));                                                        \
        if (!zm) fail = 1;                                                                        \
        T *zx = zm + C;                                                                           \
        _Pragma("omp for schedule(static)")                                                       \
        for (long r = 0; r < K * n; ++r) {                                                        \
            if (!zm) continue;                                                                    \
            const long k = r / n, i = r % n, m = k * 2 * n + i, x = m + n;  /* rows of W_in, o */ \
            if (pass == SCAN)                                                                     \
                scan_row_##SUF(X + k * dx * C, Win + m * dx, Win + x * dx, lam[r], h + r * C, dx, Tn, B, zm, zx); \
            else if (pass == SCAN_BACK)                                                           \
                scan_back_row_##SUF(X + k * dx * C, Win + m * dx, Win + x * dx, lam[r], h + r * C, a + r * C, \
                                    gWin + m * dx, gWin + x * dx, glam + r, dx, Tn, B, zm, zx);   \
            else                                                                                  \
                readout_back_row_##SUF(o + m * C, o + x * C, D + k * dout * n + i, gy + k * dout * C, \
                                       gO + m * C, gO + x * C, gD + k * dout * n + i, n, dout, C, zm); \
        }                                                                                         \
        free(zm);                                                                                 \
    }                                                                                             \
    return fail;                                                                                  \
}                                                                                                 \
                                                                                                  \
int gates_scan_##SUF(const T *X, const T *Win, const T *lam, T *h, long K, long n, long dx,       \
                     long Tn, long B, int threads)                                                \
{                                                                                                 \
    return rows_##SUF(SCAN, X, Win, lam, h, 0, 0, 0, 0, 0, 0, 0, 0, K, n, dx, 0, Tn, B, threads); \
}                                                                                                 \
                                                                                                  \
int gates_scan_back_##SUF(const T *X, const T *Win, const T *lam, const T *h, T *a, T *gWin,      \
                          T *glam, long K, long n, long dx, long Tn, long B, int threads)         \
{                                                                                                 \
    return rows_##SUF(SCAN_BACK, X, Win, lam, (T *)h, a, gWin, glam, 0, 0, 0, 0, 0, K, n, dx, 0, Tn, B, \
                      threads);                                                                   \
}                                                                                                 \
                                                                                                  \
int readout_##SUF(const T *o, const T *D, T *y, long K, long n, long dout, long C, int threads)   \
{                                                                                                 \
    int fail = 0;                                                                                 \
    _Pragma("omp parallel for num_threads(threads) if(threads > 1 && K > 1) reduction(|:fail)")   \
    for (long k = 0; k < K; ++k) {                                                                \
        T *p = malloc(C * sizeof(T));                                                             \
        if (!p) { fail = 1; continue; }                                                           \
        T *yk = y + k * dout * C;                                                                 \
        memset(yk, 0, dout * C * sizeof(T));                                                      \
        for (long i = 0; i < n; ++i) {                                                            \
            const T *om = o + (k * 2 * n + i) * C, *ox = o + (k * 2 * n + n + i) * C;             \
            _Pragma("omp simd")                                                                   \
            for (long c = 0; c < C; ++c) p[c] = om[c] * ox[c];                                    \
            for (long q = 0; q < dout; ++q) {                                                     \
                const T dq = D[(k * dout + q) * n + i];                                           \
                T *yq = yk + q * C;                                                               \
                _Pragma("omp simd")                                                               \
                for (long c = 0; c < C; ++c) yq[c] += dq * p[c];                                  \
            }                                                                                     \
        }                                                                                         \
        free(p);                                                                                  \
    }                                                                                             \
    return fail;                                                                                  \
}                                                                                                 \
                                                                                                  \
int readout_back_##SUF(const T *o, const T *D, const T *gy, T *gO, T *gD, long K, long n,        \
                       long dout, long C, int threads)                                            \
{                                                                                                 \
    return rows_##SUF(READOUT_BACK, 0, 0, 0, 0, 0, 0, 0, o, D, gy, gO, gD, K, n, 0, dout, C, 1, threads); \
}

DEFINE_KERNELS(float, f32)
DEFINE_KERNELS(double, f64)
