// A hand-written sm_100a kernel with one block-scaled MXFP8 tcgen05 MMA pair,
// its descriptor words taken from the encoder's unit tests
// (test/Unit/Tcgen05DescriptorsTest.cpp), lowers through upstream NVVM to PTX
// that ptxas assembles for sm_100a, and the SASS holds the tensor-memory MMA.
// No Blackwell GPU here: this proves the code assembles, not that it computes.
// RUN: moe-opt %s --mlir-print-op-on-diagnostic=false -gpu-lower-to-nvvm-pipeline="cubin-chip=sm_100a cubin-features=+ptx88 opt-level=3 cubin-format=isa" -o %t.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.isa.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file %t.ptx
// RUN: %ptxas -arch=sm_100a %t.ptx -o %t.cubin
// RUN: %cuobjdump -sass %t.cubin | FileCheck %s --check-prefix=SASS

// PTX: .target sm_100a
// PTX-LABEL: .entry mxfp8_mma_128x128x64(
// PTX: tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32
// PTX: tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned
// The descriptor literals, in decimal: 0x0000400800080000 (scale tiles),
// 0x4000404000010000 (A and B tiles), 0x08A00000 and 0x28A00010 (idesc).
// PTX-DAG: or.b64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, 70403104440320;
// PTX-DAG: or.b64 {{%rd[0-9]+}}, {{%rd[0-9]+}}, 4611756662049538048;
// PTX: tcgen05.cp.cta_group::1.32x128b.warpx4
// PTX: tcgen05.cp.cta_group::1.32x128b.warpx4
// PTX: mov.b32 [[IDESC0:%r[0-9]+]], 144703488;
// PTX: tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32.collector::a::discard [{{%r[0-9]+}}], {{%rd[0-9]+}}, {{%rd[0-9]+}}, [[IDESC0]],
// PTX: mov.b32 [[IDESC1:%r[0-9]+]], 681574416;
// PTX: tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32.collector::a::discard [{{%r[0-9]+}}], {{%rd[0-9]+}}, {{%rd[0-9]+}}, [[IDESC1]],
// PTX: tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// PTX: mbarrier.try_wait.parity
// PTX: tcgen05.ld.sync.aligned.32x32b.x16.b32
// PTX: tcgen05.wait::ld.sync.aligned
// PTX: tcgen05.dealloc.cta_group::1.sync.aligned.b32

// nvdisasm 13 spells the pieces: UTCATOMSWS (alloc/dealloc), UTCCP
// (tcgen05.cp), UTCQMMA (the block-scaled MMA, its idesc in a uniform
// register loaded with the unit-test literal; !UPT / UPT is enable-input-D),
// UTCBAR (tcgen05.commit), LDTM (tcgen05.ld).
// SASS: Function : mxfp8_mma_128x128x64
// SASS: UTCATOMSWS.FIND_AND_SET.ALIGN
// SASS: UTCCP.T.S.4x32dp128bit tmem[{{UR[0-9]+}}+0x80], gdesc[{{UR[0-9]+}}]
// SASS: UTCCP.T.S.4x32dp128bit tmem[{{UR[0-9]+}}+0x88], gdesc[{{UR[0-9]+}}]
// SASS: UMOV [[SIDESC0:UR[0-9]+]], 0x8a00000
// SASS: UMOV {{UR[0-9]+}}, 0x40004040
// SASS: UTCQMMA gdesc[{{UR[0-9]+}}], gdesc[{{UR[0-9]+}}], tmem[{{UR[0-9]+}}], tmem[{{UR[0-9]+}}], idesc{{\[}}[[SIDESC0]]{{\]}}, tmem[{{UR[0-9]+}}], !UPT
// SASS: UMOV [[SIDESC1:UR[0-9]+]], 0x28a00010
// SASS: UTCQMMA gdesc[{{UR[0-9]+}}], gdesc[{{UR[0-9]+}}], tmem[{{UR[0-9]+}}], tmem[{{UR[0-9]+}}], idesc{{\[}}[[SIDESC1]]{{\]}}, tmem[{{UR[0-9]+}}], UPT
// SASS: UTCBAR
// SASS: LDTM.x16
// SASS: UTCATOMSWS.AND

// One CTA of 128 threads (one warpgroup) computes a 128 x 128 f32 tile of
// A (128 x 64 e4m3, K-major) times B (128 x 64 e4m3, K-major) with one UE8M0
// scale per 32 K: two K = 32 MMAs, the second accumulating. Loading the tiles
// (TMA in the real kernel) is left out: only the tcgen05 side is under test.
// Shared memory, 1024-byte aligned for the 128-byte swizzle:
//   [0, 16384)      A, 128 rows of 128 bytes
//   [16384, 32768)  B, 128 rows of 128 bytes
//   [32768, 33280)  A's scales, 32 rows of 16 bytes (tcgen05.cp .32x128b)
//   [33280, 33792)  B's scales, likewise
//   [33792, 33800)  the mbarrier tcgen05.commit arrives on
//   [33800, 33804)  the tensor memory address tcgen05.alloc writes
// Tensor memory, 256 columns: D in columns 0-127, A's scales from column
// 128, B's from column 136.
module attributes {gpu.container_module} {
gpu.module @tcgen05_block_scale {
  llvm.mlir.global internal @smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<33808 x i8> {
    %0 = llvm.mlir.undef : !llvm.array<33808 x i8>
    llvm.return %0 : !llvm.array<33808 x i8>
  }

  gpu.func @mxfp8_mma_128x128x64(%out: !llvm.ptr<1>) kernel
      attributes {known_block_size = array<i32: 128, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c32 = arith.constant 32 : index
    %zero = arith.constant 0 : i32
    %one = arith.constant 1 : i32
    %columns = arith.constant 256 : i32
    %false = arith.constant false
    %true = arith.constant true
    %tid = gpu.thread_id x
    %warp = arith.divui %tid, %c32 : index
    %isWarp0 = arith.cmpi eq, %warp, %c0 : index
    %isThread0 = arith.cmpi eq, %tid, %c0 : index

    %smem = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %aTile = llvm.getelementptr %smem[0] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %aTileK32 = llvm.getelementptr %smem[32] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %bTile = llvm.getelementptr %smem[16384] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %bTileK32 = llvm.getelementptr %smem[16416] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %aScales = llvm.getelementptr %smem[32768] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %bScales = llvm.getelementptr %smem[33280] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %mbar = llvm.getelementptr %smem[33792] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %tmemSlot = llvm.getelementptr %smem[33800] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8

    // Descriptor words with start address 0; the tile's (address & 0x3FFFF)
    // >> 4 goes into bits 0-13 at run time.
    // knownGoodSmemKMajor128BAtZero: K-major, 128B swizzle, SBO 1024, LBO 16.
    %kMajor128B = arith.constant 0x4000404000010000 : i64
    // knownGoodSmemScaleTileForCopy: unswizzled, LBO 128, SBO 128.
    %scaleTile = arith.constant 0x0000400800080000 : i64
    // knownGoodIdescE4M3xE4M3 (N = 128): M 128, E4M3 x E4M3, UE8M0, byte 0.
    %idescK0 = arith.constant 0x08A00000 : i32
    // knownGoodIdescScalesAtByte1 (N = 128): the same, scales from byte 1.
    %idescK1 = arith.constant 0x28A00010 : i32

    %mask = arith.constant 0x3FFFF : i64
    %four = arith.constant 4 : i64
    %aAddr = llvm.ptrtoint %aTile : !llvm.ptr<3> to i64
    %aAddrK32 = llvm.ptrtoint %aTileK32 : !llvm.ptr<3> to i64
    %bAddr = llvm.ptrtoint %bTile : !llvm.ptr<3> to i64
    %bAddrK32 = llvm.ptrtoint %bTileK32 : !llvm.ptr<3> to i64
    %aScalesAddr = llvm.ptrtoint %aScales : !llvm.ptr<3> to i64
    %bScalesAddr = llvm.ptrtoint %bScales : !llvm.ptr<3> to i64
    %aMasked = arith.andi %aAddr, %mask : i64
    %aEnc = arith.shrui %aMasked, %four : i64
    %aDesc = arith.ori %kMajor128B, %aEnc : i64
    %aMaskedK32 = arith.andi %aAddrK32, %mask : i64
    %aEncK32 = arith.shrui %aMaskedK32, %four : i64
    %aDescK32 = arith.ori %kMajor128B, %aEncK32 : i64
    %bMasked = arith.andi %bAddr, %mask : i64
    %bEnc = arith.shrui %bMasked, %four : i64
    %bDesc = arith.ori %kMajor128B, %bEnc : i64
    %bMaskedK32 = arith.andi %bAddrK32, %mask : i64
    %bEncK32 = arith.shrui %bMaskedK32, %four : i64
    %bDescK32 = arith.ori %kMajor128B, %bEncK32 : i64
    %aScalesMasked = arith.andi %aScalesAddr, %mask : i64
    %aScalesEnc = arith.shrui %aScalesMasked, %four : i64
    %aScalesDesc = arith.ori %scaleTile, %aScalesEnc : i64
    %bScalesMasked = arith.andi %bScalesAddr, %mask : i64
    %bScalesEnc = arith.shrui %bScalesMasked, %four : i64
    %bScalesDesc = arith.ori %scaleTile, %bScalesEnc : i64

    // Allocation is warp-wide; give up the permit at once (one allocation).
    scf.if %isWarp0 {
      nvvm.tcgen05.alloc %tmemSlot, %columns : !llvm.ptr<3>, i32
      nvvm.tcgen05.relinquish_alloc_permit
    }
    scf.if %isThread0 {
      nvvm.mbarrier.init %mbar, %one : !llvm.ptr<3>, i32
    }
    nvvm.tcgen05.fence #nvvm.tcgen05_fence<before>
    gpu.barrier
    nvvm.tcgen05.fence #nvvm.tcgen05_fence<after>

    %tmemBase = llvm.load %tmemSlot : !llvm.ptr<3> -> i32
    %accum = llvm.inttoptr %tmemBase : i32 to !llvm.ptr<6>
    %c128 = arith.constant 128 : i32
    %c136 = arith.constant 136 : i32
    %aScalesCol = arith.addi %tmemBase, %c128 : i32
    %bScalesCol = arith.addi %tmemBase, %c136 : i32
    %aScalesTmem = llvm.inttoptr %aScalesCol : i32 to !llvm.ptr<6>
    %bScalesTmem = llvm.inttoptr %bScalesCol : i32 to !llvm.ptr<6>

    // One thread issues: the copies and MMAs of one thread run in order, so
    // the MMAs see the scales without a fence.
    scf.if %isThread0 {
      nvvm.tcgen05.cp %aScalesTmem, %aScalesDesc {shape = #nvvm.tcgen05_cp_shape<shape_32x128b>, multicast = #nvvm.tcgen05_cp_multicast<warpx4>}
      nvvm.tcgen05.cp %bScalesTmem, %bScalesDesc {shape = #nvvm.tcgen05_cp_shape<shape_32x128b>, multicast = #nvvm.tcgen05_cp_multicast<warpx4>}
      nvvm.tcgen05.mma.block_scale %accum, %aDesc, %bDesc, %idescK0, %false, %aScalesTmem, %bScalesTmem
          {kind = #nvvm.block_scale_kind<mxf8f6f4>, ctaGroup = #nvvm.cta_group<cta_1>, blockScale = #nvvm.tcgen05_mma_block_scale<block32>}
          : (!llvm.ptr<6>, i64, i64, i32, i1, !llvm.ptr<6>, !llvm.ptr<6>)
      nvvm.tcgen05.mma.block_scale %accum, %aDescK32, %bDescK32, %idescK1, %true, %aScalesTmem, %bScalesTmem
          {kind = #nvvm.block_scale_kind<mxf8f6f4>, ctaGroup = #nvvm.cta_group<cta_1>, blockScale = #nvvm.tcgen05_mma_block_scale<block32>}
          : (!llvm.ptr<6>, i64, i64, i32, i1, !llvm.ptr<6>, !llvm.ptr<6>)
      nvvm.tcgen05.commit %mbar : !llvm.ptr<3>
    }
    %ticks = arith.constant 10000000 : i32
    nvvm.mbarrier.try_wait.parity %mbar, %zero, %ticks : !llvm.ptr<3>, i32, i32
    nvvm.tcgen05.fence #nvvm.tcgen05_fence<after>

    // Warp w reads lanes 32w..32w+31 (rows of D), 16 columns each.
    %warpI32 = arith.index_cast %warp : index to i32
    %c21 = arith.constant 21 : i32
    %laneOffset = arith.shli %warpI32, %c21 : i32
    %rowsAddr = arith.addi %tmemBase, %laneOffset : i32
    %rows = llvm.inttoptr %rowsAddr : i32 to !llvm.ptr<6>
    %fragment = nvvm.tcgen05.ld %rows {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<16xi32>
    nvvm.tcgen05.wait #nvvm.tcgen05_wait<load>
    %tidI64 = arith.index_cast %tid : index to i64
    %slot = llvm.getelementptr %out[%tidI64] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, vector<16xi32>
    llvm.store %fragment, %slot : vector<16xi32>, !llvm.ptr<1>

    nvvm.tcgen05.fence #nvvm.tcgen05_fence<before>
    gpu.barrier
    scf.if %isWarp0 {
      nvvm.tcgen05.dealloc %accum, %columns : !llvm.ptr<6>, i32
    }
    gpu.return
  }
}
}
