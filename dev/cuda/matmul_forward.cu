/*
matmul_forward: the matmuls of a linear layer, from the naive kernel to the ones the fast trainer ships
(kernels/fast/, through kernels/fast/matmul_fast.h), with cuBLAS as the yardstick.

Key: B batch, IN input features, OUT output features; row-major; weight is (OUT, IN) like nn.Linear.
The three products of a layer, as generic C(M, N) = sum_k A(m, k) B(k, n):
  fwd     out(B,OUT)      = inp(B,IN) . weight(OUT,IN)^T   "NT"  M=B   N=OUT K=IN
  dinp    dinp(B,IN)      = dout(B,OUT) . weight(OUT,IN)   "NN"  M=B   N=IN  K=OUT
  dweight dweight(OUT,IN) = dout(B,OUT)^T . inp(B,IN)      "TN"  M=OUT N=IN  K=B

versions (1..4 take any layout through strides; 5, 6 are the shipped launchers):
  1: naive, one thread per output, threadIdx.x walks m (rows): uncoalesced
  2: coalesced: threadIdx.x walks n, so a warp writes 32 neighbours of a row of C
  3: shared-memory tiling: 32x32 tiles of A and B staged in shared memory, one output per thread
  4: 2D register blocking: 64x64 tiles, each thread a 4x4 block of C kept in registers
  5: kernels/fast/ in FP32 (fp32_tiles.cuh): cp.async pipeline, 8x8 or 4x4 register blocks, tile
     size picked per shape to fill the SMs (planner.cuh), and split-K where the output is small: the
     K slices of a tile run as one thread-block cluster and add up their partial tiles through
     distributed shared memory in a fixed order (deterministic, no scratch), as in the trainer
     (matmul_splitk_fixup.cu has the other way: a workspace in global memory)
  6: kernels/fast/ in TF32 (opt-in): mma.sync.m16n8k8 tensor cores, inputs rounded cvt.rna
     (mma_tf32.cuh); its configurations 11-14 are the wgmma kernel (wgmma_tf32.cuh; sm_90a: this
     Makefile builds GPU_ARCH=90 as sm_90a), which only the sweep, `one` and the tuned table run
  7: the same kernels on inputs that are TF32 values already (MF_TF32_EXACT), as the trainer's -x 1
     stores its forward products' operands: no rounding on the way in (the tensor cores take such
     values exactly); for all three products
  The kernels of versions 5-7 are dev/cuda's own build of kernels/fast/matmul_fast*.cu: with the
  configurations only the sweeps run (matmul_sweep_configs.h), every one built for every product
  and precision.
  cuBLAS: cublasSgemm (FP32) and cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32 (TF32), the latter
     also on the TF32-valued inputs of version 7 ("cuBLAS TF32 values", version 7's yardstick)

Run:
  ./matmul_forward          validate all versions, benchmark all + cuBLAS, validate again, summary
  ./matmul_forward 5        the same for version 5 only (and cuBLAS)
  ./matmul_forward fast     the same for versions 5, 6 and 7 (and cuBLAS)
  ./matmul_forward sweep    time every tile configuration of versions 5 and 6 on every shape
  ./matmul_forward sweep CSV wide   the same on the batch-256 wide shapes only, cuBLAS timed beside
  ./matmul_forward sweep CSV wide fp32   the same for version 5 only (FP32 A/B runs)
  ./matmul_forward one PROD B IN OUT TF32 CFG SPLITS   one validated call, then 3 more (for ncu);
                            TF32 0 (v5), 1 (v6) or 2 (v7); CFG `cublas`: that version's cuBLAS yardstick
  CSV: dev/cuda/out/matmul_forward.csv (or the path given as the 2nd argument)

Tolerances (relative norm error ||out - ref|| / ||ref|| against a double-precision CPU reference):
  FP32 versions 1e-5: float32 sums of K <= 1024 products land near 1e-7..1e-6.
  TF32 version and cuBLAS TF32 2e-3: both inputs rounded to 10 mantissa bits (rel. error 2^-11
  each) give about 4e-4 on random data.
  Version 7 and cuBLAS TF32 on TF32 values 1e-4: the reference is the exact product of those values,
  so only the FP32 sums differ (the tensor cores' accumulation, measured ~1e-7..1e-6); an input the
  kernel changed on the way in (truncated, or rounded twice) would show up at the 4e-4 level.
Outputs are filled with NaN before every validated run, so an element a kernel never writes fails.
*/
#include "common.h"
#include <cublas_v2.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../../common/mlp.h"              // ACT_NONE
#include "../../kernels/fast/matmul_fast.h"  // versions 5-7: plans, and runs of explicit plans
#include "../../kernels/fast/tf32.cuh"       // round_tf32: the host twin of cvt.rna

#define cublasCheck(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { fflush(stdout); \
    fprintf(stderr, "error: %s:%d: cuBLAS error: status %d ---> try: check the shapes and leading dimensions\n", \
            __FILE__, __LINE__, (int)s_); exit(EXIT_FAILURE); } } while (0)

// ----------------------------------------------------------------------------
// a problem: one product of one layer

enum { PROD_FWD = 0, PROD_DINP = 1, PROD_DWEIGHT = 2 };
static const char* prod_names[3] = {"fwd", "dinp", "dweight"};

typedef struct {
    int Bsz, IN, OUT, prod;
    int M, N, K;
    int a_kc, b_kc;   // A(m, k) = a_kc ? A[m*K + k] : A[k*M + m];  B(k, n) = b_kc ? B[n*K + k] : B[k*N + n]
} Problem;

static Problem make_problem(int Bsz, int IN, int OUT, int prod) {
    Problem p = {Bsz, IN, OUT, prod, 0, 0, 0, 0, 0};
    if (prod == PROD_FWD)  { p.M = Bsz; p.N = OUT; p.K = IN;  p.a_kc = 1; p.b_kc = 1; }
    if (prod == PROD_DINP) { p.M = Bsz; p.N = IN;  p.K = OUT; p.a_kc = 1; p.b_kc = 0; }
    if (prod == PROD_DWEIGHT) { p.M = OUT; p.N = IN; p.K = Bsz; p.a_kc = 0; p.b_kc = 0; }
    return p;
}

// ----------------------------------------------------------------------------
// CPU reference, in double

void matmul_cpu(double* C, const float* A, const float* B, const Problem* p) {
    const int M = p->M, N = p->N, K = p->K;
    #pragma omp parallel for
    for (int m = 0; m < M; m++) {
        for (int n = 0; n < N; n++) C[(size_t)m * N + n] = 0.0;
        for (int k = 0; k < K; k++) {
            double a = p->a_kc ? A[(size_t)m * K + k] : A[(size_t)k * M + m];
            double* c = C + (size_t)m * N;
            if (p->b_kc) for (int n = 0; n < N; n++) c[n] += a * B[(size_t)n * K + k];
            else         for (int n = 0; n < N; n++) c[n] += a * B[(size_t)k * N + n];
        }
    }
}

// ----------------------------------------------------------------------------
// kernels 1..4: any layout, through strides: A(m, k) = A[m*sam + k*sak], B(k, n) = B[k*sbk + n*sbn]

// version 1: naive, x walks rows m
__global__ void matmul_kernel1(float* C, const float* A, const float* B, int M, int N, int K,
                               int sam, int sak, int sbk, int sbn) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;
    int n = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float s = 0.0f;
    for (int k = 0; k < K; k++) s += A[(size_t)m * sam + (size_t)k * sak] * B[(size_t)k * sbk + (size_t)n * sbn];
    C[(size_t)m * N + n] = s;
}

// version 2: coalesced, x walks columns n
__global__ void matmul_kernel2(float* C, const float* A, const float* B, int M, int N, int K,
                               int sam, int sak, int sbk, int sbn) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    int m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    float s = 0.0f;
    for (int k = 0; k < K; k++) s += A[(size_t)m * sam + (size_t)k * sak] * B[(size_t)k * sbk + (size_t)n * sbn];
    C[(size_t)m * N + n] = s;
}

// version 3: 32x32 shared-memory tiles, one output per thread, block (32, 32)
#define T3 32
__global__ void matmul_kernel3(float* C, const float* A, const float* B, int M, int N, int K,
                               int sam, int sak, int sbk, int sbn) {
    __shared__ float As[T3][T3 + 1];   // As[m][k], +1: no bank conflicts on the transposed access
    __shared__ float Bs[T3][T3 + 1];   // Bs[k][n]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int m0 = blockIdx.y * T3, n0 = blockIdx.x * T3;
    float s = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T3) {
        // thread (ty, tx) loads A(m0+ty, k0+tx) and B(k0+ty, n0+tx); zero outside
        int m = m0 + ty, k = k0 + tx;
        As[ty][tx] = (m < M && k < K) ? A[(size_t)m * sam + (size_t)k * sak] : 0.0f;
        k = k0 + ty; int n = n0 + tx;
        Bs[ty][tx] = (k < K && n < N) ? B[(size_t)k * sbk + (size_t)n * sbn] : 0.0f;
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < T3; kk++) s += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }
    if (m0 + ty < M && n0 + tx < N) C[(size_t)(m0 + ty) * N + n0 + tx] = s;
}

// version 4: 64x64 tiles, BK 8, 256 threads, each a 4x4 register block (rows ty*4.., cols tx*4..)
#define BM4 64
#define BN4 64
#define BK4 8
__global__ void __launch_bounds__(256) matmul_kernel4(float* C, const float* A, const float* B, int M, int N, int K,
                                                     int sam, int sak, int sbk, int sbn) {
    __shared__ float As[BK4][BM4];   // k-major: a thread reads 4 neighbouring rows at once
    __shared__ float Bs[BK4][BN4];
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int m0 = blockIdx.y * BM4, n0 = blockIdx.x * BN4;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < K; k0 += BK4) {
        for (int i = tid; i < BM4 * BK4; i += 256) {   // 2 elements of each tile per thread
            int mm = i % BM4, kk = i / BM4;
            int m = m0 + mm, k = k0 + kk;
            As[kk][mm] = (m < M && k < K) ? A[(size_t)m * sam + (size_t)k * sak] : 0.0f;
            int nn = i % BN4, n = n0 + nn;
            Bs[kk][nn] = (k < K && n < N) ? B[(size_t)k * sbk + (size_t)n * sbn] : 0.0f;
        }
        __syncthreads();
        #pragma unroll
        for (int kk = 0; kk < BK4; kk++) {
            float a[4], b[4];
            #pragma unroll
            for (int i = 0; i < 4; i++) { a[i] = As[kk][ty * 4 + i]; b[i] = Bs[kk][tx * 4 + i]; }
            #pragma unroll
            for (int i = 0; i < 4; i++)
                #pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < 4; i++)
        #pragma unroll
        for (int j = 0; j < 4; j++) {
            int m = m0 + ty * 4 + i, n = n0 + tx * 4 + j;
            if (m < M && n < N) C[(size_t)m * N + n] = acc[i][j];
        }
}

// ----------------------------------------------------------------------------
// launchers. Operands: A, B as the problem's layout defines them; scratch for version 5/6 split-K.

#define V_CUBLAS 8
#define V_CUBLAS_TF32 9
#define V_CUBLAS_TF32V 10   // cuBLAS TF32 on the TF32-valued inputs (version 7's yardstick)
#define NVERSIONS 11
static const char* version_name(int v) {
    static const char* names[] = {"", "v1 naive", "v2 coalesced", "v3 smem tiled", "v4 reg-block 4x4",
                                  "v5 fast FP32", "v6 fast TF32", "v7 TF32 values", "cuBLAS SGEMM", "cuBLAS TF32",
                                  "cuBLAS TF32 values"};
    return names[v];
}
static int version_is_tf32(int v) { return v == 6 || v == 7 || v == V_CUBLAS_TF32 || v == V_CUBLAS_TF32V; }
static int version_on_values(int v) { return v == 7 || v == V_CUBLAS_TF32V; }   // reads the TF32-valued inputs
static int version_is_ours(int v) { return v >= 5 && v <= 7; }                  // the shipped launchers
static int version_of_tf32(int tf32) { return tf32 == 0 ? 5 : tf32 == MF_TF32_ROUND ? 6 : 7; }   // launcher's tf32 arg
static int yardstick_of(int v) {
    return version_on_values(v) ? V_CUBLAS_TF32V : version_is_tf32(v) ? V_CUBLAS_TF32 : V_CUBLAS;
}
static cublasHandle_t cublas_handle;

// Versions 5-7: as the trainer's launchers (matmul_fast.h) plan and launch a product with no bias
// and no activation, without programmatic dependent launch (single kernels, timed against cuBLAS,
// which does not overlap launches either). forced_plan: the sweep's and `one`'s choice instead of
// the planner's.
static const MatmulFastPlan* forced_plan = NULL;
static void run_fast(int tf32, float* C, const float* A, const float* B, const Problem* p, float* scratch,
                     cudaStream_t s) {
    const MfProduct prod = (MfProduct)p->prod;
    const MatmulFastEpi epi = {prod == MF_FWD ? MF_EPI_FORWARD : prod == MF_DINP ? MF_EPI_DINP : MF_EPI_RAW,
                               ACT_NONE, NULL, NULL, {}, 0};
    float* sc = prod == MF_DWEIGHT ? scratch : NULL;   // only the weight gradient splits K through scratch
    const MatmulFastPlan plan = forced_plan ? *forced_plan : matmul_fast_plan(prod, p->M, p->N, p->K, tf32, sc != NULL);
    matmul_fast_run(prod, &plan, C, A, B, p->M, p->N, p->K, &epi, sc, tf32, 0, s);
}
// configuration cfg with `splits` K slices for product p, as the launchers would run it:
// 0 where that is not possible here
static int fixed_plan(MatmulFastPlan* plan, const Problem* p, int tf32, int cfg, int splits) {
    if (!matmul_fast_plan_fixed(plan, (MfProduct)p->prod, p->M, p->N, p->K, tf32, p->prod == PROD_DWEIGHT, cfg, splits))
        return 0;
    return splits == 1 || plan->splits > 1;   // (through scratch, a short K may leave one slice: not this split)
}

void run_version(int v, float* C, const float* A, const float* B, const Problem* p, float* scratch, cudaStream_t s) {
    const int M = p->M, N = p->N, K = p->K;
    const int sam = p->a_kc ? K : 1, sak = p->a_kc ? 1 : M;
    const int sbk = p->b_kc ? 1 : N, sbn = p->b_kc ? K : 1;
    switch (v) {
        case 1: { dim3 blk(32, 8), grid(CEIL_DIV(M, 32), CEIL_DIV(N, 8));
                  matmul_kernel1<<<grid, blk, 0, s>>>(C, A, B, M, N, K, sam, sak, sbk, sbn); break; }
        case 2: { dim3 blk(32, 8), grid(CEIL_DIV(N, 32), CEIL_DIV(M, 8));
                  matmul_kernel2<<<grid, blk, 0, s>>>(C, A, B, M, N, K, sam, sak, sbk, sbn); break; }
        case 3: { dim3 blk(T3, T3), grid(CEIL_DIV(N, T3), CEIL_DIV(M, T3));
                  matmul_kernel3<<<grid, blk, 0, s>>>(C, A, B, M, N, K, sam, sak, sbk, sbn); break; }
        case 4: { dim3 grid(CEIL_DIV(N, BN4), CEIL_DIV(M, BM4));
                  matmul_kernel4<<<grid, 256, 0, s>>>(C, A, B, M, N, K, sam, sak, sbk, sbn); break; }
        case 5: case 6: case 7: {
            run_fast(v == 5 ? 0 : v == 6 ? MF_TF32_ROUND : MF_TF32_EXACT, C, A, B, p, scratch, s);
            return;   // matmul_fast_run checks its own launches
        }
        case V_CUBLAS: case V_CUBLAS_TF32: case V_CUBLAS_TF32V: {
            // cuBLAS is column-major: row-major C(M,N) is column-major C^T(N,M) = B^T A^T
            const float one = 1.0f, zero = 0.0f;
            cublasOperation_t opB = p->b_kc ? CUBLAS_OP_T : CUBLAS_OP_N;   // B^T (N x K)
            cublasOperation_t opA = p->a_kc ? CUBLAS_OP_N : CUBLAS_OP_T;   // A^T (K x M)
            int ldb = p->b_kc ? K : N, lda = p->a_kc ? K : M;
            cublasCheck(cublasSetStream(cublas_handle, s));
            if (v == V_CUBLAS) {
                cublasCheck(cublasSgemm(cublas_handle, opB, opA, N, M, K, &one, B, ldb, A, lda, &zero, C, N));
            } else {
                cublasCheck(cublasGemmEx(cublas_handle, opB, opA, N, M, K, &one, B, CUDA_R_32F, ldb, A, CUDA_R_32F, lda,
                                         &zero, C, CUDA_R_32F, N, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
            }
            return;
        }
        default: fprintf(stderr, "matmul_forward: no version %d (1..7)\n", v); exit(EXIT_FAILURE);
    }
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
// device buffers for one problem, with its CPU reference

// Two sets of inputs: A, B random FP32 (versions 1-6, cuBLAS), and At, Bt the same rounded to TF32
// (version 7, cuBLAS TF32 values), each with its reference.
typedef struct {
    Problem p;
    float *A, *B, *At, *Bt, *C, *C2, *scratch;   // device
    float *hA, *hB, *hAt, *hBt, *hC;             // host
    double *ref, *ref_t;
} Bufs;

static float* round_tf32_array(const float* x, size_t n) {
    float* r = (float*)mallocCheck(n * 4);
    for (size_t i = 0; i < n; i++) r[i] = round_tf32(x[i]);   // kernels/fast/tf32.cuh, the host twin of cvt.rna
    return r;
}

static void bufs_init(Bufs* b, Problem p, int with_ref) {
    b->p = p;
    size_t na = (size_t)p.M * p.K, nb = (size_t)p.K * p.N, nc = (size_t)p.M * p.N;
    b->hA = (float*)mallocCheck(na * 4); b->hB = (float*)mallocCheck(nb * 4); b->hC = (float*)mallocCheck(nc * 4);
    fill_uniform(b->hA, na); fill_uniform(b->hB, nb);
    b->hAt = round_tf32_array(b->hA, na); b->hBt = round_tf32_array(b->hB, nb);
    cudaCheck(cudaMalloc(&b->A, na * 4)); cudaCheck(cudaMalloc(&b->B, nb * 4));
    cudaCheck(cudaMalloc(&b->At, na * 4)); cudaCheck(cudaMalloc(&b->Bt, nb * 4));
    cudaCheck(cudaMalloc(&b->C, nc * 4)); cudaCheck(cudaMalloc(&b->C2, nc * 4));
    cudaCheck(cudaMemcpy(b->A, b->hA, na * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(b->B, b->hB, nb * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(b->At, b->hAt, na * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(b->Bt, b->hBt, nb * 4, cudaMemcpyHostToDevice));
    // scratch: enough for any forced split count the sweep tries
    size_t ns = 16 * nc;
    cudaCheck(cudaMalloc(&b->scratch, ns * 4));
    b->ref = b->ref_t = NULL;
    if (with_ref) {
        b->ref = (double*)mallocCheck(nc * sizeof(double));
        b->ref_t = (double*)mallocCheck(nc * sizeof(double));
        matmul_cpu(b->ref, b->hA, b->hB, &p);
        matmul_cpu(b->ref_t, b->hAt, b->hBt, &p);
    }
}

static void bufs_free(Bufs* b) {
    cudaCheck(cudaFree(b->A)); cudaCheck(cudaFree(b->B)); cudaCheck(cudaFree(b->C)); cudaCheck(cudaFree(b->C2));
    cudaCheck(cudaFree(b->At)); cudaCheck(cudaFree(b->Bt)); cudaCheck(cudaFree(b->scratch));
    free(b->hA); free(b->hB); free(b->hAt); free(b->hBt); free(b->hC); free(b->ref); free(b->ref_t);
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

static double tol_of(int v) { return version_on_values(v) ? 1e-4 : version_is_tf32(v) ? 2e-3 : 1e-5; }

// the inputs version v reads
static void run_on_bufs(int v, Bufs* b, float* C) {
    const int t = version_on_values(v);
    run_version(v, C, t ? b->At : b->A, t ? b->Bt : b->B, &b->p, b->scratch, 0);
}

// poison, run, compare; for versions 5-7 also run twice and demand bitwise-equal results
static int validate_one(int v, Bufs* b, const char* when, int verbose) {
    const Problem* p = &b->p;
    size_t nc = (size_t)p->M * p->N;
    cudaCheck(cudaMemset(b->C, 0xFF, nc * 4));
    cudaCheck(cudaMemset(b->scratch, 0xFF, 16 * nc * 4));
    run_on_bufs(v, b, b->C);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(b->hC, b->C, nc * 4, cudaMemcpyDeviceToHost));
    double err = rel_err(b->hC, version_on_values(v) ? b->ref_t : b->ref, nc);
    int ok = err < tol_of(v);
    int det = 1;
    if (version_is_ours(v)) {
        cudaCheck(cudaMemset(b->C2, 0xFF, nc * 4));
        run_on_bufs(v, b, b->C2);
        cudaCheck(cudaDeviceSynchronize());
        float* h2 = (float*)mallocCheck(nc * 4);
        cudaCheck(cudaMemcpy(h2, b->C2, nc * 4, cudaMemcpyDeviceToHost));
        det = memcmp(h2, b->hC, nc * 4) == 0;
        free(h2);
    }
    if (verbose || !ok || !det)
        printf("  %-17s %-7s B=%-4d %4d->%-4d (M %4d N %4d K %4d) rel err %.2e (tol %.0e)%s %s%s\n", version_name(v),
               prod_names[p->prod], p->Bsz, p->IN, p->OUT, p->M, p->N, p->K, err, tol_of(v),
               version_is_ours(v) ? (det ? " bitwise-repeatable" : " NOT REPEATABLE") : "", ok && det ? "ok" : "FAIL", when);
    return ok && det;
}

// the epilogues of the shipped launchers: bias + each activation (forward), act' from y (dinp);
// tf32 is the launchers' argument (MF_TF32_EXACT: on the TF32-valued inputs, version 7)
static int validate_epilogues(int tf32) {
    const int v = version_of_tf32(tf32);
    const double tol = tol_of(v);
    int failed = 0;
    const int shapes[][3] = {{33, 100, 37}, {1, 784, 128}, {7, 13, 5}, {64, 784, 128}, {256, 1024, 1024}};
    for (int si = 0; si < 5; si++) {
        int Bsz = shapes[si][0], IN = shapes[si][1], OUT = shapes[si][2];
        for (int act = 0; act < 4; act++) {
            // forward: out = act(inp . W^T + bias)
            Problem p = make_problem(Bsz, IN, OUT, PROD_FWD);
            Bufs b; bufs_init(&b, p, 1);
            const float *A = version_on_values(v) ? b.At : b.A, *Bm = version_on_values(v) ? b.Bt : b.B;
            double* ref = version_on_values(v) ? b.ref_t : b.ref;
            float* hbias = (float*)mallocCheck(OUT * 4); fill_uniform(hbias, OUT);
            float* dbias; cudaCheck(cudaMalloc(&dbias, OUT * 4));
            cudaCheck(cudaMemcpy(dbias, hbias, OUT * 4, cudaMemcpyHostToDevice));
            size_t nc = (size_t)p.M * p.N;
            for (size_t i = 0; i < nc; i++) {
                double x = ref[i] + hbias[i % OUT];
                ref[i] = act == 0 ? 1.0 / (1.0 + exp(-x)) : act == 1 ? (x > 0 ? x : 0) : act == 2 ? tanh(x) : x;
            }
            cudaCheck(cudaMemset(b.C, 0xFF, nc * 4));
            matmul_forward_fast(b.C, A, Bm, dbias, Bsz, IN, OUT, act, tf32, 0, 0);
            cudaCheck(cudaDeviceSynchronize());
            cudaCheck(cudaMemcpy(b.hC, b.C, nc * 4, cudaMemcpyDeviceToHost));
            double err = rel_err(b.hC, ref, nc);
            if (!(err < tol)) {
                printf("  FAIL forward epilogue tf32=%d act=%d B=%d %d->%d rel err %.2e\n", tf32, act, Bsz, IN, OUT, err);
                failed++;
            }
            cudaCheck(cudaFree(dbias)); free(hbias); bufs_free(&b);

            // dinp: (dout . W) * act'(y), y a plausible activation output
            p = make_problem(Bsz, IN, OUT, PROD_DINP);
            bufs_init(&b, p, 1);
            A = version_on_values(v) ? b.At : b.A; Bm = version_on_values(v) ? b.Bt : b.B;
            ref = version_on_values(v) ? b.ref_t : b.ref;
            nc = (size_t)p.M * p.N;
            float* hy = (float*)mallocCheck(nc * 4);
            for (size_t i = 0; i < nc; i++) {
                float u = rand_uniform();
                hy[i] = act == 0 ? 0.5f + 0.49f * u : act == 1 ? (u > 0 ? u : 0.0f) : act == 2 ? 0.99f * u : u;
            }
            float* dy; cudaCheck(cudaMalloc(&dy, nc * 4));
            cudaCheck(cudaMemcpy(dy, hy, nc * 4, cudaMemcpyHostToDevice));
            for (size_t i = 0; i < nc; i++) {
                double y = hy[i];
                double d = act == 0 ? y * (1 - y) : act == 1 ? (y > 0 ? 1.0 : 0.0) : act == 2 ? 1 - y * y : 1.0;
                ref[i] *= d;
            }
            cudaCheck(cudaMemset(b.C, 0xFF, nc * 4));
            matmul_backward_dinp_fast(b.C, A, Bm, act == ACT_NONE ? NULL : dy, act, Bsz, IN, OUT, tf32, 0);
            cudaCheck(cudaDeviceSynchronize());
            cudaCheck(cudaMemcpy(b.hC, b.C, nc * 4, cudaMemcpyDeviceToHost));
            err = rel_err(b.hC, ref, nc);
            if (!(err < tol)) {
                printf("  FAIL dinp epilogue tf32=%d act=%d B=%d %d->%d rel err %.2e\n", tf32, act, Bsz, IN, OUT, err);
                failed++;
            }
            cudaCheck(cudaFree(dy)); free(hy); bufs_free(&b);
        }
    }
    printf("  epilogues (bias + act forward, act' dinp; 4 acts x 5 shapes), %s: %s\n", version_name(v),
           failed ? "FAIL" : "ok");
    return failed == 0;
}

// ----------------------------------------------------------------------------
// timing: median over REPS of (events around INNER back-to-back launches) / INNER

#define REPS 50
#define INNER 10
static float time_version(int v, Bufs* b) {
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0)); cudaCheck(cudaEventCreate(&e1));
    // warm-up: launch for at least 20 ms, so the SM clock has ramped up from idle (an H200 idles at a
    // few hundred MHz; a handful of 10 us launches would be timed before it reaches 1980 MHz)
    double w0 = wall_ms();
    do {
        for (int i = 0; i < 20; i++) run_on_bufs(v, b, b->C);
        cudaCheck(cudaDeviceSynchronize());
    } while (wall_ms() - w0 < 20.0);
    float t[REPS];
    for (int r = 0; r < REPS; r++) {
        cudaCheck(cudaEventRecord(e0));
        for (int i = 0; i < INNER; i++) run_on_bufs(v, b, b->C);
        cudaCheck(cudaEventRecord(e1));
        cudaCheck(cudaEventSynchronize(e1));
        cudaCheck(cudaEventElapsedTime(&t[r], e0, e1));
        t[r] /= INNER;
    }
    cudaCheck(cudaEventDestroy(e0)); cudaCheck(cudaEventDestroy(e1));
    return median(t, REPS);
}

// ----------------------------------------------------------------------------

static const int bench_layers[4][2] = {{784, 128}, {784, 1024}, {1024, 1024}, {1024, 10}};
static const int bench_batches[2] = {64, 256};
#define NPROB 24
#define PAIRED_ROUNDS 5

static Problem bench_problem(int i) {   // i in [0, 24): batch, layer, product
    int bi = i / 12, li = (i / 3) % 4, prod = i % 3;
    return make_problem(bench_batches[bi], bench_layers[li][0], bench_layers[li][1], prod);
}

// the batch-256 wide shapes (784->1024, 1024->1024): the issue's targets, and most of the wide step
static int is_wide_problem(int i) { return i / 12 == 1 && (i / 3) % 4 >= 1 && (i / 3) % 4 <= 2; }

// max_tf32: the launcher tf32 arguments swept, 0 .. max_tf32 (0: version 5 only; MF_TF32_EXACT: 5, 6, 7)
static int sweep(const char* csv_file, int wide_only, int max_tf32) {
    printf("\nsweep: every tile configuration (c) and K split (s) of version%s (ms per call, median; pick = the"
           " heuristic's, %% of the best)\n", max_tf32 ? "s 5, 6 and 7" : " 5");
    // every configuration and split must be right on odd shapes too, not only the heuristic's picks
    int failed = 0, passed = 0, skipped = 0;
    const int odd[][3] = {{33, 100, 37}, {1, 784, 128}, {7, 13, 5}, {1, 1, 1}, {65, 130, 129}, {256, 1024, 10}};
    for (int si = 0; si < 6; si++)
        for (int prod = 0; prod < 3; prod++) {
            Problem p = make_problem(odd[si][0], odd[si][1], odd[si][2], prod);
            Bufs b; bufs_init(&b, p, 1);
            for (int tf32 = 0; tf32 <= max_tf32; tf32++) {
                int ncfg;
                const MatmulFastCfg* cfgs = matmul_fast_configs(tf32, &ncfg);
                for (int c = 0; c < ncfg; c++)
                    for (int sp = 1; sp <= 8; sp *= 2) {
                        MatmulFastPlan plan;
                        if (!fixed_plan(&plan, &p, tf32, cfgs[c].id, sp)) { skipped++; continue; }   // not possible here
                        forced_plan = &plan;
                        int ok = validate_one(version_of_tf32(tf32), &b, " (sweep, forced)", 0);
                        if (!ok) printf("    ^ forced c%d/s%d\n", cfgs[c].id, sp);
                        passed += ok; failed += !ok;
                    }
            }
            forced_plan = NULL;
            bufs_free(&b);
        }
    printf("every configuration x split on odd shapes: %d passed, %d failed (%d not possible here)\n", passed,
           failed, skipped);
    FILE* csv = fopenCheck(csv_file, "w");
    fprintf(csv, "prod,B,IN,OUT,M,N,K,tf32,cfg,splits,ms,pick\n");
    int tuned[NPROB][3][2];   // fastest (cfg, splits) per shape and launcher tf32 argument, for the tuned table
    memset(tuned, 0, sizeof(tuned));
    for (int i = 0; i < NPROB; i++) {
        if (wide_only && !is_wide_problem(i)) continue;
        Problem p = bench_problem(i);
        Bufs b; bufs_init(&b, p, 1);
        float cms[3] = {0.0f, 0.0f, 0.0f};   // the cuBLAS yardstick of each tf32 argument, wide only
        printf("%-7s B=%-3d %4d->%-4d M %4d N %4d K %4d |", prod_names[p.prod], p.Bsz, p.IN, p.OUT, p.M, p.N, p.K);
        if (wide_only) {   // the yardsticks in the same run, so the percentages compare like with like
            const float c32 = time_version(V_CUBLAS, &b), ct = time_version(V_CUBLAS_TF32, &b),
                        cv = time_version(V_CUBLAS_TF32V, &b);
            printf(" cuBLAS FP32 %.4f TF32 %.4f on TF32 values %.4f |", c32, ct, cv);
            cms[0] = c32; cms[1] = ct; cms[2] = cv;
            for (int t = 0; t < 3; t++)   // cfg -1: cuBLAS
                fprintf(csv, "%s,%d,%d,%d,%d,%d,%d,%d,-1,1,%.6f,0\n", prod_names[p.prod], p.Bsz, p.IN, p.OUT, p.M, p.N,
                        p.K, t, cms[t]);
        }
        for (int tf32 = 0; tf32 <= max_tf32; tf32++) {
            const int v = version_of_tf32(tf32);
            // as the launchers plan: K splits without clusters only through dweight's scratch
            const MatmulFastPlan pick = matmul_fast_plan((MfProduct)p.prod, p.M, p.N, p.K, tf32, p.prod == PROD_DWEIGHT);
            int ncfg;
            const MatmulFastCfg* cfgs = matmul_fast_configs(tf32, &ncfg);
            float best = 1e30f; int bc = 0, bs = 0;
            for (int ci = 0; ci < ncfg; ci++) {
                const int c = cfgs[ci].id;
                for (int sp = 1; sp <= 8; sp *= 2) {
                    MatmulFastPlan plan;
                    if (!fixed_plan(&plan, &p, tf32, c, sp)) continue;   // not possible here
                    forced_plan = &plan;
                    int ok = validate_one(v, &b, " (sweep, before)", 0);
                    float ms = time_version(v, &b);
                    ok = validate_one(v, &b, " (sweep, after)", 0) && ok;
                    if (!ok) printf("    ^ forced c%d/s%d\n", c, sp);
                    passed += ok; failed += !ok;
                    int is_pick = c == pick.cfg && pick.splits == sp;
                    fprintf(csv, "%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%.6f,%d\n", prod_names[p.prod], p.Bsz, p.IN, p.OUT, p.M,
                            p.N, p.K, tf32, c, sp, ms, is_pick);
                    if (ms < best) { best = ms; bc = c; bs = sp; }
                }
            }
            forced_plan = &pick;   // the planner's own plan, as the trainer runs it
            float pms = time_version(v, &b);
            forced_plan = NULL;
            printf(" %s best c%d/s%d %.4f", tf32 == 0 ? "FP32" : tf32 == 1 ? "TF32" : "TF32 values", bc, bs, best);
            if (wide_only) printf(" = %.0f%% of cuBLAS", 100.0 * cms[tf32] / best);
            printf(" pick c%d/s%d %.4f (%.0f%%)", pick.cfg, pick.splits, pms, 100.0 * best / pms);
            tuned[i][tf32][0] = bc; tuned[i][tf32][1] = bs;
        }
        printf("\n");
        fflush(stdout);
        bufs_free(&b);
    }
    fclose(csv);
    for (int tf32 = 0; tf32 <= 1; tf32++) {
        int ncfg;
        const MatmulFastCfg* cfgs = matmul_fast_configs(tf32, &ncfg);
        printf("%sconfigs %s:", tf32 ? "\n" : "", tf32 ? "TF32" : "FP32");
        for (int c = 0; c < ncfg; c++) printf(" c%d %s %dthr;", cfgs[c].id, cfgs[c].name, cfgs[c].threads);
    }
    if (max_tf32) printf("\ntuned table from this sweep, TF32 (kernels/fast/planner.cuh mf_tuned: product, M, N, K, tf32, "
           "cfg, splits; the FP32 picks are left to the cost model, see there):\n");
    for (int tf32 = MF_TF32_EXACT; tf32 >= MF_TF32_ROUND; tf32--)
        for (int i = 0; i < NPROB; i++) {
            if (!is_wide_problem(i) || !tuned[i][tf32][1]) continue;
            Problem p = bench_problem(i);
            static const char* const prods[3] = {"MF_FWD", "MF_DINP", "MF_DWEIGHT"};
            printf("    {%s, %d, %d, %d, %s, %d, %d},\n", prods[p.prod], p.M, p.N, p.K,
                   tf32 == MF_TF32_EXACT ? "MF_TF32_EXACT" : "MF_TF32_ROUND", tuned[i][tf32][0], tuned[i][tf32][1]);
        }
    printf("\nwrote %s\nsweep: %d passed, %d failed\n", csv_file, passed, failed);
    return failed;
}

// What "TF32" means for FP32 inputs: the tensor cores use the top 19 bits of each float as they find
// them, so a library that feeds FP32 data straight in truncates every input toward zero, while the
// trainer's kernels round to nearest first (cvt.rna). Which one cuBLAS TF32 does is measured here: its
// output against the exact products of the inputs rounded, and of the inputs truncated.
static float trunc_tf32(float x) { unsigned u; memcpy(&u, &x, 4); u &= 0xFFFFE000u; memcpy(&x, &u, 4); return x; }
static void tf32_inputs_report(void) {
    const int shapes[2][3] = {{256, 1024, 1024}, {64, 784, 128}};
    printf("\nTF32 on FP32 inputs: relative error against the exact product of the inputs rounded to nearest TF32 /"
           " truncated to TF32\n");
    for (int si = 0; si < 2; si++)
        for (int prod = 0; prod < 3; prod++) {
            Problem p = make_problem(shapes[si][0], shapes[si][1], shapes[si][2], prod);
            Bufs b; bufs_init(&b, p, 1);
            const size_t na = (size_t)p.M * p.K, nb = (size_t)p.K * p.N, nc = (size_t)p.M * p.N;
            float* ta = (float*)mallocCheck(na * 4); float* tb = (float*)mallocCheck(nb * 4);
            for (size_t i = 0; i < na; i++) ta[i] = trunc_tf32(b.hA[i]);
            for (size_t i = 0; i < nb; i++) tb[i] = trunc_tf32(b.hB[i]);
            double* ref_tr = (double*)mallocCheck(nc * sizeof(double));
            matmul_cpu(ref_tr, ta, tb, &p);
            printf("  %-7s B=%-4d %4d->%-4d", prod_names[p.prod], p.Bsz, p.IN, p.OUT);
            const int vs[2] = {6, V_CUBLAS_TF32};
            for (int k = 0; k < 2; k++) {
                run_on_bufs(vs[k], &b, b.C);
                cudaCheck(cudaDeviceSynchronize());
                cudaCheck(cudaMemcpy(b.hC, b.C, nc * 4, cudaMemcpyDeviceToHost));
                printf(" | %s: %.1e / %.1e", version_name(vs[k]), rel_err(b.hC, b.ref_t, nc), rel_err(b.hC, ref_tr, nc));
            }
            printf("\n");
            free(ta); free(tb); free(ref_tr); bufs_free(&b);
        }
}

int main(int argc, char** argv) {
    require_gpu_or_exit("matmul_forward");
    print_gpu_name();
    cublasCheck(cublasCreate(&cublas_handle));
    cublasCheck(cublasSetMathMode(cublas_handle, CUBLAS_DEFAULT_MATH));
    printf("matmul_fast: K splits %s\n", matmul_fast_has_clusters() ? "through thread-block clusters (sm_90 code and GPU)"
                                                                   : "through scratch (dweight only; no clusters here)");
    if (argc > 1 && strcmp(argv[1], "sweep") == 0) {
        char sbuf[256];
        const int wide_only = argc > 3 && strcmp(argv[3], "wide") == 0;
        const int fp32_only = argc > 4 && strcmp(argv[4], "fp32") == 0;   // version 5 only (an FP32 A/B in less time)
        if (argc > 5 || (argc > 4 && (!wide_only || !fp32_only))) {
            fprintf(stderr, "usage: %s sweep [CSV] [wide [fp32]]\n", argv[0]);
            return EXIT_FAILURE;
        }
        int failed = sweep(csv_path(argc > 2 ? argv[2] : NULL, "matmul_sweep", sbuf, sizeof(sbuf)), wide_only,
                           fp32_only ? 0 : MF_TF32_EXACT);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
    }
    if (argc > 1 && strcmp(argv[1], "one") == 0) {   // for a profiler: one validated call of one choice
        if (argc != 9) {
            fprintf(stderr, "usage: %s one fwd|dinp|dweight B IN OUT tf32(0|1|2) cfg|cublas splits\n", argv[0]);
            return EXIT_FAILURE;
        }
        int prod = -1;
        for (int j = 0; j < 3; j++) if (strcmp(argv[2], prod_names[j]) == 0) prod = j;
        const int tf32 = atoi(argv[6]);
        const int cublas = strcmp(argv[7], "cublas") == 0;   // the yardstick of that precision instead
        if (prod < 0 || tf32 < 0 || tf32 > MF_TF32_EXACT) {
            fprintf(stderr, "one: bad product or tf32 flag\n");
            return EXIT_FAILURE;
        }
        const int v = cublas ? yardstick_of(version_of_tf32(tf32)) : version_of_tf32(tf32);
        Problem p = make_problem(atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), prod);
        MatmulFastPlan plan;
        if (!cublas) {
            if (!fixed_plan(&plan, &p, tf32, atoi(argv[7]), atoi(argv[8]))) {
                fprintf(stderr, "one: configuration %s with %s K splits is not possible here (not built for this product"
                                " and precision, too much shared memory, or the split)\n", argv[7], argv[8]);
                return EXIT_FAILURE;
            }
            forced_plan = &plan;
        }
        Bufs b; bufs_init(&b, p, 1);
        int ok = validate_one(v, &b, " (one)", 1);
        for (int r = 0; r < 3; r++) run_on_bufs(v, &b, b.C);
        cudaCheck(cudaDeviceSynchronize());
        bufs_free(&b);
        printf("%d passed, %d failed\n", ok, !ok);
        return ok ? EXIT_SUCCESS : EXIT_FAILURE;
    }
    const int fast_only = argc > 1 && strcmp(argv[1], "fast") == 0;   // versions 5, 6 and 7 (and cuBLAS)
    int only = argc > 1 && !fast_only ? atoi(argv[1]) : 0;
    if (argc > 1 && !fast_only && (only < 1 || only > 7)) {
        fprintf(stderr, "usage: %s [version 1..7 | fast | sweep | one ...] [csv path]\n", argv[0]);
        return EXIT_FAILURE;
    }
    char buf[256];
    const char* path = csv_path(argc > 2 ? argv[2] : NULL, "matmul_forward", buf, sizeof(buf));
    int versions[NVERSIONS], nv = 0;
    for (int v = fast_only ? 5 : 1; v <= 7; v++) if (!only || only == v) versions[nv++] = v;
    versions[nv++] = V_CUBLAS; versions[nv++] = V_CUBLAS_TF32; versions[nv++] = V_CUBLAS_TF32V;

    int passed = 0, failed = 0;
    // 1. validate on odd shapes and the benchmark shapes
    printf("\nvalidation before the benchmark (relative-norm error vs a double CPU reference, outputs NaN-poisoned):\n");
    const int odd[][3] = {{33, 100, 37}, {1, 784, 128}, {7, 13, 5}, {1, 1, 1}, {256, 20, 3}, {65, 130, 129}};
    for (int si = 0; si < 6; si++)
        for (int prod = 0; prod < 3; prod++) {
            Problem p = make_problem(odd[si][0], odd[si][1], odd[si][2], prod);
            Bufs b; bufs_init(&b, p, 1);
            for (int vi = 0; vi < nv; vi++) {
                int ok = validate_one(versions[vi], &b, "", 0);
                passed += ok; failed += !ok;
            }
            bufs_free(&b);
        }
    printf("  odd shapes: %d passed, %d failed\n", passed, failed);
    for (int tf32 = 0; tf32 <= MF_TF32_EXACT; tf32++)
        if (!only || only == version_of_tf32(tf32)) { int ok = validate_epilogues(tf32); passed += ok; failed += !ok; }
    if (!only || only >= 6) tf32_inputs_report();

    // 2. benchmark shapes: validate, time, validate again
    FILE* csv = fopenCheck(path, "w");
    fprintf(csv, "version,name,prod,B,IN,OUT,M,N,K,ms,tflops,pct_of_cublas\n");
    float ms_all[NPROB][NVERSIONS];
    memset(ms_all, 0, sizeof(ms_all));
    printf("\nbenchmark (ms per call: median of %d x %d back-to-back launches; TFLOP/s = 2MNK / time)\n", REPS, INNER);
    for (int i = 0; i < NPROB; i++) {
        Problem p = bench_problem(i);
        Bufs b; bufs_init(&b, p, 1);
        for (int vi = 0; vi < nv; vi++) {
            int v = versions[vi];
            int ok = validate_one(v, &b, " (before)", 0);
            ms_all[i][v] = time_version(v, &b);
            ok = validate_one(v, &b, " (after)", 0) && ok;
            passed += ok; failed += !ok;
        }
        double flop = 2.0 * p.M * p.N * p.K;
        for (int vi = 0; vi < nv; vi++) {
            int v = versions[vi];
            float base = ms_all[i][yardstick_of(v)];
            fprintf(csv, "%d,%s,%s,%d,%d,%d,%d,%d,%d,%.6f,%.3f,%.1f\n", v, version_name(v), prod_names[p.prod], p.Bsz,
                    p.IN, p.OUT, p.M, p.N, p.K, ms_all[i][v], flop / ms_all[i][v] * 1e-9, 100.0 * base / ms_all[i][v]);
        }
        bufs_free(&b);
    }
    fclose(csv);

    // 3. tables
    printf("\n| product | B | IN->OUT | M x N x K |");
    for (int vi = 0; vi < nv; vi++) printf(" %s |", version_name(versions[vi]));
    printf("\n|---|---|---|---|");
    for (int vi = 0; vi < nv; vi++) printf("---|");
    printf("\n");
    for (int i = 0; i < NPROB; i++) {
        Problem p = bench_problem(i);
        double flop = 2.0 * p.M * p.N * p.K;
        printf("| %s | %d | %d->%d | %dx%dx%d |", prod_names[p.prod], p.Bsz, p.IN, p.OUT, p.M, p.N, p.K);
        for (int vi = 0; vi < nv; vi++) {
            int v = versions[vi];
            float base = ms_all[i][yardstick_of(v)];
            if (v >= V_CUBLAS) printf(" %.4f ms %.1f TF |", ms_all[i][v], flop / ms_all[i][v] * 1e-9);
            else printf(" %.4f ms %.1f TF %.0f%% |", ms_all[i][v], flop / ms_all[i][v] * 1e-9, 100.0 * base / ms_all[i][v]);
        }
        printf("\n");
    }
    if (!only || only >= 5) {
        printf("\nsummary: the shipped kernels vs cuBLAS (%% = cuBLAS time / ours; v6 vs cuBLAS TF32, v7 vs cuBLAS TF32"
               " on the same TF32-valued inputs)\n");
        printf("| product | B | IN->OUT | cuBLAS FP32 ms | v5 FP32 ms | v5 %% | cuBLAS TF32 ms | v6 TF32 ms | v6 %% |"
               " cuBLAS TF32 values ms | v7 TF32 values ms | v7 %% |\n");
        printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < NPROB; i++) {
            Problem p = bench_problem(i);
            float c32 = ms_all[i][V_CUBLAS], ct = ms_all[i][V_CUBLAS_TF32], cv = ms_all[i][V_CUBLAS_TF32V];
            float v5 = ms_all[i][5], v6 = ms_all[i][6], v7 = ms_all[i][7];
            printf("| %s | %d | %d->%d | %.4f | %.4f | %.0f%% | %.4f | %.4f | %.0f%% | %.4f | %.4f | %.0f%% |\n",
                   prod_names[p.prod], p.Bsz, p.IN, p.OUT, c32, v5, v5 > 0 ? 100.0 * c32 / v5 : 0.0, ct, v6,
                   v6 > 0 ? 100.0 * ct / v6 : 0.0, cv, v7, v7 > 0 ? 100.0 * cv / v7 : 0.0);
        }
    }
    if (!only || only >= 5) {
        // cuBLAS's time on these 10-25 us calls moves by up to 40% between runs (clocks, and which
        // kernel it picks), so the percentages above are one sample each. Here cuBLAS and ours are
        // timed alternately, 5 rounds, and the median of the 5 ratios is the figure.
        printf("\npaired timing, batch-256 wide shapes: cuBLAS and v5 / v6 / v7 alternately, %d rounds, median of the "
               "ratios (cuBLAS time / ours)\n", PAIRED_ROUNDS);
        printf("| product | B | IN->OUT | v5 FP32 %% of cuBLAS (min..max) | v6 TF32 %% of cuBLAS (min..max) |"
               " v7 TF32 values %% of cuBLAS (min..max) |\n|---|---|---|---|---|---|\n");
        for (int i = 0; i < NPROB; i++) {
            if (!is_wide_problem(i)) continue;
            Problem p = bench_problem(i);
            Bufs b; bufs_init(&b, p, 1);
            printf("| %s | %d | %d->%d |", prod_names[p.prod], p.Bsz, p.IN, p.OUT);
            for (int v = 5; v <= 7; v++) {
                if (only && only != v) continue;
                float r[PAIRED_ROUNDS];
                for (int k = 0; k < PAIRED_ROUNDS; k++) r[k] = time_version(yardstick_of(v), &b) / time_version(v, &b);
                int ok = validate_one(v, &b, " (after paired timing)", 0);
                passed += ok; failed += !ok;
                float lo = r[0], hi = r[0];
                for (int k = 1; k < PAIRED_ROUNDS; k++) { lo = r[k] < lo ? r[k] : lo; hi = r[k] > hi ? r[k] : hi; }
                printf(" %.0f%% (%.0f..%.0f) |", 100.0 * median(r, PAIRED_ROUNDS), 100.0 * lo, 100.0 * hi);
            }
            printf("\n");
            fflush(stdout);
            bufs_free(&b);
        }
    }
    printf("wrote %s\n", path);
    cublasCheck(cublasDestroy(cublas_handle));
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
