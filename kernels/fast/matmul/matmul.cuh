/*
kernels/fast/matmul/matmul.cuh: the door to the fast matmul library, for the code that is built on it:
the fast trainer includes this header, and so do the fused steps (kernels/fast/fused/), whose kernels
are made of the library's own tiles.
  - the host API, kernels/fast/matmul/matmul_fast.h: the launchers of a linear layer's three products,
    the planner's choice and the generic product, the BF16 and K-major TF32 copies' kernels. Host code
    that only calls the library (dev/cuda's benchmarks, the tests) may include that header alone.
  - the device pieces a kernel of its own builds tiles from: the tile configurations and their shared
    memory (configs.cuh), the cp.async pipeline (pipeline.cuh), the epilogues (epilogue.cuh), the
    mma.sync tiles (mma_tf32.cuh: TF32, 3xTF32 and BF16 rounding on the way in), and wgmma with the
    Tensor Memory Accelerator (wgmma_tma.cuh, and through it wgmma_kmajor.cuh, wgmma_tf32.cuh).
The kernels behind the host API are compiled once, in the .cu files beside this header (one per
instruction family's copies, one per product of the tiled kernels), and linked into every program
that uses them. The files, by instruction family: ffma.cuh (FP32 register tiles on the CUDA cores),
mma_tf32.cuh (mma.sync on FP32 operands, TF32 or 3xTF32 or BF16), mma_bf16.cuh (mma.sync on BF16
copies), wgmma_tf32.cuh (wgmma, TF32), wgmma_kmajor.cuh (wgmma on K-major copies, BF16 or TF32),
wgmma_tma.cuh (wgmma fed by the TMA); and around them configs.cuh, planner.cuh, pipeline.cuh,
epilogue.cuh, launch.cuh.
*/
#ifndef MLP_FAST_MATMUL_CUH
#define MLP_FAST_MATMUL_CUH

#include "matmul_fast.h"  // the host API
#include "configs.cuh"    // mf_smem_floats
#include "epilogue.cuh"   // MfEpiIn, mf_epi_load, mf_epi_apply, mf_sgd_step_store4
#include "mma_tf32.cuh"   // mf_mma_sums, mf_mma_stage, mf_to_tf32, mf_ldsm_x4, mf_lds_f32
#include "pipeline.cuh"   // mf_cp16, mf_cp4, mf_cp_commit, mf_cp_wait
#include "wgmma_tma.cuh"  // mf_tma_load, mf_tensor_map, mf_mbar_*, mf_wgmma_tf32_n32_rs, CUtensorMap

#endif  // MLP_FAST_MATMUL_CUH
