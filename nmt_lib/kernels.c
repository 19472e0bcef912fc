/* Compiled CPU kernels of nmt_lib (loaded by kernels.py with ctypes; plain C, OpenMP, no Python or
 * PyTorch headers). Each computes what a few PyTorch operations compute, in one pass over memory
 * instead of one pass per operation; kernels.py says where each is used and the tests compare
 * them with those operations. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

static inline float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Element i of a bf16 (is_bf16) or float32 array, as float32. The flag is the same for a whole
 * loop: the compiler makes one vectorized loop per case. */
static inline float load(const void *z, int is_bf16, int64_t i) {
    return is_bf16 ? bf16_to_float(((const uint16_t *)z)[i]) : ((const float *)z)[i];
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

/* search.best_words for a [R, K] matrix of bf16 (is_bf16) or float32 logits, row stride ldx:
 * per row, in float32, x + bias (bias may be NULL); if normalize, m = max and
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
            float m = -INFINITY;
            for (int64_t b = 0; b < nb; b++) {
                int64_t j0 = b * BLOCK, j1 = j0 + BLOCK < K ? j0 + BLOCK : K;
                float q = -INFINITY;
#pragma omp simd reduction(max : q)
                for (int64_t j = j0; j < j1; j++) {
                    float v = load(x, is_bf16, r * ldx + j) + (bias ? bias[j] : 0.0f);
                    row[j] = v;
                    q = v > q ? v : q;
                }
                bmax[b] = q;
                m = q > m ? q : m;
            }
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

/* tanh (Cephes' tanhf: an odd polynomial below 0.625, (1 - e^-2|x|) / (1 + e^-2|x|) above; ~2 ulp),
 * branch-free so that the loops around it vectorize. */
static inline float tanh_float(float x) {
    float a = fabsf(x), z = x * x;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    float t = exp_nonpositive(-2.0f * a);
    float big = copysignf((1.0f - t) / (1.0f + t), x);
    return a < 0.625f ? p * z * x + x : big;
}

/* attention.energies_in_pieces: e[b, g, j] = sum_d v[d] tanh(Uh[b, j, d] + Ws[b, g, d]) for B
 * sentences, G states each, Tx positions, n' = N; all float32, contiguous. Each sentence's Uh
 * (Tx * N floats) is read from cache for its G states; nothing but e is written. */
void energies(const float *Uh, const float *Ws, const float *v, int64_t B, int64_t G, int64_t Tx,
              int64_t N, int threads, float *e) {
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
    for (int64_t b = 0; b < B; b++)
        for (int64_t g = 0; g < G; g++) {
            const float *ws = Ws + (b * G + g) * N;
            for (int64_t j = 0; j < Tx; j++) {
                const float *uh = Uh + (b * Tx + j) * N;
                float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
                for (int64_t d = 0; d < N; d++) acc += v[d] * tanh_float(uh[d] + ws[d]);
                e[(b * G + g) * Tx + j] = acc;
            }
        }
}

/* The backward of energies (decoder._energies_backward), tanh recomputed: for each of B sentences
 * with state term q[b] (W_a s_{i-1}) and dL/de[b, j] = d_e[b, j], t = tanh(Uh[b, j] + q[b]):
 * d_sum[b, j] += d_e[b, j] (1 - t^2)   (accumulated over the steps of the caller's loop),
 * d_q[b] = sum_j d_e[b, j] (1 - t^2),  dv[b] = sum_j d_e[b, j] t   (the caller sums dv over b).
 * All float32, contiguous; Uh, d_sum [B, Tx, N], q, d_q, dv [B, N], d_e [B, Tx]. */
void energies_backward(const float *Uh, const float *q, const float *d_e, int64_t B, int64_t Tx,
                       int64_t N, int threads, float *d_sum, float *d_q, float *dv) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t b = 0; b < B; b++) {
        const float *qb = q + b * N;
        float *dq = d_q + b * N, *dvb = dv + b * N;
        for (int64_t d = 0; d < N; d++) dq[d] = dvb[d] = 0.0f;
        for (int64_t j = 0; j < Tx; j++) {
            const float *uh = Uh + (b * Tx + j) * N;
            float *ds = d_sum + (b * Tx + j) * N, de = d_e[b * Tx + j];
#pragma omp simd
            for (int64_t d = 0; d < N; d++) {
                float t = tanh_float(uh[d] + qb[d]), g = de * (1.0f - t * t);
                ds[d] += g;
                dq[d] += g;
                dvb[d] += de * t;
            }
        }
    }
}

static inline uint16_t float_to_bf16(float f) { /* round to nearest even, as PyTorch; NaN stays NaN */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint16_t rounded = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? (uint16_t)((u >> 16) | 0x40u) : rounded;
}

/* decoder.target_log_prob, forward: for N rows of logits z (bf16 if is_bf16, else float32; row
 * stride ldz) plus bias[K], in float32: m = max, log_s = log sum exp(x - m) over the row,
 * logp[r] = (x[y[r]] - m) - log_s; stats[r] = (m, log_s) for the backward. */
void target_logp(const void *z, int is_bf16, int64_t N, int64_t K, int64_t ldz, const float *bias,
                 const int64_t *y, int threads, float *logp, float *stats) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t r = 0; r < N; r++) {
        float m = -INFINITY, s = 0.0f;
#pragma omp simd reduction(max : m)
        for (int64_t j = 0; j < K; j++) {
            float v = load(z, is_bf16, r * ldz + j) + bias[j];
            m = v > m ? v : m;
        }
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < K; j++) s += exp_nonpositive(load(z, is_bf16, r * ldz + j) + bias[j] - m);
        float log_s = logf(s);
        logp[r] = (load(z, is_bf16, r * ldz + y[r]) + bias[y[r]] - m) - log_s;
        stats[2 * r] = m;
        stats[2 * r + 1] = log_s;
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
