/*
dev/cuda/phase_tma.cu: how fast one phase of the wide model's deep fused step could be, measured on
its own: the forward product h (256 x 1024) = x (256 x 1024) . Wᵀ (W 1024 x 1024), TF32 values,
as 128 blocks of 64 outputs x 32 rows of the batch, each one warpgroup of wgmma.m64n32k8 fed by the
Tensor Memory Accelerator, the blocks of a thread-block cluster (CL of them along the batch, the
same 64 rows of W) sharing W's tile: each block's copier brings 64 / CL of its rows into every
block of the cluster at once (multicast).

Why: the fused step (kernels/fast/fused/fused_deep.cuh) runs this product as 128 tiles of 32 x 64 on
mma.sync, each block reading its own operands through cp.async: 384 KB a block, 49 MB a phase from
L2, which bounds the phase's mainloop (dev/bin/fused_profile times the phases). Here a block
reads 128 KB of x and 256 / CL KB of W; the question is how much of that reaches the phase's
time, before anyone rebuilds the fused step around it.

    ./dev/cuda/bin/phase_tma [reps]    each variant below: checked against the CPU on a sample of
                                       outputs, then timed as single launches, as `reps` products one
                                       after another in one launch (default 100), and so again with
                                       the copies alone and with the products alone

The kernel: warpgroup 0 (threads 0-127) runs the products, warp 4's first thread the copies. ST
stages, each with two mbarriers: full[s] (the copier's arrival with the stage's 12 KB, the other
blocks' shares of W included) and empty[s] (one arrival from the products' warpgroup of every block
of the cluster: the copier refills a stage in all of them). The variants: CL (1, 2, 4, 8), ST, the
waits (try_wait or test_wait in a loop), and the empty arrivals' release scope: the cluster's (a
fence before each arrival, on the products' critical path once a k-tile) or the CTA's, the default,
which suffices: the stage's reads are wgmma's, over once wgmma.wait_group returns. The first made
every variant several times slower (doc/fast.md, "wgmma + TMA"). Needs sm_90a (MF_WGMMA).
*/
#include <vector>
#include <algorithm>
#include "common.h"
#include "../../kernels/fast/ops/round.cuh"            // round_tf32
#include "../../kernels/fast/matmul/wgmma_tf32.cuh"    // mf_wg_fence, mf_wg_commit, mf_wg_wait
#include "../../kernels/fast/matmul/wgmma_kmajor.cuh"  // mf_wgb16_desc, mf_mbar_init, mf_mbar_wait
#include "../../kernels/fast/matmul/wgmma_tma.cuh"     // mf_wgmma_tf32_n32, mf_wg_n32_store_t, mf_mbar_expect_tx, mf_tma_load(_mc), mf_cluster_*, mf_tensor_map

#define PB 256     // rows of the batch
#define PK 1024    // the layer's inputs
#define PN 1024    // its outputs
#define BM 64      // outputs a block (W's rows: wgmma's M)
#define BNB 32     // rows of the batch a block (wgmma's N)
#define BK 32      // k a stage: 128 bytes of a row, the swizzle's width

#if defined(MF_WGMMA) && defined(__CUDA_ARCH__)
// one arrival on the barrier at the same shared offset in block cta of the cluster. REL_CLUSTER: with
// release semantics at cluster scope (this thread's earlier memory accesses made visible to the whole
// cluster first: a fence); else at the default, the CTA's scope. The stage's reads that must be over
// before the copier refills it are wgmma's, which wgmma.wait_group has already waited for.
template <int REL_CLUSTER>
__device__ __forceinline__ void pt_arrive_cluster(unsigned bar, unsigned cta) {
    if constexpr (REL_CLUSTER)
        asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
                     "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n}\n" :: "r"(bar), "r"(cta) : "memory");
    else
        mf_mbar_arrive_cluster(bar, cta);   // (the trainer's TMA kernel's)
}
// until the barrier's phase of this parity has completed: try_wait (which may suspend the thread until
// the phase completes or a time limit passes) or test_wait (which returns at once) in a loop
template <int SPIN>
__device__ __forceinline__ void pt_wait(unsigned bar, unsigned parity) {
    if constexpr (SPIN)
        asm volatile("{\n.reg .pred p;\nPT_SPIN_%=:\n"
                     "mbarrier.test_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                     "@!p bra PT_SPIN_%=;\n}\n" :: "r"(bar), "r"(parity) : "memory");
    else
        mf_mbar_wait(bar, parity);
}
#endif

constexpr int W_BYTES = BM * 128, X_BYTES = BNB * 128, STAGE = W_BYTES + X_BYTES;
constexpr int pt_smem_bytes(int ST) { return ST * STAGE + 2 * ST * 8 + 1024; }

// h[b][o] = Σ_k x[b][k] W[o][k], `reps` times over (the same sums each time), block (blockIdx.x: rows
// n0 of the batch, blockIdx.y: outputs m0); tmW: boxes of 32 k x BM / CL rows, tmX: 32 k x BNB rows
// PART: 0 the product; 1 the copies alone (no wgmma: wrong sums); 2 the products alone (the stages as
// they are, no copies: wrong sums): where the time goes
template <int CL, int ST, int SPIN, int PART, int REL>
__global__ void __launch_bounds__(160, 1) phase_kernel(const __grid_constant__ CUtensorMap tmW,
                                                       const __grid_constant__ CUtensorMap tmX, float* h, int reps) {
#if defined(MF_WGMMA) && defined(__CUDA_ARCH__)
    extern __shared__ __align__(16) unsigned char pt_smem[];
    const unsigned sraw = (unsigned)__cvta_generic_to_shared(pt_smem);
    const unsigned sbase = sraw + ((1024u - (sraw & 1023u)) & 1023u);   // swizzle atoms 1024-byte aligned
    const unsigned bars = sbase + ST * STAGE;                          // full[s], then empty[s]
    const int tid = threadIdx.x, n0 = blockIdx.x * BNB, m0 = blockIdx.y * BM;
    const unsigned rank = CL > 1 ? mf_cluster_rank() : 0;
    constexpr int NT = PK / BK;   // k-tiles a product
    const int total = reps * NT;
    if (tid == 0) {
        for (int s = 0; s < ST; s++) {
            mf_mbar_init(bars + 8 * s, 1);
            mf_mbar_init(bars + 8 * (ST + s), CL);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (CL > 1) mf_cluster_sync();
    else __syncthreads();

    if (tid >= 128) {   // the copier
        if (tid == 128) {
            for (int g = 0; g < total; g++) {
                const int s = g % ST, t = g % NT;
                const unsigned full = bars + 8 * s, sa = sbase + s * STAGE;
                if (g >= ST) pt_wait<SPIN>(bars + 8 * (ST + s), ((g / ST) + 1) & 1);   // every block is done with it
                if (PART == 2) {   // the products alone: the stage "lands" at once
                    mf_mbar_arrive(full);
                    continue;
                }
                mf_mbar_expect_tx(full, STAGE);
                mf_tma_load(sa + W_BYTES, &tmX, t * BK, n0, full);
                if (CL > 1)
                    mf_tma_load_mc(sa + rank * (W_BYTES / CL), &tmW, t * BK, m0 + (int)rank * (BM / CL), full,
                              (unsigned short)((1u << CL) - 1));
                else
                    mf_tma_load(sa, &tmW, t * BK, m0, full);
            }
        }
    } else {            // the products (mf_wg_n32_store_t says which sums a thread holds)
        float acc[16];
        for (int r = 0; r < reps; r++) {
#pragma unroll
            for (int i = 0; i < 16; i++) acc[i] = 0.0f;
            for (int t = 0; t < NT; t++) {
                const int g = r * NT + t, s = g % ST;
                pt_wait<SPIN>(bars + 8 * s, (g / ST) & 1);
                const unsigned a = sbase + s * STAGE, b = a + W_BYTES;
                mf_wg_fence();
                if (PART != 1) {
#pragma unroll
                    for (int ks = 0; ks < BK / 8; ks++)
                        mf_wgmma_tf32_n32(acc, mf_wgb16_desc(a + ks * 32, false), mf_wgb16_desc(b + ks * 32, false));
                }
                mf_wg_commit();
                mf_wg_wait<1>();   // tile g - 1's products are done: its stage may be refilled
                if (g >= 1 && tid < CL)   // thread c: block c's barrier
                    pt_arrive_cluster<REL>(bars + 8 * (ST + (g - 1) % ST), tid);
            }
            mf_wg_wait<0>();
            mf_wg_n32_store_t(h + (size_t)n0 * PN + m0, PN, acc, tid);
        }
        if (tid < CL)   // the last tile's stage
            pt_arrive_cluster<REL>(bars + 8 * (ST + (total - 1) % ST), tid);
    }
    if (CL > 1) mf_cluster_sync();   // no block leaves while another may still write into its shared memory
#endif
}

template <int CL, int ST, int SPIN, int REL, int PART = 0>
static void launch(const float* dW, const float* dX, float* dH, int reps) {
    CUtensorMap tmW, tmX;
    mf_tensor_map(&tmW, dW, PN, PK, BM / CL);
    mf_tensor_map(&tmX, dX, PB, PK, BNB);
    const int SMEM = pt_smem_bytes(ST);
    cudaCheck(cudaFuncSetAttribute(phase_kernel<CL, ST, SPIN, PART, REL>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(PB / BNB, PN / BM);
    cfg.blockDim = dim3(160);
    cfg.dynamicSmemBytes = SMEM;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CL;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    cudaCheck(cudaLaunchKernelEx(&cfg, phase_kernel<CL, ST, SPIN, PART, REL>, tmW, tmX, dH, reps));
}

template <int CL, int ST, int SPIN, int REL>
static int run(const float* dW, const float* dX, float* dH, const std::vector<float>& W, const std::vector<float>& X,
               int reps) {
    cudaCheck(cudaMemset(dH, 0, sizeof(float) * PB * PN));
    launch<CL, ST, SPIN, REL>(dW, dX, dH, 2);
    cudaCheck(cudaGetLastError());
    cudaCheck(cudaDeviceSynchronize());
    std::vector<float> H((size_t)PB * PN);
    cudaCheck(cudaMemcpy(H.data(), dH, sizeof(float) * H.size(), cudaMemcpyDeviceToHost));
    // a sample of outputs against double sums of the same TF32 values (the tensor cores' products are
    // exact on them; their FP32 sums over K = 1024 of values ~0.1 keep ~1e-6 of the largest)
    double worst = 0.0, maxv = 0.0;
    for (int i = 0; i < 4096; i++) {
        const int b = (int)((i * 2654435761u) % PB), o = (int)((i * 40503u + 17u) % PN);
        double s = 0.0;
        for (int k = 0; k < PK; k++) s += (double)X[(size_t)b * PK + k] * W[(size_t)o * PK + k];
        worst = std::max(worst, fabs(s - H[(size_t)b * PN + o]));
        maxv = std::max(maxv, fabs(s));
    }
    const bool ok = worst <= 1e-5 * maxv;
    // single launches (each a product of its own: the pipeline fills and drains), and reps products in a row
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    std::vector<float> one, many;
    for (int trial = 0; trial < 7; trial++) {
        float ms;
        cudaCheck(cudaEventRecord(e0));
        for (int i = 0; i < 50; i++) launch<CL, ST, SPIN, REL>(dW, dX, dH, 1);
        cudaCheck(cudaEventRecord(e1));
        cudaCheck(cudaEventSynchronize(e1));
        cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
        one.push_back(ms * 1000.0f / 50);
        cudaCheck(cudaEventRecord(e0));
        launch<CL, ST, SPIN, REL>(dW, dX, dH, reps);
        cudaCheck(cudaEventRecord(e1));
        cudaCheck(cudaEventSynchronize(e1));
        cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
        many.push_back(ms * 1000.0f / reps);
    }
    std::vector<float> copies, products;
    const auto time_part = [&](void (*go)(const float*, const float*, float*, int)) {   // us a product
        float ms;
        cudaCheck(cudaEventRecord(e0));
        go(dW, dX, dH, reps);
        cudaCheck(cudaEventRecord(e1));
        cudaCheck(cudaEventSynchronize(e1));
        cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
        return ms * 1000.0f / reps;
    };
    for (int trial = 0; trial < 5; trial++) {
        copies.push_back(time_part(launch<CL, ST, SPIN, REL, 1>));
        products.push_back(time_part(launch<CL, ST, SPIN, REL, 2>));
    }
    std::sort(copies.begin(), copies.end());
    std::sort(products.begin(), products.end());
    std::sort(one.begin(), one.end());
    std::sort(many.begin(), many.end());
    printf("CL %d, %2d stages, %s, release.%s: %s (max abs error %.2e of max |h| %.2e) | a launch %.2f us | in a run of %d, %.2f us a product "
           "(%.0f GB/s of operands from L2, %.1f TFLOP/s)\n", CL, ST, SPIN ? "test_wait" : "try_wait ", REL ? "cluster" : "cta    ", ok ? "ok" : "WRONG", worst, maxv, one[3], reps,
           many[3], (128.0 * (BNB + BM / CL) * PK * 4) / (many[3] * 1e3), 2.0 * PB * PN * PK / (many[3] * 1e6));
    printf("      the copies alone %.2f us a product, the products alone %.2f us\n", copies[2], products[2]);
    cudaCheck(cudaEventDestroy(e0));
    cudaCheck(cudaEventDestroy(e1));
    cudaCheck(cudaMemset(dH, 0, sizeof(float) * PB * PN));   // (the parts' sums were wrong by design)
    return ok ? 0 : 1;
}

int main(int argc, char** argv) {
    require_gpu_or_exit("phase_tma");
    const int reps = argc > 1 ? atoi(argv[1]) : 100;
    if (reps < 1) {
        fprintf(stderr, "error: phase_tma: reps %s (a positive count is needed)\n", argv[1]);
        return 2;
    }
    print_gpu_name();
#if !defined(MF_WGMMA)
    printf("phase_tma: built without MF_WGMMA (sm_90a), nothing to run\n");
    return 0;
#else
    std::vector<float> W((size_t)PN * PK), X((size_t)PB * PK);
    uint32_t st = 12345;
    auto next = [&]() { st = st * 1664525u + 1013904223u; return ((st >> 8) * (1.0f / 16777216.0f)) - 0.5f; };
    for (auto& v : W) v = round_tf32(next() * 0.06f);
    for (auto& v : X) v = round_tf32(next() + 0.5f);
    float *dW, *dX, *dH;
    cudaCheck(cudaMalloc(&dW, sizeof(float) * W.size()));
    cudaCheck(cudaMalloc(&dX, sizeof(float) * X.size()));
    cudaCheck(cudaMalloc(&dH, sizeof(float) * PB * PN));
    cudaCheck(cudaMemcpy(dW, W.data(), sizeof(float) * W.size(), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(dX, X.data(), sizeof(float) * X.size(), cudaMemcpyHostToDevice));
    printf("h (%d x %d) = x (%d x %d) . W^T, TF32 values; %d blocks of %d outputs x %d rows\n", PB, PN, PB, PK,
           (PB / BNB) * (PN / BM), BM, BNB);
    int bad = 0, runs = 0;
#define PT_RUN(CL, ST, SPIN, REL) (bad += run<CL, ST, SPIN, REL>(dW, dX, dH, W, X, reps), runs++)
    PT_RUN(1, 6, 0, 1);
    PT_RUN(1, 6, 0, 0);
    PT_RUN(2, 6, 0, 1);
    PT_RUN(2, 6, 0, 0);
    PT_RUN(4, 6, 0, 0);
    PT_RUN(8, 6, 0, 0);
    PT_RUN(2, 12, 0, 0);
    PT_RUN(4, 12, 0, 0);
    cudaCheck(cudaFree(dW));
    cudaCheck(cudaFree(dX));
    cudaCheck(cudaFree(dH));
    printf("%d passed, %d failed\n", runs - bad, bad);
    return bad ? 1 : 0;
#endif
}
