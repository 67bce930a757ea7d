/*
matmul_forward: the matmuls of a linear layer, from the naive kernel to the ones the fast trainer ships
(kernels/fast/, through kernels/fast/matmul/matmul_fast.h), with cuBLAS as the yardstick.

Key: B batch, IN input features, OUT output features; row-major; weight is (OUT, IN) like nn.Linear.
The three products of a layer, as generic C(M, N) = sum_k A(m, k) B(k, n):
  fwd     out(B,OUT)      = inp(B,IN) . weight(OUT,IN)^T   "NT"  M=B   N=OUT K=IN
  dinp    dinp(B,IN)      = dout(B,OUT) . weight(OUT,IN)   "NN"  M=B   N=IN  K=OUT
  dweight dweight(OUT,IN) = dout(B,OUT)^T . inp(B,IN)      "TN"  M=OUT N=IN  K=B

versions: 1-8 are written out in this file, each one step from the one before, and take any layout
through strides; 9-11 are the shipped launchers.
  1: naive, one thread per output, threadIdx.x walks m (rows): uncoalesced
  2: coalesced: threadIdx.x walks n, so a warp writes 32 neighbours of a row of C
  3: shared-memory tiling: 32x32 tiles of A and B staged in shared memory, one output per thread
  4: 2D register blocking: 64x64 tiles, each thread a 4x4 block of C kept in registers
  5: 8x8 register blocks read from shared memory as float4s (4x the multiply-adds per shared-memory
     load), 64 threads per 64x64 tile; tiles loaded along the operand's contiguous dimension
  6: version 5 with cp.async: the next tile is copied into a second shared-memory stage while the
     current one is multiplied (a 2-stage pipeline)
  7: version 6's pipeline feeding the tensor cores: mma.sync.m16n8k8 in TF32, fragments loaded from
     shared memory and rounded to nearest (cvt.rna) on the way, sums in FP32
  8: version 7 on Hopper's wgmma (sm_90a): one warpgroup per 64x64 tile, both tiles read by the tensor
     cores straight from shared memory (k-contiguous, 128-byte swizzle), rounded in place first
  9: kernels/fast/ in FP32 (matmul/ffma.cuh): cp.async pipeline of 3-4 stages with 16-byte copies, 8x8
     or 4x4 register blocks, tile size picked per shape to fill the SMs (planner.cuh), and split-K
     where the output is small: the K slices of a tile run as one thread-block cluster and add up
     their partial tiles through distributed shared memory in a fixed order (deterministic, no
     scratch), as in the trainer (matmul_splitk_fixup.cu has the other way: a workspace in global memory)
  10: kernels/fast/ in TF32 (opt-in): mma.sync.m16n8k8 tensor cores, inputs rounded cvt.rna
     (mma_tf32.cuh); its configurations 11-14 are the wgmma kernel (wgmma_tf32.cuh; sm_90a: this
     Makefile builds GPU_ARCH=90 as sm_90a), which only the sweep, `one` and the fastest-per-shape list run
  11: the same kernels on inputs that are TF32 values already (MF_TF32_EXACT), as the trainer's -x 1
     stores its forward products' operands: no rounding on the way in (the tensor cores take such
     values exactly); for all three products
  The kernels of versions 9-11 are dev/cuda's own build of kernels/fast/matmul/'s .cu files: with the
  configurations only the sweeps run (matmul_sweep_configs.h), every one built for every product
  and precision.
  cuBLAS: cublasSgemm (FP32) and cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32 (TF32), the latter
     also on the TF32-valued inputs of version 11 ("cuBLAS TF32 values", version 11's yardstick)

Shapes: the three products of the trainers' layers (784->128, 784->1024, 1024->1024, 1024->10) at
batch 64 and 256, and of a big model's (784->4096, 4096->4096) at batch 1024.

Run:
  ./matmul_forward          validate all versions, benchmark all + cuBLAS, validate again, tables
  ./matmul_forward 0 x.csv  the same, the CSV to x.csv
  ./matmul_forward 7        the same for version 7 only (and cuBLAS)
  ./matmul_forward fast     the same for versions 9, 10 and 11 (and cuBLAS)
  ./matmul_forward sweep    time every tile configuration of versions 9, 10 and 11 on the trainers' shapes
  ./matmul_forward sweep CSV wide   the same on the batch-256 wide shapes only, cuBLAS timed beside
  ./matmul_forward sweep CSV wide fp32   the same for version 9 only (FP32 A/B runs)
  ./matmul_forward sweep CSV all fp32    version 9 only on the trainers' 24 shapes
  ./matmul_forward sweep CSV big         the big model's shapes (batch 1024, 784 -> 4096 -> 4096), cuBLAS beside
  ./matmul_forward sweep CSV big tf32    the same for versions 10 and 11 only
  ./matmul_forward sweep CSV big bf16    the same in BF16 only (version 15, the trainer's -x 2), with cuBLAS
                                         BF16 (CUBLAS_COMPUTE_32F_FAST_16BF) beside
  ./matmul_forward sweep CSV pixels      FP32 on a batch of pixels (the trainer's first layer in FP32:
                                         forward and weight gradient, batch 64, 256 and 1024)
  ./matmul_forward one PROD B IN OUT TF32 CFG SPLITS   one validated call, then 3 more (for ncu);
                            TF32 0 (v9), 1 (v10), 2 (v11) or 3 (v15, BF16); CFG `cublas`: that version's
                            cuBLAS yardstick
  ./matmul_forward one PROD B IN OUT vN                the same for version N of 1..8
  CSV: dev/cuda/out/matmul_forward.csv (or the path given as the 2nd argument)

Tolerances (relative norm error ||out - ref|| / ||ref|| against a double-precision CPU reference):
  FP32 versions 1e-5: float32 sums of K <= 4096 products land near 1e-7..3e-6.
  Version 10 and cuBLAS TF32 2e-3, against the product of the FP32 inputs: both inputs rounded to 10
  mantissa bits (rel. error 2^-11 each) give about 4e-4 on random data.
  Versions 7, 8, 11 and cuBLAS TF32 on TF32 values 1e-4, against the exact product of the inputs rounded
  to TF32 on the host (round_tf32, the twin of cvt.rna): versions 7 and 8 round their inputs that way,
  and version 11 is given them, so only the FP32 sums differ (the tensor cores' accumulation, measured
  ~1e-7..1e-6); an input the kernel changed otherwise (truncated, or not rounded) would show up at the
  4e-4 level.
Every version here (1-11) is also run twice and must give bitwise-identical results: no atomics, every
sum in a fixed order.
Outputs are filled with NaN before every validated run, so an element a kernel never writes fails.
*/
#include "common.h"
#include <cublas_v2.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../../common/mlp.h"                       // ACT_NONE
#include "../../kernels/fast/matmul/matmul_fast.h"  // versions 9-11: plans, and runs of explicit plans
#include "../../kernels/fast/ops/round.cuh"         // round_tf32: the host twin of cvt.rna

#define cublasCheck(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { fflush(stdout); \
    fprintf(stderr, "error: %s:%d: cuBLAS error: status %d ---> try: check the shapes and leading dimensions\n", \
            __FILE__, __LINE__, (int)s_); exit(EXIT_FAILURE); } } while (0)

// the columns of the steps' table: versions 1-8 and the cuBLAS yardsticks of their precisions
static int in_steps_table(int v);

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

// each C(m, n) summed over k = 0, 1, .. in order; a k-contiguous B is transposed to (K, N) first, so that
// the inner loop walks memory contiguously, and each row of B, once loaded, serves 4 rows of C (the big
// model's shapes would otherwise take minutes)
void matmul_cpu(double* C, const float* A, const float* B, const Problem* p) {
    const int M = p->M, N = p->N, K = p->K;
    float* Bt = NULL;
    if (p->b_kc) {
        Bt = (float*)mallocCheck((size_t)K * N * sizeof(float));
        #pragma omp parallel for
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++) Bt[(size_t)k * N + n] = B[(size_t)n * K + k];
    }
    const float* Bkn = p->b_kc ? Bt : B;   // B(k, n) = Bkn[k * N + n]
    #pragma omp parallel for schedule(dynamic)
    for (int m0 = 0; m0 < M; m0 += 4) {
        const int rows = M - m0 < 4 ? M - m0 : 4;
        for (int i = 0; i < rows; i++)
            for (int n = 0; n < N; n++) C[(size_t)(m0 + i) * N + n] = 0.0;
        for (int k = 0; k < K; k++) {
            const float* b = Bkn + (size_t)k * N;
            for (int i = 0; i < rows; i++) {
                const int m = m0 + i;
                const double a = p->a_kc ? A[(size_t)m * K + k] : A[(size_t)k * M + m];
                double* c = C + (size_t)m * N;
                for (int n = 0; n < N; n++) c[n] += a * b[n];
            }
        }
    }
    free(Bt);
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
// kernels 5..8: the steps from version 4 to the shipped kernels, one change each. Like 1..4 they take
// any layout through strides, and the shapes are whatever the caller gives (tails are zero-filled).

// Which element of an operand tile a thread loads, for versions 5-8. A tile is BD x BK of an operand
// X(d, k) (d: a row of A or a column of B); element i of it is (d, k). The threads walk the dimension
// that is contiguous in global memory, k when the operand is k-contiguous, else d, so that the 32 loads
// of a warp read neighbouring addresses whatever the product's layout. (Version 4 always walks d: on
// a k-contiguous operand, the forward product's both, each of its warp's loads touches 32 rows.)
__device__ __forceinline__ void tile_coords(int i, int BD, int BK, bool k_contiguous, int& d, int& k) {
    if (k_contiguous) { d = i / BK; k = i % BK; }
    else              { d = i % BD; k = i / BD; }
}

// version 5: 8 x 8 outputs per thread, read from shared memory as float4s.
// Version 4's thread reads 4 + 4 floats from shared memory per k for 16 multiply-adds; here a thread
// owns 8 x 8 outputs and reads its 8 + 8 operands as four float4s (16-byte loads) for 64 multiply-adds:
// four times the arithmetic per shared-memory instruction. Tiles 64 x 64, BK 16, 64 threads. The shared
// tiles are stored k-major, As[k][m] and Bs[k][n], so a thread's operands of one k are neighbours. Its
// rows are ty*4 .. ty*4+3 and 32 + ty*4 .. (columns likewise with tx): the 8 threads of a quarter-warp
// then read 8 neighbouring float4s of Bs, which fall in different banks (rows ty*8 .. ty*8+7 would put
// two threads 32 bytes apart in the same banks).
#define BM5 64
#define BN5 64
#define BK5 16
#define LD5 (64 + 4)   // padded rows: the tile loads' stores (threads along k) spread over the banks
__device__ __forceinline__ void regblock_8x8(float acc[8][8], const float (*As)[LD5], const float (*Bs)[LD5], int tx,
                                             int ty) {
    #pragma unroll
    for (int kk = 0; kk < BK5; kk++) {
        const float4 a0 = *reinterpret_cast<const float4*>(&As[kk][ty * 4]);
        const float4 a1 = *reinterpret_cast<const float4*>(&As[kk][32 + ty * 4]);
        const float4 b0 = *reinterpret_cast<const float4*>(&Bs[kk][tx * 4]);
        const float4 b1 = *reinterpret_cast<const float4*>(&Bs[kk][32 + tx * 4]);
        const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
        #pragma unroll
        for (int i = 0; i < 8; i++)
            #pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}
// the 8 x 8 block of C of thread (tx, ty), bounds-checked
__device__ __forceinline__ void store_8x8(float* C, const float acc[8][8], int M, int N, int m0, int n0, int tx, int ty) {
    #pragma unroll
    for (int i = 0; i < 8; i++) {
        const int m = m0 + (i / 4) * 32 + ty * 4 + i % 4;
        #pragma unroll
        for (int j = 0; j < 8; j++) {
            const int n = n0 + (j / 4) * 32 + tx * 4 + j % 4;
            if (m < M && n < N) C[(size_t)m * N + n] = acc[i][j];
        }
    }
}
__global__ void __launch_bounds__(64) matmul_kernel5(float* C, const float* A, const float* B, int M, int N, int K,
                                                    int sam, int sak, int sbk, int sbn) {
    __shared__ __align__(16) float As[BK5][LD5];   // As[k][m]
    __shared__ __align__(16) float Bs[BK5][LD5];   // Bs[k][n]
    const int tid = threadIdx.x, tx = tid % 8, ty = tid / 8;
    const int m0 = blockIdx.y * BM5, n0 = blockIdx.x * BN5;
    float acc[8][8] = {};
    for (int k0 = 0; k0 < K; k0 += BK5) {
        #pragma unroll
        for (int e = 0; e < BM5 * BK5 / 64; e++) {   // 16 elements of each tile per thread
            int d, k;
            tile_coords(tid + e * 64, BM5, BK5, sak == 1, d, k);
            As[k][d] = (m0 + d < M && k0 + k < K) ? A[(size_t)(m0 + d) * sam + (size_t)(k0 + k) * sak] : 0.0f;
            tile_coords(tid + e * 64, BN5, BK5, sbk == 1, d, k);
            Bs[k][d] = (n0 + d < N && k0 + k < K) ? B[(size_t)(k0 + k) * sbk + (size_t)(n0 + d) * sbn] : 0.0f;
        }
        __syncthreads();
        regblock_8x8(acc, As, Bs, tx, ty);
        __syncthreads();
    }
    store_8x8(C, acc, M, N, m0, n0, tx, ty);
}

// version 6: version 5 with its tile copies asynchronous and double-buffered (cp.async, sm_80+).
// In version 5 every thread waits for its global loads before it can store them and compute: the SM
// idles for a memory latency per tile. cp.async copies global memory straight into shared memory
// without passing through registers, and the thread goes on while the copy is in flight. With two
// shared-memory stages, tile t + 1 is copied while tile t is multiplied: a 2-stage pipeline. Copies are
// 4 bytes (any layout); one whose source is out of range has a source size of 0 and writes a zero.
// (The shipped kernels copy 16 bytes where the layout allows, and run 3 or 4 stages.)
__device__ __forceinline__ void cp_async4(unsigned smem_addr, const float* src, bool in_range) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr), "l"(src), "r"(in_range ? 4 : 0)
                 : "memory");
#endif
}
__device__ __forceinline__ void cp_async_commit(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>   // until at most N of this thread's committed groups are still in flight
__device__ __forceinline__ void cp_async_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }

__global__ void __launch_bounds__(64) matmul_kernel6(float* C, const float* A, const float* B, int M, int N, int K,
                                                    int sam, int sak, int sbk, int sbn) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    __shared__ __align__(16) float As[2][BK5][LD5];   // two stages of version 5's tiles
    __shared__ __align__(16) float Bs[2][BK5][LD5];
    const int tid = threadIdx.x, tx = tid % 8, ty = tid / 8;
    const int m0 = blockIdx.y * BM5, n0 = blockIdx.x * BN5;
    const int ntiles = CEIL_DIV(K, BK5);
    auto load_tile = [&](int stage, int k0) {   // the copies of one tile, as one commit group
        #pragma unroll
        for (int e = 0; e < BM5 * BK5 / 64; e++) {
            int d, k;
            tile_coords(tid + e * 64, BM5, BK5, sak == 1, d, k);
            bool ok = m0 + d < M && k0 + k < K;
            cp_async4(smem_u32(&As[stage][k][d]), ok ? A + (size_t)(m0 + d) * sam + (size_t)(k0 + k) * sak : A, ok);
            tile_coords(tid + e * 64, BN5, BK5, sbk == 1, d, k);
            ok = n0 + d < N && k0 + k < K;
            cp_async4(smem_u32(&Bs[stage][k][d]), ok ? B + (size_t)(k0 + k) * sbk + (size_t)(n0 + d) * sbn : B, ok);
        }
        cp_async_commit();
    };
    float acc[8][8] = {};
    if (ntiles > 0) load_tile(0, 0);
    for (int t = 0; t < ntiles; t++) {
        if (t + 1 < ntiles) {
            load_tile((t + 1) % 2, (t + 1) * BK5);   // in flight while tile t is multiplied
            cp_async_wait<1>();                      // this thread's copies of tile t have landed
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();   // ... and every thread's
        regblock_8x8(acc, As[t % 2], Bs[t % 2], tx, ty);
        __syncthreads();   // every thread is done with stage t % 2 before tile t + 2 is copied into it
    }
    store_8x8(C, acc, M, N, m0, n0, tx, ty);
#endif
}

// version 7: the tensor cores through mma.sync (TF32, sm_80+), on version 6's pipeline.
// mma.sync.m16n8k8 is one warp-wide instruction: a 16 x 8 tile of A times an 8 x 8 tile of B, added to
// a 16 x 8 tile of C in FP32: 1024 multiply-adds, where version 6 issues an FFMA for each. Its
// operands are TF32 (10 mantissa bits): each element is rounded to nearest (cvt.rna) as it goes from
// shared memory into a fragment register; left as it is, the tensor core would drop the low 13 bits
// (truncation, a bias that does not average out). Sums stay FP32.
// Tiles 64 x 64, BK 16, 128 threads: 4 warps of 32 x 32, each 2 x 4 mma tiles. The fragment layouts
// (PTX ISA, mma.m16n8k8 .tf32), g = lane / 4, q = lane % 4:
//   A (16 x 8, row, k): a0 (g, q)  a1 (g+8, q)  a2 (g, q+4)  a3 (g+8, q+4)
//   B (8 x 8, k, col):  b0 (q, g)  b1 (q+4, g)
//   C (16 x 8):         c0 (g, 2q)  c1 (g, 2q+1)  c2 (g+8, 2q)  c3 (g+8, 2q+1)
// Shared tiles S[k][d] with rows of 64 + 8 floats: lane (g, q) reads S[q][g + ...], bank 8q + g, all
// 32 lanes in different banks.
#define BM7 64
#define BN7 64
#define BK7 16
#define LD7 (64 + 8)
__device__ __forceinline__ uint32_t tf32_bits(float x) {   // x rounded to nearest TF32, as an mma operand
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
__global__ void __launch_bounds__(128) matmul_kernel7(float* C, const float* A, const float* B, int M, int N, int K,
                                                     int sam, int sak, int sbk, int sbn) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    __shared__ __align__(16) float As[2][BK7][LD7];   // As[stage][k][m]
    __shared__ __align__(16) float Bs[2][BK7][LD7];   // Bs[stage][k][n]
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, q = lane % 4;
    const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;   // the warp's 32 x 32 of the tile
    const int m0 = blockIdx.y * BM7, n0 = blockIdx.x * BN7;
    const int ntiles = CEIL_DIV(K, BK7);
    auto load_tile = [&](int stage, int k0) {   // as version 6
        #pragma unroll
        for (int e = 0; e < BM7 * BK7 / 128; e++) {
            int d, k;
            tile_coords(tid + e * 128, BM7, BK7, sak == 1, d, k);
            bool ok = m0 + d < M && k0 + k < K;
            cp_async4(smem_u32(&As[stage][k][d]), ok ? A + (size_t)(m0 + d) * sam + (size_t)(k0 + k) * sak : A, ok);
            tile_coords(tid + e * 128, BN7, BK7, sbk == 1, d, k);
            ok = n0 + d < N && k0 + k < K;
            cp_async4(smem_u32(&Bs[stage][k][d]), ok ? B + (size_t)(k0 + k) * sbk + (size_t)(n0 + d) * sbn : B, ok);
        }
        cp_async_commit();
    };
    float acc[2][4][4] = {};   // [m tile][n tile][c0..c3]
    if (ntiles > 0) load_tile(0, 0);
    for (int t = 0; t < ntiles; t++) {
        if (t + 1 < ntiles) {
            load_tile((t + 1) % 2, (t + 1) * BK7);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const float (*as)[LD7] = As[t % 2];
        const float (*bs)[LD7] = Bs[t % 2];
        #pragma unroll
        for (int kk = 0; kk < BK7; kk += 8) {
            uint32_t af[2][4], bf[4][2];
            #pragma unroll
            for (int i = 0; i < 2; i++) {
                const int r = wm + i * 16 + g;
                af[i][0] = tf32_bits(as[kk + q][r]);
                af[i][1] = tf32_bits(as[kk + q][r + 8]);
                af[i][2] = tf32_bits(as[kk + q + 4][r]);
                af[i][3] = tf32_bits(as[kk + q + 4][r + 8]);
            }
            #pragma unroll
            for (int j = 0; j < 4; j++) {
                const int c = wn + j * 8 + g;
                bf[j][0] = tf32_bits(bs[kk + q][c]);
                bf[j][1] = tf32_bits(bs[kk + q + 4][c]);
            }
            #pragma unroll
            for (int i = 0; i < 2; i++)
                #pragma unroll
                for (int j = 0; j < 4; j++)
                    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                                 : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                                 : "r"(af[i][0]), "r"(af[i][1]), "r"(af[i][2]), "r"(af[i][3]), "r"(bf[j][0]),
                                   "r"(bf[j][1]));
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < 2; i++)
        #pragma unroll
        for (int h = 0; h < 2; h++) {   // h = 0: row g (c0, c1); h = 1: row g + 8 (c2, c3)
            const int m = m0 + wm + i * 16 + g + h * 8;
            #pragma unroll
            for (int j = 0; j < 4; j++) {
                const int n = n0 + wn + j * 8 + 2 * q;
                if (m < M && n < N) C[(size_t)m * N + n] = acc[i][j][2 * h];
                if (m < M && n + 1 < N) C[(size_t)m * N + n + 1] = acc[i][j][2 * h + 1];
            }
        }
#endif
}

// version 8: the tensor cores through wgmma (TF32; Hopper, sm_90a only), on version 7's pipeline.
// mma.sync makes every warp load its fragments from shared memory into registers first: most of
// version 7's instructions do that. wgmma.mma_async is issued by a warpgroup (4 warps, 128 threads)
// together, and the tensor cores read both operand tiles from shared memory themselves, through a
// 64-bit "matrix descriptor" per tile; it runs asynchronously (commit, then wait for it).
// One wgmma.m64n64k8 is a 64 x 64 x 8 product; the block is one warpgroup and a 64 x 64 tile of C,
// BK 32. Each thread gets 32 of the 64 x 64 sums: thread (warp w, g, q) holds acc[c*4 + h*2 + e] =
// C(16w + g + 8h, 8c + 2q + e).
// Shared layout: wgmma takes TF32 operands only k-contiguous ("K-major"), here in its "128-byte swizzle"
// mode: a tile row is 32 floats = 128 bytes, 8 rows make a 1024-byte atom (1024-byte aligned), and the
// 16-byte chunk c of row r is stored at chunk c ^ (r % 8), so that the 8 rows' chunk c lie in 8
// different bank groups; the hardware undoes the XOR from the address bits. The descriptor of a tile:
// its address / 16, the byte distance between 8-row atoms (1024) / 16, and the swizzle mode (PTX ISA,
// "matrix descriptor"); the k-step of 8 within a row moves its address by 32 bytes.
// The copies are version 6's 4-byte cp.async, each element to its swizzled place (an operand that is
// not k-contiguous in global memory is transposed on the way). wgmma would truncate FP32 inputs, so
// when its copies have landed each thread rounds the elements it copied (cvt.rna) in place, and
// fence.proxy.async makes those stores visible to the tensor cores, which read through another path.
#define BK8 32
#define TILE8_BYTES (64 * 128)   // one 64 x 32 tile of floats
__device__ __forceinline__ unsigned swizzle128(int d, int k) {   // byte offset of element (d, k) in a tile
    return (unsigned)(d * 128 + (((k >> 2) ^ (d & 7)) << 4) + (k & 3) * 4);
}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ uint64_t wgmma_desc(unsigned smem_addr) {   // K-major, 128-byte swizzle
    return (uint64_t)((smem_addr & 0x3FFFF) >> 4)   // bits 0-13: start address / 16
           | ((uint64_t)1 << 16)                     // 16-29: leading byte offset / 16 (unused with this swizzle)
           | ((uint64_t)(1024 >> 4) << 32)           // 32-45: stride byte offset / 16: 8-row atom to atom
           | ((uint64_t)1 << 62);                    // 62-63: swizzle mode 1 = 128 bytes
}
__device__ __forceinline__ void wgmma_m64n64k8(float* d, uint64_t da, uint64_t db) {   // d += A . B^T
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                   "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
                   "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
                   "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db));
}
#endif
__global__ void __launch_bounds__(128) matmul_kernel8(float* C, const float* A, const float* B, int M, int N, int K,
                                                     int sam, int sak, int sbk, int sbn) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    // two stages of (A tile, B tile), from a 1024-byte aligned start (the swizzle atoms' alignment)
    __shared__ __align__(16) unsigned char smem_raw[2 * 2 * TILE8_BYTES + 1024];
    const unsigned raw = smem_u32(smem_raw), pad = (1024u - (raw & 1023u)) & 1023u;
    const unsigned sbase = raw + pad;   // stage s: A tile at s * 2 * TILE8_BYTES, B tile after it
    unsigned char* const base = smem_raw + pad;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
    const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
    const int ntiles = CEIL_DIV(K, BK8);
    auto load_tile = [&](int stage, int k0) {   // 16 elements of each tile per thread, as one commit group
        const unsigned sa = sbase + stage * 2 * TILE8_BYTES, sb = sa + TILE8_BYTES;
        #pragma unroll
        for (int e = 0; e < 64 * BK8 / 128; e++) {
            int d, k;
            tile_coords(tid + e * 128, 64, BK8, sak == 1, d, k);
            bool ok = m0 + d < M && k0 + k < K;
            cp_async4(sa + swizzle128(d, k), ok ? A + (size_t)(m0 + d) * sam + (size_t)(k0 + k) * sak : A, ok);
            tile_coords(tid + e * 128, 64, BK8, sbk == 1, d, k);
            ok = n0 + d < N && k0 + k < K;
            cp_async4(sb + swizzle128(d, k), ok ? B + (size_t)(k0 + k) * sbk + (size_t)(n0 + d) * sbn : B, ok);
        }
        cp_async_commit();
    };
    auto round_tile = [&](int stage) {   // the elements this thread copied, rounded to TF32 in place
        unsigned char* const ta = base + stage * 2 * TILE8_BYTES;
        unsigned char* const tb = ta + TILE8_BYTES;
        #pragma unroll
        for (int e = 0; e < 64 * BK8 / 128; e++) {
            int d, k;
            tile_coords(tid + e * 128, 64, BK8, sak == 1, d, k);
            float* pa = reinterpret_cast<float*>(ta + swizzle128(d, k));
            *pa = __uint_as_float(tf32_bits(*pa));
            tile_coords(tid + e * 128, 64, BK8, sbk == 1, d, k);
            float* pb = reinterpret_cast<float*>(tb + swizzle128(d, k));
            *pb = __uint_as_float(tf32_bits(*pb));
        }
    };
    float acc[32];
    #pragma unroll
    for (int i = 0; i < 32; i++) acc[i] = 0.0f;
    if (ntiles > 0) load_tile(0, 0);
    for (int t = 0; t < ntiles; t++) {
        cp_async_wait<0>();   // this thread's copies of tile t have landed ...
        round_tile(t % 2);    // ... rounded ...
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");   // ... visible to the tensor cores ...
        __syncthreads();      // ... every thread's; and every thread has waited for tile t - 1's products
        if (t + 1 < ntiles) load_tile((t + 1) % 2, (t + 1) * BK8);   // into tile t - 1's stage, now free
        const unsigned sa = sbase + (t % 2) * 2 * TILE8_BYTES, sb = sa + TILE8_BYTES;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        #pragma unroll
        for (int ks = 0; ks < BK8 / 8; ks++) wgmma_m64n64k8(acc, wgmma_desc(sa + ks * 32), wgmma_desc(sb + ks * 32));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");   // tile t's products are done
    }
    #pragma unroll
    for (int i = 0; i < 32; i++) asm volatile("" : "+f"(acc[i])::"memory");   // no read of acc before the wait
    #pragma unroll
    for (int h = 0; h < 2; h++) {
        const int m = m0 + warp * 16 + g + 8 * h;
        #pragma unroll
        for (int c = 0; c < 8; c++) {
            const int n = n0 + 8 * c + 2 * q;
            if (m < M && n < N) C[(size_t)m * N + n] = acc[c * 4 + h * 2];
            if (m < M && n + 1 < N) C[(size_t)m * N + n + 1] = acc[c * 4 + h * 2 + 1];
        }
    }
#endif
}

// ----------------------------------------------------------------------------
// launchers. Operands: A, B as the problem's layout defines them; scratch for the fast versions' split-K.

// the shipped kernels (kernels/fast/), and the cuBLAS yardsticks (not versions, but timed and validated alike)
#define V_FAST_FP32 9
#define V_FAST_TF32 10
#define V_FAST_VALUES 11
#define V_LAST 11           // the last version number
#define V_CUBLAS 12
#define V_CUBLAS_TF32 13
#define V_CUBLAS_TF32V 14   // cuBLAS TF32 on the TF32-valued inputs (version 11's yardstick)
// BF16 (the launchers' MF_BF16, the trainer's -x 2): only the sweep and `one` run it, so it is numbered
// after the yardsticks and the progression's tables and CSV keep their columns
#define V_FAST_BF16 15
#define V_CUBLAS_BF16 16    // cuBLAS on FP32 inputs with CUBLAS_COMPUTE_32F_FAST_16BF (BF16 tensor cores)
#define NVERSIONS 17
static const char* version_name(int v) {
    static const char* names[] = {"", "v1 naive", "v2 coalesced", "v3 smem tiled", "v4 reg-block 4x4",
                                  "v5 reg-block 8x8", "v6 cp.async", "v7 mma.sync TF32", "v8 wgmma TF32",
                                  "v9 fast FP32", "v10 fast TF32", "v11 TF32 values", "cuBLAS SGEMM", "cuBLAS TF32",
                                  "cuBLAS TF32 values", "v15 fast BF16", "cuBLAS BF16"};
    return names[v];
}
static int version_is_tf32(int v) {
    return (v >= 7 && v <= 8) || (v >= 10 && v <= 11) || v == V_CUBLAS_TF32 || v == V_CUBLAS_TF32V;
}
static int version_is_bf16(int v) { return v == V_FAST_BF16 || v == V_CUBLAS_BF16; }
static int version_on_values(int v) { return v == V_FAST_VALUES || v == V_CUBLAS_TF32V; }   // reads the TF32-valued inputs
// ours: every kernel sums in a fixed order; fast: the shipped launchers
static int version_is_ours(int v) { return (v >= 1 && v <= V_LAST) || v == V_FAST_BF16; }
static int version_is_fast(int v) { return (v >= V_FAST_FP32 && v <= V_FAST_VALUES) || v == V_FAST_BF16; }
static int version_of_tf32(int tf32) {   // the fast version of the launchers' tf32 argument
    return tf32 == 0               ? V_FAST_FP32
         : tf32 == MF_TF32_ROUND   ? V_FAST_TF32
         : tf32 == MF_BF16         ? V_FAST_BF16
                                   : V_FAST_VALUES;
}
static int yardstick_of(int v) {
    return version_on_values(v) ? V_CUBLAS_TF32V
         : version_is_bf16(v)    ? V_CUBLAS_BF16
         : version_is_tf32(v)    ? V_CUBLAS_TF32
                                 : V_CUBLAS;
}
// Versions 7 and 8 round their inputs to nearest TF32 themselves (cvt.rna), as round_tf32 does on the
// host: their output must be the product of the rounded inputs, up to the FP32 sums (see the top).
// Version 15 (BF16) rounds its inputs to BF16 (round_bf16's rounding): against the product of the
// inputs so rounded.
static int version_vs_rounded(int v) { return v == 7 || v == 8 || version_on_values(v) || v == V_FAST_BF16; }
static int in_steps_table(int v) { return v <= 8 || v == V_CUBLAS || v == V_CUBLAS_TF32; }
static cublasHandle_t cublas_handle;

// Whether version v can run here, else why not (the summary counts it as skipped): v6 and v7 need
// cp.async and TF32 mma.sync (sm_80+); v8 needs wgmma, in code built for sm_90a (make GPU_ARCH=90,
// which defines MF_WGMMA) and a GPU of compute capability 9.0.
static const char* version_unavailable(int v) {
    static int major = -1, minor = -1;
    if (major < 0) {
        int dev = 0;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        cudaCheck(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    }
    if ((v == 6 || v == 7) && major < 8) return "needs sm_80 or newer";
#if defined(MF_WGMMA)
    if (v == 8 && !(major == 9 && minor == 0)) return "needs a compute capability 9.0 GPU (wgmma, sm_90a)";
#else
    if (v == 8) return "not built: wgmma needs sm_90a (make GPU_ARCH=90)";
#endif
    return NULL;
}

// Versions 9-11: as the trainer's launchers (matmul_fast.h) plan and launch a product with no bias
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
        case 5: { dim3 grid(CEIL_DIV(N, BN5), CEIL_DIV(M, BM5));
                  matmul_kernel5<<<grid, 64, 0, s>>>(C, A, B, M, N, K, sam, sak, sbk, sbn); break; }
        case 6: { dim3 grid(CEIL_DIV(N, BN5), CEIL_DIV(M, BM5));
                  matmul_kernel6<<<grid, 64, 0, s>>>(C, A, B, M, N, K, sam, sak, sbk, sbn); break; }
        case 7: { dim3 grid(CEIL_DIV(N, BN7), CEIL_DIV(M, BM7));
                  matmul_kernel7<<<grid, 128, 0, s>>>(C, A, B, M, N, K, sam, sak, sbk, sbn); break; }
        case 8: { dim3 grid(CEIL_DIV(N, 64), CEIL_DIV(M, 64));
                  matmul_kernel8<<<grid, 128, 0, s>>>(C, A, B, M, N, K, sam, sak, sbk, sbn); break; }
        case V_FAST_FP32: case V_FAST_TF32: case V_FAST_VALUES: case V_FAST_BF16: {
            const int tf32 = v == V_FAST_FP32 ? 0 : v == V_FAST_TF32 ? MF_TF32_ROUND : v == V_FAST_BF16 ? MF_BF16
                                                                                                 : MF_TF32_EXACT;
            run_fast(tf32, C, A, B, p, scratch, s);
            return;   // matmul_fast_run checks its own launches
        }
        case V_CUBLAS: case V_CUBLAS_TF32: case V_CUBLAS_TF32V: case V_CUBLAS_BF16: {
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
                                         &zero, C, CUDA_R_32F, N,
                                         v == V_CUBLAS_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                            : CUBLAS_COMPUTE_32F_FAST_TF32,
                                         CUBLAS_GEMM_DEFAULT));
            }
            return;
        }
        default: fprintf(stderr, "matmul_forward: no version %d (1..%d)\n", v, V_LAST); exit(EXIT_FAILURE);
    }
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
// device buffers for one problem, with its CPU reference

// Two sets of inputs: A, B random FP32 (versions 1-10, cuBLAS), and At, Bt the same rounded to TF32
// (version 11, cuBLAS TF32 values; the references of versions 7 and 8 too), each with its reference;
// and ref_b, the product of A and B rounded to BF16 (version 15's reference).
typedef struct {
    Problem p;
    float *A, *B, *At, *Bt, *C, *C2, *scratch;   // device
    float *hA, *hB, *hAt, *hBt, *hC;             // host
    double *ref, *ref_t, *ref_b;                 // A . B, At . Bt, bf16(A) . bf16(B), exact (double)
    size_t scratch_floats;
} Bufs;

static float* round_tf32_array(const float* x, size_t n) {
    float* r = (float*)mallocCheck(n * 4);
    for (size_t i = 0; i < n; i++) r[i] = round_tf32(x[i]);   // kernels/fast/ops/round.cuh, the host twin of cvt.rna
    return r;
}

// whether bufs_init computes ref_b too (only where version 15 runs: the big shapes' references cost seconds each)
static int bufs_bf16_ref = 0;

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
    // scratch (only the weight gradient splits K through it): enough for any forced split count the sweep tries
    b->scratch_floats = p.prod == PROD_DWEIGHT ? 16 * nc : 1;
    cudaCheck(cudaMalloc(&b->scratch, b->scratch_floats * 4));
    b->ref = b->ref_t = b->ref_b = NULL;
    if (with_ref) {
        b->ref = (double*)mallocCheck(nc * sizeof(double));
        b->ref_t = (double*)mallocCheck(nc * sizeof(double));
        matmul_cpu(b->ref, b->hA, b->hB, &p);
        matmul_cpu(b->ref_t, b->hAt, b->hBt, &p);
    }
    if (with_ref && bufs_bf16_ref) {
        b->ref_b = (double*)mallocCheck(nc * sizeof(double));
        float* ab = (float*)mallocCheck(na * 4); float* bb = (float*)mallocCheck(nb * 4);
        for (size_t i = 0; i < na; i++) ab[i] = round_bf16(b->hA[i]);   // kernels/fast/ops/round.cuh
        for (size_t i = 0; i < nb; i++) bb[i] = round_bf16(b->hB[i]);
        matmul_cpu(b->ref_b, ab, bb, &p);
        free(ab); free(bb);
    }
}

static void bufs_free(Bufs* b) {
    cudaCheck(cudaFree(b->A)); cudaCheck(cudaFree(b->B)); cudaCheck(cudaFree(b->C)); cudaCheck(cudaFree(b->C2));
    cudaCheck(cudaFree(b->At)); cudaCheck(cudaFree(b->Bt)); cudaCheck(cudaFree(b->scratch));
    free(b->hA); free(b->hB); free(b->hAt); free(b->hBt); free(b->hC); free(b->ref); free(b->ref_t); free(b->ref_b);
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

// against the product of the rounded inputs (versions 7, 8, 11, 15, cuBLAS TF32 values) 1e-4, else BF16
// 1e-2 (8 significant bits: 2e-3 per input), TF32 2e-3, FP32 1e-5
static double tol_of(int v) {
    return version_vs_rounded(v) ? 1e-4 : version_is_bf16(v) ? 1e-2 : version_is_tf32(v) ? 2e-3 : 1e-5;
}

// the inputs version v reads
static void run_on_bufs(int v, Bufs* b, float* C) {
    const int t = version_on_values(v);
    run_version(v, C, t ? b->At : b->A, t ? b->Bt : b->B, &b->p, b->scratch, 0);
}

// poison, run, compare; for our versions (1-11) also run twice and demand bitwise-equal results
static int validate_one(int v, Bufs* b, const char* when, int verbose) {
    const Problem* p = &b->p;
    size_t nc = (size_t)p->M * p->N;
    cudaCheck(cudaMemset(b->C, 0xFF, nc * 4));
    cudaCheck(cudaMemset(b->scratch, 0xFF, b->scratch_floats * 4));
    run_on_bufs(v, b, b->C);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(b->hC, b->C, nc * 4, cudaMemcpyDeviceToHost));
    double err = rel_err(b->hC, v == V_FAST_BF16 ? b->ref_b : version_vs_rounded(v) ? b->ref_t : b->ref, nc);
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
// tf32 is the launchers' argument (MF_TF32_EXACT: on the TF32-valued inputs, version 11)
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
// timing: bench_ms (common.h): after 20 ms of launches, the median over 50 timings of 10 back-to-back
// calls (slow versions: of one call, at least 5 times, within a quarter of a second)

typedef struct { int v; Bufs* b; } TimedCall;
static void timed_call(void* ctx) {
    const TimedCall* c = (const TimedCall*)ctx;
    run_on_bufs(c->v, c->b, c->b->C);
}
static float time_version(int v, Bufs* b) {
    TimedCall c = {v, b};
    return bench_ms(timed_call, &c);
}

// ----------------------------------------------------------------------------

// The benchmark's shapes: the three products of the trainers' layers (784->128, 784->1024, 1024->1024,
// 1024->10) at batch 64 and 256 (the first 24, which the sweeps run too), then those of a big model's
// two layers (784->4096, 4096->4096) at batch 1024, where a GPU is full and the kernels run at their rate.
static const int bench_layers[4][2] = {{784, 128}, {784, 1024}, {1024, 1024}, {1024, 10}};
static const int bench_batches[2] = {64, 256};
static const int big_layers[2][2] = {{784, 4096}, {4096, 4096}};
#define BIG_BATCH 1024
#define NPROB_TRAINER 24
#define NPROB 30
#define PAIRED_ROUNDS 5

static Problem bench_problem(int i) {   // i in [0, 24): batch, layer, product; [24, 30): big layer, product
    if (i >= NPROB_TRAINER) {
        const int li = (i - NPROB_TRAINER) / 3;
        return make_problem(BIG_BATCH, big_layers[li][0], big_layers[li][1], i % 3);
    }
    int bi = i / 12, li = (i / 3) % 4, prod = i % 3;
    return make_problem(bench_batches[bi], bench_layers[li][0], bench_layers[li][1], prod);
}

// the batch-256 wide shapes (784->1024, 1024->1024): the issue's targets, and most of the wide step
static int is_wide_problem(int i) { return i < NPROB_TRAINER && i / 12 == 1 && (i / 3) % 4 >= 1 && (i / 3) % 4 <= 2; }

// The trainers' 24 shapes (or the 6 wide ones), every configuration and K split of the fast versions.
// precs: the launcher tf32 arguments swept, nprec of them ({0}: version 9 only; {0, 1, 2}: 9, 10, 11;
// {MF_BF16}: version 15 only)
// which shapes a sweep times: 0 the trainers' 24, SWEEP_WIDE the batch-256 wide ones, SWEEP_BIG the big
// model's 6 (batch 1024, 784 -> 4096 -> 4096); the last two with cuBLAS timed beside each shape
enum { SWEEP_ALL = 0, SWEEP_WIDE = 1, SWEEP_BIG = 2 };
static int sweep_selects(int i, int which) {
    return which == SWEEP_WIDE ? is_wide_problem(i) : which == SWEEP_BIG ? i >= NPROB_TRAINER : i < NPROB_TRAINER;
}

static int sweep(const char* csv_file, int which, const int* precs, int nprec) {
    const int wide_only = which != SWEEP_ALL;   // (a chosen set: cuBLAS beside it, and the fastest plan of each shape)
    printf("\nsweep: every tile configuration (c) and K split (s) of version%s (ms per call, median; pick = the"
           " heuristic's, %% of the best)\n",
           nprec == 3 ? "s 9, 10 and 11" : nprec == 2 ? "s 10 and 11" : precs[0] == MF_BF16 ? " 15" : " 9");
    // every configuration and split must be right on odd shapes too, not only the heuristic's picks
    int failed = 0, passed = 0, skipped = 0;
    const int odd[][3] = {{33, 100, 37}, {1, 784, 128}, {7, 13, 5}, {1, 1, 1}, {65, 130, 129}, {256, 1024, 10}};
    for (int si = 0; si < 6; si++)
        for (int prod = 0; prod < 3; prod++) {
            Problem p = make_problem(odd[si][0], odd[si][1], odd[si][2], prod);
            Bufs b; bufs_init(&b, p, 1);
            for (int pi = 0; pi < nprec; pi++) {
                const int tf32 = precs[pi];
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
    int tuned[NPROB][4][2];   // fastest (cfg, splits) per shape and launcher tf32 argument, listed at the end
    memset(tuned, 0, sizeof(tuned));
    for (int i = 0; i < NPROB; i++) {
        if (!sweep_selects(i, which)) continue;
        Problem p = bench_problem(i);
        Bufs b; bufs_init(&b, p, 1);
        float cms[4] = {0.0f, 0.0f, 0.0f, 0.0f};   // the cuBLAS yardstick of each tf32 argument, wide only
        printf("%-7s B=%-3d %4d->%-4d M %4d N %4d K %4d |", prod_names[p.prod], p.Bsz, p.IN, p.OUT, p.M, p.N, p.K);
        if (wide_only) {   // the yardsticks in the same run, so the percentages compare like with like
            const float c32 = time_version(V_CUBLAS, &b), ct = time_version(V_CUBLAS_TF32, &b),
                        cv = time_version(V_CUBLAS_TF32V, &b), cb = time_version(V_CUBLAS_BF16, &b);
            printf(" cuBLAS FP32 %.4f TF32 %.4f on TF32 values %.4f BF16 %.4f |", c32, ct, cv, cb);
            cms[0] = c32; cms[1] = ct; cms[2] = cv; cms[3] = cb;
            for (int t = 0; t < 4; t++)   // cfg -1: cuBLAS
                fprintf(csv, "%s,%d,%d,%d,%d,%d,%d,%d,-1,1,%.6f,0\n", prod_names[p.prod], p.Bsz, p.IN, p.OUT, p.M, p.N,
                        p.K, t, cms[t]);
        }
        for (int pi = 0; pi < nprec; pi++) {
            const int tf32 = precs[pi];
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
            printf(" %s best c%d/s%d %.4f",
                   tf32 == 0 ? "FP32" : tf32 == 1 ? "TF32" : tf32 == MF_BF16 ? "BF16" : "TF32 values", bc, bs, best);
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
    printf("\nthe fastest plan of each shape in this sweep (what the trainer's -A 1 would cache: product, M, N, K, tf32, cfg, splits):\n");
    for (int pi = nprec - 1; pi >= 0; pi--)
        for (int i = 0; i < NPROB; i++) {
            const int tf32 = precs[pi];
            if (!sweep_selects(i, which == SWEEP_ALL ? SWEEP_WIDE : which) || !tuned[i][tf32][1]) continue;
            Problem p = bench_problem(i);
            static const char* const prods[3] = {"MF_FWD", "MF_DINP", "MF_DWEIGHT"};
            static const char* const precn[4] = {"0", "MF_TF32_ROUND", "MF_TF32_EXACT", "MF_BF16"};
            printf("    {%s, %d, %d, %d, %s, %d, %d},\n", prods[p.prod], p.M, p.N, p.K, precn[tf32], tuned[i][tf32][0],
                   tuned[i][tf32][1]);
        }
    printf("\nwrote %s\nsweep: %d passed, %d failed\n", csv_file, passed, failed);
    return failed;
}

// ----------------------------------------------------------------------------
// sweep ... pixels: FP32 on a batch of pixels (the launchers' MF_FP32_PIXELS), the fast trainer's
// first-layer products in FP32: the forward product's A and the weight gradient's B are the batch,
// held as its bytes 0..255, and the kernel divides the other operand by 255 (two TF32 products where
// 3xTF32 takes three, so the FP32 tuned picks need not be the fastest here). Every 3xTF32
// configuration and K split on the three trainers' first layers, each checked against the CPU's
// product of the bytes over 255 (FP32's 1e-5) and for repeatable bits, and timed.

static void pixel_call(void* ctx) {
    Bufs* b = (Bufs*)ctx;
    run_fast(MF_FP32_PIXELS, b->C, b->A, b->B, &b->p, b->scratch, 0);
}

static int validate_pixels(Bufs* b, const char* what) {
    const size_t nc = (size_t)b->p.M * b->p.N;
    float* h2 = (float*)mallocCheck(nc * 4);
    cudaCheck(cudaMemset(b->C, 0xFF, nc * 4));
    pixel_call(b);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(b->hC, b->C, nc * 4, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemset(b->C, 0xFF, nc * 4));
    pixel_call(b);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(h2, b->C, nc * 4, cudaMemcpyDeviceToHost));
    const double err = rel_err(b->hC, b->ref, nc);
    const int det = memcmp(h2, b->hC, nc * 4) == 0, ok = err < 1e-5 && det;
    if (!ok)
        printf("  pixels %s B=%d %d->%d %s: rel err %.2e (tol 1e-05)%s FAIL\n", prod_names[b->p.prod], b->p.Bsz,
               b->p.IN, b->p.OUT, what, err, det ? "" : " NOT REPEATABLE");
    free(h2);
    return ok;
}

static int sweep_pixels(const char* csv_file) {
    static const int shapes[3][3] = {{64, 784, 128}, {256, 784, 1024}, {BIG_BATCH, 784, 4096}};   // B, IN, OUT
    printf("\nsweep pixels: every 3xTF32 configuration (c) and K split (s) on a batch of pixels (ms per call, "
           "median; pick = the planner's, %% of the best)\n");
    FILE* csv = fopenCheck(csv_file, "w");
    fprintf(csv, "prod,B,IN,OUT,M,N,K,cfg,splits,ms,pick\n");
    int passed = 0, failed = 0, ncfg;
    const MatmulFastCfg* cfgs = matmul_fast_configs(MF_FP32_PIXELS, &ncfg);
    for (int si = 0; si < 3; si++)
        for (int prod = PROD_FWD; prod <= PROD_DWEIGHT; prod += PROD_DWEIGHT - PROD_FWD) {
            Problem p = make_problem(shapes[si][0], shapes[si][1], shapes[si][2], prod);
            Bufs b; bufs_init(&b, p, 0);
            float* px = prod == PROD_FWD ? b.hA : b.hB;   // the batch, B x IN either way
            float* dpx = prod == PROD_FWD ? b.A : b.B;
            const size_t npx = (size_t)p.Bsz * p.IN, nc = (size_t)p.M * p.N;
            for (size_t i = 0; i < npx; i++) px[i] = (float)(int)(128.0f * (rand_uniform() + 1.0f));   // 0..255
            cudaCheck(cudaMemcpy(dpx, px, npx * 4, cudaMemcpyHostToDevice));
            b.ref = (double*)mallocCheck(nc * sizeof(double));
            matmul_cpu(b.ref, b.hA, b.hB, &p);
            for (size_t i = 0; i < nc; i++) b.ref[i] /= 255.0;
            const int scratch = prod == PROD_DWEIGHT;
            const MatmulFastPlan pick = matmul_fast_plan((MfProduct)prod, p.M, p.N, p.K, MF_FP32_PIXELS, scratch);
            const int pick_fits = matmul_fast_pixels_fit((MfProduct)prod, p.M, p.N, p.K, scratch);
            printf("%-7s B=%-4d %4d->%-4d M %4d N %4d K %4d |", prod_names[prod], p.Bsz, p.IN, p.OUT, p.M, p.N, p.K);
            float best = 1e30f; int bc = -1, bs = 0;
            for (int ci = 0; ci < ncfg; ci++) {
                if (cfgs[ci].kind != MF_KIND_3XTF32) continue;   // only these take pixels
                for (int sp = 1; sp <= 8; sp *= 2) {
                    MatmulFastPlan plan;
                    if (!fixed_plan(&plan, &p, MF_FP32_PIXELS, cfgs[ci].id, sp)) continue;   // not possible here
                    forced_plan = &plan;
                    int ok = validate_pixels(&b, "before");
                    const float ms = bench_ms(pixel_call, &b);
                    ok = validate_pixels(&b, "after") && ok;
                    if (!ok) printf("    ^ forced c%d/s%d\n", cfgs[ci].id, sp);
                    passed += ok; failed += !ok;
                    const int is_pick = pick_fits && cfgs[ci].id == pick.cfg && pick.splits == sp;
                    fprintf(csv, "%s,%d,%d,%d,%d,%d,%d,%d,%d,%.6f,%d\n", prod_names[prod], p.Bsz, p.IN, p.OUT, p.M,
                            p.N, p.K, cfgs[ci].id, sp, ms, is_pick);
                    if (ms < best) { best = ms; bc = cfgs[ci].id; bs = sp; }
                }
            }
            forced_plan = NULL;
            printf(" best c%d/s%d %.4f", bc, bs, best);
            if (pick_fits) {
                forced_plan = &pick;
                const float pms = bench_ms(pixel_call, &b);
                forced_plan = NULL;
                printf(" pick c%d/s%d %.4f (%.0f%%)\n", pick.cfg, pick.splits, pms, 100.0 * best / pms);
            } else {
                printf(" pick c%d/s%d: not a 3xTF32 configuration, the trainer gathers values here\n", pick.cfg,
                       pick.splits);
            }
            fflush(stdout);
            bufs_free(&b);
        }
    fclose(csv);
    printf("\nwrote %s\nsweep pixels: %d passed, %d failed\n", csv_file, passed, failed);
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
            const int vs[2] = {V_FAST_TF32, V_CUBLAS_TF32};
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
        const int which = argc > 3 && strcmp(argv[3], "wide") == 0 ? SWEEP_WIDE
                        : argc > 3 && strcmp(argv[3], "big") == 0  ? SWEEP_BIG : SWEEP_ALL;
        const int named_all = argc > 3 && strcmp(argv[3], "all") == 0;   // the trainers' 24, to add a precision
        if (argc == 4 && strcmp(argv[3], "pixels") == 0)   // FP32 on pixels, the first layers' two products
            return sweep_pixels(csv_path(argv[2], "matmul_sweep_pixels", sbuf, sizeof(sbuf))) ? EXIT_FAILURE
                                                                                              : EXIT_SUCCESS;
        const int fp32_only = argc > 4 && strcmp(argv[4], "fp32") == 0;   // version 9 only (an FP32 A/B in less time)
        const int bf16_only = argc > 4 && strcmp(argv[4], "bf16") == 0;   // version 15 only
        const int tf32_only = argc > 4 && strcmp(argv[4], "tf32") == 0;   // versions 10 and 11 only
        if (argc > 5 || (argc > 3 && which == SWEEP_ALL && !named_all) ||
            (argc > 4 && !fp32_only && !bf16_only && !tf32_only)) {
            fprintf(stderr, "usage: %s sweep [CSV] [all|wide|big [fp32|tf32|bf16] | pixels]\n", argv[0]);
            return EXIT_FAILURE;
        }
        static const int all[3] = {0, MF_TF32_ROUND, MF_TF32_EXACT}, fp32[1] = {0}, bf16[1] = {MF_BF16};
        bufs_bf16_ref = bf16_only;
        int failed = sweep(csv_path(argc > 2 ? argv[2] : NULL, "matmul_sweep", sbuf, sizeof(sbuf)), which,
                           fp32_only ? fp32 : bf16_only ? bf16 : tf32_only ? all + 1 : all,
                           fp32_only || bf16_only ? 1 : tf32_only ? 2 : 3);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
    }
    if (argc > 1 && strcmp(argv[1], "one") == 0) {   // for a profiler: one validated call of one choice
        // one PROD B IN OUT tf32 cfg|cublas splits: a fast version's configuration; one PROD B IN OUT vN: version N
        const int by_version = argc == 7 && argv[6][0] == 'v';
        if (argc != 9 && !by_version) {
            fprintf(stderr, "usage: %s one fwd|dinp|dweight B IN OUT tf32(0|1|2|3 = BF16) cfg|cublas splits\n"
                            "       %s one fwd|dinp|dweight B IN OUT vN   (N = 1..8)\n", argv[0], argv[0]);
            return EXIT_FAILURE;
        }
        int prod = -1;
        for (int j = 0; j < 3; j++) if (strcmp(argv[2], prod_names[j]) == 0) prod = j;
        const int tf32 = by_version ? 0 : atoi(argv[6]);
        const int cublas = !by_version && strcmp(argv[7], "cublas") == 0;   // the yardstick of that precision instead
        const int step = by_version ? atoi(argv[6] + 1) : 0;
        if (prod < 0 || tf32 < 0 || tf32 > MF_BF16 || (by_version && (step < 1 || step > 8))) {
            fprintf(stderr, "one: bad product, tf32 flag or version (v1..v8; the fast ones by tf32 flag and cfg)\n");
            return EXIT_FAILURE;
        }
        if (by_version && version_unavailable(step)) {
            fprintf(stderr, "one: version %d %s\n", step, version_unavailable(step));
            return EXIT_FAILURE;
        }
        const int v = by_version ? step : cublas ? yardstick_of(version_of_tf32(tf32)) : version_of_tf32(tf32);
        Problem p = make_problem(atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), prod);
        MatmulFastPlan plan;
        if (!cublas && !by_version) {
            if (!fixed_plan(&plan, &p, tf32, atoi(argv[7]), atoi(argv[8]))) {
                fprintf(stderr, "one: configuration %s with %s K splits is not possible here (not built for this product"
                                " and precision, too much shared memory, or the split)\n", argv[7], argv[8]);
                return EXIT_FAILURE;
            }
            forced_plan = &plan;
        }
        bufs_bf16_ref = tf32 == MF_BF16;
        Bufs b; bufs_init(&b, p, 1);
        int ok = validate_one(v, &b, " (one)", 1);
        for (int r = 0; r < 3; r++) run_on_bufs(v, &b, b.C);
        cudaCheck(cudaDeviceSynchronize());
        bufs_free(&b);
        printf("%d passed, %d failed\n", ok, !ok);
        return ok ? EXIT_SUCCESS : EXIT_FAILURE;
    }
    const int fast_only = argc > 1 && strcmp(argv[1], "fast") == 0;   // versions 9, 10 and 11 (and cuBLAS)
    int only = argc > 1 && !fast_only ? atoi(argv[1]) : 0;
    if (argc > 1 && !fast_only && (only < 0 || only > V_LAST || (only == 0 && strcmp(argv[1], "0") != 0))) {
        fprintf(stderr, "usage: %s [version 1..%d, 0 = all | fast | sweep | one ...] [csv path]\n", argv[0], V_LAST);
        return EXIT_FAILURE;
    }
    char buf[256];
    const char* path = csv_path(argc > 2 ? argv[2] : NULL, "matmul_forward", buf, sizeof(buf));
    int versions[NVERSIONS], nv = 0, skipped = 0;
    for (int v = fast_only ? V_FAST_FP32 : 1; v <= V_LAST; v++) {
        if (only && only != v) continue;
        const char* why = version_unavailable(v);
        if (why) { printf("%s: skipped, %s\n", version_name(v), why); skipped++; continue; }
        versions[nv++] = v;
    }
    versions[nv++] = V_CUBLAS; versions[nv++] = V_CUBLAS_TF32; versions[nv++] = V_CUBLAS_TF32V;
    const int with_fast = !only || version_is_fast(only);   // the fast versions' own checks and tables

    int passed = 0, failed = 0;
    // 1. validate on odd shapes and the benchmark shapes
    printf("\nvalidation before the benchmark (relative-norm error vs a double CPU reference, outputs NaN-poisoned):\n");
    const int odd[][3] = {{33, 100, 37}, {1, 784, 128}, {7, 13, 5}, {1, 1, 1}, {256, 20, 3}, {65, 130, 129},
                          {130, 333, 257}};
    for (int si = 0; si < 7; si++)
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
    if (!only || only == V_FAST_TF32) tf32_inputs_report();

    // 2. benchmark shapes: validate, time, validate again
    FILE* csv = fopenCheck(path, "w");
    fprintf(csv, "version,name,prod,B,IN,OUT,M,N,K,ms,tflops,pct_of_cublas\n");
    float ms_all[NPROB][NVERSIONS];
    memset(ms_all, 0, sizeof(ms_all));
    printf("\nbenchmark (ms per call: median of %d x %d back-to-back launches, or of single ones for slow calls;"
           " TFLOP/s = 2MNK / time)\n", BENCH_REPS, BENCH_INNER);
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
        printf("  %-7s B=%-4d %4d->%-4d timed\n", prod_names[p.prod], p.Bsz, p.IN, p.OUT);
        fflush(stdout);
        bufs_free(&b);
    }
    fclose(csv);

    // 3. tables. The progression: every version's time and TFLOP/s, and its % of the cuBLAS of its
    // precision (SGEMM for FP32 versions, TF32 for TF32 ones, TF32 on the TF32-valued inputs for v11)
    printf("\nthe progression (ms per call, TFLOP/s, %% = the cuBLAS of the same precision's time / ours)\n");
    printf("| product | B | IN->OUT | M x N x K |");
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
    if (!fast_only && (!only || !version_is_fast(only))) {
        // the steps alone, in the README's layout: the versions this file builds up, cuBLAS beside them
        printf("\nthe steps: ms per call (TFLOP/s), the forward product of the trainers' wide layers and of the big "
               "model (every shape: the table above)\n| product | B | IN->OUT |");
        for (int vi = 0; vi < nv; vi++)
            if (in_steps_table(versions[vi])) printf(" %s |", version_name(versions[vi]));
        printf("\n|---|---|---|");
        for (int vi = 0; vi < nv; vi++)
            if (in_steps_table(versions[vi])) printf("---:|");
        printf("\n");
        for (int i = 0; i < NPROB; i++) {
            Problem p = bench_problem(i);
            const int shown = p.prod == PROD_FWD && (is_wide_problem(i) || i >= NPROB_TRAINER);
            if (!shown) continue;
            const double flop = 2.0 * p.M * p.N * p.K;
            printf("| %s | %d | %d->%d |", prod_names[p.prod], p.Bsz, p.IN, p.OUT);
            for (int vi = 0; vi < nv; vi++)
                if (in_steps_table(versions[vi]))
                    printf(" %.4f (%.1f) |", ms_all[i][versions[vi]], flop / ms_all[i][versions[vi]] * 1e-9);
            printf("\n");
        }
    }
    if (with_fast) {
        printf("\nsummary: the shipped kernels vs cuBLAS (%% = cuBLAS time / ours; v10 vs cuBLAS TF32, v11 vs cuBLAS"
               " TF32 on the same TF32-valued inputs)\n");
        printf("| product | B | IN->OUT | cuBLAS FP32 ms | v9 FP32 ms | v9 %% | cuBLAS TF32 ms | v10 TF32 ms | v10 %% |"
               " cuBLAS TF32 values ms | v11 TF32 values ms | v11 %% |\n");
        printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (int i = 0; i < NPROB; i++) {
            Problem p = bench_problem(i);
            float c32 = ms_all[i][V_CUBLAS], ct = ms_all[i][V_CUBLAS_TF32], cv = ms_all[i][V_CUBLAS_TF32V];
            float f32 = ms_all[i][V_FAST_FP32], ft = ms_all[i][V_FAST_TF32], fv = ms_all[i][V_FAST_VALUES];
            printf("| %s | %d | %d->%d | %.4f | %.4f | %.0f%% | %.4f | %.4f | %.0f%% | %.4f | %.4f | %.0f%% |\n",
                   prod_names[p.prod], p.Bsz, p.IN, p.OUT, c32, f32, f32 > 0 ? 100.0 * c32 / f32 : 0.0, ct, ft,
                   ft > 0 ? 100.0 * ct / ft : 0.0, cv, fv, fv > 0 ? 100.0 * cv / fv : 0.0);
        }
        // cuBLAS's time on these 10-25 us calls moves by up to 40% between runs (clocks, and which
        // kernel it picks), so the percentages above are one sample each. Here cuBLAS and ours are
        // timed alternately, 5 rounds, and the median of the 5 ratios is the figure.
        printf("\npaired timing, batch-256 wide shapes: cuBLAS and v9 / v10 / v11 alternately, %d rounds, median of the "
               "ratios (cuBLAS time / ours)\n", PAIRED_ROUNDS);
        printf("| product | B | IN->OUT | v9 FP32 %% of cuBLAS (min..max) | v10 TF32 %% of cuBLAS (min..max) |"
               " v11 TF32 values %% of cuBLAS (min..max) |\n|---|---|---|---|---|---|\n");
        for (int i = 0; i < NPROB; i++) {
            if (!is_wide_problem(i)) continue;
            Problem p = bench_problem(i);
            Bufs b; bufs_init(&b, p, 1);
            printf("| %s | %d | %d->%d |", prod_names[p.prod], p.Bsz, p.IN, p.OUT);
            for (int v = V_FAST_FP32; v <= V_FAST_VALUES; v++) {
                if (only && only != v) { printf(" - |"); continue; }
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
    if (skipped) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else printf("%d passed, %d failed\n", passed, failed);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
