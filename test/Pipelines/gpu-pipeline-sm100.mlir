// The MXFP8 grouped GEMM through --moe-gpu-pipeline with chip=sm_100a: PTX
// with the tcgen05 tensor-memory ops, TMA loads and the block-scaled MMA,
// which ptxas assembles for sm_100a; the SASS holds UTCQMMA. No Blackwell
// GPU here: this proves the kernel compiles and assembles, not that it
// computes or how fast.
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-gpu-pipeline="chip=sm_100a format=isa" -o %t.isa.mlir
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file %t.isa.mlir
// RUN: %python %S/../../prototypes/sm90_grouped_gemm/extract_gpu_object.py %t.isa.mlir %t.ptx
// RUN: FileCheck %s --check-prefix=PTX --input-file %t.ptx
// RUN: %ptxas -arch=sm_100a %t.ptx -o %t.cubin
// RUN: %cuobjdump -sass %t.cubin | FileCheck %s --check-prefix=SASS

// MANIFEST: moe.manifest = {entries = [{abi = "grouped_matmul_fp8.v1", {{.*}}format = "mxfp8", k = 7168 : i64,
// MANIFEST-SAME: name = "grouped_matmul_mxfp8_tcgen05_128x128x128_s4_off32", rows_max = 2147483647 : i64, rows_min = 1 : i64, swap_ab = false
// MANIFEST: gpu.binary @moe_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_100a", features = "+ptx88">
// MANIFEST-NOT: moe.dequantize

// PTX: .target sm_100a
// PTX-LABEL: .entry grouped_matmul_mxfp8_tcgen05_128x128x128_s4_off32(
// PTX: tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32
// PTX: tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned
// PTX: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// The descriptor literals in decimal: the scale tiles 0x0000400800080000,
// A and B 0x4000404000010000, the idesc of MMA k = 0..3 (M 128, N 128,
// E4M3 x E4M3, UE8M0, scale factor byte k for A and B).
// PTX: or.b64 [[SFA:%rd[0-9]+]], {{%rd[0-9]+}}, 70403104440320;
// PTX: tcgen05.cp.cta_group::1.32x128b.warpx4 [{{%r[0-9]+}}], [[SFA]];
// PTX: or.b64 [[SFB:%rd[0-9]+]], {{%rd[0-9]+}}, 70403104440320;
// PTX: tcgen05.cp.cta_group::1.32x128b.warpx4 [{{%r[0-9]+}}], [[SFB]];
// PTX: or.b64 [[A0:%rd[0-9]+]], {{%rd[0-9]+}}, 4611756662049538048;
// PTX: or.b64 [[B0:%rd[0-9]+]], {{%rd[0-9]+}}, 4611756662049538048;
// PTX: mov.b32 [[I0:%r[0-9]+]], 144703488;
// PTX: tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32.collector::a::discard [{{%r[0-9]+}}], [[A0]], [[B0]], [[I0]],
// PTX: mov.b32 [[I1:%r[0-9]+]], 681574416;
// PTX: tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32.collector::a::discard [{{%r[0-9]+}}], {{%rd[0-9]+}}, {{%rd[0-9]+}}, [[I1]],
// PTX: mov.b32 [[I2:%r[0-9]+]], 1218445344;
// PTX: tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32.collector::a::discard [{{%r[0-9]+}}], {{%rd[0-9]+}}, {{%rd[0-9]+}}, [[I2]],
// PTX: mov.b32 [[I3:%r[0-9]+]], 1755316272;
// PTX: tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32.collector::a::discard [{{%r[0-9]+}}], {{%rd[0-9]+}}, {{%rd[0-9]+}}, [[I3]],
// PTX: tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64
// PTX: mbarrier.try_wait.parity
// PTX: tcgen05.ld.sync.aligned.32x32b.x16.b32
// PTX: tcgen05.wait::ld.sync.aligned
// PTX: tcgen05.dealloc.cta_group::1.sync.aligned.b32

// SASS: Function : grouped_matmul_mxfp8_tcgen05_128x128x128_s4_off32
// SASS-DAG: UTCATOMSWS.FIND_AND_SET.ALIGN
// SASS-DAG: UTMALDG.2D
// SASS-DAG: UTMALDG.3D
// SASS-DAG: UTCCP.T.S.4x32dp128bit
// SASS-DAG: UTCQMMA gdesc
// SASS-DAG: UTCBAR
// SASS-DAG: LDTM.x16
// SASS-DAG: UTCATOMSWS.AND
func.func @gate_up(%xq: tensor<?x7168xf8E4M3FN>, %xs: tensor<?x224xf8E8M0FNU>,
                   %wq: tensor<256x4096x7168xf8E4M3FN>, %ws: tensor<256x4096x224xf8E8M0FNU>,
                   %off: tensor<257xi32>) -> tensor<?x4096xbf16> {
  %x = moe.dequantize %xq, %xs from <f8E4M3FN, [1, 32], f8E8M0FNU>
      : tensor<?x7168xf8E4M3FN>, tensor<?x224xf8E8M0FNU> -> tensor<?x7168xbf16>
  %w = moe.dequantize %wq, %ws from <f8E4M3FN, [1, 1, 32], f8E8M0FNU>
      : tensor<256x4096x7168xf8E4M3FN>, tensor<256x4096x224xf8E8M0FNU> -> tensor<256x4096x7168xbf16>
  %y = moe.grouped_matmul %x, %w, %off
      : (tensor<?x7168xbf16>, tensor<256x4096x7168xbf16>, tensor<257xi32>) -> tensor<?x4096xbf16>
  return %y : tensor<?x4096xbf16>
}
