// Issue 25, class 3: the GPU pipelines refuse an unknown `format` when their
// options are parsed (upstream's gpu-module-to-binary only reported it and
// went on, and a gpu.binary moe-translate cannot read was written with exit
// 0), listing the values they take; the device pipeline also refuses a chip
// without kernels of ours. bin, isa and fatbin are accepted.
//
// RUN: not moe-opt %s --moe-gpu-pipeline="format=elf" -o %t.elf.mlir 2>&1 | FileCheck %s --check-prefix=ELF
// RUN: not test -e %t.elf.mlir
// RUN: not moe-opt %s --moe-gpu-pipeline="format=llvm" 2>&1 | FileCheck %s --check-prefix=LLVM
// RUN: not moe-opt %s --moe-gpu-pipeline="format=" 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not moe-opt %s --moe-gpu-pipeline="format=BIN" 2>&1 | FileCheck %s --check-prefix=UPPER
// RUN: not moe-opt %s --pass-pipeline="builtin.module(moe-gpu-pipeline{format=elf})" 2>&1 | FileCheck %s --check-prefix=ELF
// RUN: not moe-opt %s --moe-select-kernels --convert-moe-to-nvgpu --moe-extract-device-code --moe-gpu-device-pipeline="format=cubin" 2>&1 | FileCheck %s --check-prefix=DEVICE
// RUN: not moe-opt %s --moe-select-kernels --convert-moe-to-nvgpu --moe-extract-device-code --moe-gpu-device-pipeline="chip=sm_89" 2>&1 | FileCheck %s --check-prefix=DEVICE-CHIP
//
// The values listed are taken (isa needs no ptxas; bin and fatbin do).
// RUN: moe-opt %s --moe-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=ISA
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-gpu-pipeline="format=bin" | FileCheck %s --check-prefix=BIN
// RUN: env CUDA_ROOT=%cuda_toolkit moe-opt %s --moe-gpu-pipeline="format=fatbin" | FileCheck %s --check-prefix=FATBIN

// ELF: error: moe-gpu-pipeline: 'format' must be bin (a cubin: what moe-translate bundles), isa (PTX text) or fatbin, got 'elf'
// LLVM: error: moe-gpu-pipeline: 'format' must be bin (a cubin: what moe-translate bundles), isa (PTX text) or fatbin, got 'llvm'
// EMPTY: error: moe-gpu-pipeline: 'format' must be bin (a cubin: what moe-translate bundles), isa (PTX text) or fatbin, got ''
// UPPER: error: moe-gpu-pipeline: 'format' must be bin (a cubin: what moe-translate bundles), isa (PTX text) or fatbin, got 'BIN'
// DEVICE: error: moe-gpu-device-pipeline: 'format' must be bin (a cubin: what moe-translate bundles), isa (PTX text) or fatbin, got 'cubin'
// DEVICE-CHIP: error: moe-gpu-device-pipeline: 'chip' must be sm_90a, or sm_100a (the MXFP8 grouped_matmul only), got 'sm_89'
// ISA: gpu.binary @moe_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, {{.*}}assembly = "
// BIN: gpu.binary @moe_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, {{.*}}bin = "\7FELF
// A fatbin (its magic 0xBA55ED50), not a cubin.
// FATBIN: gpu.binary @moe_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, {{.*}} : i64}, "P\EDU\BA
func.func @router(%logits: tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>) {
  %ids, %w = moe.route softmax_topk %logits top 2 renormalize
      : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
  return %ids, %w : tensor<?x2xi32>, tensor<?x2xf32>
}
