// Grouped (MoE) GEMM for sm_90a: out[rows of expert e, :] = A[rows of e, :] @ B[e]^T
//
//   A       : [M, K]    bf16 row-major (K contiguous), rows sorted by expert
//   B       : [E, N, K] bf16 (expert e's weights are an [N, K] row-major block)
//   offsets : [E+1]     i32 in device memory, offsets[0] = 0, offsets[E] = M,
//                       expert e owns rows [offsets[e], offsets[e+1])
//   out     : [M, N]    bf16 row-major
//
// One CTA = one warpgroup (128 threads) computes a 64 x 128 tile of `out`.
//   blockIdx.x : m-tile "slot" in [0, gridDim.x). gridDim.x is an upper bound of
//                the number of m-tiles, e.g. ceil(M/64) + E. The kernel walks the
//                offsets and finds the (expert, local m-tile) that owns this slot;
//                slots past the last tile return immediately.
//   blockIdx.y : n-tile, gridDim.y = ceil(N/128).
//
// Main loop: K in steps of 64, 2-stage TMA double buffer (128B swizzle) with one
// mbarrier per stage, 4 x wgmma m64n128k16 (bf16 -> f32) per K step.
// Epilogue: accumulators -> shared memory (f32) -> bf16 global stores, masked to
// the rows of this tile's expert (row < offsets[e+1]) and to col < N.
//
// Shared memory (dynamic, 1024-byte aligned symbol @moe_gg_smem):
//   stage s (s = 0, 1) at byte s*24576:  A tile [64][64] bf16 (8 KiB)
//                                        B tile [128][64] bf16 (16 KiB) at +8192
//   epilogue reuses bytes [0, 32768) as a [64][128] f32 staging tile.
//   => launch with 49152 bytes of dynamic shared memory (plus ~1 KiB static for
//      the mbarriers / alignment padding that ptxas adds).

#smem = #gpu.address_space<workgroup>

// TMA descriptor types (device side only needs the swizzle and the box shape;
// the tensor memref is the shared-memory box, outermost dimension first).
!tmapA = !nvgpu.tensormap.descriptor<tensor = memref<64x64xbf16, #smem>,
                                     swizzle = swizzle_128b, l2promo = none,
                                     oob = zero, interleave = none>
!tmapB = !nvgpu.tensormap.descriptor<tensor = memref<1x128x64xbf16, #smem>,
                                     swizzle = swizzle_128b, l2promo = none,
                                     oob = zero, interleave = none>
!barriers = !nvgpu.mbarrier.group<memorySpace = #smem, num_barriers = 2>
!accT = !nvgpu.warpgroup.accumulator<fragmented = vector<64x128xf32>>
// One wgmma step covers K = 16: A slice [64][16], B slice viewed as [K=16][N=128].
!wgDescA = !nvgpu.warpgroup.descriptor<tensor = memref<64x16xbf16, #smem>>
!wgDescB = !nvgpu.warpgroup.descriptor<tensor = memref<16x128xbf16, #smem>>

module attributes {gpu.container_module} {
gpu.module @moe_grouped_gemm {

  // Dynamic shared memory. A *public, uninitialized* memref.global becomes
  // `.extern .shared .align 1024 .b8 moe_gg_smem[];` in PTX. (gpu.dynamic_shared_memory
  // is avoided on purpose, see NOTES.md: with LLVM 22 its internal global is
  // demoted to a 1-byte static variable that overlaps the mbarriers.)
  memref.global @moe_gg_smem : memref<0xi8, #smem> {alignment = 1024 : i64}

  gpu.func @grouped_gemm_bf16_sm90(%tmapA_ptr: !llvm.ptr,   // CUtensorMap* for A (global memory)
                                   %tmapB_ptr: !llvm.ptr,   // CUtensorMap* for B (global memory)
                                   %offsets: memref<?xi32>, // [E+1]
                                   %out: memref<?x?xbf16>,  // [M, N]
                                   %K_i32: i32)              // K (multiple of 8)
      kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c4 = arith.constant 4 : index
    %c16 = arith.constant 16 : index
    %c63 = arith.constant 63 : index
    %c64 = arith.constant 64 : index
    %c128 = arith.constant 128 : index
    %cm1 = arith.constant -1 : index

    %tid = gpu.thread_id x
    %slot = gpu.block_id x
    %ntile = gpu.block_id y

    %numOff = memref.dim %offsets, %c0 : memref<?xi32>
    %E = arith.subi %numOff, %c1 : index
    %N = memref.dim %out, %c1 : memref<?x?xbf16>

    // ---- tile scheduler: walk the experts, each owns ceil(rows_e / 64) m-tiles ----
    %walk:3 = scf.for %e = %c0 to %E step %c1
        iter_args(%tilesBefore = %c0, %foundE = %cm1, %foundT = %c0) -> (index, index, index) {
      %e1 = arith.addi %e, %c1 : index
      %lo32 = memref.load %offsets[%e] : memref<?xi32>
      %hi32 = memref.load %offsets[%e1] : memref<?xi32>
      %lo = arith.index_cast %lo32 : i32 to index
      %hi = arith.index_cast %hi32 : i32 to index
      %rows = arith.subi %hi, %lo : index
      %rowsPad = arith.addi %rows, %c63 : index
      %tilesE = arith.divsi %rowsPad, %c64 : index
      %tilesUpTo = arith.addi %tilesBefore, %tilesE : index
      %notYet = arith.cmpi slt, %foundE, %c0 : index
      %inside = arith.cmpi slt, %slot, %tilesUpTo : index
      %hit = arith.andi %notYet, %inside : i1
      %local = arith.subi %slot, %tilesBefore : index
      %nextE = arith.select %hit, %e, %foundE : index
      %nextT = arith.select %hit, %local, %foundT : index
      scf.yield %tilesUpTo, %nextE, %nextT : index, index, index
    }
    %n0 = arith.muli %ntile, %c128 : index
    %haveTile = arith.cmpi sge, %walk#1, %c0 : index
    %nInRange = arith.cmpi slt, %n0, %N : index
    %work = arith.andi %haveTile, %nInRange : i1
    cf.cond_br %work, ^compute, ^done

  ^done:
    gpu.return

  ^compute:
    %expert = arith.addi %walk#1, %c0 : index       // (named copies of the scheduler results)
    %mtile = arith.addi %walk#2, %c0 : index
    %expert1 = arith.addi %expert, %c1 : index
    %rowBeg32 = memref.load %offsets[%expert] : memref<?xi32>
    %rowEnd32 = memref.load %offsets[%expert1] : memref<?xi32>
    %rowBeg = arith.index_cast %rowBeg32 : i32 to index
    %rowEnd = arith.index_cast %rowEnd32 : i32 to index
    %mOff = arith.muli %mtile, %c64 : index
    %row0 = arith.addi %rowBeg, %mOff : index       // first A/out row of this tile (any alignment)

    %K = arith.index_cast %K_i32 : i32 to index
    %Kpad = arith.addi %K, %c63 : index
    %numK = arith.divsi %Kpad, %c64 : index          // K tail is zero-filled by TMA (oob = zero)

    %tmapA = builtin.unrealized_conversion_cast %tmapA_ptr : !llvm.ptr to !tmapA
    %tmapB = builtin.unrealized_conversion_cast %tmapB_ptr : !llvm.ptr to !tmapB

    %smemRaw = memref.get_global @moe_gg_smem : memref<0xi8, #smem>
    %smem = memref.reinterpret_cast %smemRaw to offset: [0], sizes: [49152], strides: [1]
        : memref<0xi8, #smem> to memref<49152xi8, #smem>

    %stageBytes = arith.constant 24576 : index     // 64x64x2 + 128x64x2
    %bOffset = arith.constant 8192 : index
    %txBytes = arith.constant 24576 : index

    %bars = nvgpu.mbarrier.create -> !barriers
    %isLeader = arith.cmpi eq, %tid, %c0 : index
    scf.if %isLeader {
      nvgpu.mbarrier.init %bars[%c0], %c1 : !barriers
      nvgpu.mbarrier.init %bars[%c1], %c1 : !barriers
      nvvm.fence.mbarrier.init
      nvgpu.tma.prefetch.descriptor %tmapA : !tmapA
      nvgpu.tma.prefetch.descriptor %tmapB : !tmapB
    }
    gpu.barrier

    // ---- prologue: the leader fills stage 0 (K-step 0) and stage 1 (K-step 1) ----
    %has0 = arith.cmpi sgt, %numK, %c0 : index
    %has1 = arith.cmpi sgt, %numK, %c1 : index
    %issue0 = arith.andi %isLeader, %has0 : i1
    %issue1 = arith.andi %isLeader, %has1 : i1
    scf.if %issue0 {
      %aDst = memref.view %smem[%c0][] : memref<49152xi8, #smem> to memref<64x64xbf16, #smem>
      %bDst = memref.view %smem[%bOffset][] : memref<49152xi8, #smem> to memref<1x128x64xbf16, #smem>
      nvgpu.mbarrier.arrive.expect_tx %bars[%c0], %txBytes : !barriers
      // coordinates are innermost-first: A (k, row), B (k, n, expert)
      nvgpu.tma.async.load %tmapA[%c0, %row0], %bars[%c0] to %aDst
          : !tmapA, !barriers -> memref<64x64xbf16, #smem>
      nvgpu.tma.async.load %tmapB[%c0, %n0, %expert], %bars[%c0] to %bDst
          : !tmapB, !barriers -> memref<1x128x64xbf16, #smem>
    }
    scf.if %issue1 {
      %bOff1 = arith.addi %stageBytes, %bOffset : index
      %aDst = memref.view %smem[%stageBytes][] : memref<49152xi8, #smem> to memref<64x64xbf16, #smem>
      %bDst = memref.view %smem[%bOff1][] : memref<49152xi8, #smem> to memref<1x128x64xbf16, #smem>
      nvgpu.mbarrier.arrive.expect_tx %bars[%c1], %txBytes : !barriers
      nvgpu.tma.async.load %tmapA[%c64, %row0], %bars[%c1] to %aDst
          : !tmapA, !barriers -> memref<64x64xbf16, #smem>
      nvgpu.tma.async.load %tmapB[%c64, %n0, %expert], %bars[%c1] to %bDst
          : !tmapB, !barriers -> memref<1x128x64xbf16, #smem>
    }

    // ---- main loop ----
    %ticks = arith.constant 10000000 : index
    %acc0 = nvgpu.warpgroup.mma.init.accumulator -> !accT
    %accFinal = scf.for %kt = %c0 to %numK step %c1 iter_args(%acc = %acc0) -> (!accT) {
      %stage = arith.remsi %kt, %c2 : index
      %use = arith.divsi %kt, %c2 : index
      %parityIdx = arith.remsi %use, %c2 : index
      %parity = arith.index_cast %parityIdx : index to i1
      nvgpu.mbarrier.try_wait.parity %bars[%stage], %parity, %ticks : !barriers

      %aOff = arith.muli %stage, %stageBytes : index
      %bOff = arith.addi %aOff, %bOffset : index
      %aTile = memref.view %smem[%aOff][] : memref<49152xi8, #smem> to memref<64x64xbf16, #smem>
      %bTile = memref.view %smem[%bOff][] : memref<49152xi8, #smem> to memref<128x64xbf16, #smem>

      // 4 wgmma steps of K = 16. Both operands are K-major with a 128-byte swizzle:
      // advancing K by 16 elements = +32 bytes of start address inside the swizzle atom.
      %accK = scf.for %kk = %c0 to %c4 step %c1 iter_args(%a = %acc) -> (!accT) {
        %kcol = arith.muli %kk, %c16 : index
        %aSub = memref.subview %aTile[0, %kcol] [64, 16] [1, 1]
            : memref<64x64xbf16, #smem> to memref<64x16xbf16, strided<[64, 1], offset: ?>, #smem>
        %bSub = memref.subview %bTile[0, %kcol] [128, 16] [1, 1]
            : memref<128x64xbf16, #smem> to memref<128x16xbf16, strided<[64, 1], offset: ?>, #smem>
        %dA = nvgpu.warpgroup.generate.descriptor %aSub, %tmapA
            : memref<64x16xbf16, strided<[64, 1], offset: ?>, #smem>, !tmapA -> !wgDescA
        %dB = nvgpu.warpgroup.generate.descriptor %bSub, %tmapB
            : memref<128x16xbf16, strided<[64, 1], offset: ?>, #smem>, !tmapB -> !wgDescB
        // no transposeB: B is K-major ([N][K] in smem) -> wgmma imm-trans-b = 0
        %a2 = nvgpu.warpgroup.mma %dA, %dB, %a : !wgDescA, !wgDescB, !accT -> !accT
        scf.yield %a2 : !accT
      }
      // Make sure every wgmma reading this stage has retired before it is refilled.
      nvvm.wgmma.wait.group.sync.aligned 0
      gpu.barrier

      %ktNext = arith.addi %kt, %c2 : index
      %needLoad = arith.cmpi slt, %ktNext, %numK : index
      %doLoad = arith.andi %needLoad, %isLeader : i1
      scf.if %doLoad {
        %aDst = memref.view %smem[%aOff][] : memref<49152xi8, #smem> to memref<64x64xbf16, #smem>
        %bDst = memref.view %smem[%bOff][] : memref<49152xi8, #smem> to memref<1x128x64xbf16, #smem>
        %k0 = arith.muli %ktNext, %c64 : index
        nvgpu.mbarrier.arrive.expect_tx %bars[%stage], %txBytes : !barriers
        nvgpu.tma.async.load %tmapA[%k0, %row0], %bars[%stage] to %aDst
            : !tmapA, !barriers -> memref<64x64xbf16, #smem>
        nvgpu.tma.async.load %tmapB[%k0, %n0, %expert], %bars[%stage] to %bDst
            : !tmapB, !barriers -> memref<1x128x64xbf16, #smem>
      }
      scf.yield %accK : !accT
    }
    nvvm.wgmma.wait.group.sync.aligned 0
    gpu.barrier

    // ---- epilogue: registers -> smem (f32) -> masked bf16 stores ----
    %cTile = memref.view %smem[%c0][] : memref<49152xi8, #smem> to memref<64x128xf32, #smem>
    nvgpu.warpgroup.mma.store %accFinal, %cTile : !accT to memref<64x128xf32, #smem>
    gpu.barrier

    %rowsLeft = arith.subi %rowEnd, %row0 : index
    %rowsHere = arith.minsi %rowsLeft, %c64 : index   // rows of *this* expert only
    %col = arith.addi %n0, %tid : index
    %colOk = arith.cmpi slt, %col, %N : index
    scf.if %colOk {
      scf.for %r = %c0 to %rowsHere step %c1 {
        %v = memref.load %cTile[%r, %tid] : memref<64x128xf32, #smem>
        %vb = arith.truncf %v : f32 to bf16
        %row = arith.addi %row0, %r : index           // index = i64: 64-bit addressing
        memref.store %vb, %out[%row, %col] : memref<?x?xbf16>
      }
    }
    gpu.return
  }
}
}
