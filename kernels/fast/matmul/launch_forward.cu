/*
kernels/fast/matmul/launch_forward.cu: the kernels of the forward product, one per tile configuration
and precision that kernels/fast/matmul/configs.cuh builds for it:
    out(B,OUT) = act(inp(B,IN) . weight(OUT,IN)^T + bias), "NT": A (M, K), B (N, K)
One file per product, so that the three compile in parallel (make -j).
*/
#include "launch.cuh"

void mf_launch_forward(int tf32, int cfg, dim3 grid, int pdl, cudaStream_t stream, const MfArgs &a) {
    mf_launch_product<MF_FWD>(tf32, cfg, grid, pdl, stream, a);
}
