/* Internal: the AMX int8 kernel's body (nn/gemm_kernels.h), included by the files that give its
 * tile operations a form:
 *   gemm_int8_amx.c           the tile unit's instructions (AMX-INT8), the kernel est runs
 *   gemm_int8_amx_emulated.c  the same operations in plain C after the instruction set's
 *                             definition, for the tests only: a CPU without AMX checks this
 *                             body's layout, tiling and edges against the reference
 * Each defines AMX8_TARGET (its target attribute), AMX8_BLOCK (the block function's name) and
 * the tile operations TILE_CONFIGURE() (all eight tiles 16 rows x 64 bytes), TILE_RELEASE(),
 * TILE_ZERO(t), TILE_LOAD(t, p, stride), TILE_STORE(t, p, stride) (stride in bytes) and
 * TILE_DPBUSD(c, a, b), with t, c, a, b literal tile numbers (an instruction names its tiles).
 *
 * TDPBUSD multiplies a 16 x 64 u8 tile of A (16 rows m, each 16 words of 4 k) by a 16 x 64
 * s8 tile of B (16 rows of k groups, each 16 columns' words of 4 k) into a 16 x 16 int32
 * tile of C: 16384 multiply-adds in one instruction, the integer sums VPDPBUSD makes 64 at a
 * time. So the weights' panel-major words (est_int8_weights) are B tiles as they lie: panel
 * p's [groups][32] words hold, for k tile kt, two tiles 128 bytes a row, at word kt 16 32 and
 * 16 more. A comes quantized in the tiles' own layout (EST_INT8_TILES16, nn/quant_int8.h):
 * 1 KiB tiles [mt][kt][16 m][16 words], zero past K's groups, loaded where they lie. A last
 * k tile that the groups do not fill takes its B rows from a copy zero-padded past them, so
 * that nothing past the weights is read. The sums are then those of the other kernels
 * exactly, and the end of a tile is theirs: subtract 128 colsum, convert, one FMA with
 * sa sw and the bias (gemm_int8_vnni512.c).
 *
 * Tiles 0-3 hold a 32 x 32 block of C (two row tiles x the panel's two column tiles), 4-5 its
 * two A tiles and 6-7 its two B tiles at one kt: four loads feed four TDPBUSD, as in the
 * bf16 tile kernel (gemm_amx.c). Panels outermost, so one panel's weights (K x 32 bytes)
 * stay in L2 down the block's rows. A block with 16 rows or fewer left runs one row tile. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "nn/gemm_kernels.h"
#include "nn/gemm_util.h"

enum { AMX8_ROWS = 16, AMX8_WORDS = 16, AMX8_TILE = AMX8_ROWS * AMX8_WORDS };

/* One row tile of C from its two accumulators: acc[h] the 16 x 16 sums of columns n + 16 h,
 * rows from m (sa + m their scales), `rows` of them valid, columns before n1. */
AMX8_TARGET static void amx8_store(const int32_t acc[2][AMX8_TILE], const est_int8_weights *w, const float *sa,
                                   const float *bias, float *C, int ldc, int m, int rows, int n, int n1) {
  for (int h = 0; h < 2; h++) {
    const int c0 = n + AMX8_WORDS * h;
    const __mmask16 cols = est_lanes16(n1 - c0);
    if (!cols) continue;
    const __m512i comp = _mm512_slli_epi32(_mm512_loadu_si512(w->colsum + c0), 7); /* 128 colsum */
    const __m512 sw = _mm512_loadu_ps(w->scale + c0);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(cols, bias + c0) : _mm512_setzero_ps();
    for (int r = 0; r < rows; r++) {
      __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_loadu_si512(acc[h] + AMX8_WORDS * r), comp));
      _mm512_mask_storeu_ps(C + (size_t)(m + r) * ldc + c0, cols,
                            _mm512_fmadd_ps(v, _mm512_mul_ps(_mm512_set1_ps(sa[m + r]), sw), b));
    }
  }
}

/* Rows [m, m + 32) (tiles mt, mt + 1 from Ap; `two` = 0: only mt's 16) times one panel: its
 * k tiles from the panel's words, the last from tail when the groups end inside it. */
AMX8_TARGET static void amx8_rows_by_panel(const int32_t *Ap, int Kt, int mt, int two, const int32_t *panel,
                                           int full_kt, const int32_t *tail, int32_t acc[4][AMX8_TILE]) {
  const int32_t *a0 = Ap + (size_t)mt * Kt * AMX8_TILE, *a1 = a0 + (size_t)Kt * AMX8_TILE;
  TILE_ZERO(0);
  TILE_ZERO(1);
  TILE_ZERO(2);
  TILE_ZERO(3);
  for (int kt = 0; kt < Kt; kt++) {
    const int32_t *b = kt < full_kt ? panel + (size_t)kt * AMX8_ROWS * EST_INT8_NR : tail;
    TILE_LOAD(4, a0 + (size_t)kt * AMX8_TILE, 64);
    TILE_LOAD(6, b, EST_INT8_NR * 4);
    TILE_LOAD(7, b + AMX8_WORDS, EST_INT8_NR * 4);
    TILE_DPBUSD(0, 4, 6);
    TILE_DPBUSD(1, 4, 7);
    if (two) {
      TILE_LOAD(5, a1 + (size_t)kt * AMX8_TILE, 64);
      TILE_DPBUSD(2, 5, 6);
      TILE_DPBUSD(3, 5, 7);
    }
  }
  TILE_STORE(0, acc[0], 64);
  TILE_STORE(1, acc[1], 64);
  if (two) {
    TILE_STORE(2, acc[2], 64);
    TILE_STORE(3, acc[3], 64);
  }
}

AMX8_TARGET void AMX8_BLOCK(est_int8_a_layout layout, const est_int8_weights *w, const uint8_t *qa, const float *sa,
                            const float *bias, float *C, int ldc, int m0, int m1, int n0, int n1) {
  (void)layout; /* always EST_INT8_TILES16 */
  const int groups = w->groups, full_kt = groups / AMX8_ROWS, Kt = (groups + AMX8_ROWS - 1) / AMX8_ROWS;
  const int Mt = (m1 - m0 + AMX8_ROWS - 1) / AMX8_ROWS;
  /* the block's first A tile (m0 is a multiple of 16: tile-aligned), its rows' tiles Kt apart */
  const int32_t *Ap = (const int32_t *)qa + est_int8_a_word(EST_INT8_TILES16, m0, 0, groups);
  int32_t __attribute__((aligned(64))) tail[AMX8_ROWS * EST_INT8_NR]; /* a panel's last k tile, zero-padded */
  int32_t __attribute__((aligned(64))) acc[4][AMX8_TILE];
  TILE_CONFIGURE();
  for (int n = n0; n < n1; n += EST_INT8_NR) {
    const int32_t *panel = est_int8_column(w, n); /* n0 and so n: multiples of EST_INT8_NR */
    if (full_kt < Kt) { /* the groups' last rows, then zeros */
      const int have = groups - full_kt * AMX8_ROWS;
      memcpy(tail, panel + (size_t)full_kt * AMX8_ROWS * EST_INT8_NR, (size_t)have * EST_INT8_NR * 4);
      memset(tail + (size_t)have * EST_INT8_NR, 0, (size_t)(AMX8_ROWS - have) * EST_INT8_NR * 4);
      /* GCC's _tile_loadd names its address as a plain register input, not as memory it reads,
       * so nothing would keep these stores to a local array before the loads (or at all):
       * a compiler barrier does (TILESTORED's builtin clobbers memory; the others' operands
       * are written by other functions) */
      __asm__ volatile("" ::: "memory");
    }
    for (int mt = 0; mt < Mt; mt += 2) {
      const int m = m0 + mt * AMX8_ROWS, two = mt + 1 < Mt;
      amx8_rows_by_panel(Ap, Kt, mt, two, panel, full_kt, tail, acc);
      const int rows = m1 - m < AMX8_ROWS ? m1 - m : AMX8_ROWS;
      amx8_store((const int32_t(*)[AMX8_TILE])acc, w, sa, bias, C, ldc, m, rows, n, n1);
      if (two) {
        const int rows2 = m1 - m - AMX8_ROWS < AMX8_ROWS ? m1 - m - AMX8_ROWS : AMX8_ROWS;
        amx8_store((const int32_t(*)[AMX8_TILE])(acc + 2), w, sa, bias, C, ldc, m + AMX8_ROWS, rows2, n, n1);
      }
    }
  }
  TILE_RELEASE();
}
