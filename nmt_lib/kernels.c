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

/* search.best_words for a [R, K] matrix of bf16 (is_bf16) or float32 logits, row stride ldx:
 * per row, in float32, x + bias (bias may be NULL); if normalize, m = max and
 * s = sum exp(x - m) over ALL words; then words 0 (<pad>), 1 (<unk>, if ignore_unk) and 2 (EOS, if
 * no_eos[r]) excluded; the k largest (k <= K) written best first to out_v as (x - m) - log s
 * (x itself if not normalize) and their columns to out_i; among equal values the lower column
 * first. work: threads * K floats, the row in float32 for each thread (in cache); the input is read
 * once. */
void best_words(const void *x, int is_bf16, int64_t R, int64_t K, int64_t ldx, const float *bias,
                const uint8_t *no_eos, int ignore_unk, int normalize, int64_t k, int threads,
                float *work, float *out_v, int64_t *out_i) {
#pragma omp parallel num_threads(threads)
    {
        float *row = work + (int64_t)omp_get_thread_num() * K;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < R; r++) {
            float m = -INFINITY;
            if (is_bf16) {
                const uint16_t *xr = (const uint16_t *)x + r * ldx;
#pragma omp simd reduction(max : m)
                for (int64_t j = 0; j < K; j++) {
                    float v = bf16_to_float(xr[j]) + (bias ? bias[j] : 0.0f);
                    row[j] = v;
                    m = v > m ? v : m;
                }
            } else {
                const float *xr = (const float *)x + r * ldx;
#pragma omp simd reduction(max : m)
                for (int64_t j = 0; j < K; j++) {
                    float v = xr[j] + (bias ? bias[j] : 0.0f);
                    row[j] = v;
                    m = v > m ? v : m;
                }
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
            /* top k by insertion into a sorted list; blocks of 64 whose max cannot enter skipped */
            float *tv = out_v + r * k;
            int64_t *ti = out_i + r * k, filled = 0;
            for (int64_t j0 = 0; j0 < K; j0 += 64) {
                int64_t j1 = j0 + 64 < K ? j0 + 64 : K;
                if (filled == k) {
                    float bm = -INFINITY;
#pragma omp simd reduction(max : bm)
                    for (int64_t j = j0; j < j1; j++) bm = row[j] > bm ? row[j] : bm;
                    if (!(bm > tv[k - 1])) continue;
                }
                for (int64_t j = j0; j < j1; j++) {
                    float v = row[j];
                    if (filled == k && !(v > tv[k - 1])) continue;
                    int64_t i = filled < k ? filled++ : k - 1;
                    for (; i > 0 && v > tv[i - 1]; i--) {
                        tv[i] = tv[i - 1];
                        ti[i] = ti[i - 1];
                    }
                    tv[i] = v;
                    ti[i] = j;
                }
            }
            if (normalize)
                for (int64_t i = 0; i < k; i++) tv[i] = (tv[i] - m) - log_s;
        }
    }
}
