// Every verifier error of the kernel configuration attributes (`moe.kernels`),
// each naming what it rejects.
// RUN: moe-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{gemm_form rows must satisfy 1 <= rows_min <= rows_max <= 2147483647, got [0, 16]}}
#f = #moe.gemm_form<rows_min = 0, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>

// -----

// expected-error @+1 {{gemm_form stages must be in [2, 64] (a pipelined K loop needs two stages), got 4611686018427387904}}
#f = #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4611686018427387904>

// -----

// Issue 25: a pipelined K loop refills a stage only after the step that read
// it, so one stage would deadlock every form (normal, swap-AB,
// warp-specialized).
// expected-error @+1 {{gemm_form stages must be in [2, 64] (a pipelined K loop needs two stages), got 1}}
#f = #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 64, tile_n = 128, tile_k = 64, stages = 1>

// -----

// expected-error @+1 {{gemm_form stages must be in [2, 64] (a pipelined K loop needs two stages), got 1}}
#f = #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 1, swap_ab = true>

// -----

// expected-error @+1 {{gemm_form stages must be in [2, 64] (a pipelined K loop needs two stages), got 1}}
#f = #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 128, tile_n = 192, tile_k = 128, stages = 1, warp_specialized = true>

// -----

// expected-error @+1 {{gemm_form stages must be in [2, 64] (a pipelined K loop needs two stages), got 65}}
#f = #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 64, tile_n = 128, tile_k = 64, stages = 65>

// -----

// expected-error @+1 {{gemm_form split_k must be 1 or 2, got 3}}
#f = #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true, split_k = 3>

// -----

// expected-error @+1 {{split_k needs a swap_ab gemm_form}}
#f = #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 64, tile_n = 128, tile_k = 64, stages = 4, split_k = 2>

// -----

// expected-error @+1 {{a swap_ab gemm_form has no cluster, producer warpgroup or widening}}
#f = #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true, cluster = 2>

// -----

// expected-error @+1 {{gemm_form cluster must be 1 or 2, got 4}}
#f = #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 64, tile_n = 128, tile_k = 64, stages = 4, cluster = 4>

// -----

// expected-error @+1 {{gemm_form tile extents must be positive, got 0x128x64}}
#f = #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 0, tile_n = 128, tile_k = 64, stages = 4>

// -----

// expected-error @+1 {{chip must be "sm_90a" or "sm_100a", got "sm_80"}}
#k = #moe.gemm_kernels<chip = "sm_80", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 4>]>

// -----

// expected-error @+1 {{gemm_kernels needs at least one form}}
#k = #moe.gemm_kernels<chip = "sm_90a", forms = []>

// -----

// expected-error @+1 {{gemm_kernels forms must be #moe.gemm_form, got 4 : i64}}
#k = #moe.gemm_kernels<chip = "sm_90a", forms = [4]>

// -----

// expected-error @+1 {{gemm_kernels forms must cover the row counts in order without gaps: expected a form from 17 rows, got one from 20}}
#k = #moe.gemm_kernels<chip = "sm_90a", forms = [
    #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>,
    #moe.gemm_form<rows_min = 20, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 4>]>

// -----

// expected-error @+1 {{gemm_kernels forms must reach 2147483647 rows, the last ends at 64}}
#k = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 64, tile_m = 64, tile_n = 128, tile_k = 64, stages = 4>]>

// -----

// expected-error @+1 {{a swap_ab gemm_form needs tile_n = 64 and tile_m in {8, 16, 32, 64}, got 12x64}}
#k = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 12, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>]>

// -----

// expected-error @+1 {{a gemm_form without swap_ab needs tile_m in {64, 128} and tile_n in {128, 192, 256}, got 96x256}}
#k = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 96, tile_n = 256, tile_k = 64, stages = 4>]>

// -----

// expected-error @+1 {{sm_90a gemm_form tile_k must be 64 (bf16) or 128 (FP8), got 32}}
#k = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 256, tile_k = 32, stages = 4>]>

// -----

// expected-error @+1 {{the sm_100a grouped GEMM has one form: a 128x128x128 tile, no swap_ab, cluster, producer warpgroup or widening}}
#k = #moe.gemm_kernels<chip = "sm_100a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4>]>

// -----

#gemm90 = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 64, stages = 4>]>
#gemm100 = #moe.gemm_kernels<chip = "sm_100a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 128, tile_n = 128, tile_k = 128, stages = 4>]>
// expected-error @+1 {{expert_mlp_kernels parts must target one chip, got sm_90a and sm_100a}}
#m = #moe.expert_mlp_kernels<gate_up = #gemm90, down = #gemm100>

// -----

#gemmq = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4>], quantize_output = true>
// expected-error @+1 {{only the gate_up GEMM can quantize its output}}
#m = #moe.expert_mlp_kernels<gate_up = #gemmq, down = #gemmq>

// -----

#swap = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>, #moe.gemm_form<rows_min = 17, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>]>
// expected-error @+1 {{expert_mlp_kernels decode must be in [0, 64] (token rows of a swap-AB tile), got 65}}
#m = #moe.expert_mlp_kernels<gate_up = #swap, down = #swap, decode = 65>

// -----

#swap = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 8, tile_m = 8, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>, #moe.gemm_form<rows_min = 9, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>]>
// expected-error @+1 {{expert_mlp_kernels decode = 16 needs both GEMMs' first forms swap-AB, of the same tile and stages, without split K, taking experts of up to 16 rows in one tile}}
#m = #moe.expert_mlp_kernels<gate_up = #swap, down = #swap, decode = 16>

// -----

#swap = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true>, #moe.gemm_form<rows_min = 17, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>]>
#split = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true, split_k = 2>, #moe.gemm_form<rows_min = 17, rows_max = 2147483647, tile_m = 128, tile_n = 256, tile_k = 64, stages = 4>]>
// expected-error @+1 {{expert_mlp_kernels decode = 16 needs both GEMMs' first forms swap-AB, of the same tile and stages, without split K}}
#m = #moe.expert_mlp_kernels<gate_up = #swap, down = #split, decode = 16>

// -----

#q = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4>], quantize_output = true>
#plain = #moe.gemm_kernels<chip = "sm_90a", forms = [#moe.gemm_form<rows_min = 1, rows_max = 2147483647, tile_m = 64, tile_n = 128, tile_k = 128, stages = 4>]>
// expected-error @+1 {{expert_mlp_kernels decode needs sm_90a bf16 GEMMs without a quantized output}}
#m = #moe.expert_mlp_kernels<gate_up = #q, down = #plain, decode = 16>

// -----

// expected-error @+1 {{permute_kernels scatter_from must be 0 (no scatter kernel) or a token count in [1, 2147483647], got -1}}
#p = #moe.permute_kernels<chip = "sm_90a", quantize_rows = true, scatter_from = -1>

// -----

// expected-error @+1 {{permute_kernels scatter_from must be 0 (no scatter kernel) or a token count in [1, 2147483647], got 2147483648}}
#p = #moe.permute_kernels<chip = "sm_90a", quantize_rows = true, scatter_from = 2147483648>

// -----

// expected-error @+1 {{the scatter kernel is a quantizing one: scatter_from needs quantize_rows}}
#p = #moe.permute_kernels<chip = "sm_90a", scatter_from = 128>

// -----

// expected-error @+1 {{chip must be "sm_90a" or "sm_100a", got "gfx942"}}
#r = #moe.kernel<chip = "gfx942">

// -----

// expected-error @+1 {{a pingpong gemm_form has tile_m = 64 or 128 and a producer warpgroup (warp_specialized), and no swap_ab, cluster or widening}}
#f = #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 32, tile_n = 256, tile_k = 64, stages = 4, warp_specialized = true, pingpong = true>

// -----

// expected-error @+1 {{a pingpong gemm_form has tile_m = 64 or 128 and a producer warpgroup (warp_specialized), and no swap_ab, cluster or widening}}
#f = #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 64, tile_n = 256, tile_k = 64, stages = 4, pingpong = true>

// -----

// expected-error @+1 {{a swap_ab gemm_form has no tma_store}}
#f = #moe.gemm_form<rows_min = 1, rows_max = 16, tile_m = 16, tile_n = 64, tile_k = 64, stages = 4, swap_ab = true, tma_store = true>
