/* _NchwcConv2D's depthwise convs with 3- or 5-wide filters and no dilation, on any plane
 * (nchwc_conv.c routes them here; its padded-copy route keeps the others): NCHWc8, a block's 8
 * channels in a vector's lanes, one output row of one (image, block) plane a call.
 *
 * The manner of MLAS's MlasConvDepthwiseFloatKernel, with input reuse across taps: a tile is
 * DW_P output pixels of a row in DW_P vector accumulators; for each filter row the kw filter
 * vectors are loaded once, then each input pixel the tile's window spans ((DW_P - 1) * S + kw of
 * them) is loaded once and multiply-added into every accumulator whose window holds it (kw / S of
 * them).  A 3x3 stride-1 tile thus does 24 multiply-adds for 13 loads, where a load per
 * multiply-add (the generic depthwise tile) bound the kernel on loads.  kw and the stride are
 * compile-time (3 / 5 x 1 / 2), so the tile is straight-line code on registers: DW_P + kw + 1
 * vectors.
 *
 * Borders with no per-pixel clipping: rows outside the input are skipped per filter row; a tile
 * whose window leaves the row on either side (the first, the last, a row's short remainder) is
 * run on a copy of its window (kh rows of (DW_P - 1) * S + kw pixels, zeros outside the input,
 * on the stack) and stores only its pixels inside the output row.  Bias starts the accumulators;
 * the residual and Relu / Clip run on them as they are stored, other activations on the stored
 * row (in L1).  The pool's work items are consecutive output rows of a plane (nchwc_conv.c's
 * nc_chunk), so the kh input rows a row reads stay in L1 for the next one.  The rows are compiled
 * once per kernel family (nchwc_dw_tmpl.h; nchwc.h): hrt_nchwc_dw_row_avx512 / _avx2 / _generic,
 * each called by the same family's conv rows. */
#include "kcommon.h"

#include "nchwc.h"

#define DW_P 8      /* output pixels a tile */
#define DW_KHMAX 7  /* filter rows, at most */

bool hrt_nchwc_dw_ok(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw) {
    return (kw == 3 || kw == 5) && kh >= 1 && kh <= DW_KHMAX && sh >= 1 && (sw == 1 || sw == 2) &&
           dh == 1 && dw == 1;
}

#define NC_TMPL "nchwc_dw_tmpl.h"
#include "nchwc_families.h"
