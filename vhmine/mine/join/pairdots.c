/* The re-check's arithmetic on pairs of float32 rows read where they lie (vhmine.mine.join.native): their
 * float32 products (pair_dots), and the float64 products of their elements (pair_products), which are exact
 * (a float32 times a float32 fits in a float64's 53 bits), for recheck.pair_sims to sum as it always has.
 * pair_dots' sums run in whatever order the vector unit takes: recheck's error bound holds for any order. */
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CLONES
#endif

CLONES void pair_dots(const float* x, long d, const int64_t* i, const int64_t* j, long n, float* out) {
  for (long p = 0; p < n; p++) {
    const float* a = x + i[p] * d;
    const float* b = x + j[p] * d;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (long k = 0; k < d; k++) s += a[k] * b[k];
    out[p] = s;
  }
}

CLONES void pair_products(const float* x, long d, const int64_t* i, const int64_t* j, long n, double* out) {
  for (long p = 0; p < n; p++) {
    const float* a = x + i[p] * d;
    const float* b = x + j[p] * d;
    double* o = out + p * d;
#pragma omp simd
    for (long k = 0; k < d; k++) o[k] = (double)a[k] * (double)b[k];
  }
}
