// --moe-raise on the torch-mlir exports in raise/fixtures (unmodified; see
// raise/export/README.md): each becomes route -> permute -> expert_mlp ->
// unpermute, nothing of the exported top-k or experts is left, and the
// result compiles through the CPU reference pipeline. raise-fixtures-run.mlir
// runs them against torch's output.
//
// RUN: moe-opt %S/raise/fixtures/mixtral_dense_masked.mlir --allow-unregistered-dialect --moe-raise \
// RUN:   | FileCheck %s --check-prefix=MIXTRAL
// RUN: moe-opt %S/raise/fixtures/qwen3_dense_masked.mlir --allow-unregistered-dialect --moe-raise \
// RUN:   | FileCheck %s --check-prefix=QWEN3
// RUN: moe-opt %S/raise/fixtures/qwen3_stacked_gather.mlir --allow-unregistered-dialect --moe-raise \
// RUN:   | FileCheck %s --check-prefix=GATHER
// RUN: moe-opt %S/raise/fixtures/mixtral_dense_masked.mlir --allow-unregistered-dialect --moe-raise \
// RUN:   --moe-cpu-reference-pipeline | FileCheck %s --check-prefix=CPU
// RUN: moe-opt %S/raise/fixtures/qwen3_dense_masked.mlir --allow-unregistered-dialect --moe-raise \
// RUN:   --moe-cpu-reference-pipeline | FileCheck %s --check-prefix=CPU
// RUN: moe-opt %S/raise/fixtures/qwen3_stacked_gather.mlir --allow-unregistered-dialect --moe-raise \
// RUN:   --moe-cpu-reference-pipeline | FileCheck %s --check-prefix=CPU
// The fused layer the GPU pipeline compiles as one entry forms from it too.
// RUN: moe-opt %S/raise/fixtures/mixtral_dense_masked.mlir --allow-unregistered-dialect --moe-raise \
// RUN:   --moe-fuse-layer | FileCheck %s --check-prefix=LAYER
//
// The bf16 exports (module.to(torch.bfloat16)): the roundings to bf16 the
// program makes are looked through, tokens, weights and output stay bf16, the
// route reads the f32 logits the softmax reads.
// RUN: moe-opt %S/raise/fixtures/mixtral_dense_masked_bf16.mlir --allow-unregistered-dialect --moe-raise \
// RUN:   | FileCheck %s --check-prefix=MIXBF16
// RUN: moe-opt %S/raise/fixtures/qwen3_stacked_gather_bf16.mlir --allow-unregistered-dialect --moe-raise \
// RUN:   | FileCheck %s --check-prefix=GATHERBF16
// The functions around them (router matmul, weight constants, reshapes) have
// no GPU kernels: the GPU pipeline refuses them, naming the first such op,
// rather than compile the layer alone and drop the rest.
// RUN: not moe-opt %S/raise/fixtures/mixtral_dense_masked_bf16.mlir --allow-unregistered-dialect \
// RUN:   --moe-raise --moe-gpu-pipeline 2>&1 | FileCheck %s --check-prefix=GPU-DROP
// RUN: not moe-opt %S/raise/fixtures/qwen3_stacked_gather_bf16.mlir --allow-unregistered-dialect \
// RUN:   --moe-raise --moe-gpu-pipeline 2>&1 | FileCheck %s --check-prefix=GPU-DROP

// Mixtral (E = 4, top-2, renormalised), per-expert w1/w3/w2 constants
// stacked into [E, 2I, H] and [E, H, I].
// MIXTRAL-LABEL: func.func @mixtral_dense_masked
// MIXTRAL-SAME: (%[[ARG:.*]]: tensor<1x?x16xf32>)
// MIXTRAL: %[[X:.*]] = tensor.collapse_shape %[[ARG]]
// MIXTRAL: %[[LOGITS:.*]] = linalg.matmul ins(%[[X]],
// MIXTRAL-NOT: tm_tensor.sort
// MIXTRAL: %[[IDS:.*]], %[[W:.*]] = moe.route softmax_topk %[[LOGITS]] top 2 renormalize : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
// MIXTRAL: %[[ROWS:.*]], %[[OFF:.*]], %[[SLOTS:.*]] = moe.permute %[[X]], %[[IDS]] : (tensor<?x16xf32>, tensor<?x2xi32>) -> (tensor<?x16xf32>, tensor<5xi64>, tensor<?x2xi64>)
// MIXTRAL-COUNT-8: tensor.insert_slice {{.*}} : tensor<32x16xf32> into tensor<4x64x16xf32>
// MIXTRAL-COUNT-4: tensor.insert_slice {{.*}} : tensor<16x32xf32> into tensor<4x16x32xf32>
// MIXTRAL: %[[H:.*]] = moe.expert_mlp silu %[[ROWS]], %[[OFF]], %{{.*}}, %{{.*}} : (tensor<?x16xf32>, tensor<5xi64>, tensor<4x64x16xf32>, tensor<4x16x32xf32>) -> tensor<?x16xf32>
// MIXTRAL: %[[Y:.*]] = moe.unpermute %[[H]], %[[SLOTS]] weights %[[W]] : (tensor<?x16xf32>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xf32>
// MIXTRAL-NOT: linalg.generic
// MIXTRAL-NOT: linalg.matmul
// MIXTRAL: %[[OUT:.*]] = tensor.expand_shape %[[Y]]
// MIXTRAL: return %[[OUT]], %[[LOGITS]]

// Qwen3 (E = 8, top-2, norm_topk_prob=False): no renormalisation.
// QWEN3-LABEL: func.func @qwen3_dense_masked
// QWEN3-NOT: tm_tensor.sort
// QWEN3: moe.route softmax_topk %{{.*}} top 2 : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
// QWEN3: moe.permute
// QWEN3-COUNT-16: tensor.insert_slice {{.*}} : tensor<32x16xf32> into tensor<8x64x16xf32>
// QWEN3-COUNT-8: tensor.insert_slice {{.*}} : tensor<16x32xf32> into tensor<8x16x32xf32>
// QWEN3: moe.expert_mlp silu {{.*}} : (tensor<?x16xf32>, tensor<9xi64>, tensor<8x64x16xf32>, tensor<8x16x32xf32>) -> tensor<?x16xf32>
// QWEN3: moe.unpermute
// QWEN3-NOT: linalg.generic

// Qwen3 with stacked gate_up_proj [E, 2I, H] / down_proj [E, H, I] gathered
// by the routed ids: those constants are the moe weights as they are.
// GATHER-LABEL: func.func @qwen3_stacked_gather
// GATHER-DAG: %[[DOWN:.*]] = arith.constant dense_resource<{{.*}}> : tensor<8x16x32xf32>
// GATHER-DAG: %[[GATE_UP:.*]] = arith.constant dense_resource<{{.*}}> : tensor<8x64x16xf32>
// GATHER-NOT: tm_tensor.sort
// GATHER: moe.route softmax_topk %{{.*}} top 2 renormalize : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
// GATHER: %[[ROWS:.*]], %[[OFF:.*]], %{{.*}} = moe.permute
// GATHER-NOT: tensor.insert_slice
// GATHER: moe.expert_mlp silu %[[ROWS]], %[[OFF]], %[[GATE_UP]], %[[DOWN]] :
// GATHER: moe.unpermute
// GATHER-NOT: linalg.generic
// GATHER-NOT: linalg.batch_matmul

// CPU: llvm.func @{{mixtral_dense_masked|qwen3_dense_masked|qwen3_stacked_gather}}
// CPU-NOT: moe.
// CPU-NOT: tm_tensor

// LAYER: moe.layer
// LAYER: moe.route softmax_topk
// LAYER: moe.expert_mlp silu
// LAYER: moe.unpermute
// LAYER: moe.yield

// MIXBF16-LABEL: func.func @mixtral_dense_masked_bf16
// MIXBF16-SAME: (%[[ARG:.*]]: tensor<1x?x16xbf16>) -> (tensor<1x?x16xbf16>, tensor<?x4xbf16>)
// MIXBF16: %[[X:.*]] = tensor.collapse_shape %[[ARG]]
// MIXBF16: %[[LOGITS:.*]] = linalg.matmul ins(%[[X]],
// MIXBF16: %[[ROUNDED:.*]] = linalg.generic {{.*}} ins(%[[LOGITS]] : tensor<?x4xf32>) outs(%{{.*}} : tensor<?x4xbf16>)
// MIXBF16: arith.truncf
// MIXBF16: %[[EXTENDED:.*]] = linalg.generic {{.*}} ins(%[[ROUNDED]] : tensor<?x4xbf16>) outs(%{{.*}} : tensor<?x4xf32>)
// MIXBF16: arith.extf
// MIXBF16-NOT: tm_tensor.sort
// MIXBF16: %[[IDS:.*]], %[[W:.*]] = moe.route softmax_topk %[[EXTENDED]] top 2 renormalize : (tensor<?x4xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
// MIXBF16: %[[ROWS:.*]], %[[OFF:.*]], %[[SLOTS:.*]] = moe.permute %[[X]], %[[IDS]] : (tensor<?x16xbf16>, tensor<?x2xi32>) -> (tensor<?x16xbf16>, tensor<5xi64>, tensor<?x2xi64>)
// MIXBF16-COUNT-8: tensor.insert_slice {{.*}} : tensor<32x16xbf16> into tensor<4x64x16xbf16>
// MIXBF16-COUNT-4: tensor.insert_slice {{.*}} : tensor<16x32xbf16> into tensor<4x16x32xbf16>
// MIXBF16: %[[H:.*]] = moe.expert_mlp silu %[[ROWS]], %[[OFF]], %{{.*}}, %{{.*}} : (tensor<?x16xbf16>, tensor<5xi64>, tensor<4x64x16xbf16>, tensor<4x16x32xbf16>) -> tensor<?x16xbf16>
// MIXBF16: %[[Y:.*]] = moe.unpermute %[[H]], %[[SLOTS]] weights %[[W]] : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xbf16>
// MIXBF16-NOT: linalg.generic
// MIXBF16-NOT: linalg.matmul
// MIXBF16: %[[OUT:.*]] = tensor.expand_shape %[[Y]]
// MIXBF16: return %[[OUT]], %[[ROUNDED]]

// GATHERBF16-LABEL: func.func @qwen3_stacked_gather_bf16
// GATHERBF16-DAG: %[[DOWN:.*]] = arith.constant dense_resource<{{.*}}> : tensor<8x16x32xbf16>
// GATHERBF16-DAG: %[[GATE_UP:.*]] = arith.constant dense_resource<{{.*}}> : tensor<8x64x16xbf16>
// GATHERBF16-NOT: tm_tensor.sort
// GATHERBF16: moe.route softmax_topk %{{.*}} top 2 renormalize : (tensor<?x8xf32>) -> (tensor<?x2xi32>, tensor<?x2xf32>)
// GATHERBF16: %[[ROWS:.*]], %[[OFF:.*]], %{{.*}} = moe.permute %{{.*}} : (tensor<?x16xbf16>, tensor<?x2xi32>)
// GATHERBF16-NOT: tensor.insert_slice
// GATHERBF16: moe.expert_mlp silu %[[ROWS]], %[[OFF]], %[[GATE_UP]], %[[DOWN]] : (tensor<?x16xbf16>, tensor<9xi64>, tensor<8x64x16xbf16>, tensor<8x16x32xbf16>) -> tensor<?x16xbf16>
// GATHERBF16: moe.unpermute {{.*}} : (tensor<?x16xbf16>, tensor<?x2xi64>, tensor<?x2xf32>) -> tensor<?x16xbf16>
// GATHERBF16-NOT: linalg.generic
// GATHERBF16-NOT: linalg.batch_matmul

// The fused layer's manifest entry and its kernels' binary.
// GPU-DROP: error: 'arith.constant' op has no GPU kernel: the GPU pipeline compiles moe ops only, and the bundle would silently drop this part of @{{.*}} (ops without a kernel in all: {{[0-9]+}})
