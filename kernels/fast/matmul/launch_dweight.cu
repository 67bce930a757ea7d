/*
kernels/fast/matmul/launch_dweight.cu: the kernels of the dweight product, one per tile configuration
and precision that kernels/fast/matmul/configs.cuh builds for it:
    dweight(OUT,IN) = dout(B,OUT)^T . inp(B,IN), "TN": A (K, M), B (K, N)
One file per product, so that the three compile in parallel (make -j).
*/
#include "launch.cuh"

void mf_launch_dweight(int tf32, int cfg, dim3 grid, int pdl, cudaStream_t stream, const MfArgs &a) {
    mf_launch_product<MF_DWEIGHT>(tf32, cfg, grid, pdl, stream, a);
}
