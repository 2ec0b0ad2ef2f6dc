// GridSampler2DBackward: the plan (paths, blocks, parts, workspace layout), from the arguments alone.
// A part of the kernel ops/grid_sampler2d_backward.cpp, compiled inside it once per ISA level
// (hence the ISA namespace and the anonymous namespace); nothing outside the kernel includes it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "aclnn_cpu/ops/grid_sampler2d_backward_args.h"
#include "aclnn_cpu/simd.h"
#include "aclnn_cpu/staging.h"  // staged_slots
#include "channel_layout.h"  // make_plane
#include "constants.h"
#include "records.h"

namespace aclnn_cpu {
namespace ACLNN_ISA_NS {
namespace {

// ---------------------------------------------------------------------------------------------
// The plan: block width, chunking, parallel strategy and workspace layout. A function of the
// arguments only (never of the thread count), shared by the workspace query and the run.

struct Plan {
  Geometry geo;
  int64_t interp = 0, pad = 0;
  bool align = false;
  bool need_ig = false;  // inputGrad requested
  bool need_gg = false;  // gridGrad requested
  bool need_gx = false;  // gridGrad needs computing (not nearest)
  bool trivial = false;  // nothing to compute beyond zero-filling outputs
  bool stream_out = false;  // inputGrad is big: write it with cache-bypassing stores
  // Nearest's gridGrad (all zeros) is zero-filled by each sample's first task, on every thread,
  // rather than by one thread before the tasks (Runner::zero_sample_grid_grad).
  bool zero_gg_in_tasks = false;
  int cb = 16;           // channels per block
  int64_t nblocks = 0;
  int64_t chunk = 1;     // samples per chunk
  int64_t parts = 1;     // position parts per block (> 1: split positions, reduce inputGrad)
  int64_t slots = 1;     // scratch slots = most threads used in phase 2
  bool compact = false;  // phase 2 on the referenced pixels only (see kCompactRatio)
  int64_t taps = 0;      // input pixels a position reads: 4 bilinear, 1 nearest, 16 bicubic
  // Each tile's records computed in the thread's slot just before the tile uses them (bilinear
  // with up to kTileRecordBlocks blocks, bicubic; not compact) rather than in phase 1.
  bool tile_records = false;
  bool tile_grid_grad = false;  // with tile records and one block: gridGrad written per tile
  // Workspace layout (bytes from the aligned base).
  int64_t buf_floats = 0;   // one channel-last buffer: (H*W + 1) * cb, or framed
  int64_t rec_array = 0;    // bytes of one record array (chunk * P entries, or kTile, aligned)
  int64_t mult_array = 0;   // several blocks with tile records: bytes of the chunk's bilinear multipliers
  int64_t mult_off = 0, rec_off = 0, part_off = 0, group_off = 0, group_bytes = 0, slot_off = 0, slot_bytes = 0;
  int64_t buffer_bytes = 0;  // fused: a slot's bytes before its tile (the buffers, or the compact layout)
  bool few_bicubic = false;  // bicubic, 16 taps a position kFewBicubicRatio times fewer than the pixels
  bool direct = false;  // one block of up to 4 channels on its planes themselves (run_direct)
  bool direct_in_place = false;  // direct, and inputGrad is fp32 on a flat plane: summed in place
  bool direct_prefetch = false;  // direct, on a sample's planes bigger than kCompactCachedBytes
  bool direct_copy_input = false;  // direct, and the input plane is not flat: read from flat copies
  // Bilinear, one channel block, whole buffers (fused, not compact or direct): the buffers and
  // records take the framed layout (Frame), buf_floats = Frame::pixels * cb.
  bool framed = false;
  int64_t total = 0;
};

// Byte sizes of run_compact's regions, in the order it takes them from a slot: the pixel ->
// row map, the remapped corners, the row -> pixel list, then one buffer of `rows` rows of cb
// lanes for the input (when needed) and one for inputGrad (when needed).
struct CompactSizes {
  int64_t rows, map, remap, pixels, buffer;
  CompactSizes(int64_t HW, int64_t P, int64_t taps, int64_t cb)
      : rows(taps * P + 1),  // most distinct pixels, the sink included
        map(4 * (HW + 1)),
        remap(4 * taps * P),
        pixels(4 * rows),
        buffer(rows * cb * 4) {}
};

int record_arrays(int64_t interp) { return interp == kBilinear ? 10 : interp == kNearest ? 1 : kBicubicTileArrays; }

// Blocks are at most one native register of floats (16 lanes on AVX-512, 8 on AVX2, 4 at the
// baseline). Wider blocks buy nothing there: a block's per-position work (its records, the
// corner and index arithmetic) is shared by its lanes, but two registers' lanes cost two
// registers' instructions anyway, and GCC expands some operations of generic vectors wider
// than the registers element by element (the lane shuffles of fmadd's and pair_sum's 16-lane
// forms went through memory on AVX2). On a Zen 3 (AVX2) machine, 2 threads, fp32, processes
// alternated, 16-lane blocks against 8-lane ones: N1 C256 64x64 -> 128x128 bilinear warp 1.52x
// the time, N32 C32 64x64 bilinear 1.51x, nearest 1.21x, bicubic 2.46x. So the widths the
// level cannot hold in a register are neither planned nor compiled.
int pick_block_width(int64_t C) {
  if (C == 1) return 1;  // one lane: no transposes, a quarter of the buffers
  // Relative cost of one position for one block of each width; fewest total cost wins.
  const int widths[3] = {16, 8, 4};
  const double cost[3] = {1.0, 0.6, 0.4};
  int best = 0;
  double best_cost = 0;
  for (int k = 0; k < 3; ++k) {
    if (widths[k] > simd::kWidth) continue;
    const double c = double(ceil_div(C, widths[k])) * cost[k];
    if (best == 0 || c < best_cost) {
      best = widths[k];
      best_cost = c;
    }
  }
  return best;
}

Plan make_plan(const GridSampler2DBackwardArgs& a) {
  Plan p;
  Geometry& g = p.geo;
  g = make_geometry(a.input, a.grid, a.alignCorners);
  p.interp = a.interpolationMode;
  p.pad = a.paddingMode;
  p.align = a.alignCorners;
  p.need_ig = a.outputMask[0] && a.inputGrad.present;
  p.need_gg = a.outputMask[1] && a.gridGrad.present;
  p.need_gx = p.need_gg && p.interp != kNearest;
  p.trivial = (!p.need_ig && !p.need_gx) || g.N == 0 || g.C == 0 || g.P == 0 || g.HW == 0;
  if (p.trivial) return p;

  // inputGrad bigger than a quarter of the last-level cache bypasses the caches (8 MiB of a
  // Zen 4's 32 in fp32: the size from which streaming was measured to win there; tests shrink
  // the cache size to run this path on small data; decided below, once the block width and
  // layout are known, which 16-bit streaming needs). AVX-512 only, as simd.h's rule for
  // streams has it (kLineStreams): below it, a line takes several narrower streaming stores,
  // and on an AVX2-only Zen 3 (2 threads, fp32, processes alternated) normal stores took 0.79x
  // the time of the 32-byte streams on N32 C32 64x64 nearest, 0.90x on N128 C32
  // (64 MiB a tensor, far beyond the 32 MiB L3, so not a matter of outputs left in cache),
  // 0.94x bilinear, 0.99x bicubic, and 0.88x / 0.96x the 16-byte streams of N16 C4 256x256
  // nearest / bilinear.
  const uint64_t ig_bytes = uint64_t(g.N * g.C * g.HW) * 4;
  const bool big_input_grad = simd::kLineStreams<float> && p.need_ig && simd::streams_worthwhile(4 * ig_bytes, 1);
  p.cb = pick_block_width(g.C);
  p.nblocks = ceil_div(g.C, p.cb);
  p.buf_floats = (g.HW + 1) * p.cb;
  int64_t buf_bytes = round_up(p.buf_floats * 4, kAlign);

  // Too few channel blocks to keep threads busy: split each block's positions into parts. Two
  // blocks give two threads a task each already; split, they paid the parts' zeroing and
  // reduction for no thread more (2 threads, processes alternated, fp32, random grids: N2 C1
  // 189x63 -> 116x156 nearest 48 -> 39.5 us, torch 40-48; 256x256 nearest 150 -> 115 us, torch
  // 120-133; 128x128 -> 181x181 bilinear 252-284 -> 232 us, torch 217-222; 128x128 bicubic
  // 508-595 -> 467-475 us, torch 500; C3 128x128 bilinear 175 -> 126-146 us). Three split in
  // two (six tasks share out evenly; unsplit, N3 C1 128x128 bicubic took 1.2-1.5x the time).
  const int64_t blocks_total = g.N * p.nblocks;
  if (blocks_total < kTargetTasks && blocks_total != 2) {
    int64_t k = ceil_div(kTargetTasks, blocks_total);
    k = std::min(k, g.P / kMinPartPositions);
    if (p.need_ig) k = std::min(k, std::max<int64_t>(1, 2 * g.P / g.HW));  // reduction cost
    p.parts = std::max<int64_t>(1, k);
  }
  int64_t in_bytes = p.need_gx ? buf_bytes : 0;
  p.taps = p.interp == kBilinear ? 4 : p.interp == kNearest ? 1 : 16;
  if (p.parts == 1) {
    // A small grid over a big input: the channel-last buffers would be filled, zeroed and
    // transposed for every pixel while few are touched (N2 C16 128x128 input, 8x8 grid: nearest
    // 152 us and bilinear 245 us, against torch's 75 and 99; compact 76 and 64 us, same run).
    // A slot holds the compact layout (run_compact) in place of those buffers.
    const CompactSizes cs(g.HW, g.P, p.taps, p.cb);
    const int64_t compact_bytes = round_up(cs.map, kAlign) + round_up(cs.remap, kAlign) + round_up(cs.pixels, kAlign) +
                                  (p.need_gx + p.need_ig) * round_up(cs.buffer, kAlign);
    // A block's input and inputGrad planes that fit in L2 take the compact path from half the
    // ratio: its gathers and scatters stay in cache (see kCompactCachedRatio). So do calls of
    // at most kCompactFewTasks (sample, block) pairs, whatever their planes.
    const int64_t plane_bytes = 2 * g.HW * std::min<int64_t>(g.C, p.cb) * int64_t(dtype_size(a.input.dtype));
    const bool from_half = plane_bytes <= kCompactCachedBytes || blocks_total <= kCompactFewTasks;
    const int64_t ratio = from_half ? kCompactCachedRatio : kCompactRatio;
    p.compact = p.interp != kBicubic && cs.rows * ratio <= g.HW;
    // Bicubic with few positions: a tap grid in the buffers' space, else pixel slots
    // (Runner::run_tap_grid, run_bicubic_pixels).
    p.few_bicubic = p.interp == kBicubic && p.taps * g.P * kFewBicubicRatio <= g.HW;
    // Up to 4 channels (one block, so tile records and gridGrad per tile) whose taps reach at
    // most a 6th of the pixels run on their planes directly (run_direct): no per-pixel pass but
    // inputGrad's zero-fill, where the full buffers make four and the compact path two. fp32
    // sums into inputGrad in place; 16-bit sums into fp32 planes written back, which costs
    // 8 C - 4 bytes a pixel more than the compact path's map and zero-fill (kDirectSlotRatio).
    p.direct_in_place = a.input.dtype == DType::Float32 && p.need_ig &&
                        make_plane(g.H, g.W, a.inputGrad.strides[2], a.inputGrad.strides[3]).flat;
    p.direct = g.C <= 4 && p.taps * g.P * kDirectRatio <= g.HW &&
               (!(p.compact || p.few_bicubic) || !p.need_ig || p.direct_in_place ||
                p.taps * g.P * kDirectSlotRatio >= (2 * g.C - 1) * g.HW);
    if (p.direct) p.compact = p.few_bicubic = false;
    // The framed layout: one corner per record, the other three derived in the tile. In-process
    // A/B (benchmarks/ab_builds.cpp), fp32, bitwise the same results, AVX2 on a Zen 3 and AVX-512
    // on a Zen 4: see docs/kernels/grid_sampler2d_backward.md, "Tiles".
    p.framed = p.interp == kBilinear && p.nblocks == 1 && !p.compact && !p.direct &&
               g.frame.pixels <= INT32_MAX;
    if (p.framed) {
      p.buf_floats = g.frame.pixels * p.cb;
      buf_bytes = round_up(p.buf_floats * 4, kAlign);
      in_bytes = p.need_gx ? buf_bytes : 0;
    }
    // An input plane that is not flat is copied, as it is stored, to flat planes in the slot:
    // the same code then runs whatever the strides, so a call's bits do not depend on its
    // operands' layout (NaN signs included: where several NaNs meet, which one an instruction
    // passes on depends on the instruction's form, which differs between compiled paths).
    p.direct_copy_input = p.need_gx && !make_plane(g.H, g.W, a.input.strides[2], a.input.strides[3]).flat;
    p.direct_prefetch = g.C * g.HW * (4 + int64_t(dtype_size(a.input.dtype))) > kCompactCachedBytes;
    p.buffer_bytes = in_bytes + (p.need_ig ? buf_bytes : 0);
    if (p.compact) p.buffer_bytes = std::max(p.buffer_bytes, compact_bytes);
    if (p.few_bicubic) {  // pixel slots may need more
      const int64_t slots = p.taps * g.P + 1;
      const int64_t pixels_bytes = round_up(4 * (g.HW + 1), kAlign) + round_up(4 * slots, kAlign) +
                                   (p.need_gx + p.need_ig) * round_up(slots * p.cb * 4, kAlign);
      p.buffer_bytes = std::max(p.buffer_bytes, pixels_bytes);
    }
  }
  // A big fp32 inputGrad streams (above); a big 16-bit one where its 8-channel groups write
  // whole lines (two 8 x 8 blocks of 16-bit values a 64-byte store, store_channel_blocks), so
  // with blocks of 8 or 16 lanes, and not in the framed layout, whose write-back goes row by
  // row. In-process A/B on a Zen 4, 2 threads, the same bits: N32 C32 64x64 nearest fp16
  // 0.875x the time, bf16 0.97x, bilinear 0.945x / 0.99x, bicubic 0.96x / 0.975x; N10 C16
  // 128x128 nearest fp16 0.90x; framed (N10 C16 128x128 bilinear fp16) 1.0-1.09x, so not
  // there. (An earlier measurement, with 16- and 64-byte stores alike, had nearest b32 fp16
  // slower streamed: 1.42 against 1.35 ms.)
  p.stream_out = big_input_grad && (a.input.dtype == DType::Float32 || (p.cb >= 8 && !p.framed));
  p.zero_gg_in_tasks = p.need_gg && !p.need_gx && p.parts == 1;

  // Phase 1 computes the records of a chunk of samples once for all channel blocks: 40 bytes a
  // position for bilinear, 96 for bicubic, which go out to L2/L3 and come back for every block.
  // Computing each tile's records in the slot just before its tile runs (once per block) costs
  // more arithmetic and no traffic; with one block gridGrad is then written per tile too, with
  // no partials (phase 3). In-process A/B against the chunk records, 2 threads, bitwise the
  // same results: one block, bilinear 0.73-0.88x the time (N4 C3 224x224 fp32 1.88 -> 1.29 ms,
  // C1 0.77-0.83x), bicubic 0.42-0.51x; several blocks, bilinear at 2-4 blocks 0.80-0.90x, 6-8
  // 0.92-1.00x, 16 1.03-1.10x, bicubic at 2-16 blocks 0.56-0.71x; nearest (one 4-byte record
  // a position) 0.96-1.14x with one block, 1.19-1.24x with 16, so it kept phase 1; with its
  // cheaper records (in_range/keep) one block measured 0.94-1.00x at 2 threads (N16 C1 64x64,
  // N4 C1 128x128, N2 C1 256x256, N4 C3 224x224) and 0.88-0.98x on one thread: one block
  // computes them per tile now, several keep chunk records (computed in phase 1, or by each
  // whole-sample task: Runner::records_per_sample_task).
  p.tile_records = !p.compact && (p.interp == kBicubic || (p.interp == kBilinear && p.nblocks <= kTileRecordBlocks) ||
                                   (p.interp == kNearest && p.nblocks == 1));
  p.tile_grid_grad = p.tile_records && p.nblocks == 1;
  const bool chunk_mults = p.tile_records && !p.tile_grid_grad && p.need_gx && p.interp == kBilinear;
  const int64_t tile_bytes = round_up(kTile * p.cb * 4, kAlign) +
                             (p.tile_records ? record_arrays(p.interp) * round_up(kTile * 4, kAlign) +
                                                   (p.need_gx ? round_up(2 * kTile * 4, kAlign) : 0)
                                             : 0);

  // Samples per chunk: a chunk's records and gridGrad partials, and with tile records the
  // inputGrad parts of its blocks, stay within a budget.
  int64_t per_sample = 0;
  if (!p.tile_records) per_sample += g.P * 4 * record_arrays(p.interp);
  if (!p.tile_grid_grad && p.need_gx) per_sample += g.P * 8 * p.nblocks;
  if (chunk_mults) per_sample += g.P * 8;
  if (p.tile_records && p.parts > 1) per_sample += p.nblocks * (in_bytes + p.parts * buf_bytes);
  p.chunk = per_sample == 0 ? g.N : std::max<int64_t>(1, std::min<int64_t>(g.N, kRecordBudget / per_sample));

  const int64_t groups = p.chunk * p.nblocks;
  int64_t off = 0;
  p.rec_array = p.tile_records ? kTileRecordBytes : round_up(p.chunk * g.P * 4, kAlign);
  p.rec_off = off;
  if (!p.tile_records) off += p.rec_array * record_arrays(p.interp);
  p.part_off = off;
  if (!p.tile_grid_grad && p.need_gx) off += round_up(groups * g.P * 2 * 4, kAlign);
  p.mult_array = chunk_mults ? round_up(p.chunk * g.P * 4, kAlign) : 0;
  p.mult_off = off;
  off += 2 * p.mult_array;
  if (p.parts == 1) {
    // Fused per-block tasks: each thread reuses one slot (input + inputGrad buffers + tile).
    p.slot_bytes = p.buffer_bytes + tile_bytes;
    p.slots = staged_slots(groups, uint64_t(p.slot_bytes));
  } else {
    // Every block of the chunk lives at once: its input and one inputGrad buffer per part.
    p.group_bytes = in_bytes + (p.need_ig ? p.parts * buf_bytes : 0);
    p.group_off = off;
    off += groups * p.group_bytes;
    p.slot_bytes = tile_bytes;
    p.slots = staged_slots(groups * p.parts, uint64_t(p.slot_bytes));
  }
  p.slot_off = off;
  off += p.slots * p.slot_bytes;
  p.total = off + kAlign;  // room to align the caller's pointer
  return p;
}

}  // namespace
}  // namespace ACLNN_ISA_NS
}  // namespace aclnn_cpu
