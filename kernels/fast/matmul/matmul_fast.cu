/*
kernels/fast/matmul/matmul_fast.cu: the launchers of kernels/fast/matmul/matmul_fast.h: plan a product
(kernels/fast/matmul/planner.cuh), then launch its kernel (kernels/fast/matmul/launch.cuh, compiled per product in
kernels/fast/matmul/launch_forward.cu, _dinp.cu and _dweight.cu, which build in parallel).
Compiled once, and linked into the fast trainer, test_mlp and dev/cuda's benchmarks.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "launch.cuh"     // MfArgs, mf_launch_forward / _dinp / _dweight
#include "matmul_fast.h"
#include "planner.cuh"    // mf_plan, mf_cfg
#include "wgmma_tma.cuh"  // mf_tma_encoder

static inline bool mf_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

// the precision a product is planned in: FP32 on pixels is planned as FP32 (the same tiles)
static int mf_plan_prec(MfProduct prod, int tf32) { return tf32 == MF_FP32_PIXELS ? 0 : mf_tf32_here(prod, tf32); }

// whether configuration c (of the FP32 list) runs product prod on pixels: the 3xTF32 kernels of the
// forward and weight-gradient layouts (kernels/fast/matmul/mma_tf32.cuh), the only ones built for it
static int mf_takes_pixels(MfProduct prod, const MatmulFastCfg *c) {
    return c != NULL && prod != MF_DINP && c->kind == MF_KIND_3XTF32;
}

MatmulFastPlan matmul_fast_plan(MfProduct prod, int M, int N, int K, int tf32, int have_scratch) {
    return mf_plan(prod, M, N, K, mf_plan_prec(prod, tf32), have_scratch);
}

int matmul_fast_plan_fixed(MatmulFastPlan *p, MfProduct prod, int M, int N, int K, int tf32, int have_scratch,
                           int cfg, int splits) {
    return mf_plan_fixed(p, prod, M, N, K, mf_plan_prec(prod, tf32), have_scratch, cfg, splits);
}

int matmul_fast_pixels_fit(MfProduct prod, int M, int N, int K, int have_scratch) {
    const MatmulFastPlan p = mf_plan(prod, M, N, K, 0, have_scratch);
    return mf_takes_pixels(prod, p.cfg < 0 ? NULL : mf_cfg(0, p.cfg));
}

const MatmulFastCfg *matmul_fast_configs(int tf32, int *count) {
    const int tc = tf32 != 0 && tf32 != MF_FP32_PIXELS;   // (FP32 on pixels: the FP32 list's 3xTF32 rows)
    *count = tc ? MF_NUM_TF32_CFGS : MF_NUM_FP32_CFGS;
    return tc ? mf_tf32_cfgs : mf_fp32_cfgs;
}

int matmul_fast_has_clusters(void) { return mf_has_clusters(); }

// Clusters need sm_90 in the code that runs, not only in the GPU: a build for an older target
// compiles the cluster reduction out (mf_cluster_reduce), and would silently drop the partial sums.
// So ask what was compiled: the PTX target (__CUDA_ARCH__ when the kernels were compiled) and the
// machine code of the kernels that will run on this GPU. The wgmma kernels are sm_90a code: they
// run where that is the code chosen for the GPU, and the TMA where the driver makes tensor maps.
MfTarget matmul_fast_target_here(void) {
    static MfTarget t = {};
    if (t.sms == 0) {
        int dev = 0, sms = 0;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        cudaFuncAttributes fa;
        cudaCheck(cudaFuncGetAttributes(&fa, matmul_fast_splitk_reduce_kernel<true>));
        t.clusters = fa.ptxVersion >= 90 && fa.binaryVersion >= 90;
        t.wgmma = MF_HAVE_WGMMA && fa.binaryVersion == 90;
        t.tma = t.wgmma && mf_tma_encoder() != NULL;
        cudaCheck(cudaDeviceGetAttribute(&t.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        int khz = 0;
        cudaCheck(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
        t.clock_mhz = khz / 1000;
        if (t.clusters) {   // (asked of a kernel of this library given a whole SM's shared memory)
            cudaCheck(cudaFuncSetAttribute(matmul_fast_splitk_reduce_kernel<true>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, t.smem_optin));
            cudaLaunchConfig_t lc = {};
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeClusterDimension;
            at[0].val.clusterDim.x = 2;
            at[0].val.clusterDim.y = 1;
            at[0].val.clusterDim.z = 1;
            lc.gridDim = dim3(2 * sms);
            lc.blockDim = dim3(256);
            lc.dynamicSmemBytes = (size_t)t.smem_optin;
            lc.attrs = at;
            lc.numAttrs = 1;
            if (cudaOccupancyMaxActiveClusters(&t.pair_clusters, (void *)matmul_fast_splitk_reduce_kernel<true>, &lc) !=
                cudaSuccess) {
                (void)cudaGetLastError();   // (a failed query: none)
                t.pair_clusters = 0;
            }
        }
        t.sms = sms;
    }
    return t;
}

static MfTarget mf_target_given;
static int mf_target_is_given = 0;

void matmul_fast_set_target(const MfTarget *t) {
    mf_target_is_given = t != NULL;
    if (t) mf_target_given = *t;
}

const MfTarget *matmul_fast_target(void) {
    static MfTarget here;
    if (mf_target_is_given) return &mf_target_given;
    if (here.sms == 0) here = matmul_fast_target_here();
    return &here;
}

int matmul_fast_large_cfg(MfProduct prod, int tf32) {
    const MatmulFastCfg *c = mf_large_cfg(prod, mf_plan_prec(prod, tf32));
    if (tf32 == MF_FP32_PIXELS && !mf_takes_pixels(prod, c)) return -1;
    return c ? c->id : -1;
}

// C(M, N) = epi(A . B) with plan p: the grid has a block per (BM x BN tile, K slice); the slices add
// up in their cluster, or through scratch and the reduce kernel (epilogue.cuh), which then applies
// the epilogue.
void matmul_fast_run(MfProduct prod, const MatmulFastPlan *p, float *C, const float *A, const float *B, int M,
                     int N, int K, const MatmulFastEpi *epi, float *scratch, int tf32, int pdl, cudaStream_t stream) {
    if (M <= 0 || N <= 0) return;
    static const char *const names[] = {"forward", "dinp", "dweight"};
    tf32 = mf_tf32_here(prod, tf32);
    const MatmulFastCfg *c = mf_cfg(mf_plan_prec(prod, tf32), p->cfg);
    if (c == NULL) {
        fprintf(stderr, "error: matmul_fast: this build has no kernel for the %s product in precision %d ---> try: "
                        "the lists of kernels/fast/matmul/configs.cuh\n", names[prod], tf32);
        exit(EXIT_FAILURE);
    }
    if (tf32 == MF_FP32_PIXELS && !mf_takes_pixels(prod, c)) {
        fprintf(stderr, "error: matmul_fast: the %s product with configuration %d cannot take its batch as pixels "
                        "(MF_FP32_PIXELS) ---> try: matmul_fast_pixels_fit first\n", names[prod], p->cfg);
        exit(EXIT_FAILURE);
    }
    const int split = p->splits > 1 && p->cluster ? MF_SPLIT_CLUSTER : MF_SPLIT_RAW;
    const int via_scratch = p->splits > 1 && split == MF_SPLIT_RAW;
    if (via_scratch && scratch == NULL) {
        fprintf(stderr, "error: matmul_fast: the %s product's plan splits K %d ways through scratch, and there is "
                        "none ---> try: matmul_fast_plan with have_scratch = 0\n", names[prod], p->splits);
        exit(EXIT_FAILURE);
    }
    const bool vec = (K % 4 == 0) && (M % 4 == 0) && (N % 4 == 0) && mf_aligned16(A) && mf_aligned16(B) &&
                     mf_aligned16(C) && (epi->aux == NULL || mf_aligned16(epi->aux)) &&
                     (scratch == NULL || mf_aligned16(scratch));
    const dim3 grid(mf_ceil_div(N, c->bn), mf_ceil_div(M, c->bm), p->splits);
    MfArgs a = {via_scratch ? scratch : C, A, B, M, N, K, p->kchunk, vec ? 1 : 0, split, *epi};
    if (via_scratch) a.epi.kind = MF_EPI_RAW;
    if (prod == MF_FWD) mf_launch_forward(tf32, p->cfg, grid, pdl, stream, a);
    else if (prod == MF_DINP) mf_launch_dinp(tf32, p->cfg, grid, pdl, stream, a);
    else mf_launch_dweight(tf32, p->cfg, grid, pdl, stream, a);
    if (via_scratch) {
        const size_t MN = (size_t)M * N;
        const int threads = 256;
        if (vec) {
            matmul_fast_splitk_reduce_kernel<true><<<(unsigned)((MN / 4 + threads - 1) / threads), threads, 0, stream>>>(
                C, scratch, p->splits, M, N, *epi);
        } else {
            matmul_fast_splitk_reduce_kernel<false><<<(unsigned)((MN + threads - 1) / threads), threads, 0, stream>>>(
                C, scratch, p->splits, M, N, *epi);
        }
        cudaCheck(cudaGetLastError());
    }
}

// ----------------------------------------------------------------------------
// the launchers the trainer calls

// the product on the BF16 copies of its operands (kernels/fast/matmul/wgmma_kmajor.cuh, mma_bf16.cuh) where they
// are given and the BF16-operand planner takes the shape; false: the caller runs the FP32-operand
// kernels, and then mf_copy_out
static bool mf_run_bf16(MfProduct prod, float *C, int M, int N, int K, const MatmulFastEpi *epi, int tf32,
                        const MatmulFastBf16 *bf16, int pdl, cudaStream_t stream) {
    if (bf16 == NULL || bf16->a == NULL || bf16->b == NULL || tf32 != MF_BF16) return false;
    const int cfg = matmul_fast_bf16_plan(prod, M, N, K);
    if (cfg < 0) return false;
    matmul_fast_bf16_run(prod, cfg, C, bf16->a, bf16->b, M, N, K, epi, bf16->out, pdl, stream);
    return true;
}

// after an FP32-operand product: its output's BF16 copy, if one is asked for (MatmulFastBf16's out)
static void mf_copy_out(const float *C, size_t n, const MatmulFastBf16 *bf16, cudaStream_t stream) {
    if (bf16 != NULL && bf16->out != NULL) matmul_fast_bf16_copy(bf16->out, C, n, stream);
}

void matmul_forward_fast(float *out, const float *inp, const float *weight, const float *bias, int B, int IN,
                         int OUT, int act, int tf32, int round_out, cudaStream_t stream, const MatmulFastBf16 *bf16) {
    const MatmulFastEpi epi = {MF_EPI_FORWARD, act, bias, NULL, {}, round_out};
    if (mf_run_bf16(MF_FWD, out, B, OUT, IN, &epi, tf32, bf16, 1, stream)) return;
    const MatmulFastPlan p = matmul_fast_plan(MF_FWD, B, OUT, IN, tf32, 0);
    matmul_fast_run(MF_FWD, &p, out, inp, weight, B, OUT, IN, &epi, NULL, tf32, 1, stream);
    mf_copy_out(out, (size_t)B * OUT, bf16, stream);
}

void matmul_backward_dinp_fast(float *dinp, const float *dout, const float *weight, const float *inp_act, int act,
                               int B, int IN, int OUT, int tf32, cudaStream_t stream, const MatmulFastBf16 *bf16) {
    if (inp_act == NULL && act != ACT_NONE) {
        fprintf(stderr, "error: matmul_backward_dinp_fast: inp_act is NULL but act is %s (only none allows it)\n",
                ACT_NAMES[act]);
        exit(EXIT_FAILURE);
    }
    const MatmulFastEpi epi = {MF_EPI_DINP, act, NULL, inp_act, {}, 0};
    if (mf_run_bf16(MF_DINP, dinp, B, IN, OUT, &epi, tf32, bf16, 0, stream)) return;
    const MatmulFastPlan p = matmul_fast_plan(MF_DINP, B, IN, OUT, tf32, 0);
    matmul_fast_run(MF_DINP, &p, dinp, dout, weight, B, IN, OUT, &epi, NULL, tf32, 0, stream);
    mf_copy_out(dinp, (size_t)B * IN, bf16, stream);
}

size_t matmul_fast_scratch_floats(int B, int IN, int OUT) {
    size_t need = 0;
    static const int precisions[] = {0, MF_TF32_ROUND, MF_BF16};   // what the trainer passes for dweight
    for (int i = 0; i < 3; i++) {
        const MatmulFastPlan p = matmul_fast_plan(MF_DWEIGHT, OUT, IN, B, precisions[i], 1);
        if (p.splits > 1 && !p.cluster) {
            const size_t n = (size_t)p.splits * OUT * IN;
            if (n > need) need = n;
        }
    }
    return need;
}

void matmul_backward_dweight_fast(float *dweight, const float *dout, const float *inp, int B, int IN, int OUT,
                                  float *scratch, int tf32, const MatmulFastSgd *sgd, cudaStream_t stream,
                                  const MatmulFastBf16 *bf16) {
    MatmulFastEpi epi = {MF_EPI_RAW, ACT_NONE, NULL, NULL, {}, 0};
    if (sgd) {
        epi.kind = MF_EPI_SGD;
        epi.sgd = *sgd;
    }
    if (mf_run_bf16(MF_DWEIGHT, dweight, OUT, IN, B, &epi, tf32, bf16, 0, stream)) return;
    const MatmulFastPlan p = matmul_fast_plan(MF_DWEIGHT, OUT, IN, B, tf32, scratch != NULL);
    matmul_fast_run(MF_DWEIGHT, &p, dweight, dout, inp, OUT, IN, B, &epi, scratch, tf32, 0, stream);
}
