/*
matmul_splitk_fixup: K splits through a workspace in global memory ("fixup"), against the thread-block
clusters the trainer uses, and cuBLAS. An experiment that did not go into the trainer: the products
alone got faster on some wide shapes, the trainer's wide FP32 epoch slower (doc/fast.md, "FFMA tiles").

Key: B batch, IN input features, OUT output features; row-major; weight is (OUT, IN) like nn.Linear.
    fwd   out(B,OUT) = inp(B,IN) . weight(OUT,IN)^T   "NT"  M = B  N = OUT  K = IN
    dinp  dinp(B,IN) = dout(B,OUT) . weight(OUT,IN)   "NN"  M = B  N = IN   K = OUT
(the two products whose A is k-contiguous; the weight gradient splits K through scratch elsewhere).

Where the output is too small to fill the GPU, the planner (kernels/fast/matmul/planner.cuh) cuts K into S
slices, a block per slice and output tile. The trainer adds the slices of a tile up inside a cluster
of its S blocks, through distributed shared memory (kernels/fast/matmul/epilogue.cuh mf_cluster_reduce).
But a cluster's blocks must be resident together on one GPC, and with clusters of 4 some SMs were
left without work (ncu: sm__cycles_active.min 0). The fixup instead lets every block run wherever a
slot is free: each slice writes its partial tile to a workspace in global memory, a counter per tile
(atomicAdd) tells the last block of the tile to arrive, and that block adds the S partials in the
order 0 .. S-1, the cluster's order: the same bits, whichever block comes last. The counter says who
adds up, not in what order, so the result stays reproducible.

The kernel here is the trainer's FP32 kernel (kernels/fast/matmul/ffma.cuh: the same cp.async pipeline,
pipeline.cuh, and register tiles) with that ending; the epilogue (bias, activation) is epilogue.cuh's.
The tile configuration and the split are the planner's pick for each shape (matmul_fast_plan).

Run: ./matmul_splitk_fixup          validate on odd shapes, then per shape: validate, time (fixup,
                                    clusters, cuBLAS SGEMM), validate again; bitwise against clusters
Tolerance: relative-norm error 1e-5 against a double-precision CPU reference (float32 sums of
K <= 1024 products land near 1e-7..1e-6). Outputs are filled with NaN before every validated run.
*/
#include "common.h"
#include <cublas_v2.h>

#include "../../common/mlp.h"                       // ACT_*
#include "../../kernels/fast/matmul/configs.cuh"    // MF_FP32_CONFIGS: the trainer's FP32 tiles
#include "../../kernels/fast/matmul/epilogue.cuh"   // mf_epi_load, mf_epi_apply
#include "../../kernels/fast/matmul/matmul_fast.h"  // matmul_fast_plan, matmul_fast_run (the cluster split)
#include "../../kernels/fast/matmul/pipeline.cuh"   // MfTile, mf_mainloop

#define cublasCheck(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { fflush(stdout); \
    fprintf(stderr, "error: %s:%d: cuBLAS error: status %d ---> try: check the shapes and leading dimensions\n", \
            __FILE__, __LINE__, (int)s_); exit(EXIT_FAILURE); } } while (0)

// ----------------------------------------------------------------------------
// the workspace

typedef struct {
    float* part;          // partial tiles: S * (tiles of the grid) * BM * BN floats
    unsigned* count;      // one counter per output tile, 0 between launches (the last block resets it)
    size_t part_floats;   // the sizes of part and count; a product that needs more is refused
    size_t tiles;
} SplitKWorkspace;

static SplitKWorkspace workspace_alloc(size_t floats, size_t tiles) {
    SplitKWorkspace ws;
    cudaCheck(cudaMalloc(&ws.part, floats * sizeof(float)));
    cudaCheck(cudaMalloc(&ws.count, tiles * sizeof(unsigned)));
    cudaCheck(cudaMemset(ws.count, 0, tiles * sizeof(unsigned)));   // then kept 0 by the kernel
    ws.part_floats = floats;
    ws.tiles = tiles;
    return ws;
}

static void workspace_free(SplitKWorkspace* ws) {
    cudaCheck(cudaFree(ws->part));
    cudaCheck(cudaFree(ws->count));
}

// ----------------------------------------------------------------------------
// the kernel: kernels/fast/matmul/ffma.cuh's, ending in the fixup

// C (M, N) = epilogue(A . B), A (M, K) row-major, B (N, K) row-major (B_KC) or (K, N); blockIdx.z is
// the K slice. Dynamic shared memory: mf_smem_floats(BM, BN, BK, ST, true, B_KC, 4) floats.
template <int BM, int BN, int BK, int TM, int TN, int ST, bool B_KC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    matmul_fixup_kernel(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B, int M, int N,
                        int K, int kchunk, int vec, MatmulFastEpi epi, SplitKWorkspace ws) {
    constexpr bool A_KC = true;
    constexpr int NT = (BM / TM) * (BN / TN);
    typedef MfTile<BM, BK, NT, A_KC, 4> TA;
    typedef MfTile<BN, BK, NT, B_KC, 4> TB;
    constexpr int RN = BN * 4 / TN;   // stride between a thread's float4 groups of columns
    extern __shared__ __align__(16) float smem[];
    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN), ty = tid / (BN / TN);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int kbeg = blockIdx.z * kchunk;
    const int kend = min(K, kbeg + kchunk);
    const int ntiles = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;

    // 1. this slice's partial tile, as in ffma.cuh
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;
    mf_mainloop<BM, BN, BK, ST, TA, TB>(smem, A, B, M, N, K, B_KC ? K : N, m0, n0, kbeg, kend, ntiles, tid, vec != 0,
        [&](const float* as, const float* bs) {
#pragma unroll
        for (int k4 = 0; k4 < BK; k4 += 4) {
            float a[4][TM], b[4][TN];
#pragma unroll
            for (int i = 0; i < TM; i++) {   // A is k-contiguous: one float4 per row
                const float4 v = *reinterpret_cast<const float4*>(&as[(ty + i * (BM / TM)) * TA::LD + k4]);
                a[0][i] = v.x; a[1][i] = v.y; a[2][i] = v.z; a[3][i] = v.w;
            }
#pragma unroll
            for (int j = 0; j < (B_KC ? TN : TN / 4); j++) {
                if constexpr (B_KC) {
                    const float4 v = *reinterpret_cast<const float4*>(&bs[(tx + j * (BN / TN)) * TB::LD + k4]);
                    b[0][j] = v.x; b[1][j] = v.y; b[2][j] = v.z; b[3][j] = v.w;
                } else {
#pragma unroll
                    for (int kk = 0; kk < 4; kk++) {
                        const float4 v = *reinterpret_cast<const float4*>(&bs[(k4 + kk) * TB::LD + j * RN + tx * 4]);
                        b[kk][j * 4 + 0] = v.x; b[kk][j * 4 + 1] = v.y; b[kk][j * 4 + 2] = v.z; b[kk][j * 4 + 3] = v.w;
                    }
                }
            }
#pragma unroll
            for (int kk = 0; kk < 4; kk++)
#pragma unroll
                for (int i = 0; i < TM; i++)
#pragma unroll
                    for (int j = 0; j < TN; j++) acc[i][j] = fmaf(a[kk][i], b[kk][j], acc[i][j]);
        }
    });

    // 2. the fixup. Every block of the tile keeps the same outputs in the same threads, so each thread
    // writes its partial sums in its own order (its e-th at e * NT + tid: coalesced), and in the last
    // block each thread reads back exactly the outputs it holds, a slice's loads in flight together.
    const int S = (int)gridDim.z;
    const unsigned tile = blockIdx.y * gridDim.x + blockIdx.x;
    float* part = ws.part + (size_t)tile * S * (TM * TN * NT);
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) __stcg(&part[((size_t)blockIdx.z * TM * TN + i * TN + j) * NT + tid], acc[i][j]);
    int& is_last = *reinterpret_cast<int*>(smem);   // the stages are free now (mf_mainloop's last barrier)
    __threadfence();   // this block's partial tile is visible GPU-wide before its count
    __syncthreads();
    if (tid == 0) is_last = atomicAdd(&ws.count[tile], 1u) == (unsigned)S - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();   // the other blocks' partial tiles are read after their counts
    float sum[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) sum[i][j] = 0.0f;
    for (int z = 0; z < S; z++) {   // in the order 0 .. S-1, like the cluster reduction: the same bits
        const float* pz = part + (size_t)z * TM * TN * NT;
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) sum[i][j] += z == (int)blockIdx.z ? acc[i][j] : __ldcg(&pz[(i * TN + j) * NT + tid]);
    }
    if (tid == 0) ws.count[tile] = 0;   // every block of the tile has counted: ready for the next launch

    // 3. the epilogue, its loads up to 16 at a time in flight (one output at a time, each waiting for
    // its own load, was slower than the cluster's float4 rounds), then the stores
#define FX_ROW(i) (ty + (i) * (BM / TM))
#define FX_COL(j) (B_KC ? tx + (j) * (BN / TN) : ((j) / 4) * RN + tx * 4 + ((j) % 4))
    constexpr int R = TN >= 16 ? 1 : 16 / TN;   // rows per round
    static_assert(TM % R == 0, "whole rounds of rows");
#pragma unroll
    for (int i0 = 0; i0 < TM; i0 += R) {
        MfEpiIn in[R][TN];
#pragma unroll
        for (int i = 0; i < R; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) {
                const int m = m0 + FX_ROW(i0 + i), n = n0 + FX_COL(j);
                in[i][j] = m < M && n < N ? mf_epi_load(m, n, N, epi) : MfEpiIn{0.0f, 0.0f};
            }
#pragma unroll
        for (int i = 0; i < R; i++)
#pragma unroll
            for (int j = 0; j < TN; j++) {
                const int m = m0 + FX_ROW(i0 + i), n = n0 + FX_COL(j);
                if (m < M && n < N) C[(size_t)m * N + n] = mf_epi_apply(sum[i0 + i][j], in[i][j], m, n, N, epi);
            }
    }
#undef FX_ROW
#undef FX_COL
}

// Configuration cfg of the trainer's FP32 list (kernels/fast/matmul/configs.cuh) with S = grid.z slices;
// false when the workspace is too small for the grid
template <bool B_KC>
static bool launch_fixup(int cfg, dim3 grid, float* C, const float* A, const float* B, int M, int N, int K, int kchunk,
                         int vec, const MatmulFastEpi& epi, const SplitKWorkspace& ws) {
    switch (cfg) {
#define FX_CASE(ID, BM, BN, BK, TM, TN, ST, EFF, FILL, OCC, BUILT)                                                 \
    case ID: {                                                                                                     \
        const size_t tiles = (size_t)grid.x * grid.y;                                                              \
        if (tiles > ws.tiles || tiles * grid.z * BM * BN > ws.part_floats) return false;                          \
        auto kernel = matmul_fixup_kernel<BM, BN, BK, TM, TN, ST, B_KC>;                                           \
        const size_t smem = (size_t)mf_smem_floats(BM, BN, BK, ST, true, B_KC, 4) * sizeof(float);                \
        if (smem > 48 * 1024) cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, \
                                                             (int)smem));                                          \
        kernel<<<grid, (BM / TM) * (BN / TN), smem>>>(C, A, B, M, N, K, kchunk, vec, epi, ws);                     \
        cudaCheck(cudaGetLastError());                                                                             \
        return true;                                                                                               \
    }
        MF_FP32_CONFIGS(FX_CASE)
#undef FX_CASE
    }
    fprintf(stderr, "matmul_splitk_fixup: no FP32 configuration %d\n", cfg);
    exit(EXIT_FAILURE);
}

// ----------------------------------------------------------------------------
// a problem: one product of one layer, with its buffers and CPU reference

typedef struct {
    MfProduct prod;
    int Bsz, IN, OUT, M, N, K;
    float *A, *B, *C, *C2, *bias;   // device
    float *hA, *hB, *hC, *hbias;    // host
    double* ref;                    // A . B in double, through the forward epilogue (+ bias, act) if any
    int act, with_bias;
} Problem;

// forward: act(A . B + bias), the bias only with_bias; dinp: A . B (act' would need y)
static void problem_init(Problem* p, MfProduct prod, int Bsz, int IN, int OUT, int act, int with_bias) {
    p->prod = prod; p->Bsz = Bsz; p->IN = IN; p->OUT = OUT; p->act = act; p->with_bias = with_bias;
    p->M = Bsz; p->N = prod == MF_FWD ? OUT : IN; p->K = prod == MF_FWD ? IN : OUT;
    const size_t na = (size_t)p->M * p->K, nb = (size_t)p->K * p->N, nc = (size_t)p->M * p->N;
    p->hA = (float*)mallocCheck(na * 4); p->hB = (float*)mallocCheck(nb * 4); p->hC = (float*)mallocCheck(nc * 4);
    p->hbias = (float*)mallocCheck((size_t)p->N * 4);
    fill_uniform(p->hA, na); fill_uniform(p->hB, nb); fill_uniform(p->hbias, p->N);
    cudaCheck(cudaMalloc(&p->A, na * 4)); cudaCheck(cudaMalloc(&p->B, nb * 4));
    cudaCheck(cudaMalloc(&p->C, nc * 4)); cudaCheck(cudaMalloc(&p->C2, nc * 4));
    cudaCheck(cudaMalloc(&p->bias, (size_t)p->N * 4));
    cudaCheck(cudaMemcpy(p->A, p->hA, na * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(p->B, p->hB, nb * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(p->bias, p->hbias, (size_t)p->N * 4, cudaMemcpyHostToDevice));
    // the forward product with its bias and activation; dinp as a plain product (act' needs y)
    p->ref = (double*)mallocCheck(nc * sizeof(double));
    const bool b_kc = prod == MF_FWD;   // B(k, n) = weight[n][k] (forward) or weight[k][n] (dinp)
#pragma omp parallel for
    for (int m = 0; m < p->M; m++)
        for (int n = 0; n < p->N; n++) {
            double s = 0.0;
            for (int k = 0; k < p->K; k++)
                s += (double)p->hA[(size_t)m * p->K + k] * (b_kc ? p->hB[(size_t)n * p->K + k] : p->hB[(size_t)k * p->N + n]);
            if (prod == MF_FWD) {
                if (with_bias) s += p->hbias[n];
                s = act == ACT_SIGMOID ? 1.0 / (1.0 + exp(-s)) : act == ACT_RELU ? (s > 0 ? s : 0) : act == ACT_TANH ? tanh(s) : s;
            }
            p->ref[(size_t)m * p->N + n] = s;
        }
}

static void problem_free(Problem* p) {
    cudaCheck(cudaFree(p->A)); cudaCheck(cudaFree(p->B)); cudaCheck(cudaFree(p->C)); cudaCheck(cudaFree(p->C2));
    cudaCheck(cudaFree(p->bias));
    free(p->hA); free(p->hB); free(p->hC); free(p->hbias); free(p->ref);
}

static MatmulFastEpi problem_epi(const Problem* p) {
    MatmulFastEpi e = {MF_EPI_FORWARD, p->act, p->with_bias ? p->bias : NULL, NULL, {}, 0};
    if (p->prod == MF_DINP) { e.kind = MF_EPI_DINP; e.act = ACT_NONE; e.bias = NULL; }
    return e;
}

// ----------------------------------------------------------------------------
// the three ways

enum { WAY_FIXUP = 0, WAY_CLUSTER = 1, WAY_CUBLAS = 2 };
static const char* const way_names[3] = {"fixup", "clusters", "cuBLAS"};
static cublasHandle_t cublas_handle;

// the planner's tile and split for p; fixup: the same, its slices added through ws (false when the
// plan does not split K, or the workspace is too small)
static bool run_way(int way, const Problem* p, float* C, const SplitKWorkspace& ws) {
    const MatmulFastEpi epi = problem_epi(p);
    const MatmulFastPlan plan = matmul_fast_plan(p->prod, p->M, p->N, p->K, 0, 0);
    if (way == WAY_CLUSTER) {
        matmul_fast_run(p->prod, &plan, C, p->A, p->B, p->M, p->N, p->K, &epi, NULL, 0, 0, 0);
        return true;
    }
    if (way == WAY_CUBLAS) {   // column-major: C^T (N, M) = B^T A^T (problems without bias and activation)
        const float one = 1.0f, zero = 0.0f;
        const bool b_kc = p->prod == MF_FWD;
        cublasCheck(cublasSgemm(cublas_handle, b_kc ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, p->N, p->M, p->K, &one,
                                p->B, b_kc ? p->K : p->N, p->A, p->K, &zero, C, p->N));
        return true;
    }
    if (plan.splits <= 1) return false;
    int n;
    const MatmulFastCfg* cfgs = matmul_fast_configs(0, &n);
    const MatmulFastCfg* c = NULL;
    for (int i = 0; i < n; i++) if (cfgs[i].id == plan.cfg) c = &cfgs[i];
    const int chunk = CEIL_DIV(CEIL_DIV(p->K, plan.splits), c->bk) * c->bk;   // as the planner cuts K
    const dim3 grid(CEIL_DIV(p->N, c->bn), CEIL_DIV(p->M, c->bm), CEIL_DIV(p->K, chunk));
    const int vec = p->K % 4 == 0 && p->M % 4 == 0 && p->N % 4 == 0;   // (cudaMalloc'ed: 256-byte aligned)
    return p->prod == MF_FWD ? launch_fixup<true>(plan.cfg, grid, C, p->A, p->B, p->M, p->N, p->K, chunk, vec, epi, ws)
                             : launch_fixup<false>(plan.cfg, grid, C, p->A, p->B, p->M, p->N, p->K, chunk, vec, epi, ws);
}

static double rel_err(const float* out, const double* ref, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)out[i] - ref[i];
        num += d * d; den += ref[i] * ref[i];
    }
    if (num != num) return INFINITY;   // NaN: an unwritten or broken element
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

// poison, run, compare with the CPU (cuBLAS: only products without bias and activation)
static int validate(int way, Problem* p, const SplitKWorkspace& ws, const char* when) {
    const size_t nc = (size_t)p->M * p->N;
    cudaCheck(cudaMemset(p->C, 0xFF, nc * 4));
    if (!run_way(way, p, p->C, ws)) return -1;   // not applicable
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(p->hC, p->C, nc * 4, cudaMemcpyDeviceToHost));
    const double err = rel_err(p->hC, p->ref, nc);
    const int ok = err < 1e-5;
    if (!ok) printf("  FAIL %-8s %-4s B=%d %d->%d %s: rel err %.2e%s\n", way_names[way], p->prod == MF_FWD ? "fwd" : "dinp",
                    p->Bsz, p->IN, p->OUT, ACT_NAMES[p->act], err, when);
    return ok;
}

// the fixup's output equals the clusters', bit for bit (the same order of sums)
static int same_bits(Problem* p, const SplitKWorkspace& ws) {
    const size_t nc = (size_t)p->M * p->N;
    if (!run_way(WAY_FIXUP, p, p->C, ws)) return 1;
    run_way(WAY_CLUSTER, p, p->C2, ws);
    float* h2 = (float*)mallocCheck(nc * 4);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(p->hC, p->C, nc * 4, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(h2, p->C2, nc * 4, cudaMemcpyDeviceToHost));
    const int same = memcmp(h2, p->hC, nc * 4) == 0;
    free(h2);
    if (!same) printf("  FAIL fixup and clusters differ in their bits: %s B=%d %d->%d\n", p->prod == MF_FWD ? "fwd" : "dinp",
                      p->Bsz, p->IN, p->OUT);
    return same;
}

// median over 50 of (events around 10 back-to-back launches) / 10, after 20 ms of warm-up
static float time_way(int way, Problem* p, const SplitKWorkspace& ws) {
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0)); cudaCheck(cudaEventCreate(&e1));
    const double w0 = wall_ms();
    do {
        for (int i = 0; i < 20; i++) run_way(way, p, p->C, ws);
        cudaCheck(cudaDeviceSynchronize());
    } while (wall_ms() - w0 < 20.0);
    float t[50];
    for (int r = 0; r < 50; r++) {
        cudaCheck(cudaEventRecord(e0));
        for (int i = 0; i < 10; i++) run_way(way, p, p->C, ws);
        cudaCheck(cudaEventRecord(e1));
        cudaCheck(cudaEventSynchronize(e1));
        cudaCheck(cudaEventElapsedTime(&t[r], e0, e1));
        t[r] /= 10;
    }
    cudaCheck(cudaEventDestroy(e0)); cudaCheck(cudaEventDestroy(e1));
    return median(t, 50);
}

int main(int argc, char** argv) {
    (void)argv;
    if (argc > 1) {
        fprintf(stderr, "usage: matmul_splitk_fixup   (no arguments)\n");
        return EXIT_FAILURE;
    }
    require_gpu_or_exit("matmul_splitk_fixup");
    print_gpu_name();
    if (!matmul_fast_has_clusters()) {
        printf("matmul_splitk_fixup: no thread-block clusters here (an sm_90 build on an sm_90 GPU), nothing to compare\n");
        return EXIT_SUCCESS;
    }
    cublasCheck(cublasCreate(&cublas_handle));
    // large enough for every plan below: 8 slices of 1024 x 1024, tiles of 32 x 32 at least
    SplitKWorkspace ws = workspace_alloc((size_t)8 << 20, 4096);
    int passed = 0, failed = 0;

    printf("\nvalidation on odd shapes (forward with bias and every activation, dinp; the planner's tile and split;"
           " the fixup's bits against the clusters'):\n");
    const int odd[][3] = {{33, 100, 37}, {1, 784, 128}, {7, 13, 5}, {65, 130, 129}, {64, 784, 128}, {256, 1024, 1024}};
    for (int si = 0; si < 6; si++)
        for (int prod = MF_FWD; prod <= MF_DINP; prod++)
            for (int act = 0; act < 4; act++) {
                if (prod == MF_DINP && act > 0) continue;   // dinp: a plain product here
                Problem p;
                problem_init(&p, (MfProduct)prod, odd[si][0], odd[si][1], odd[si][2], act, 1);
                for (int way = WAY_FIXUP; way <= WAY_CLUSTER; way++) {
                    const int ok = validate(way, &p, ws, "");
                    if (ok >= 0) { passed += ok; failed += !ok; }
                }
                const int same = same_bits(&p, ws);
                passed += same; failed += !same;
                problem_free(&p);
            }
    printf("  %d passed, %d failed\n", passed, failed);

    printf("\nthe trainer's shapes (ms per call, median; %% = cuBLAS time / ours; '-': the plan does not split K):\n");
    printf("| product | B | IN->OUT | plan | fixup ms | clusters ms | cuBLAS ms | fixup %% | clusters %% |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    const int wide[][3] = {{256, 784, 1024}, {256, 1024, 1024}, {256, 1024, 10}, {64, 784, 128}};
    for (int si = 0; si < 4; si++)
        for (int prod = MF_FWD; prod <= MF_DINP; prod++) {
            Problem p;
            problem_init(&p, (MfProduct)prod, wide[si][0], wide[si][1], wide[si][2], ACT_NONE, 0);
            const MatmulFastPlan plan = matmul_fast_plan(p.prod, p.M, p.N, p.K, 0, 0);
            float ms[3] = {0, 0, 0};
            for (int way = WAY_FIXUP; way <= WAY_CUBLAS; way++) {
                int ok = validate(way, &p, ws, " (before)");
                if (ok < 0) continue;   // the plan does not split K: no fixup to time
                ms[way] = time_way(way, &p, ws);
                ok = validate(way, &p, ws, " (after)") && ok;
                passed += ok; failed += !ok;
            }
            char fx[32] = "-", fxp[32] = "-";
            if (ms[0] > 0) {
                snprintf(fx, sizeof(fx), "%.4f", ms[0]);
                snprintf(fxp, sizeof(fxp), "%.0f%%", 100.0 * ms[2] / ms[0]);
            }
            printf("| %s | %d | %d->%d | c%d/s%d | %s | %.4f | %.4f | %s | %.0f%% |\n", prod == MF_FWD ? "fwd" : "dinp",
                   p.Bsz, p.IN, p.OUT, plan.cfg, plan.splits, fx, ms[1], ms[2], fxp, 100.0 * ms[2] / ms[1]);
            fflush(stdout);
            problem_free(&p);
        }
    workspace_free(&ws);
    cublasCheck(cublasDestroy(cublas_handle));
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
