/* Element-wise parts and recurrences of the Fig. 4 networks' training step, for lib/recurrent_step.py.
 *
 * A network of lib.recurrent_cells (embedding, LRU layers, readout) is trained on batches of B
 * sequences of T steps; every activation is a matrix of M = B T rows (ordered (b, t): the layout
 * of a (B, T, width) tensor, so that step t of sequence b follows step t - 1) by its features.
 * The products with the layers' weight matrices are left to BLAS (torch.mm); what is here is the
 * rest, each one pass:
 *
 *   glu_fwd / glu_bwd     y = sigmoid(a_m) * a_x and its backward (a_m, a_x: two column blocks)
 *   lru_prep              the layer's real weights from its parameters: W_B = [g B_re; g B_im]
 *                         (g = exp(gamma_log)), W_C = [C_re, -C_im], lam = exp(-exp(nu) + i exp(theta))
 *   crecur_fwd            the complex diagonal recurrence h_t = lam h_{t-1} + p_t, states split as
 *                         [Re | Im] columns (2n a row), along each sequence's T rows
 *   crecur_bwd            its adjoint a_t = g_t + conj(lam) a_{t+1} (in place) and dL/dlam
 *                         (as dL/dRe lam, dL/dIm lam) = sum_t a_t conj(h_{t-1})
 *   skip_bwd              of y~ = ... + D * x: dL/dx = dL/dy~ * D and dL/dD = column sums
 *   lru_prep_bwd          dL/dparameters from dL/dW_B, dL/dW_C, dL/dlam
 *   lstm_fwd / lstm_bwd,  the LSTM and GRU recurrences and their adjoints (below)
 *   gru_fwd / gru_bwd
 *
 * Each function exists for float ("_f32") and double ("_f64") and returns 0 (or 1: no memory for
 * a scratch block).  The kernels are written once, for a type T: this file includes itself once
 * with T = float and once with T = double (its second half), and F(name) is name_f32 or name_f64.
 */
#ifndef T            /* the first pass: what both types share, then this file once per type */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SIG_CHUNK 256                           /* columns of a row whose sigmoids are formed at once */

/* s = 1 / (1 + exp(-a)) on n entries.  float: eight at a time with the exp of Cephes' expf
   (range reduction by ln 2 in two parts, a degree-6 polynomial, the power of two in the exponent
   bits; relative error about 1e-7, as libm's), since GCC does not vectorise calls of expf; double
   (the exact checks): libm's exp. */
typedef float v8f __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));

static inline v8f vsel(v8i mask, v8f a, v8f b) { return (v8f)((mask & (v8i)a) | (~mask & (v8i)b)); }

static inline v8f vexpf(v8f x)
{
    const v8f hi = (v8f){} + 88.3762626647949f, lo = (v8f){} - 87.3365478515625f;
    x = vsel(x > hi, hi, x);
    x = vsel(x < lo, lo, x);
    const v8f magic = (v8f){} + 12582912.0f;                  /* 1.5 * 2^23: rounds to an integer */
    const v8f nf = (x * 1.44269504088896341f + magic) - magic;
    const v8f r = x - nf * 0.693359375f + nf * 2.12194440e-4f;
    v8f p = (v8f){} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const v8i e = (__builtin_convertvector(nf, v8i) + 127) << 23;
    return p * (v8f)e;
}

static void sigmoid_f32(const float *a, float *s, long n)
{
    long j = 0;
    for (; j + 8 <= n; j += 8) {
        v8f v;
        memcpy(&v, a + j, sizeof v);
        v = 1.0f / (1.0f + vexpf(-v));
        memcpy(s + j, &v, sizeof v);
    }
    if (j < n) {                                /* the tail through the same formula */
        v8f v = {0};
        memcpy(&v, a + j, (n - j) * sizeof(float));
        v = 1.0f / (1.0f + vexpf(-v));
        memcpy(s + j, &v, (n - j) * sizeof(float));
    }
}

static void sigmoid_f64(const double *a, double *s, long n)
{
    for (long j = 0; j < n; ++j) s[j] = 1.0 / (1.0 + exp(-a[j]));
}

/* t = tanh(a) on n entries.  float: Cephes' tanhf, eight at a time (an odd polynomial for
   |a| < 0.625, 1 - 2 / (exp(2|a|) + 1) with a's sign beyond); double: libm's tanh. */
static inline v8f vtanhf(v8f x)
{
    const v8i sign = (v8i)x & ((v8i){} + (-2147483647 - 1));     /* the sign bits */
    const v8f ax = (v8f)((v8i)x & ~sign), z = x * x;
    v8f p = (v8f){} - 5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    const v8f small = p * z * x + x;
    const v8f big = (v8f)((v8i)(1.0f - 2.0f / (vexpf(ax + ax) + 1.0f)) | sign);
    return vsel(ax < 0.625f, small, big);
}

static void tanh_f32(const float *a, float *t, long n)
{
    long j = 0;
    for (; j + 8 <= n; j += 8) {
        v8f v;
        memcpy(&v, a + j, sizeof v);
        v = vtanhf(v);
        memcpy(t + j, &v, sizeof v);
    }
    if (j < n) {
        v8f v = {0};
        memcpy(&v, a + j, (n - j) * sizeof(float));
        v = vtanhf(v);
        memcpy(t + j, &v, (n - j) * sizeof(float));
    }
}

static void tanh_f64(const double *a, double *t, long n)
{
    for (long j = 0; j < n; ++j) t[j] = tanh(a[j]);
}

/* the vectors and register tiles of the LSTM and GRU layers' small GEMM (below) */
#if defined(__AVX512F__)
#define RVB 64                                  /* bytes a vector: 16 floats, 8 doubles */
#define RROWS 8                                 /* rows of a tile: 16 accumulators of 32 registers */
#define KEEP(v) __asm__("" : "+v"(v))           /* v stays in a register */
#elif defined(__AVX__)
#define RVB 32
#define RROWS 6                                 /* 12 accumulators of 16 registers */
#define KEEP(v) __asm__("" : "+x"(v))
#else
#define RVB 32
#define RROWS 6
#define KEEP(v) ((void)0)
#endif

#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)
#define F(name) CAT(name, SUF)                  /* name_f32 or name_f64 */

#define T float
#define SUF f32
#define EXP expf
#define COS cosf
#define SIN sinf
#include "recurrent.c"               /* this file again, from its second half */
#undef T
#undef SUF
#undef EXP
#undef COS
#undef SIN

#define T double
#define SUF f64
#define EXP exp
#define COS cos
#define SIN sin
#include "recurrent.c"

#else                /* the kernels for one type T (float or double), suffix SUF; EXP, COS, SIN of T */

int F(glu_fwd)(const T *am, const T *ax, T *y, long M, long w, long sa, long sx)
{
    T s[SIG_CHUNK];
    for (long m = 0; m < M; ++m)
        for (long j0 = 0; j0 < w; j0 += SIG_CHUNK) {
            const long nj = w - j0 < SIG_CHUNK ? w - j0 : SIG_CHUNK;
            const T *pm = am + m * sa + j0, *px = ax + m * sx + j0;
            T *py = y + m * w + j0;
            F(sigmoid)(pm, s, nj);
            for (long j = 0; j < nj; ++j) py[j] = s[j] * px[j];
        }
    return 0;
}

/* dam, dax: the layout of am, ax (row strides sa, sx); dy: (M, w) */
int F(glu_bwd)(const T *am, const T *ax, const T *dy, T *dam, T *dax, long M, long w, long sa,
               long sx)
{
    T s[SIG_CHUNK];
    for (long m = 0; m < M; ++m)
        for (long j0 = 0; j0 < w; j0 += SIG_CHUNK) {
            const long nj = w - j0 < SIG_CHUNK ? w - j0 : SIG_CHUNK;
            const T *pm = am + m * sa + j0, *px = ax + m * sx + j0, *pd = dy + m * w + j0;
            T *qm = dam + m * sa + j0, *qx = dax + m * sx + j0;
            F(sigmoid)(pm, s, nj);
            for (long j = 0; j < nj; ++j) {
                qm[j] = pd[j] * px[j] * s[j] * ((T)1 - s[j]);
                qx[j] = pd[j] * s[j];
            }
        }
    return 0;
}

/* B_re, B_im (n, w); gamma_log, nu, theta (n); C_re, C_im (w, n) -> W_B (2n, w), W_C (w, 2n),
   lam (2n) = [Re | Im] */
int F(lru_prep)(const T *B_re, const T *B_im, const T *gamma_log, const T *C_re, const T *C_im,
                const T *nu, const T *theta, T *W_B, T *W_C, T *lam, long n, long w)
{
    for (long i = 0; i < n; ++i) {
        const T g = EXP(gamma_log[i]), r = EXP(-EXP(nu[i])), phi = EXP(theta[i]);
        for (long j = 0; j < w; ++j) { W_B[i * w + j] = g * B_re[i * w + j]; W_B[(n + i) * w + j] = g * B_im[i * w + j]; }
        lam[i] = r * COS(phi);
        lam[n + i] = r * SIN(phi);
    }
    for (long j = 0; j < w; ++j)
        for (long i = 0; i < n; ++i) { W_C[j * 2 * n + i] = C_re[j * n + i]; W_C[j * 2 * n + n + i] = -C_im[j * n + i]; }
    return 0;
}

/* p, h (B T, 2n) rows (b, t); h may be p (in place) */
int F(crecur_fwd)(const T *p, T *h, const T *lam, long Bn, long Tn, long n)
{
    const T *lr = lam, *li = lam + n;
    for (long b = 0; b < Bn; ++b) {
        const T *pb = p + b * Tn * 2 * n;
        T *hb = h + b * Tn * 2 * n;
        for (long i = 0; i < 2 * n; ++i) hb[i] = pb[i];
        for (long t = 1; t < Tn; ++t) {
            const T *prev = hb + (t - 1) * 2 * n, *pt = pb + t * 2 * n;
            T *cur = hb + t * 2 * n;
            for (long i = 0; i < n; ++i) {
                const T hr = prev[i], hi = prev[n + i];
                cur[i] = lr[i] * hr - li[i] * hi + pt[i];
                cur[n + i] = lr[i] * hi + li[i] * hr + pt[n + i];
            }
        }
    }
    return 0;
}

/* a: dL/dh on entry, the adjoint (= dL/dp) on return; glam (2n) = [dL/dRe lam | dL/dIm lam] */
int F(crecur_bwd)(T *a, const T *h, const T *lam, T *glam, long Bn, long Tn, long n)
{
    const T *lr = lam, *li = lam + n;
    for (long i = 0; i < 2 * n; ++i) glam[i] = 0;
    for (long b = 0; b < Bn; ++b) {
        T *ab = a + b * Tn * 2 * n;
        const T *hb = h + b * Tn * 2 * n;
        for (long t = Tn - 1; t >= 1; --t) {      /* a_t is final: it meets h_{t-1} */
            const T *at = ab + t * 2 * n, *hp = hb + (t - 1) * 2 * n;
            T *ap = ab + (t - 1) * 2 * n;
            for (long i = 0; i < n; ++i) {
                const T ar = at[i], ai = at[n + i], hr = hp[i], hi = hp[n + i];
                glam[i] += ar * hr + ai * hi;
                glam[n + i] += ai * hr - ar * hi;
                ap[i] += lr[i] * ar + li[i] * ai;
                ap[n + i] += lr[i] * ai - li[i] * ar;
            }
        }
    }
    return 0;
}

/* y~ = ... + D * x: dx = dy * D (written), dD = sum_m dy * x */
int F(skip_bwd)(const T *dy, const T *x, const T *D, T *dx, T *dD, long M, long w)
{
    for (long j = 0; j < w; ++j) dD[j] = 0;
    for (long m = 0; m < M; ++m) {
        const T *py = dy + m * w, *px = x + m * w;
        T *qx = dx + m * w;
        for (long j = 0; j < w; ++j) { dD[j] += py[j] * px[j]; qx[j] = py[j] * D[j]; }
    }
    return 0;
}

/* dW_B (2n, w), dW_C (w, 2n), glam (2n) -> dB_re, dB_im (n, w), dgamma_log, dnu, dtheta (n),
   dC_re, dC_im (w, n) */
int F(lru_prep_bwd)(const T *dW_B, const T *dW_C, const T *glam, const T *B_re, const T *B_im,
                    const T *gamma_log, const T *nu, const T *theta, const T *lam, T *dB_re,
                       T *dB_im, T *dgamma, T *dC_re, T *dC_im, T *dnu, T *dtheta, long n, long w)
{
    for (long i = 0; i < n; ++i) {
        const T g = EXP(gamma_log[i]), lr = lam[i], li = lam[n + i], gr = glam[i], gi = glam[n + i];
        T s = 0;
        for (long j = 0; j < w; ++j) {
            const T dr = dW_B[i * w + j], di = dW_B[(n + i) * w + j];
            dB_re[i * w + j] = g * dr;
            dB_im[i * w + j] = g * di;
            s += B_re[i * w + j] * dr + B_im[i * w + j] * di;
        }
        dgamma[i] = g * s;
        dnu[i] = -EXP(nu[i]) * (gr * lr + gi * li);          /* d lam / d nu = -exp(nu) lam */
        dtheta[i] = EXP(theta[i]) * (gi * lr - gr * li);     /* d lam / d theta = i exp(theta) lam */
    }
    for (long j = 0; j < w; ++j)
        for (long i = 0; i < n; ++i) { dC_re[j * n + i] = dW_C[j * 2 * n + i]; dC_im[j * n + i] = -dW_C[j * 2 * n + n + i]; }
    return 0;
}

/* LSTM and GRU layers (torch.nn.LSTM / torch.nn.GRU, gate orders (i, f, g, o) and (r, z, n)):
 * the recurrence over time with the input projections Xp = X W_ih^T + b_ih given (M, G w), rows
 * (b, t).  Each step's recurrent product h_{t-1} W_hh^T (B x w by w x G w) is a small GEMM here
 * (gemm_acc); the backward returns dL/dXp (M, G w) and dL/d(h_{t-1} W_hh^T + b_hh) one row earlier
 * ("shifted": row (b, t) holds step t + 1, the last row of a sequence 0), so that the weight
 * gradients are single products, dW_ih = dXp^T X and dW_hh = dHs^T H, left to torch.mm. */

/* this type's vectors: rv (RVB bytes, the recurrent GEMM's) and hv (32 bytes), their unaligned
   aliases rvu, hvu, and their loads and stores; each named rv_f32, ... by F */
#define rv F(rv)
#define rvu F(rvu)
#define rld F(rld)
#define rst F(rst)
#define hv F(hv)
#define hvu F(hvu)
#define hld F(hld)
#define hst F(hst)
typedef T rv __attribute__((vector_size(RVB)));
typedef T rvu __attribute__((vector_size(RVB), aligned(sizeof(T)), may_alias));
static inline rv rld(const T *p) { return *(const rvu *)p; }
static inline void rst(T *p, rv v) { *(rvu *)p = v; }
typedef T hv __attribute__((vector_size(32)));
typedef T hvu __attribute__((vector_size(32), aligned(sizeof(T)), may_alias));
static inline hv hld(const T *p) { return *(const hvu *)p; }
static inline void hst(T *p, hv v) { *(hvu *)p = v; }

/* one tile: C[0..R, 0..NV V) = (acc ? C : 0) + A[0..R, 0..K) Bm[0..K, 0..NV V), R x NV
   accumulators in registers (R, NV constants once inlined; KEEP holds the NV vectors of Bm in
   registers: folded into each multiply-add as a memory operand they cost R loads more a step).
   Every entry of C is summed over k = 0, 1, ..., K - 1 in order, whatever the tile, so the
   tiling changes no sum (the compiler's choice of fused or separate multiply-adds aside) */
static inline __attribute__((always_inline)) void F(tile)(const T *A, long lda, const T *Bm,
        long N, T *C, long ldc, long K, int acc, const int R, const int NV)
{
    enum { V = RVB / sizeof(T) };
    rv s[RROWS][2];
    for (int r = 0; r < R; ++r)
        for (int u = 0; u < NV; ++u) s[r][u] = acc ? rld(C + r * ldc + u * V) : (rv){0};
    for (long k = 0; k < K; ++k) {
        rv b[2];
        for (int u = 0; u < NV; ++u) { b[u] = rld(Bm + k * N + u * V); KEEP(b[u]); }
        for (int r = 0; r < R; ++r) {
            const T a = A[r * lda + k];
            for (int u = 0; u < NV; ++u) s[r][u] += a * b[u];
        }
    }
    for (int r = 0; r < R; ++r)
        for (int u = 0; u < NV; ++u) rst(C + r * ldc + u * V, s[r][u]);
}

/* the Mr rows of one panel of NV vectors: tiles of RROWS rows, the rest by tiles of 4, 2, 1 */
static inline __attribute__((always_inline)) void F(panel)(const T *A, long lda, const T *Bm,
        long N, T *C, long ldc, long Mr, long K, int acc, const int NV)
{
    long m = 0;
    for (; m + RROWS <= Mr; m += RROWS) F(tile)(A + m * lda, lda, Bm, N, C + m * ldc, ldc, K, acc, RROWS, NV);
    if (m + 4 <= Mr) { F(tile)(A + m * lda, lda, Bm, N, C + m * ldc, ldc, K, acc, 4, NV); m += 4; }
    if (m + 2 <= Mr) { F(tile)(A + m * lda, lda, Bm, N, C + m * ldc, ldc, K, acc, 2, NV); m += 2; }
    if (m < Mr) F(tile)(A + m * lda, lda, Bm, N, C + m * ldc, ldc, K, acc, 1, NV);
}

/* C[m, :] = (acc ? C[m, :] : 0) + sum_k A[m, k] Bm[k, :]; A (Mr x K, row stride lda), Bm (K x N)
   contiguous, C (row stride ldc): panels of two vectors of columns (RVB bytes a vector: 64 with
   AVX-512, else 32; Bm's panel stays in L1 across the rows), one of one vector, then the last
   columns by 32-byte vectors and one by one */
static void F(gemm_acc)(const T *A, long lda, const T *Bm, long N, T *C, long ldc, long Mr,
                        long K, int acc)
{
    enum { V = RVB / sizeof(T), V2 = 32 / sizeof(T) };
    long n = 0;
    for (; n + 2 * V <= N; n += 2 * V) F(panel)(A, lda, Bm + n, N, C + n, ldc, Mr, K, acc, 2);
    if (n + V <= N) { F(panel)(A, lda, Bm + n, N, C + n, ldc, Mr, K, acc, 1); n += V; }
    for (long m = 0; m < Mr; ++m) {
        const T *a0 = A + m * lda;
        T *c0 = C + m * ldc;
        long j = n;
        for (; j + V2 <= N; j += V2) {            /* 32-byte vectors, then one column at a time */
            hv v = acc ? hld(c0 + j) : (hv){0};
            for (long k = 0; k < K; ++k) v += a0[k] * hld(Bm + k * N + j);
            hst(c0 + j, v);
        }
        for (; j < N; ++j) {
            T v = acc ? c0[j] : 0;
            for (long k = 0; k < K; ++k) v += a0[k] * Bm[k * N + j];
            c0[j] = v;
        }
    }
}

/* P (Bn x G w) = b_hh + h_prev W_hh^T, h_prev the rows t - 1 of H (none at t = 0) */
static void F(hidden_proj)(const T *H, const T *WT, const T *b_hh, T *P, long Bn, long Tn,
                           long t, long w, long G)
{
    for (long b = 0; b < Bn; ++b) memcpy(P + b * G * w, b_hh, G * w * sizeof(T));
    if (t > 0) F(gemm_acc)(H + (t - 1) * w, Tn * w, WT, G * w, P, G * w, Bn, w, 1);
}

static T *F(transpose)(const T *W, long rows, long cols)
{
    T *WT = malloc(rows * cols * sizeof(T));
    if (WT) for (long i = 0; i < rows; ++i) for (long j = 0; j < cols; ++j) WT[j * rows + i] = W[i * cols + j];
    return WT;
}

/* one GRU step of one row: xp, hp its input and hidden projections (3w each), s (4w) keeps r, z, n
   and hn = W_hn h_{t-1} + b_hn, h the new state, hprev the old one (NULL at t = 0) */
static void F(gru_cell)(const T *xp, const T *hp, T *s, T *h, const T *hprev, long w)
{
    for (long j = 0; j < 2 * w; ++j) s[j] = xp[j] + hp[j];
    F(sigmoid)(s, s, 2 * w);                                  /* r, z */
    for (long j = 0; j < w; ++j) { s[3 * w + j] = hp[2 * w + j]; s[2 * w + j] = xp[2 * w + j] + s[j] * hp[2 * w + j]; }
    F(tanh)(s + 2 * w, s + 2 * w, w);                         /* n */
    for (long j = 0; j < w; ++j) h[j] = (1 - s[w + j]) * s[2 * w + j] + (hprev ? s[w + j] * hprev[j] : 0);
}

/* one LSTM step of one row: xp, hp (4w each), s (6w) keeps i, f, g, o, c and tanh(c), cprev the
   old cell state (NULL at t = 0) */
static void F(lstm_cell)(const T *xp, const T *hp, T *s, T *h, const T *cprev, long w)
{
    for (long j = 0; j < 4 * w; ++j) s[j] = xp[j] + hp[j];
    F(sigmoid)(s, s, 2 * w);                                  /* i, f */
    F(tanh)(s + 2 * w, s + 2 * w, w);                         /* g */
    F(sigmoid)(s + 3 * w, s + 3 * w, w);                      /* o */
    for (long j = 0; j < w; ++j) s[4 * w + j] = s[j] * s[2 * w + j] + (cprev ? s[w + j] * cprev[j] : 0);
    F(tanh)(s + 4 * w, s + 5 * w, w);                         /* tanh(c) */
    for (long j = 0; j < w; ++j) h[j] = s[3 * w + j] * s[5 * w + j];
}

/* the LSTM (G = 4 gates, S (M, 6w)) or GRU (G = 3, S (M, 4w)) forward: per step the hidden
   projection of all rows (one GEMM), then each row's cell */
static int F(recur_fwd)(long G, const T *Xp, const T *W_hh, const T *b_hh, T *H, T *S, long Bn, long Tn, long w)
{
    const long SW = G == 4 ? 6 : 4;
    T *WT = F(transpose)(W_hh, G * w, w), *P = malloc(Bn * G * w * sizeof(T));
    if (!WT || !P) { free(WT); free(P); return 1; }
    for (long t = 0; t < Tn; ++t) {
        F(hidden_proj)(H, WT, b_hh, P, Bn, Tn, t, w, G);
        for (long b = 0; b < Bn; ++b) {
            const long row = b * Tn + t;
            T *s = S + row * SW * w, *h = H + row * w;
            if (G == 4) F(lstm_cell)(Xp + row * G * w, P + b * G * w, s, h, t ? s - 2 * w : NULL, w);
            else F(gru_cell)(Xp + row * G * w, P + b * G * w, s, h, t ? h - w : NULL, w);
        }
    }
    free(WT); free(P);
    return 0;
}

int F(gru_fwd)(const T *Xp, const T *W_hh, const T *b_hh, T *H, T *S, long Bn, long Tn, long w)
{
    return F(recur_fwd)(3, Xp, W_hh, b_hh, H, S, Bn, Tn, w);
}

int F(lstm_fwd)(const T *Xp, const T *W_hh, const T *b_hh, T *H, T *S, long Bn, long Tn, long w)
{
    return F(recur_fwd)(4, Xp, W_hh, b_hh, H, S, Bn, Tn, w);
}

/* the adjoint of one GRU step of one row: g = dL/dh (carried dhb + from above dho) -> dx, the
   step's pre-activation gradients (3w), dp the same through the hidden projection (its n part
   times r), dhb the part of dL/dh_prev through h = ... + z h_prev (hprev NULL at t = 0) */
static void F(gru_cell_bwd)(const T *s, const T *hprev, const T *dho, T *dhb, T *dx, T *dp, long w)
{
    #pragma omp simd
    for (long j = 0; j < w; ++j) {
        const T r = s[j], z = s[w + j], n = s[2 * w + j], hn = s[3 * w + j];
        const T hp = hprev ? hprev[j] : 0, g = dhb[j] + dho[j];
        const T dan = g * (1 - z) * (1 - n * n);
        const T daz = g * (hp - n) * z * (1 - z);
        const T dar = dan * hn * r * (1 - r);
        dx[j] = dar; dx[w + j] = daz; dx[2 * w + j] = dan;
        dp[j] = dar; dp[w + j] = daz; dp[2 * w + j] = dan * r;
        dhb[j] = g * z;
    }
}

/* the adjoint of one LSTM step of one row: dx (4w) = dL/d(pre-activations), the same through the
   hidden projection; dcb carries dL/dc (cprev NULL at t = 0) */
static void F(lstm_cell_bwd)(const T *s, const T *cprev, const T *dho, const T *dhb, T *dcb, T *dx, long w)
{
    #pragma omp simd
    for (long j = 0; j < w; ++j) {
        const T i = s[j], f = s[w + j], g = s[2 * w + j], o = s[3 * w + j], tc = s[5 * w + j];
        const T gh = dhb[j] + dho[j], cp = cprev ? cprev[j] : 0;
        const T gc = dcb[j] + gh * o * (1 - tc * tc);
        dx[j] = gc * g * i * (1 - i);
        dx[w + j] = gc * cp * f * (1 - f);
        dx[2 * w + j] = gc * i * (1 - g * g);
        dx[3 * w + j] = gh * tc * o * (1 - o);
        dcb[j] = gc * f;
    }
}

/* the LSTM (G = 4) or GRU (G = 3) adjoint, from the last step back: dH (M, w) dL/dH from above ->
   dXp (M, Gw) = dL/d(x W_ih^T + b_ih) of each step (= dL/d(h W_hh^T + b_hh) for the LSTM; the
   GRU's differs in its n gate and goes through dP), dHs (M, Gw) the latter shifted one step
   back, db_hh (Gw). dL/dh_prev = dP W_hh (+ z dL/dh for the GRU) */
static int F(recur_bwd)(long G, const T *dH, const T *W_hh, const T *H, const T *S, T *dXp, T *dHs,
                        T *db_hh, long Bn, long Tn, long w)
{
    const long SW = G == 4 ? 6 : 4, Gw = G * w;
    T *dh = calloc(Bn * w, sizeof(T)), *dc = calloc(Bn * w, sizeof(T));
    T *dP = G == 3 ? malloc(Bn * Gw * sizeof(T)) : NULL;
    if (!dh || !dc || (G == 3 && !dP)) { free(dh); free(dc); free(dP); return 1; }
    for (long j = 0; j < Gw; ++j) db_hh[j] = 0;
    for (long b = 0; b < Bn; ++b) memset(dHs + (b * Tn + Tn - 1) * Gw, 0, Gw * sizeof(T));
    for (long t = Tn - 1; t >= 0; --t) {
        for (long b = 0; b < Bn; ++b) {
            const long row = b * Tn + t;
            const T *s = S + row * SW * w;
            T *dx = dXp + row * Gw, *dp = G == 3 ? dP + b * Gw : dx;
            if (G == 4) F(lstm_cell_bwd)(s, t ? s - 2 * w : NULL, dH + row * w, dh + b * w, dc + b * w, dx, w);
            else F(gru_cell_bwd)(s, t ? H + (row - 1) * w : NULL, dH + row * w, dh + b * w, dx, dp, w);
            #pragma omp simd
            for (long j = 0; j < Gw; ++j) db_hh[j] += dp[j];
            if (t > 0) memcpy(dHs + (row - 1) * Gw, dp, Gw * sizeof(T));
        }
        if (t > 0 && G == 3) F(gemm_acc)(dP, Gw, W_hh, w, dh, w, Bn, Gw, 1);   /* dh += dP W_hh */
        if (t > 0 && G == 4) F(gemm_acc)(dXp + t * Gw, Tn * Gw, W_hh, w, dh, w, Bn, Gw, 0);   /* dh = */
    }
    free(dh); free(dc); free(dP);
    return 0;
}

int F(gru_bwd)(const T *dH, const T *W_hh, const T *H, const T *S, T *dXp, T *dHs, T *db_hh,
               long Bn, long Tn, long w)
{
    return F(recur_bwd)(3, dH, W_hh, H, S, dXp, dHs, db_hh, Bn, Tn, w);
}

int F(lstm_bwd)(const T *dH, const T *W_hh, const T *H, const T *S, T *dXp, T *dHs, T *db_hh,
                long Bn, long Tn, long w)
{
    return F(recur_bwd)(4, dH, W_hh, H, S, dXp, dHs, db_hh, Bn, Tn, w);
}

#undef rv
#undef rvu
#undef rld
#undef rst
#undef hv
#undef hvu
#undef hld
#undef hst
#endif
