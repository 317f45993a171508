/* The fused products kernel of vhmine.mine.join.vnni: int8 rows a (M x K) times int8 rows b (N x K), each
 * product compared with a threshold as it is made and the pairs at or above it listed; no product is written
 * unless `out` is given. AVX512-VNNI (VPDPBUSD: unsigned x signed bytes into int32): a's bytes are shifted by
 * +128 as they are packed (XOR 0x80), and the shift's share, 128 x (the sum of b's row), is taken off at the
 * end (comp). Every product is an integer below 2^24 in magnitude, and every partial sum, the shift's share
 * included, below (L + 128) L K for rows of levels L = quantise.qmax_for(K) (L^2 K < 2^24): under 2^31 for
 * every width up to 2^23 (checked), so exact in int32.
 *
 * Both operands are packed (vnni_pack_left, vnni_pack); M a multiple of 4, N of 64, K of 4 (the miner's rows
 * are padded so). A tile of 4 rows by 64 columns is held in 16 registers; the width runs in blocks of KC bytes
 * (the panel's block, 24 KiB, stays in the L1 cache), the rows in blocks of MB (a block's partial sums in cbuf,
 * MB x 64 int32, the caller's: one per thread). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define KC 384 /* (K = 768: two blocks) */
#define MB 128 /* vnni.py's MB */
#define NC 64

#define ACC(r, z) c##r##z
#define ALL(F) F(0, 0), F(0, 1), F(0, 2), F(0, 3), F(1, 0), F(1, 1), F(1, 2), F(1, 3), \
               F(2, 0), F(2, 1), F(2, 2), F(2, 3), F(3, 0), F(3, 1), F(3, 2), F(3, 3)
#define DECLARE(r, z) ACC(r, z) = _mm512_setzero_si512()
#define LOAD(r, z) ACC(r, z) = _mm512_loadu_si512(cb + r * NC + 16 * z)
#define STORE(r, z) _mm512_storeu_si512(cb + r * NC + 16 * z, ACC(r, z))
#define CHECK(r, z) nh = check(ACC(r, z), comp + n0 + 16 * z, th, out, (m0 + r) * N + n0 + 16 * z, hits, maxhits, nh)
#define ROW(r)                                                                                               \
  {                                                                                                          \
    __m512i av = _mm512_set1_epi32(*(const int32_t*)(ak + 4 * r));                                          \
    ACC(r, 0) = _mm512_dpbusd_epi32(ACC(r, 0), av, b0);                                                      \
    ACC(r, 1) = _mm512_dpbusd_epi32(ACC(r, 1), av, b1);                                                      \
    ACC(r, 2) = _mm512_dpbusd_epi32(ACC(r, 2), av, b2);                                                      \
    ACC(r, 3) = _mm512_dpbusd_epi32(ACC(r, 3), av, b3);                                                      \
  }

/* The 16 finished products acc - comp at flat index at..at+15: written to out (if any), those >= th listed. */
static inline long check(__m512i acc, const int32_t* comp, __m512i th, int32_t* out, int at, int32_t* hits,
                         long maxhits, long nh) {
  __m512i v = _mm512_sub_epi32(acc, _mm512_loadu_si512(comp));
  if (out) _mm512_storeu_si512(out + at, v);
  __mmask16 km = _mm512_cmpge_epi32_mask(v, th);
  if (!km) return nh;
  int32_t vals[16];
  _mm512_storeu_si512(vals, v);
  while (km) {
    int j = __builtin_ctz(km);
    km &= km - 1;
    if (nh < maxhits) {
      hits[2 * nh] = at + j;
      hits[2 * nh + 1] = vals[j];
    }
    nh++;
  }
  return nh;
}

/* Sixteen vectors of 16 int32 transposed in place: r[j] lane i becomes r[i] lane j (unpacks of 32 and 64 bits,
 * then of 128-bit lanes). */
static inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 16; i += 8)
    for (int j = 0; j < 4; j++) {
      t[i + j] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0xdd);
    }
  for (int j = 0; j < 8; j++) {
    r[j] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd);
  }
}

/* b (N x K, row-major, N a multiple of 64) as panels of 64 rows, four bytes of each row side by side
 * (bp: N x K bytes), and comp[j] = 128 x sum of row j. Sixteen rows at a time, 64 bytes of each: loaded whole,
 * transposed as sixteen sets of four bytes in registers, stored whole, and summed by VPDPBUSD with bytes of 1;
 * the width's last bytes short of 64 one set of four at a time. (A gather of each row's four bytes, 16 rows at a
 * time, took 3.5 times as long: 200-240 us a 1,024-row piece of width 768 against 62.) */
void vnni_pack(const int8_t* b, int ldb, int N, int K, int8_t* bp, int32_t* comp) {
  const __m512i ones = _mm512_set1_epi8(1);
  const int K4 = K / 4, whole = K4 / 16 * 16;
  for (int n0 = 0; n0 < N; n0 += NC) {
    int32_t* dst = (int32_t*)(bp + (size_t)n0 * K);
    for (int c0 = 0; c0 < NC; c0 += 16) {
      const int8_t* base = b + (size_t)(n0 + c0) * ldb;
      __m512i sum = _mm512_setzero_si512();
      for (int k4 = 0; k4 < whole; k4 += 16) {
        __m512i r[16];
        for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(base + (size_t)i * ldb + 4 * k4);
        transpose16(r);
        for (int t = 0; t < 16; t++) {
          _mm512_storeu_si512(dst + (k4 + t) * NC + c0, r[t]);
          sum = _mm512_dpbusd_epi32(sum, ones, r[t]);
        }
      }
      int32_t sums[16];
      _mm512_storeu_si512(sums, sum);
      for (int i = 0; i < 16; i++) {
        const int8_t* row = base + (size_t)i * ldb;
        for (int k4 = whole; k4 < K4; k4++) {
          int32_t v;
          memcpy(&v, row + 4 * k4, 4);
          dst[k4 * NC + c0 + i] = v;
          for (int q = 0; q < 4; q++) sums[i] += row[4 * k4 + q];
        }
        comp[n0 + c0 + i] = 128 * sums[i];
      }
    }
  }
}

/* a (M x K, row-major, M a multiple of 4) as blocks of 4 rows, four bytes of each row side by side, each byte
 * shifted by +128 (XOR 0x80: int8 q becomes uint8 q + 128): ap, M x K bytes. */
void vnni_pack_left(const int8_t* a, int lda, int M, int K, uint8_t* ap) {
  for (int m0 = 0; m0 < M; m0 += 4) {
    uint32_t* dst = (uint32_t*)(ap + (size_t)m0 * K);
    for (int r = 0; r < 4; r++) {
      const uint32_t* src = (const uint32_t*)(a + (size_t)(m0 + r) * lda);
      for (int k4 = 0; k4 < K / 4; k4++) dst[4 * k4 + r] = src[k4] ^ 0x80808080u;
    }
  }
}

/* Returns the number of pairs at or above thresh; the first maxhits are in hits as (row * N + column,
 * product) int32 pairs, in no promised order. out, when not null: every product (M x N, row-major). */
long vnni_search(const uint8_t* a, int M, const int8_t* bp, const int32_t* comp, int N, int K,
                 int thresh, int32_t* cbuf, int32_t* hits, long maxhits, int32_t* out) {
  long nh = 0;
  const __m512i th = _mm512_set1_epi32(thresh);
  for (int mb = 0; mb < M; mb += MB) {
    int mend = mb + MB < M ? mb + MB : M;
    for (int n0 = 0; n0 < N; n0 += NC) {
      const int8_t* panel = bp + (size_t)n0 * K;
      for (int k0 = 0; k0 < K; k0 += KC) {
        int kend = (k0 + KC < K ? k0 + KC : K) / 4, last = k0 + KC >= K;
        for (int m0 = mb; m0 < mend; m0 += 4) {
          const uint8_t* a0 = a + (size_t)m0 * K;
          int32_t* cb = cbuf + (size_t)(m0 - mb) * NC;
          /* (sixteen named accumulators, not an array: gcc keeps these in registers, an array it spills) */
          __m512i ALL(DECLARE);
          if (k0) { ALL(LOAD); }
          for (int k = k0 / 4; k < kend; k++) {
            const int8_t* bk = panel + (size_t)k * NC * 4;
            const uint8_t* ak = a0 + (size_t)k * 16;
            __m512i b0 = _mm512_loadu_si512(bk), b1 = _mm512_loadu_si512(bk + 64);
            __m512i b2 = _mm512_loadu_si512(bk + 128), b3 = _mm512_loadu_si512(bk + 192);
            /* (keeps each panel vector in a register: gcc would fold it into every multiply's operand) */
            __asm__ volatile("" : "+v"(b0), "+v"(b1), "+v"(b2), "+v"(b3));
            ROW(0) ROW(1) ROW(2) ROW(3)
          }
          if (!last) {
            ALL(STORE);
            continue;
          }
          ALL(CHECK);
        }
      }
    }
  }
  return nh;
}
