/* The element-wise part of the gated RNN's training step, for lib/gated_step.py.
 *
 * The training loss of K stacked gated RNNs (Zucchet et al. 2023, eq. 2) is, feature-major
 * (every activation a matrix of neurons x columns, the columns ordered (t, b), C = T B):
 *
 *     z_m = W_in_m X,  z_x = W_in_x X,  h_t = lam * h_{t-1} + z_m * z_x     (input gates, scan)
 *     o = [W_out_m; W_out_x] h,  y = D (o_m * o_x),  L = 1/2 mean (y - Y)^2   (output gates, readout)
 *
 * The output gates are (2n x n) by (n x C) products, left to BLAS (three a step, with the
 * backward's two).  Everything else is element-wise or a product with a tiny inner dimension
 * (d_x = d + 1, d_out = d), which BLAS runs far below its speed; here each is one pass:
 *
 *   pack           a batch (K, B, T, d) feature-major: (K, rows, T B), rows d.. filled with 1
 *   gates_scan     lam = exp(-exp(nu)); z_m, z_x (in registers, never stored), their product and
 *                  the recurrence, one neuron row at a time
 *   readout_loss   y = D (o_m * o_x), r = y - Y, the losses L_k and g_y = r / (d_out C); then
 *                  dL/do = (g_p * o_x ; g_p * o_m) with g_p = D^T g_y, and dL/dD = g_y (o_m * o_x)^T
 *   gates_scan_back  from a = dL/dh, one neuron row at a time: the adjoint recurrence
 *                  a_t += lam a_{t+1} (in place, from the end) with dL/dnu = -exp(nu) lam
 *                  sum_{t >= 1} a_t h_{t-1}; then (the row of a now in cache) dL/dW_in =
 *                  (a * z_x ; a * z_m) X^T with z_m, z_x recomputed in registers
 *
 * The inner loops are written on explicit SIMD vectors (GCC/Clang vector extensions: 32 bytes,
 * 8 floats or 4 doubles, unaligned loads), over the B columns of one time step; the d_x loop of
 * the input gates is unrolled for d_x <= 8 (the cases of the book: d_x = 5 and 7) so that the
 * gate and gradient accumulators stay in registers.  (Left to the auto-vectoriser, the same loops
 * with a runtime d_x inside ran 2-3x slower than streaming passes over whole rows.)
 *
 * Shapes (row-major, contiguous): X (K, dx, C); Wm, Wx, gWm, gWx (K, n, dx); nu, lam, gnu (K, n);
 * h, a (K, n, C); o, gO (K, 2n, C') (rows 0..n-1: o_m); D, gD (K, dout, n); Y, gy (K, dout, C');
 * losses (K).  C' = C, or B when only the last step is read.  Each function exists for float
 * ("_f32") and double ("_f64"); they return 0 (or 1: no memory for a scratch block).  The kernels
 * are written once, for a type T: this file includes itself once with T = float and once with
 * T = double (the second half below), and F(name) is name_f32 or name_f64.
 * Threads split the (member, neuron) rows, and the readout the (member, column block) pairs; every
 * sum is taken in an order that does not depend on the number of threads.
 */
#ifndef T            /* the first pass: what both types share, then this file once per type */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))
#define CB 2048                                 /* columns of one readout block (pass 1) */
#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define F(name) CAT(name, SUF)                  /* name_f32 or name_f64 */

/* d_x as a compile-time constant for 1..8 (the call ROW(..., DX) is inlined with it; the switch
   sits inside the threads' loop, so that the constant reaches the code each thread runs) */
#define DX_CASES(ROW, ...)                                                                        \
    switch (dx) {                                                                                \
    case 1: ROW(__VA_ARGS__, 1); break;  case 2: ROW(__VA_ARGS__, 2); break;                     \
    case 3: ROW(__VA_ARGS__, 3); break;  case 4: ROW(__VA_ARGS__, 4); break;                     \
    case 5: ROW(__VA_ARGS__, 5); break;  case 6: ROW(__VA_ARGS__, 6); break;                     \
    case 7: ROW(__VA_ARGS__, 7); break;  case 8: ROW(__VA_ARGS__, 8); break;                     \
    default: ROW(__VA_ARGS__, dx); }

/* one row r of a row pass, with d_x the constant DX (cases of DX_CASES) */
#define SCAN_ROW(X, Wm, Wx, l, h, r, n, Tn, B, C, DX)                                             \
    F(scan_row)(X + r / n * (DX) * C, Wm + r * (DX), Wx + r * (DX), l, h + r * C, DX, Tn, B, C)
#define BACK_ROW(X, Wm, Wx, lam, h, a, gWm, gWx, gl, r, n, Tn, B, C, DX)                          \
    F(back_row)(X + r / n * (DX) * C, Wm + r * (DX), Wx + r * (DX), lam[r], h + r * C, a + r * C, \
                gWm + r * (DX), gWx + r * (DX), &gl, DX, Tn, B, C)

#define T float
#define SUF f32
#define EXP expf
#include "gated.c"                   /* this file again, from its second half */
#undef T
#undef SUF
#undef EXP

#define T double
#define SUF f64
#define EXP exp
#include "gated.c"                   /* this file again, from its second half */

#else                /* the kernels for one type T (float or double), suffix SUF, exponential EXP */

/* this type's vector helpers: vec (32 bytes of T), its unaligned alias vecu, VL (T's a vector),
   load, store and horizontal sum; each named vec_f32, ... by F */
#define vec F(vec)
#define vecu F(vecu)
#define VL F(VL)
#define ld F(ld)
#define st F(st)
#define hsum F(hsum)
typedef T vec __attribute__((vector_size(32)));
typedef T vecu __attribute__((vector_size(32), aligned(sizeof(T)), may_alias));
enum { VL = 32 / sizeof(T) };
INLINE vec ld(const T *p) { return *(const vecu *)p; }
INLINE void st(T *p, vec v) { *(vecu *)p = v; }
INLINE T hsum(vec v) { T s = 0; for (int u = 0; u < VL; ++u) s += v[u]; return s; }

int F(pack)(const T *src, T *dst, long K, long B, long Tn, long d, long rows)
{
    const long C = Tn * B;
    for (long k = 0; k < K; ++k) {
        const T *s = src + k * B * Tn * d;
        T *o = dst + k * rows * C;
        for (long b = 0; b < B; ++b)
            for (long t = 0; t < Tn; ++t)
                for (long j = 0; j < d; ++j) o[j * C + t * B + b] = s[(b * Tn + t) * d + j];
        for (long j = d; j < rows; ++j)
            for (long c = 0; c < C; ++c) o[j * C + c] = 1;
    }
    return 0;
}

/* one neuron row: h_t = lam h_{t-1} + (wm . x_t)(wx . x_t), two vectors of columns at a time */
INLINE void F(scan_row)(const T *Xk, const T *wm, const T *wx, T l, T *hr, const long dx,
                        long Tn, long B, long C)
{
    enum { V = VL };
    for (long t = 0; t < Tn; ++t) {
        T *cur = hr + t * B;
        const T *prev = cur - B, *xt = Xk + t * B;
        long b = 0;
        for (; b + 2 * V <= B; b += 2 * V) {
            vec m0 = {0}, m1 = {0}, x0 = {0}, x1 = {0};
            for (long j = 0; j < dx; ++j) {
                const vec v0 = ld(xt + j * C + b), v1 = ld(xt + j * C + b + V);
                m0 += wm[j] * v0; m1 += wm[j] * v1; x0 += wx[j] * v0; x1 += wx[j] * v1;
            }
            vec h0 = m0 * x0, h1 = m1 * x1;
            if (t) { h0 += l * ld(prev + b); h1 += l * ld(prev + b + V); }
            st(cur + b, h0); st(cur + b + V, h1);
        }
        for (; b < B; ++b) {
            T m = 0, x = 0;
            for (long j = 0; j < dx; ++j) { const T v = xt[j * C + b]; m += wm[j] * v; x += wx[j] * v; }
            cur[b] = t ? m * x + l * prev[b] : m * x;
        }
    }
}

/* one neuron row of the backward: the adjoint a_t (in place, from the last step to the first)
   with sum_t a_{t+1} h_t; then, from the first step on, the input-gate gradients accumulated a
   vector of columns at a time (the row of a is in cache from the first pass) */
INLINE void F(back_row)(const T *Xk, const T *wm, const T *wx, T l, const T *hr, T *ar,
                        T *gm, T *gx, T *glam, const long dx, long Tn, long B, long C)
{
    enum { V = VL };
    const long nv = C / V * V;
    vec gl = {0};
    T gls = 0;
    for (long t = Tn - 2; t >= 0; --t) {     /* a_{t+1} is final: it meets h_t */
        T *cur = ar + t * B;
        const T *nxt = cur + B, *ht = hr + t * B;
        long b = 0;
        for (; b + V <= B; b += V) {
            const vec an = ld(nxt + b);
            gl += an * ld(ht + b);
            st(cur + b, ld(cur + b) + l * an);
        }
        for (; b < B; ++b) { gls += nxt[b] * ht[b]; cur[b] += l * nxt[b]; }
    }
    *glam = gls + hsum(gl);
    vec am[dx], ax[dx];
    T ams[dx], axs[dx];
    for (long j = 0; j < dx; ++j) { am[j] = (vec){0}; ax[j] = (vec){0}; ams[j] = 0; axs[j] = 0; }
    for (long c = 0; c < nv; c += V) {
        const vec a = ld(ar + c);
        vec m = {0}, x = {0};
        for (long j = 0; j < dx; ++j) {
            const vec v = ld(Xk + j * C + c);
            m += wm[j] * v; x += wx[j] * v;
        }
        const vec gzm = a * x, gzx = a * m;
        for (long j = 0; j < dx; ++j) {
            const vec v = ld(Xk + j * C + c);
            am[j] += gzm * v; ax[j] += gzx * v;
        }
    }
    for (long c = nv; c < C; ++c) {
        const T a = ar[c];
        T m = 0, x = 0;
        for (long j = 0; j < dx; ++j) { const T v = Xk[j * C + c]; m += wm[j] * v; x += wx[j] * v; }
        for (long j = 0; j < dx; ++j) { const T v = Xk[j * C + c]; ams[j] += a * x * v; axs[j] += a * m * v; }
    }
    for (long j = 0; j < dx; ++j) { gm[j] = ams[j] + hsum(am[j]); gx[j] = axs[j] + hsum(ax[j]); }
}

int F(gates_scan)(const T *X, const T *Wm, const T *Wx, const T *nu, T *lam, T *h, long K,
                  long n, long dx, long Tn, long B, int threads)
{
    const long C = Tn * B;
    #pragma omp parallel for schedule(static) num_threads(threads) if(threads > 1)
    for (long r = 0; r < K * n; ++r) {
        const T l = EXP(-EXP(nu[r]));
        lam[r] = l;
        DX_CASES(SCAN_ROW, X, Wm, Wx, l, h, r, n, Tn, B, C)    /* dx a constant inside */
    }
    return 0;
}

int F(gates_scan_back)(const T *X, const T *Wm, const T *Wx, const T *nu, const T *lam,
                       const T *h, T *a, T *gWm, T *gWx, T *gnu, long K, long n, long dx,
                          long Tn, long B, int threads)
{
    const long C = Tn * B;
    #pragma omp parallel for schedule(static) num_threads(threads) if(threads > 1)
    for (long r = 0; r < K * n; ++r) {
        T gl;
        DX_CASES(BACK_ROW, X, Wm, Wx, lam, h, a, gWm, gWx, gl, r, n, Tn, B, C)
        gnu[r] = -EXP(nu[r]) * lam[r] * gl;                /* dlam/dnu = -exp(nu) lam */
    }
    return 0;
}

/* pass 1 of the readout on columns c0 .. c0 + nc of member k: gy <- (D (o_m * o_x) - Y) s;
   returns the block's sum of squared residuals */
static double F(readout_block)(const T *ok, const T *Dk, const T *Yk, T *gyk, long n, long dout,
                               long C, long c0, long nc, T s)
{
    enum { V = VL };
    const long nv = nc / V * V;
    for (long q = 0; q < dout; ++q) memset(gyk + q * C + c0, 0, nc * sizeof(T));
    for (long i = 0; i < n; ++i) {
        const T *om = ok + i * C + c0, *ox = ok + (n + i) * C + c0;
        for (long q = 0; q < dout; ++q) {
            const T dq = Dk[q * n + i];
            T *yq = gyk + q * C + c0;
            for (long c = 0; c < nv; c += V)
                st(yq + c, ld(yq + c) + dq * (ld(om + c) * ld(ox + c)));
            for (long c = nv; c < nc; ++c) yq[c] += dq * (om[c] * ox[c]);
        }
    }
    vec sv = {0};
    T ss = 0;
    for (long q = 0; q < dout; ++q) {
        T *yq = gyk + q * C + c0;
        const T *Yq = Yk + q * C + c0;
        for (long c = 0; c < nv; c += V) {
            const vec r = ld(yq + c) - ld(Yq + c);
            sv += r * r;
            st(yq + c, r * s);
        }
        for (long c = nv; c < nc; ++c) { const T r = yq[c] - Yq[c]; ss += r * r; yq[c] = r * s; }
    }
    double sum = ss;
    for (int u = 0; u < V; ++u) sum += sv[u];
    return sum;
}

/* pass 2 on one neuron row i of member k: gO rows (g_p * o_x, g_p * o_m), dL/dD[:, i] */
static void F(readout_back_row)(const T *om, const T *ox, const T *Dk, const T *gyk, T *gm,
                                T *gx, T *gDk, long n, long dout, long C)
{
    enum { V = VL, QMAX = 8 };
    const long nv = C / V * V;
    for (long q0 = 0; q0 < dout; q0 += QMAX) {       /* up to QMAX outputs a pass */
        const long nq = dout - q0 < QMAX ? dout - q0 : QMAX, first = q0 == 0;
        T dq[QMAX], ss[QMAX];
        vec sq[QMAX];
        for (long q = 0; q < nq; ++q) { dq[q] = Dk[(q0 + q) * n]; sq[q] = (vec){0}; ss[q] = 0; }
        const T *gy0 = gyk + q0 * C;
        for (long c = 0; c < nv; c += V) {
            const vec vm = ld(om + c), vx = ld(ox + c), p = vm * vx;
            vec gp = first ? (vec){0} : ld(gm + c);
            for (long q = 0; q < nq; ++q) {
                const vec g = ld(gy0 + q * C + c);
                gp += dq[q] * g; sq[q] += g * p;
            }
            if (q0 + nq < dout) st(gm + c, gp);      /* g_p so far, finished next pass */
            else { st(gm + c, gp * vx); st(gx + c, gp * vm); }
        }
        for (long c = nv; c < C; ++c) {
            const T p = om[c] * ox[c];
            T gp = first ? 0 : gm[c];
            for (long q = 0; q < nq; ++q) { const T g = gy0[q * C + c]; gp += dq[q] * g; ss[q] += g * p; }
            if (q0 + nq < dout) gm[c] = gp;
            else { gm[c] = gp * ox[c]; gx[c] = gp * om[c]; }
        }
        for (long q = 0; q < nq; ++q) gDk[(q0 + q) * n] = ss[q] + hsum(sq[q]);
    }
}

int F(readout_loss)(const T *o, const T *D, const T *Y, T *gy, T *losses, T *gO, T *gD,
                    long K, long n, long dout, long C, int threads)
{
    const long nb = (C + CB - 1) / CB;
    const T s = (T)1 / (T)(dout * C);
    double *part = malloc(K * nb * sizeof(double));
    if (!part) return 1;
    #pragma omp parallel for schedule(static) num_threads(threads) if(threads > 1)
    for (long kb = 0; kb < K * nb; ++kb) {
        const long k = kb / nb, c0 = kb % nb * CB;
        part[kb] = F(readout_block)(o + k * 2 * n * C, D + k * dout * n, Y + k * dout * C,
                                    gy + k * dout * C, n, dout, C, c0, C - c0 < CB ? C - c0 : CB, s);
    }
    for (long k = 0; k < K; ++k) {
        double sum = 0;
        for (long b = 0; b < nb; ++b) sum += part[k * nb + b];
        losses[k] = (T)(0.5 * sum * (double)s);
    }
    free(part);
    if (!gO) return 0;
    #pragma omp parallel for schedule(static) num_threads(threads) if(threads > 1)
    for (long r = 0; r < K * n; ++r) {
        const long k = r / n, i = r % n, m = k * 2 * n + i;
        F(readout_back_row)(o + m * C, o + (m + n) * C, D + k * dout * n + i, gy + k * dout * C,
                            gO + m * C, gO + (m + n) * C, gD + k * dout * n + i, n, dout, C);
    }
    return 0;
}


#undef vec
#undef vecu
#undef VL
#undef ld
#undef st
#undef hsum
#endif
