/*
kernels/fast/ops/float4.cuh: the simple kernels' per-element math on a float4, four values at a time,
for the fast kernels' 16-byte loads and stores (the matmul epilogues, the fused steps, the head, the
SGD kernel). Each applies the simple tier's own function (kernels/activation.cuh,
kernels/sgd.cuh) to every component, so the two tiers compute the same bits.
*/
#ifndef MLP_FAST_FLOAT4_CUH
#define MLP_FAST_FLOAT4_CUH

#include "../../activation.cuh"  // activation_grad_from_output
#include "../../sgd.cuh"         // sgd_one

// v ⊙ act'(y) on four values (the fast kernels' float4 epilogues: dinp, and the head's dh)
__device__ __forceinline__ float4 activation_grad_times4(float4 v, float4 y, int act) {
    return make_float4(v.x * activation_grad_from_output(y.x, act), v.y * activation_grad_from_output(y.y, act),
                       v.z * activation_grad_from_output(y.z, act), v.w * activation_grad_from_output(y.w, act));
}

// four parameters' steps, sgd_one on each float of a float4 (the fast kernels' 16-byte paths)
__device__ __forceinline__ void sgd_four(float4 &p, float4 grad, float4 &buf, float lr, float mu, float wd) {
    sgd_one(p.x, grad.x, buf.x, lr, mu, wd);
    sgd_one(p.y, grad.y, buf.y, lr, mu, wd);
    sgd_one(p.z, grad.z, buf.z, lr, mu, wd);
    sgd_one(p.w, grad.w, buf.w, lr, mu, wd);
}

#endif  // MLP_FAST_FLOAT4_CUH
