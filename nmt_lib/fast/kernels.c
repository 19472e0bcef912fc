/* Compiled CPU kernels of nmt_lib (loaded by kernels.py with ctypes; plain C, OpenMP, no Python or
 * PyTorch headers). Each computes what a few PyTorch operations compute, in one pass over memory
 * instead of one pass per operation; kernels.py says where each is used and the tests compare
 * them with those operations. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

static inline float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Element i of a bf16 (is_bf16) or float32 array, as float32. In a loop, the flag must be a
 * constant (a function inlined for each case, INLINE): with a flag known only at run time, gcc
 * vectorizes the loop with masked loads of both types, and the float32 ones reach past the end of a
 * bf16 array; where that memory is not mapped, every such load waits for a suppressed fault (far
 * slower on an AMD EPYC: bench/README.md, "Compiled kernels"). */
#define INLINE static inline __attribute__((always_inline))
static inline float load(const void *z, int is_bf16, int64_t i) {
    return is_bf16 ? bf16_to_float(((const uint16_t *)z)[i]) : ((const float *)z)[i];
}

static inline uint16_t float_to_bf16(float f) { /* round to nearest even, as PyTorch; NaN stays NaN */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint16_t rounded = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? (uint16_t)((u >> 16) | 0x40u) : rounded;
}

/* e^x for x <= 0 (Cephes' expf: range reduction by ln 2, degree-6 polynomial, ~1 ulp); 0 below -87,
 * NaN for NaN. Written without branches or calls, so that the loops around it vectorize. */
static inline float exp_nonpositive(float x) {
    float c = x < -87.0f ? -87.0f : x;
    float n = floorf(c * 1.44269504088896341f + 0.5f);
    float r = c - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23; /* 2^n */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < -87.0f ? 0.0f : p * scale;
}

/* Insert v (column j) into the list tv/ti of the largest values, best first, of which `filled` of k
 * are set; among equal values the earlier one stays first. Returns the new `filled`. */
static inline int64_t insert_top(float *tv, int64_t *ti, int64_t k, int64_t filled, float v,
                                 int64_t j) {
    if (filled == k && !(v > tv[k - 1])) return filled;
    int64_t i = filled < k ? filled++ : k - 1;
    for (; i > 0 && v > tv[i - 1]; i--) {
        tv[i] = tv[i - 1];
        ti[i] = ti[i - 1];
    }
    tv[i] = v;
    ti[i] = j;
    return filled;
}

#define BLOCK 64

/* Of best_words: row x (bf16 if is_bf16, a constant) + bias, in float32, into row; the maxima of
 * its blocks of 64 words into bmax; returns the row's maximum. */
INLINE float row_and_block_maxima(const void *x, const int is_bf16, int64_t K, const float *bias,
                                  float *row, float *bmax) {
    float m = -INFINITY;
    for (int64_t b = 0, nb = (K + BLOCK - 1) / BLOCK; b < nb; b++) {
        int64_t j0 = b * BLOCK, j1 = j0 + BLOCK < K ? j0 + BLOCK : K;
        float q = -INFINITY;
#pragma omp simd reduction(max : q)
        for (int64_t j = j0; j < j1; j++) {
            float v = load(x, is_bf16, j) + bias[j];
            row[j] = v;
            q = v > q ? v : q;
        }
        bmax[b] = q;
        m = q > m ? q : m;
    }
    return m;
}

/* search.best_words for a [R, K] matrix of bf16 (is_bf16) or float32 logits, row stride ldx:
 * per row, in float32, x + bias; if normalize, m = max and
 * s = sum exp(x - m) over ALL words; then words 0 (<pad>), 1 (<unk>, if ignore_unk) and 2 (EOS, if
 * no_eos[r]) excluded; the k largest (k <= K) written best first to out_v as (x - m) - log s
 * (x itself if not normalize) and their columns to out_i; among equal values the lower column
 * first. work: threads * (K + ceil(K / 64)) floats, the row in float32 and its maxima per block of
 * 64 words for each thread (in cache); the input is read once. The top k: at least k words reach
 * the k-th largest block maximum, so only the blocks and words that reach it are looked at. */
void best_words(const void *x, int is_bf16, int64_t R, int64_t K, int64_t ldx, const float *bias,
                const uint8_t *no_eos, int ignore_unk, int normalize, int64_t k, int threads,
                float *work, float *out_v, int64_t *out_i) {
    int64_t nb = (K + BLOCK - 1) / BLOCK;
#pragma omp parallel num_threads(threads)
    {
        float *row = work + (int64_t)omp_get_thread_num() * (K + nb), *bmax = row + K;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < R; r++) {
            float m;
            if (is_bf16)
                m = row_and_block_maxima((const uint16_t *)x + r * ldx, 1, K, bias, row, bmax);
            else
                m = row_and_block_maxima((const float *)x + r * ldx, 0, K, bias, row, bmax);
            float log_s = 0.0f;
            if (normalize) {
                float s = 0.0f;
#pragma omp simd reduction(+ : s)
                for (int64_t j = 0; j < K; j++) s += exp_nonpositive(row[j] - m);
                log_s = logf(s);
            }
            row[0] = -INFINITY;
            if (ignore_unk && K > 1) row[1] = -INFINITY;
            if (no_eos[r] && K > 2) row[2] = -INFINITY;
            bmax[0] = -INFINITY;
            for (int64_t j = 0; j < (K < BLOCK ? K : BLOCK); j++)
                bmax[0] = row[j] > bmax[0] ? row[j] : bmax[0];
            float *tv = out_v + r * k;
            int64_t *ti = out_i + r * k, filled = 0;
            float thr = -INFINITY; /* the k-th largest block maximum, or -inf */
            if (k <= nb) {
                for (int64_t b = 0; b < nb; b++) filled = insert_top(tv, ti, k, filled, bmax[b], b);
                thr = tv[k - 1];
                filled = 0;
            }
            for (int64_t b = 0; b < nb; b++) {
                if (bmax[b] < thr) continue;
                int64_t j1 = (b + 1) * BLOCK < K ? (b + 1) * BLOCK : K;
                for (int64_t j = b * BLOCK; j < j1; j++)
                    if (!(row[j] < thr)) filled = insert_top(tv, ti, k, filled, row[j], j);
            }
            if (normalize)
                for (int64_t i = 0; i < k; i++) tv[i] = (tv[i] - m) - log_s;
        }
    }
}

/* tanh: Eigen's rational approximation (generic_fast_tanh_float: odd degree-13 numerator, even
 * degree-6 denominator, x clamped to +-7.9053; tanh(x) = x below 4e-4): within 4.9 float32 ulps
 * of tanh compiled with FMA, 6.9 without (checked over all floats); +-1 at +-inf, NaN for NaN.
 * One division and no exp: the energies run faster than with Cephes' tanhf (bench/README.md).
 * Branch-free, so that the loops around it vectorize. */
static inline float tanh_float(float x) {
    const float c = 7.90531110763549805f;
    float xc = x > c ? c : (x < -c ? -c : x), x2 = xc * xc;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 - 8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return fabsf(x) < 0.0004f ? x : p * xc / q;
}

/* An operand of the GRU kernels (and a row of attend's): element (d, i, j) at
 * data + d * sd + i * sr + j (in elements), bf16 or float32; a view with data NULL is absent (an
 * input: 0; an output: not written). kernels.py builds them from tensors. */
typedef struct {
    void *data;
    int64_t sd, sr;
    int32_t bf16;
} view;

/* dst[0:n] = columns off..off+n of row (d, i) of v, as float32 (0 if v is absent). */
static inline void row_in(const view *v, int64_t d, int64_t i, int64_t off, int64_t n, float *dst) {
    if (!v->data) {
        memset(dst, 0, n * sizeof *dst);
        return;
    }
    int64_t at = d * v->sd + i * v->sr + off;
    if (v->bf16) {
        const uint16_t *src = (const uint16_t *)v->data + at;
#pragma omp simd
        for (int64_t j = 0; j < n; j++) dst[j] = bf16_to_float(src[j]);
    } else {
        memcpy(dst, (const float *)v->data + at, n * sizeof *dst);
    }
}

/* Columns off..off+n of row (d, i) of v = src, rounded to bf16 if v is; nothing if v is absent. */
static inline void row_out(const view *v, int64_t d, int64_t i, int64_t off, int64_t n,
                           const float *src) {
    if (!v->data) return;
    int64_t at = d * v->sd + i * v->sr + off;
    if (v->bf16) {
        uint16_t *dst = (uint16_t *)v->data + at;
#pragma omp simd
        for (int64_t j = 0; j < n; j++) dst[j] = float_to_bf16(src[j]);
    } else {
        memcpy((float *)v->data + at, src, n * sizeof *src);
    }
}

/* The tanh of the GRU and attention kernels on a vector register of VW floats: with AVX-512 (16)
 * or AVX2 and FMA (8); elsewhere the loops around tanh_float, which the compiler vectorizes with a
 * division. Loads and stores of the first lanes of a register, a mask saying which: `full`, a
 * constant in each caller, picks the plain load or store (AVX2's masked store is slow on AMD). */
#if defined(__AVX512F__)
#define VW 16
typedef __m512 vf;
typedef __mmask16 vmask;
#define vset1 _mm512_set1_ps
#define vadd _mm512_add_ps
#define vmul _mm512_mul_ps
#define vfmadd _mm512_fmadd_ps
#define vfnmadd _mm512_fnmadd_ps
#define vmin _mm512_min_ps
#define vmax _mm512_max_ps
#define vrcp _mm512_rcp14_ps /* rel. error < 2^-14 */
#define vsum _mm512_reduce_add_ps
static inline vmask lanes(int64_t left) { /* the first `left` (any integer) of 16 lanes */
    if (left >= 16) return (vmask)0xFFFF;
    return left <= 0 ? (vmask)0 : (vmask)((1u << left) - 1u);
}
INLINE vf vload(const float *p, int full, vmask m) {
    return full ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}
INLINE void vstore(float *p, int full, vmask m, vf x) {
    if (full)
        _mm512_storeu_ps(p, x);
    else
        _mm512_mask_storeu_ps(p, m, x);
}
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define VW 8
typedef __m256 vf;
typedef __m256i vmask;
#define vset1 _mm256_set1_ps
#define vadd _mm256_add_ps
#define vmul _mm256_mul_ps
#define vfmadd _mm256_fmadd_ps
#define vfnmadd _mm256_fnmadd_ps
#define vmin _mm256_min_ps
#define vmax _mm256_max_ps
#define vrcp _mm256_rcp_ps /* rel. error < 1.5 * 2^-12 */
static inline float vsum(vf x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
static inline vmask lanes(int64_t left) { /* the first `left` (any integer) of 8 lanes */
    int32_t k = left > 8 ? 8 : (left < 0 ? 0 : (int32_t)left);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
INLINE vf vload(const float *p, int full, vmask m) {
    return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}
INLINE void vstore(float *p, int full, vmask m, vf x) {
    if (full)
        _mm256_storeu_ps(p, x);
    else
        _mm256_maskstore_ps(p, m, x);
}
#endif

#ifdef VW
/* tanh_float on VW floats, its division replaced by a reciprocal estimate and one Newton step:
 * within 2.5 (AVX-512) or 3 (AVX2) float32 ulps of tanh on a dense sweep (tanh_float: 4.9),
 * 1 - 2^-22 at +inf; a higher throughput (the division bounds the energies). max/min return
 * their second operand for NaN: NaN stays NaN. */
static inline vf tanh_vec(vf x) {
    const vf c = vset1(7.90531110763549805f);
    vf xc = vmin(c, vmax(vset1(-7.90531110763549805f), x)), x2 = vmul(xc, xc);
    vf p = vset1(-2.76076847742355e-16f), q, r;
    p = vfmadd(p, x2, vset1(2.00018790482477e-13f));
    p = vfmadd(p, x2, vset1(-8.60467152213735e-11f));
    p = vfmadd(p, x2, vset1(5.12229709037114e-08f));
    p = vfmadd(p, x2, vset1(1.48572235717979e-05f));
    p = vfmadd(p, x2, vset1(6.37261928875436e-04f));
    p = vfmadd(p, x2, vset1(4.89352455891786e-03f));
    q = vfmadd(vset1(1.19825839466702e-06f), x2, vset1(1.18534705686654e-04f));
    q = vfmadd(q, x2, vset1(2.26843463243900e-03f));
    q = vfmadd(q, x2, vset1(4.89352518554385e-03f));
    r = vrcp(q);
    r = vfmadd(r, vfnmadd(q, r, vset1(1.0f)), r);
    return vmul(vmul(p, xc), r);
}

/* tanh_of_sum's VW columns from d on, of which the first m (all but in a last pass). */
INLINE void tanh_of_sum_lanes(float *p, const float *q, int64_t d, int full, vmask m) {
    vstore(p + d, full, m, tanh_vec(vadd(vload(p + d, full, m), vload(q + d, full, m))));
}

/* energy2's VW columns from d on. */
INLINE void energy2_lanes(const float *u0, const float *u1, const float *ws, const float *v,
                          int64_t d, int full, vmask m, vf *a0, vf *a1) {
    vf w = vload(ws + d, full, m), vd = vload(v + d, full, m);
    *a0 = vfmadd(vd, tanh_vec(vadd(vload(u0 + d, full, m), w)), *a0);
    *a1 = vfmadd(vd, tanh_vec(vadd(vload(u1 + d, full, m), w)), *a1);
}

/* energy_backward's VW columns from d on. */
INLINE void energy_backward_lanes(const float *uh, const float *q, float de, float *ds, float *dq,
                                  float *dv, int64_t d, int full, vmask m) {
    vf dev = vset1(de), t = tanh_vec(vadd(vload(uh + d, full, m), vload(q + d, full, m)));
    vf gt = vmul(dev, vfnmadd(t, t, vset1(1.0f)));
    vstore(ds + d, full, m, vadd(vload(ds + d, full, m), gt));
    vstore(dq + d, full, m, vadd(vload(dq + d, full, m), gt));
    vstore(dv + d, full, m, vfmadd(dev, t, vload(dv + d, full, m)));
}
#endif

/* p[0:n] = tanh(p + q) (tanh_vec where there is AVX-512 or AVX2: every tanh of the GRU and the
 * attention kernels is the same function). */
static inline void tanh_of_sum(float *p, const float *q, int64_t n) {
#ifdef VW
    int64_t d = 0;
    for (; d + VW <= n; d += VW) tanh_of_sum_lanes(p, q, d, 1, lanes(VW));
    if (d < n) tanh_of_sum_lanes(p, q, d, 0, lanes(n - d));
#else
#pragma omp simd
    for (int64_t d = 0; d < n; d++) p[d] = tanh_float(p[d] + q[d]);
#endif
}

/* The energies e[0] = v . tanh(u0 + ws), e[1] = v . tanh(u1 + ws) over n' = N: two positions per
 * pass share the loads of ws and v (with tanh_vec, the attention kernel faster than one position
 * at a time with tanh_float: bench/README.md). */
static inline void energy2(const float *u0, const float *u1, const float *ws, const float *v,
                           int64_t N, float *e) {
#ifdef VW
    vf a0 = vset1(0.0f), a1 = vset1(0.0f);
    int64_t d = 0;
    for (; d + VW <= N; d += VW) energy2_lanes(u0, u1, ws, v, d, 1, lanes(VW), &a0, &a1);
    if (d < N) energy2_lanes(u0, u1, ws, v, d, 0, lanes(N - d), &a0, &a1);
    e[0] = vsum(a0);
    e[1] = vsum(a1);
#else
    float a0 = 0.0f, a1 = 0.0f;
#pragma omp simd reduction(+ : a0, a1)
    for (int64_t d = 0; d < N; d++) {
        a0 += v[d] * tanh_float(u0[d] + ws[d]);
        a1 += v[d] * tanh_float(u1[d] + ws[d]);
    }
    e[0] = a0;
    e[1] = a1;
#endif
}

/* With t = tanh(uh + q) (the same function as energy2's) and gt = de (1 - t^2) over n' = N:
 * ds += gt, dq += gt, dv += de t. */
static inline void energy_backward(const float *uh, const float *q, float de, float *ds, float *dq,
                                   float *dv, int64_t N) {
#ifdef VW
    int64_t d = 0;
    for (; d + VW <= N; d += VW) energy_backward_lanes(uh, q, de, ds, dq, dv, d, 1, lanes(VW));
    if (d < N) energy_backward_lanes(uh, q, de, ds, dq, dv, d, 0, lanes(N - d));
#else
#pragma omp simd
    for (int64_t d = 0; d < N; d++) {
        float t = tanh_float(uh[d] + q[d]), gt = de * (1.0f - t * t);
        ds[d] += gt;
        dq[d] += gt;
        dv[d] += de * t;
    }
#endif
}

#define MAX_CONTEXT 8192 /* ctx of attend, ctx and n' of attend_backward (kernels.py checks it): a
                            * row lives on each thread's stack */

/* One attention step (attention.Attention without autograd, decoder._AttentionDecoderScan), for B
 * sentences, G states each: the energies e_j = v . tanh(Uh[b, j] + Ws[b, g]) at the real positions
 * (mask[b, j]; the padding's are not computed), alpha = their softmax (0 at padding; a row
 * without real positions: alpha = 0, c = 0), c = sum_j alpha_j h[b, j], accumulated in float32.
 * Uh [B, Tx, N], Ws [B * G, N], v [N], alpha [B * G, Tx] float32; mask [B, Tx]; h [B, Tx, C] and
 * c [B * G, C] bf16 (h_bf16, c_bf16) or float32; all contiguous. */
void attend(const float *Uh, const float *Ws, const float *v, const uint8_t *mask, const void *h,
            int h_bf16, int64_t B, int64_t G, int64_t Tx, int64_t N, int64_t C, int threads,
            float *alpha, void *c, int c_bf16) {
    view out = {c, 0, C, c_bf16};
#pragma omp parallel num_threads(threads)
    {
        float acc[C]; /* this thread's row of c (C <= MAX_CONTEXT) */
#pragma omp for collapse(2) schedule(static)
        for (int64_t b = 0; b < B; b++)
            for (int64_t g = 0; g < G; g++) {
                const uint8_t *real = mask + b * Tx;
                float *a = alpha + (b * G + g) * Tx, m = -INFINITY, s = 0.0f, e[2];
                int64_t nr = 0, j0 = 0;
                for (int64_t j = 0; j < Tx; j++) { /* the real positions, two by two */
                    a[j] = 0.0f;
                    if (!real[j]) continue;
                    if (nr++ % 2 == 0) {
                        j0 = j;
                        continue;
                    }
                    energy2(Uh + (b * Tx + j0) * N, Uh + (b * Tx + j) * N, Ws + (b * G + g) * N, v,
                            N, e);
                    a[j0] = e[0];
                    a[j] = e[1];
                }
                if (nr % 2) { /* the last one alone */
                    const float *u = Uh + (b * Tx + j0) * N;
                    energy2(u, u, Ws + (b * G + g) * N, v, N, e);
                    a[j0] = e[0];
                }
                for (int64_t j = 0; j < Tx; j++) m = real[j] && a[j] > m ? a[j] : m;
                for (int64_t j = 0; j < Tx; j++) s += a[j] = real[j] ? exp_nonpositive(a[j] - m) : 0;
                memset(acc, 0, C * sizeof *acc);
                for (int64_t j = 0; j < Tx; j++) {
                    if (!real[j]) continue;
                    float w = a[j] /= s;
                    int64_t at = (b * Tx + j) * C;
                    if (h_bf16) {
                        const uint16_t *hj = (const uint16_t *)h + at;
#pragma omp simd
                        for (int64_t d = 0; d < C; d++) acc[d] += w * bf16_to_float(hj[d]);
                    } else {
                        const float *hj = (const float *)h + at;
#pragma omp simd
                        for (int64_t d = 0; d < C; d++) acc[d] += w * hj[d];
                    }
                }
                row_out(&out, 0, b * G + g, 0, C, acc);
            }
    }
}

/* The backward of attend for G = 1 (decoder._AttentionDecoderScan), tanh recomputed: from dL/dc
 * dc [B, C] (bf16 if dc_bf16) and dL/dalpha dA [B, Tx] (NULL: 0),
 * d_alpha_j = h_j . dc + dA_j,  d_e_j = alpha_j (d_alpha_j - sum_k alpha_k d_alpha_k)  (softmax'),
 * and with t = tanh(Uh[b, j] + q[b]), accumulated over the steps of the caller's loop:
 * d_sum[b, j] += d_e_j (1 - t^2),  dv[b] += sum_j d_e_j t  (the caller sums dv over b at the end);
 * and d_q[b] = v_a * sum_j d_e_j (1 - t^2), written to the view d_q (rows of bf16 or float32);
 * positions with d_e_j = 0 (padding: alpha_j = 0) add nothing and are skipped. d_e: B * Tx floats
 * of work. Uh, d_sum [B, Tx, N], q, dv [B, N], v_a [N], alpha [B, Tx] float32; h [B, Tx, C] bf16
 * (h_bf16) or float32; all contiguous but d_q. */
void attend_backward(const float *Uh, const float *q, const float *v_a, const void *h, int h_bf16,
                     const void *dc, int dc_bf16, const float *alpha, const float *dA, int64_t B,
                     int64_t Tx, int64_t N, int64_t C, int threads, float *d_e, float *d_sum,
                     const view *d_q, float *dv) {
    view grad = {(void *)dc, 0, C, dc_bf16};
#pragma omp parallel num_threads(threads)
    {
        float g[C], dq[N]; /* this thread's rows of dc and d_q (C, N <= MAX_CONTEXT) */
#pragma omp for schedule(static)
        for (int64_t b = 0; b < B; b++) {
            const float *qb = q + b * N, *ab = alpha + b * Tx;
            float *de = d_e + b * Tx, *dvb = dv + b * N, sum = 0.0f;
            row_in(&grad, 0, b, 0, C, g);
            for (int64_t j = 0; j < Tx; j++) {
                float dot = 0.0f;
                int64_t at = (b * Tx + j) * C;
                if (h_bf16) {
                    const uint16_t *hj = (const uint16_t *)h + at;
#pragma omp simd reduction(+ : dot)
                    for (int64_t d = 0; d < C; d++) dot += bf16_to_float(hj[d]) * g[d];
                } else {
                    const float *hj = (const float *)h + at;
#pragma omp simd reduction(+ : dot)
                    for (int64_t d = 0; d < C; d++) dot += hj[d] * g[d];
                }
                de[j] = dot + (dA ? dA[b * Tx + j] : 0.0f);
                sum += ab[j] * de[j];
            }
            memset(dq, 0, N * sizeof *dq);
            for (int64_t j = 0; j < Tx; j++) {
                float dej = ab[j] * (de[j] - sum);
                if (dej == 0.0f) continue;
                int64_t at = (b * Tx + j) * N;
                energy_backward(Uh + at, qb, dej, d_sum + at, dq, dvb, N);
            }
#pragma omp simd
            for (int64_t d = 0; d < N; d++) dq[d] *= v_a[d];
            row_out(d_q, 0, b, 0, N, dq);
        }
    }
}

/* decoder.target_log_prob, forward, for one row z (bf16 if is_bf16, a constant) and target y. */
INLINE void target_logp_row(const void *z, const int is_bf16, int64_t K, const float *bias,
                            int64_t y, float *logp, float *stats) {
    float m = -INFINITY, s = 0.0f;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < K; j++) {
        float v = load(z, is_bf16, j) + bias[j];
        m = v > m ? v : m;
    }
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < K; j++) s += exp_nonpositive(load(z, is_bf16, j) + bias[j] - m);
    float log_s = logf(s);
    *logp = (load(z, is_bf16, y) + bias[y] - m) - log_s;
    stats[0] = m;
    stats[1] = log_s;
}

/* decoder.target_log_prob, forward: for N rows of logits z (bf16 if is_bf16, else float32; row
 * stride ldz) plus bias[K], in float32: m = max, log_s = log sum exp(x - m) over the row,
 * logp[r] = (x[y[r]] - m) - log_s; stats[r] = (m, log_s) for the backward. */
void target_logp(const void *z, int is_bf16, int64_t N, int64_t K, int64_t ldz, const float *bias,
                 const int64_t *y, int threads, float *logp, float *stats) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t r = 0; r < N; r++) {
        float *st = stats + 2 * r;
        if (is_bf16)
            target_logp_row((const uint16_t *)z + r * ldz, 1, K, bias, y[r], logp + r, st);
        else
            target_logp_row((const float *)z + r * ldz, 0, K, bias, y[r], logp + r, st);
    }
}

/* decoder.target_log_prob, backward, in place: the logits z become their gradient
 * d = g[r] (onehot(y) - softmax(z + bias)) (in z's dtype), the target entry g (1 - p_y) from
 * -expm1(logp); the float32 gradients are also summed over the rows into db_work (threads * K
 * floats, zeroed by the caller; its rows summed by the caller: the gradient of the bias). */
void target_logp_backward(void *z, int is_bf16, int64_t N, int64_t K, int64_t ldz,
                          const float *bias, const int64_t *y, const float *g, const float *stats,
                          const float *logp, int threads, float *db_work) {
#pragma omp parallel num_threads(threads)
    {
        float *db = db_work + (int64_t)omp_get_thread_num() * K;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < N; r++) {
            float m = stats[2 * r], log_s = stats[2 * r + 1], gr = g[r];
            float target = gr * -expm1f(logp[r]);
            if (is_bf16) {
                uint16_t *zr = (uint16_t *)z + r * ldz;
#pragma omp simd
                for (int64_t j = 0; j < K; j++) {
                    float d = -gr * exp_nonpositive((bf16_to_float(zr[j]) + bias[j] - m) - log_s);
                    d = j == y[r] ? target : d;
                    db[j] += d;
                    zr[j] = float_to_bf16(d);
                }
            } else {
                float *zr = (float *)z + r * ldz;
#pragma omp simd
                for (int64_t j = 0; j < K; j++) {
                    float d = -gr * exp_nonpositive((zr[j] + bias[j] - m) - log_s);
                    d = j == y[r] ? target : d;
                    db[j] += d;
                    zr[j] = d;
                }
            }
        }
    }
}

#define MAX_UNITS 4096 /* n of the GRU kernels: their rows live on the threads' stacks */

/* The GRU steps' elementwise work (gru.gru_gates, gru.gru_update and their backward), for D x k
 * rows of n <= MAX_UNITS units, each operand a view. */

/* σ(x) = 1 / (1 + e^-x), from e^-|x| (never overflows). */
static inline float sigmoid_float(float x) {
    float t = exp_nonpositive(-fabsf(x));
    return (x >= 0.0f ? 1.0f : t) / (1.0f + t);
}

/* Gates: r = σ(a_r + x_r + g_r), z = σ(a_z + x_z + g_z), rh = r ∘ h, where a and x hold the
 * pre-activations [candidate; z; r] (3n columns) and g = [U_r h; U_z h] (2n columns). */
void gru_gates(int64_t D, int64_t k, int64_t n, const view *a, const view *x, const view *g,
               const view *h, const view *r, const view *z, const view *rh, int threads) {
#pragma omp parallel num_threads(threads)
    {
        float t[5 * n]; /* this thread's rows, in cache (n <= MAX_UNITS) */
        float *pr = t, *pz = t + n, *q = t + 2 * n, *rr = t + 3 * n, *zz = t + 4 * n;
#pragma omp for collapse(2) schedule(static)
        for (int64_t d = 0; d < D; d++)
            for (int64_t i = 0; i < k; i++) {
                row_in(a, d, i, n, 2 * n, pz); /* pz: z, pr: r pre-activations */
                row_in(a, d, i, 2 * n, n, pr);
                row_in(x, d, i, n, n, q);
#pragma omp simd
                for (int64_t j = 0; j < n; j++) pz[j] += q[j];
                row_in(x, d, i, 2 * n, n, q);
#pragma omp simd
                for (int64_t j = 0; j < n; j++) pr[j] += q[j];
                row_in(g, d, i, 0, n, q);
#pragma omp simd
                for (int64_t j = 0; j < n; j++) rr[j] = sigmoid_float(pr[j] + q[j]);
                row_in(g, d, i, n, n, q);
#pragma omp simd
                for (int64_t j = 0; j < n; j++) zz[j] = sigmoid_float(pz[j] + q[j]);
                row_out(r, d, i, 0, n, rr);
                row_out(z, d, i, 0, n, zz);
                row_in(h, d, i, 0, n, q);
#pragma omp simd
                for (int64_t j = 0; j < n; j++) q[j] *= rr[j];
                row_out(rh, d, i, 0, n, q);
            }
    }
}

/* Update: ht = tanh(a_h + x_h + u) (u = U (r ∘ h)), out = (1 - z) h + z ht on rows where
 * mask[d * mask_sd + i * mask_sr] (mask NULL: all rows), else h; out may be h itself; out_c (may
 * be absent) gets out again, e.g. in bf16 for the next step's matmul. */
void gru_update(int64_t D, int64_t k, int64_t n, const view *a, const view *x, const view *u,
                const view *z, const view *h, const uint8_t *mask, int64_t mask_sd,
                int64_t mask_sr, const view *ht, const view *out, const view *out_c, int threads) {
#pragma omp parallel num_threads(threads)
    {
        float t[4 * n]; /* this thread's rows, in cache (n <= MAX_UNITS) */
        float *p = t, *q = t + n, *zz = t + 2 * n, *hh = t + 3 * n;
#pragma omp for collapse(2) schedule(static)
        for (int64_t d = 0; d < D; d++)
            for (int64_t i = 0; i < k; i++) {
                row_in(a, d, i, 0, n, p);
                row_in(x, d, i, 0, n, q);
#pragma omp simd
                for (int64_t j = 0; j < n; j++) p[j] += q[j];
                row_in(u, d, i, 0, n, q);
                tanh_of_sum(p, q, n);
                row_out(ht, d, i, 0, n, p);
                row_in(z, d, i, 0, n, zz);
                row_in(h, d, i, 0, n, hh);
                if (!mask || mask[d * mask_sd + i * mask_sr]) {
#pragma omp simd
                    for (int64_t j = 0; j < n; j++) hh[j] = (1.0f - zz[j]) * hh[j] + zz[j] * p[j];
                }
                row_out(out, d, i, 0, n, hh);
                row_out(out_c, d, i, 0, n, hh);
            }
    }
}

/* The backward of gru_update and of the z gate: from dh = dL/dh_t (the new state), on rows where
 * mask (NULL: all) with dn = dh, elsewhere dn = 0:
 * d_cand = dn z (1 - ht^2) and d_z = dn (ht - h) z (1 - z), written to columns [0, 2n) of dA
 * (dL/d pre-activations [candidate; z; r]) and d_cand also to dcand_c (for the matmul with U);
 * dh becomes the part of dL/dh_{t-1} that passes by the matmuls: dn (1 - z), or dh where masked
 * out. */
void gru_backward_update(int64_t D, int64_t k, int64_t n, const view *dh, const uint8_t *mask,
                         int64_t mask_sd, int64_t mask_sr, const view *z, const view *ht,
                         const view *h, const view *dA, const view *dcand_c, int threads) {
#pragma omp parallel num_threads(threads)
    {
        float w[4 * n]; /* this thread's rows, in cache (n <= MAX_UNITS) */
        float *g = w, *zz = w + n, *t = w + 2 * n, *hh = w + 3 * n;
#pragma omp for collapse(2) schedule(static)
        for (int64_t d = 0; d < D; d++)
            for (int64_t i = 0; i < k; i++) {
                int on = !mask || mask[d * mask_sd + i * mask_sr];
                row_in(dh, d, i, 0, n, g);
                if (on) {
                    row_in(z, d, i, 0, n, zz);
                    row_in(ht, d, i, 0, n, t);
                    row_in(h, d, i, 0, n, hh);
                } else { /* past the end: no gradient into this step's gates */
                    memset(zz, 0, n * sizeof *zz);
                    memset(t, 0, n * sizeof *t);
                    memset(hh, 0, n * sizeof *hh);
                }
#pragma omp simd
                for (int64_t j = 0; j < n; j++) {
                    float dn = on ? g[j] : 0.0f;
                    float dc = dn * zz[j] * (1.0f - t[j] * t[j]);
                    float dz = dn * (t[j] - hh[j]) * ((1.0f - zz[j]) * zz[j]);
                    g[j] = on ? dn * (1.0f - zz[j]) : g[j];
                    t[j] = dc;
                    hh[j] = dz;
                }
                row_out(dh, d, i, 0, n, g);
                row_out(dA, d, i, 0, n, t);
                row_out(dA, d, i, n, n, hh);
                row_out(dcand_c, d, i, 0, n, t);
            }
    }
}

/* The backward of gru_gates' r, given d_rh = dL/d(r ∘ h) (U^T d_cand): d_r = d_rh h r (1 - r) into
 * columns [2n, 3n) of dA; drz_c = [d_r; d_z] (d_z read from dA's columns [n, 2n)), for the
 * matmul with [U_r; U_z]; dA_c (may be absent) = the whole row of dA; dh += d_rh r. */
void gru_backward_reset(int64_t D, int64_t k, int64_t n, const view *d_rh, const view *h,
                        const view *r, const view *dA, const view *drz_c, const view *dh,
                        const view *dA_c, int threads) {
#pragma omp parallel num_threads(threads)
    {
        float w[4 * n]; /* this thread's rows, in cache (n <= MAX_UNITS) */
        float *g = w, *hh = w + n, *rr = w + 2 * n, *acc = w + 3 * n;
#pragma omp for collapse(2) schedule(static)
        for (int64_t d = 0; d < D; d++)
            for (int64_t i = 0; i < k; i++) {
                row_in(d_rh, d, i, 0, n, g);
                row_in(h, d, i, 0, n, hh);
                row_in(r, d, i, 0, n, rr);
                row_in(dh, d, i, 0, n, acc);
#pragma omp simd
                for (int64_t j = 0; j < n; j++) {
                    acc[j] += g[j] * rr[j];
                    hh[j] = g[j] * hh[j] * ((1.0f - rr[j]) * rr[j]);
                }
                row_out(dh, d, i, 0, n, acc);
                row_out(dA, d, i, 2 * n, n, hh);
                row_out(drz_c, d, i, 0, n, hh);
                row_out(dA_c, d, i, 2 * n, n, hh);
                row_in(dA, d, i, n, n, acc); /* d_z */
                row_out(drz_c, d, i, n, n, acc);
                if (dA_c->data) { /* and the candidate's and z's columns */
                    row_out(dA_c, d, i, n, n, acc);
                    row_in(dA, d, i, 0, n, acc);
                    row_out(dA_c, d, i, 0, n, acc);
                }
            }
    }
}

/* gru.transposed: out[d, j, i] = x[d, i, j] for an [D, R, C] view x into a contiguous [D, C, R]
 * out, bf16 if out_bf16 (rounded to nearest even), else float32; 32 x 32 blocks, in cache. */
#ifdef __AVX512F__
/* Transpose the 16 x 16 floats at in (rows ldi apart) into out (rows ldo apart), 16 float32 or
 * bf16 (rounded as float_to_bf16) per row: unpack, shuffle, then 128-bit lane shuffles. */
static inline void transpose16(const float *in, int64_t ldi, void *out, int64_t ldo, int bf16) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(in + i * ldi);
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
    }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    }
    const __m512i one = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7FFF);
    const __m512i abs = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
    for (int i = 0; i < 16; i++) {
        if (!bf16) {
            _mm512_storeu_ps((float *)out + i * ldo, r[i]);
            continue;
        }
        __m512i u = _mm512_castps_si512(r[i]), hi = _mm512_srli_epi32(u, 16);
        __m512i rounded = _mm512_srli_epi32(
            _mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(hi, one))), 16);
        __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
        rounded = _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
        _mm256_storeu_si256((__m256i *)((uint16_t *)out + i * ldo), _mm512_cvtepi32_epi16(rounded));
    }
}
#elif defined(VW)
/* Transpose the 8 x 8 floats at in (rows ldi apart) into float32 out (rows ldo apart), as
 * transpose16 with AVX2. */
static inline void transpose8(const float *in, int64_t ldi, float *out, int64_t ldo) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(in + i * ldi);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
        t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
    }
    for (int i = 0; i < 8; i++) _mm256_storeu_ps(out + i * ldo, t[i]);
}
#endif

void transpose(int64_t D, int64_t R, int64_t C, const view *x, void *out, int out_bf16,
               int threads) {
    int64_t nbr = (R + 31) / 32, nbc = (C + 31) / 32;
#pragma omp parallel for collapse(3) schedule(static) num_threads(threads)
    for (int64_t d = 0; d < D; d++)
        for (int64_t bi = 0; bi < nbr; bi++)
            for (int64_t bj = 0; bj < nbc; bj++) {
                int64_t i1 = bi * 32 + 32 < R ? bi * 32 + 32 : R;
                int64_t j1 = bj * 32 + 32 < C ? bj * 32 + 32 : C;
                int64_t rows = i1 - bi * 32, cols = j1 - bj * 32;
                float block[32][32], col[32];
                for (int64_t i = 0; i < rows; i++)
                    row_in(x, d, bi * 32 + i, bj * 32, cols, block[i]);
#ifdef __AVX512F__
                if (rows == 32 && cols == 32) { /* faster than the scalar copy (bench/README.md) */
                    for (int ti = 0; ti < 32; ti += 16)
                        for (int tj = 0; tj < 32; tj += 16) {
                            int64_t at = (d * C + bj * 32 + tj) * R + bi * 32 + ti;
                            void *o = out_bf16 ? (void *)((uint16_t *)out + at)
                                               : (void *)((float *)out + at);
                            transpose16(&block[ti][tj], 32, o, R, out_bf16);
                        }
                    continue;
                }
#elif defined(VW)
                if (rows == 32 && cols == 32 && !out_bf16) {
                    for (int ti = 0; ti < 32; ti += 8)
                        for (int tj = 0; tj < 32; tj += 8)
                            transpose8(&block[ti][tj], 32,
                                       (float *)out + (d * C + bj * 32 + tj) * R + bi * 32 + ti, R);
                    continue;
                }
#endif
                for (int64_t j = 0; j < cols; j++) {
                    for (int64_t i = 0; i < rows; i++) col[i] = block[i][j];
                    int64_t at = (d * C + bj * 32 + j) * R + bi * 32;
                    if (out_bf16)
                        for (int64_t i = 0; i < rows; i++)
                            ((uint16_t *)out)[at + i] = float_to_bf16(col[i]);
                    else
                        memcpy((float *)out + at, col, rows * sizeof *col);
                }
            }
}

/* train.Adadelta: a step of torch.optim.Adadelta (lr, rho, eps) over n float32 parameters in one
 * pass, with torch's operations in torch's order (_single_tensor_adadelta; addcmul_ as one fused
 * multiply-add, as torch's vectorized code), each correctly rounded, on g = g scale (the gradient
 * clip's scaling, done here instead of in a pass of its own):
 * sq = sq rho + (1 - rho) g g;  delta = sqrt(acc + eps) / sqrt(sq + eps) g;
 * acc = acc rho + (1 - rho) delta delta;  p = p - lr delta.
 * PyTorch's vectorized sqrt is not always correctly rounded: an ulp off in ~1 % of the deltas
 * on an Intel Xeon, in 16-20 % of the square roots on an AMD EPYC (torch 2.13). */
void adadelta(float *p, const float *g, float *sq, float *acc, int64_t n, float rho,
              float one_minus_rho, float eps, float neg_lr, float scale, int threads) {
#pragma omp parallel for simd schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] * scale; /* the clip's g.mul_(scale), 1: g itself */
        float s = fmaf(one_minus_rho * gi, gi, sq[i] * rho);
        float delta = sqrtf(acc[i] + eps) / sqrtf(s + eps) * gi;
        sq[i] = s;
        acc[i] = fmaf(one_minus_rho * delta, delta, acc[i] * rho);
        p[i] = fmaf(neg_lr, delta, p[i]);
    }
}

/* kernels.right_product on CPUs with AMX: out[d] = x[d] @ W[d] for bf16 W and bf16/float32 x,
 * float32 sums rounded once to out's dtype (as oneDNN's bf16 matmul), by the AMX tile instructions
 * (a tile: 16 rows of 64 bytes; tdpbf16ps adds a [16, 32] @ [32, 16] bf16 product to a [16, 16]
 * float32 tile). W is packed once (amx_pack), x at every call (amx_product, into work), both into
 * the tiles' layout, zero-padded to whole tiles: oneDNN's matmul costs as much in setting up as in
 * multiplying at the 16-80 rows of a recurrent step. Built where the compiler targets AMX;
 * amx_ready() says whether it was and whether Linux lets this process use the tiles. */
#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__)
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

int amx_ready(void) { /* ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA */
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}

/* Bp[d][n / 16][k / 32] is the tile of W[d, k : k + 32, n : n + 16] (element (k, n) at
 * d * sd + k * sk + n * sn), pairs of consecutive k side by side: Bp row (k % 32) / 2, column
 * 2 * (n % 16) + k % 2. Columns padded to a multiple of 32, rows to one of 32, with zeros. */
void amx_pack(int64_t D, int64_t K, int64_t N, const uint16_t *W, int64_t sd, int64_t sk,
              int64_t sn, uint16_t *Bp, int threads) {
    int64_t nk = (K + 31) / 32, nn = (N + 31) / 32 * 2;
#pragma omp parallel for collapse(3) schedule(static) num_threads(threads)
    for (int64_t d = 0; d < D; d++)
        for (int64_t bn = 0; bn < nn; bn++)
            for (int64_t bk = 0; bk < nk; bk++) {
                uint16_t *tile = Bp + ((d * nn + bn) * nk + bk) * 512;
                for (int64_t c = 0; c < 16; c++)
                    for (int64_t r = 0; r < 32; r++) {
                        int64_t k = bk * 32 + r, n = bn * 16 + c;
                        tile[r / 2 * 32 + 2 * c + r % 2] =
                            k < K && n < N ? W[d * sd + k * sk + n * sn] : 0;
                    }
            }
}

/* Rows i0..i0+rows, columns j..j+cols (cols <= 32) of out = the [16, 32] float32 buf + bias[j..]
 * (float32, or NULL: none). */
static inline void tiles_out(const float *buf, int64_t rows, int64_t cols, const float *bias,
                             const view *out, int64_t d, int64_t i0, int64_t j) {
    __mmask16 m0 = lanes(cols), m1 = lanes(cols - 16);
    __m512 b0 = _mm512_setzero_ps(), b1 = b0;
    if (bias) {
        b0 = _mm512_maskz_loadu_ps(m0, bias + j);
        b1 = _mm512_maskz_loadu_ps(m1, bias + j + 16);
    }
    for (int64_t i = 0; i < rows; i++) {
        int64_t at = d * out->sd + (i0 + i) * out->sr + j;
        __m512 v0 = _mm512_add_ps(_mm512_loadu_ps(buf + 32 * i), b0);
        __m512 v1 = _mm512_add_ps(_mm512_loadu_ps(buf + 32 * i + 16), b1);
        if (out->bf16) {
            __mmask32 m = (__mmask32)m0 | (__mmask32)m1 << 16;
            _mm512_mask_storeu_epi16((uint16_t *)out->data + at, m,
                                     (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
        } else {
            _mm512_mask_storeu_ps((float *)out->data + at, m0, v0);
            _mm512_mask_storeu_ps((float *)out->data + at + 16, m1, v1);
        }
    }
}

/* out [D, M, N] = x [D, M, K] @ W (+ bias [N] float32, unless NULL) for W packed by amx_pack;
 * work: D * ceil(M / 16) * 16 * nk * 32 bf16 for x's tiles. Each thread packs some of x's row
 * tiles, then computes chunks of up to 16 column pairs of tiles (32 columns) for all rows: 2 x 2
 * output tiles at a time, each W tile used twice. */
void amx_product(int64_t D, int64_t M, int64_t K, int64_t N, const view *x, const uint16_t *Bp,
                 const float *bias, const view *out, uint16_t *work, int threads) {
    int64_t nk = (K + 31) / 32, mt = (M + 15) / 16, nb = (N + 31) / 32;
    /* as many chunks of nc <= 16 column pairs for each thread, nc as large as that leaves */
    int64_t per = (threads + D - 1) / D, each = (nb + per * 16 - 1) / (per * 16);
    int64_t nc = (nb + per * each - 1) / (per * each), chunks = (nb + nc - 1) / nc;
#pragma omp parallel num_threads(threads)
    {
#pragma omp for collapse(2) schedule(static)
        for (int64_t d = 0; d < D; d++)
            for (int64_t t = 0; t < mt; t++) {
                uint16_t *A = work + (d * mt + t) * nk * 512;
                for (int64_t i = 0; i < 16; i++) {
                    int64_t row = t * 16 + i;
                    for (int64_t bk = 0; bk < nk; bk++) {
                        __mmask16 m = row < M ? lanes(K - bk * 32) : 0;
                        __mmask16 m2 = row < M ? lanes(K - bk * 32 - 16) : 0;
                        __m512i v;
                        if (x->bf16) {
                            const uint16_t *src = (const uint16_t *)x->data;
                            __mmask32 mm = (__mmask32)m | (__mmask32)m2 << 16;
                            v = _mm512_maskz_loadu_epi16(mm, src + d * x->sd + row * x->sr +
                                                                 bk * 32);
                        } else {
                            const float *src = (const float *)x->data + d * x->sd + row * x->sr +
                                               bk * 32;
                            __m512 lo = _mm512_maskz_loadu_ps(m, src);
                            __m512 hi = _mm512_maskz_loadu_ps(m2, src + 16);
                            v = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
                        }
                        _mm512_storeu_si512(A + bk * 512 + i * 32, v);
                    }
                }
            }
        tile_config cfg = {.palette = 1};
        for (int t = 0; t < 8; t++) {
            cfg.rows[t] = 16;
            cfg.colsb[t] = 64;
        }
        _tile_loadconfig(&cfg);
        float buf[32 * 32];
#pragma omp for collapse(2) schedule(static)
        for (int64_t d = 0; d < D; d++)
            for (int64_t ch = 0; ch < chunks; ch++)
                for (int64_t t = 0; t < mt; t += 2) {
                    const uint16_t *A0 = work + (d * mt + t) * nk * 512, *A1 = A0 + nk * 512;
                    int64_t r0 = M - t * 16 < 16 ? M - t * 16 : 16, r1 = M - t * 16 - r0;
                    r1 = r1 > 16 ? 16 : r1;
                    int64_t end = (ch + 1) * nc < nb ? (ch + 1) * nc : nb;
                    for (int64_t b = ch * nc; b < end; b++) {
                        const uint16_t *B0 = Bp + (d * nb * 2 + 2 * b) * nk * 512,
                                       *B1 = B0 + nk * 512;
                        int64_t cols = N - b * 32 < 32 ? N - b * 32 : 32;
                        _tile_zero(0);
                        _tile_zero(1);
                        _tile_zero(2);
                        _tile_zero(3);
                        for (int64_t bk = 0; bk < nk; bk++) {
                            if (t == 0 && bk + 2 < nk) /* W's tiles from L3 (bench/README.md) */
                                for (int64_t l = (bk + 2) * 512; l < (bk + 3) * 512; l += 32) {
                                    _mm_prefetch((const char *)(B0 + l), _MM_HINT_T0);
                                    _mm_prefetch((const char *)(B1 + l), _MM_HINT_T0);
                                }
                            _tile_loadd(4, A0 + bk * 512, 64);
                            _tile_loadd(6, B0 + bk * 512, 64);
                            _tile_dpbf16ps(0, 4, 6);
                            _tile_loadd(7, B1 + bk * 512, 64);
                            _tile_dpbf16ps(1, 4, 7);
                            if (r1 > 0) {
                                _tile_loadd(5, A1 + bk * 512, 64);
                                _tile_dpbf16ps(2, 5, 6);
                                _tile_dpbf16ps(3, 5, 7);
                            }
                        }
                        _tile_stored(0, buf, 128);
                        _tile_stored(1, buf + 16, 128);
                        _tile_stored(2, buf + 512, 128);
                        _tile_stored(3, buf + 528, 128);
                        tiles_out(buf, r0, cols, bias, out, d, t * 16, b * 32);
                        tiles_out(buf + 512, r1, cols, bias, out, d, t * 16 + 16, b * 32);
                    }
                }
        _tile_release();
    }
}
#else
int amx_ready(void) { return 0; }
void amx_pack(void) {}
void amx_product(void) {}
#endif
