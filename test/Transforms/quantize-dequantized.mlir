// --moe-quantize gemm=dequantized: the GEMMs read the exact dequantized
// values in the operands' own type. A weight argument keeps its type (and
// its attributes); @<name>_prepack returns each weight's moe.fake_quantize,
// one result per weight, and each call site calls it first. Rows go through
// moe.fake_quantize right before each GEMM; a constant weight gets one
// moe.fake_quantize after it, which its uses read.
// RUN: moe-opt %s -split-input-file --moe-quantize="format=mxfp8 scope=weights+activations gemm=dequantized" | FileCheck %s
// RUN: moe-opt %s -split-input-file --moe-quantize="scope=weights gemm=dequantized" | FileCheck %s --check-prefix=BLOCK
// Run twice, a function is refused (its prepack function exists): its
// weights hold no mark of having been dequantized, and quantizing them
// again would round twice.
// RUN: moe-opt %s --moe-quantize="format=mxfp8 gemm=dequantized" | not moe-opt --moe-quantize="format=mxfp8 gemm=dequantized" 2>&1 | FileCheck %s --check-prefix=TWICE

// CHECK-LABEL: func.func @chain(
// CHECK-SAME: %[[X:[a-z0-9_]+]]: tensor<?x128xbf16>, %[[OFF:[a-z0-9_]+]]: tensor<5xi64>, %[[W13:[a-z0-9_]+]]: tensor<4x256x128xbf16> {moe.name = "w13"}, %[[W2:[a-z0-9_]+]]: tensor<4x128x128xbf16>)
// CHECK-NEXT: %[[XQ:.*]] = moe.fake_quantize %[[X]] to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x128xbf16>
// CHECK-NEXT: %[[GU:.*]] = moe.grouped_matmul %[[XQ]], %[[W13]], %[[OFF]]
// CHECK-NEXT: %[[H:.*]] = moe.swiglu silu %[[GU]]
// CHECK-NEXT: %[[HQ:.*]] = moe.fake_quantize %[[H]] to <f8E4M3FN, [1, 32], f8E8M0FNU> : tensor<?x128xbf16>
// CHECK-NEXT: moe.grouped_matmul %[[HQ]], %[[W2]], %[[OFF]]
// CHECK-NOT: moe.dequantize
// CHECK-LABEL: func.func @chain_prepack(
// CHECK-SAME: %[[A:[a-z0-9_]+]]: tensor<4x256x128xbf16> {moe.name = "w13"}, %[[B:[a-z0-9_]+]]: tensor<4x128x128xbf16>) -> (tensor<4x256x128xbf16>, tensor<4x128x128xbf16>) attributes {moe.prepack_of = @chain}
// CHECK-NEXT: %[[AQ:.*]] = moe.fake_quantize %[[A]] to <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : tensor<4x256x128xbf16>
// CHECK-NEXT: %[[BQ:.*]] = moe.fake_quantize %[[B]] to <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : tensor<4x128x128xbf16>
// CHECK-NEXT: return %[[AQ]], %[[BQ]]
// CHECK-LABEL: func.func @caller(
// CHECK: %[[P:.*]]:2 = call @chain_prepack(%{{.*}}, %{{.*}})
// CHECK-NEXT: call @chain(%{{.*}}, %{{.*}}, %[[P]]#0, %[[P]]#1)
// BLOCK-LABEL: func.func @chain_prepack(
// BLOCK: moe.fake_quantize %{{.*}} to <f8E4M3FN, [1, 128, 128], f32> : tensor<4x256x128xbf16>
// TWICE: error: 'func.func' op moe-quantize: cannot add the prepack function: @chain_prepack already exists
func.func @chain(%x: tensor<?x128xbf16>, %offsets: tensor<5xi64>,
                 %w13: tensor<4x256x128xbf16> {moe.name = "w13"},
                 %w2: tensor<4x128x128xbf16>) -> tensor<?x128xbf16> {
  %gu = moe.grouped_matmul %x, %w13, %offsets
      : (tensor<?x128xbf16>, tensor<4x256x128xbf16>, tensor<5xi64>) -> tensor<?x256xbf16>
  %h = moe.swiglu silu %gu : (tensor<?x256xbf16>) -> tensor<?x128xbf16>
  %y = moe.grouped_matmul %h, %w2, %offsets
      : (tensor<?x128xbf16>, tensor<4x128x128xbf16>, tensor<5xi64>) -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}
func.func @caller(%x: tensor<?x128xbf16>, %offsets: tensor<5xi64>,
                  %w13: tensor<4x256x128xbf16>, %w2: tensor<4x128x128xbf16>) -> tensor<?x128xbf16> {
  %y = func.call @chain(%x, %offsets, %w13, %w2)
      : (tensor<?x128xbf16>, tensor<5xi64>, tensor<4x256x128xbf16>, tensor<4x128x128xbf16>) -> tensor<?x128xbf16>
  return %y : tensor<?x128xbf16>
}

// -----

// CHECK-LABEL: func.func @constant_weights(
// CHECK: %[[C:.*]] = arith.constant dense<
// CHECK-NEXT: %[[CQ:.*]] = moe.fake_quantize %[[C]] to <f8E4M3FN, [1, 1, 32], f8E8M0FNU> : tensor<2x128x128xf32>
// CHECK: moe.grouped_matmul %{{.*}}, %[[CQ]],
// CHECK-NOT: _prepack
func.func @constant_weights(%x: tensor<?x128xf32>, %offsets: tensor<3xi64>) -> tensor<?x128xf32> {
  %w = arith.constant dense<0.75> : tensor<2x128x128xf32>
  %y = moe.grouped_matmul %x, %w, %offsets
      : (tensor<?x128xf32>, tensor<2x128x128xf32>, tensor<3xi64>) -> tensor<?x128xf32>
  return %y : tensor<?x128xf32>
}
