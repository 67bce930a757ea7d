/*
kernels/fast/ops/round.cuh: rounding a float to TF32 or BF16, the precisions the tensor cores multiply in.
*/
#ifndef MLP_FAST_ROUND_CUH
#define MLP_FAST_ROUND_CUH

#include <string.h>

// x rounded to nearest with its low `dropped` bits cleared, ties away from zero: add half of the
// dropped bits' range (a carry into the kept bits rounds up), then clear them. Inf and NaN pass as
// they are. The integer form of both roundings below.
__host__ __device__ __forceinline__ float round_dropping_bits(float x, int dropped) {
    unsigned u;
    memcpy(&u, &x, sizeof(u));
    if ((u & 0x7F800000u) != 0x7F800000u) u = (u + (1u << (dropped - 1))) & ~((1u << dropped) - 1u);
    float r;
    memcpy(&r, &u, sizeof(r));
    return r;
}

// TF32: a float with its mantissa cut to 10 bits (of 23), the precision the tensor cores multiply
// in. round_tf32 rounds to the nearest TF32 value, ties away from zero: on the GPU the instruction
// cvt.rna (sm_80+), on the host (and older GPUs) the same rounding in integer arithmetic, 13 bits
// dropped. The result is a float whose low 13 bits are 0; the tensor cores take such a value exactly
// (anything else they truncate). Inf and NaN pass as they are.
__host__ __device__ __forceinline__ float round_tf32(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
    return __uint_as_float(u);
#else
    return round_dropping_bits(x, 13);
#endif
}

// four floats rounded to TF32, kept as floats (tiles and copies the tensor cores read as they are)
__device__ __forceinline__ float4 mf_round_tf32(float4 v) {
    return make_float4(round_tf32(v.x), round_tf32(v.y), round_tf32(v.z), round_tf32(v.w));
}

// BF16: a float with its mantissa cut to 7 bits (of 23), 16 bits dropped. round_bf16 rounds to the
// nearest BF16 value, ties away from zero: what the BF16 kernels do to their operands
// (mf_pack_bf16, kernels/fast/matmul/mma_tf32.cuh). Inf and NaN pass as they are.
__host__ __device__ __forceinline__ float round_bf16(float x) { return round_dropping_bits(x, 16); }

// round_bf16(x) as the 16 bits of a BF16 value (its float's upper half), what -x 2's BF16 copies of
// the operands hold (kernels/fast/matmul/mma_bf16.cuh); and two of them in one word, lo in the low half
__host__ __device__ __forceinline__ unsigned short mf_bf16_bits(float x) {
    const float r = round_bf16(x);
    unsigned u;
    memcpy(&u, &r, sizeof(u));
    return (unsigned short)(u >> 16);
}
__host__ __device__ __forceinline__ unsigned mf_bf16x2_bits(float lo, float hi) {
    return (unsigned)mf_bf16_bits(lo) | ((unsigned)mf_bf16_bits(hi) << 16);
}

#endif // MLP_FAST_ROUND_CUH
