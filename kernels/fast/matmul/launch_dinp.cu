/*
kernels/fast/matmul/launch_dinp.cu: the kernels of the dinp product, one per tile configuration
and precision that kernels/fast/matmul/configs.cuh builds for it:
    dinp(B,IN) = (dout(B,OUT) . weight(OUT,IN)) * act'(y), "NN": A (M, K), B (K, N)
One file per product, so that the three compile in parallel (make -j).
*/
#include "launch.cuh"

void mf_launch_dinp(int tf32, int cfg, dim3 grid, int pdl, cudaStream_t stream, const MfArgs &a) {
    mf_launch_product<MF_DINP>(tf32, cfg, grid, pdl, stream, a);
}
