/*
kernels/fast/matmul/wgmma_tma.cuh: the large products of -x 1 (K-major TF32 copies) and -x 2 (BF16
copies, either layout) with their operand tiles brought by the Tensor Memory Accelerator, two blocks
of a thread-block cluster sharing the B tile (sm_90a; built where MF_WGMMA is defined): the job of
matmul_wgmma_ops_kernel (kernels/fast/matmul/wgmma_kmajor.cuh), the same tiles and epilogues.
Why: on the big model's products (1024 x 4096 x 4096 and the like) that kernel's 128 x 256 tiles read
their operands from L2 at about 5.8 TB/s, L2's limit: every block reads its own A and B tiles, and
the blocks of one column of tiles read the same B tile again and again. Here the two
blocks of a cluster take two tiles one above the other, which share B: each block's copy engine
brings half of B into both blocks' shared memory at once (multicast), so a block reads 128 rows of A
and 128 of B per k-step where it read 128 and 256: a third less L2 traffic for the same products.
And the threads issue no copies: one thread of a third warpgroup tells the TMA which box to bring
(a tensor map, made on the host, says where the matrix is and how it is laid out), and the TMA writes
it in the 128-byte swizzle the wgmma descriptors read, zeros outside the matrix.
The pipeline: ST stages, each with two mbarriers (shared-memory barriers that also count bytes):
  full[s]   the copier arms it with the stage's bytes (its own A, both halves of B: 48 KB); it
            completes when they have all landed, the other block's half included; the products'
            warpgroups wait on it;
  empty[s]  each products' warpgroup of both blocks arrives once it has finished with the stage (4
            arrivals); the copier waits on it before it refills the stage, in both blocks (its half
            of B goes to both).
A barrier completes in phases; a wait names the parity of the phase it waits for: k-tile t uses
stage t % ST in its (t / ST)-th phase.
-x 1's K-major products (kmajor_tf32.cu, configurations 4, 6 and 7) and -x 2's large products
(copies_bf16.cu, 14 to 16), in tiles 256, 192 or 128 wide, whichever fills the GPU's waves best: the
fastest of the configurations there (doc/fast.md). A BF16 operand that is MN-major in memory comes
in boxes of 64 columns by 64 k-rows, each box one panel of the MN-major layout the descriptors read.
*/
#ifndef MLP_FAST_WGMMA_TMA_CUH
#define MLP_FAST_WGMMA_TMA_CUH

#include <cuda.h>   // CUtensorMap (the type only: the map is made through the runtime's driver entry point)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000
#include <stdio.h>
#include <stdlib.h>
#include "wgmma_kmajor.cuh"  // mf_wgmma_tile, mf_wgb16_desc, mf_wg_tf32_store4, mf_wg_store_general, mf_bar_sync

#if defined(MF_WGMMA)
// d (64 x 32 of the warpgroup, 16 a thread) += A (64 x 8) . B (32 x 8)^T, TF32 values, K-major
// descriptors: the narrow tiles of the deep fused step's forward phases (kernels/fast/fused/fused_deep.cuh)
// and dev/cuda/phase_tma.cu
__device__ __forceinline__ void mf_wgmma_tf32_n32(float* d, uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {" MF_WG_REGS16 "}, %16, %17, p, 1, 1;\n}\n"
                 : MF_WG_OUTS16
                 : "l"(da), "l"(db));
}
// the same with A from registers (a[4]: this thread's elements of the warp's 16 rows of A, as mma.sync's
// m16n8k8 TF32 fragment holds them: (g, q), (g + 8, q), (g, q + 4), (g + 8, q + 4), lane 4 g + q), TF32
// values: where A is not in shared memory as wgmma reads it, or must be rounded first (wgmma would
// truncate an FP32 value)
__device__ __forceinline__ void mf_wgmma_tf32_n32_rs(float* d, const uint32_t* a, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 {" MF_WG_REGS16 "}, {%16,%17,%18,%19}, %20, p, 1, 1;\n}\n"
                 : MF_WG_OUTS16
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
// the same, 64 x 64 (32 a thread: those of two 64 x 32 products side by side, columns 32 j .. 32 j + 31
// in d[16 j] .. d[16 j + 15]): the deep fused step's split-K tiles (kernels/fast/fused/fused_deep.cuh)
__device__ __forceinline__ void mf_wgmma_tf32_n64_rs(float* d, const uint32_t* a, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {" MF_WG_REGS32 "}, {%32,%33,%34,%35}, %36, p, 1, 1;\n}\n"
                 : MF_WG_OUTS32
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
// the accumulators of mf_wgmma_tf32_n32 (thread: warp w of the warpgroup, lane 4 gq + q; D's rows
// 16 w + gq (+ 8), columns 8 c + 2 q (+ 1)) into dst transposed: D (r, c) at dst[c * ld + r]
__device__ __forceinline__ void mf_wg_n32_store_t(float* dst, int ld, const float* acc, int tid) {
    const int warp = tid / 32, lane = tid % 32, gq = lane / 4, q = lane % 4;
#pragma unroll
    for (int c = 0; c < 4; c++)
#pragma unroll
        for (int hh = 0; hh < 2; hh++)
#pragma unroll
            for (int e = 0; e < 2; e++) dst[(size_t)(8 * c + 2 * q + e) * ld + 16 * warp + gq + 8 * hh] = acc[c * 4 + hh * 2 + e];
}
// this thread's earlier accesses to global memory through the generic proxy (plain loads and stores)
// ordered against later ones through the async proxy (the TMA's), and the other way round: what one
// block stores before a grid-wide barrier and another block's TMA reads after it
__device__ __forceinline__ void mf_fence_proxy_async_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }
// one arrival that also expects bytes more to land in this phase
__device__ __forceinline__ void mf_mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
// one arrival on the barrier at the same shared offset in block cta of the cluster (this one or the
// other), with release semantics at the CTA's scope (the default). What must be over before the copier
// refills the stage are the wgmma's reads of it, which wgmma.wait_group has waited for; release at the
// cluster's scope (a fence: this thread's earlier accesses made visible to the whole cluster) put that
// fence on the products' critical path once a k-tile, and made the kernel slower than the one without
// the TMA (dev/cuda/phase_tma.cu times both).
__device__ __forceinline__ void mf_mbar_arrive_cluster(unsigned bar, unsigned cta) {
    asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" :: "r"(bar), "r"(cta) : "memory");
}
// the two halves of a cluster barrier, for work between them: this thread's arrival (release: its
// accesses before it, the other blocks' shared memory included, are seen by whoever waits after it),
// and its wait for every thread of the cluster to have arrived (acquire)
__device__ __forceinline__ void mf_cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void mf_cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
// both at once: every thread of every block of the cluster
__device__ __forceinline__ void mf_cluster_sync() {
    mf_cluster_arrive();
    mf_cluster_wait();
}
// 16 bytes at shared address sa of block cta of the cluster (distributed shared memory)
__device__ __forceinline__ float4 mf_lds_cluster_f4(unsigned sa, unsigned cta) {
    float4 v;
    asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %4, %5;\n"
                 "ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [ra];\n}\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(sa), "r"(cta) : "memory");
    return v;
}
__device__ __forceinline__ unsigned mf_cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
// the map's box at column c0 (k) and row r0 into shared address dst, its bytes counted on bar; with a
// mask, into the same address of each block the mask names, counted on the barrier at bar's offset there
__device__ __forceinline__ void mf_tma_load(unsigned dst, const CUtensorMap* map, int c0, int r0, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(dst), "l"(map), "r"(c0), "r"(r0), "r"(bar) : "memory");
}
__device__ __forceinline__ void mf_tma_load_mc(unsigned dst, const CUtensorMap* map, int c0, int r0, unsigned bar,
                                               unsigned short mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                 "[%0], [%1, {%2, %3}], [%4], %5;\n"
                 :: "r"(dst), "l"(map), "r"(c0), "r"(r0), "r"(bar), "h"(mask) : "memory");
}
#endif

// The driver's cuTensorMapEncodeTiled, which makes the TMA's tensor maps, through the runtime (no link
// against the driver library); NULL where the driver does not give it
static inline PFN_cuTensorMapEncodeTiled_v12000 mf_tma_encoder(void) {
    static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
        void *fn = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) !=
                cudaSuccess || q != cudaDriverEntryPointSuccess)
            fn = NULL;
        return (PFN_cuTensorMapEncodeTiled_v12000)fn;
    }();
    return encode;
}

// The tensor map of a row-major matrix of `outer` rows of `inner` values (type, `bytes` each), in boxes
// of box_inner x box_outer (box_inner x bytes = 128: one swizzle row), 128-byte swizzle (the layout
// the wgmma descriptors read), zeros outside the matrix
static inline void mf_tensor_map_2d(CUtensorMap *map, CUtensorMapDataType type, int bytes, const void *X, int inner,
                                    int outer, int box_inner, int box_outer) {
    const PFN_cuTensorMapEncodeTiled_v12000 encode = mf_tma_encoder();
    if (encode == NULL) {
        fprintf(stderr, "error: the TMA needs the driver's cuTensorMapEncodeTiled, which this driver does not give\n");
        exit(EXIT_FAILURE);
    }
    const cuuint64_t dim[2] = {(cuuint64_t)inner, (cuuint64_t)outer}, stride[1] = {(cuuint64_t)inner * bytes};
    const cuuint32_t box[2] = {(cuuint32_t)box_inner, (cuuint32_t)box_outer}, estride[2] = {1, 1};
    const CUresult r = encode(map, type, 2, (void *)X, dim, stride, box, estride, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "error: the TMA: cuTensorMapEncodeTiled failed (%d) on a %d x %d operand, boxes of %d x %d\n",
                (int)r, outer, inner, box_outer, box_inner);
        exit(EXIT_FAILURE);
    }
}

// The tensor map of a K-major operand X (rows x K, TF32 values, rows K floats apart): boxes of 32 k
// (128 bytes) x box_rows rows. The kernel below takes boxes of 128 rows; dev/cuda/phase_tma.cu smaller ones.
static inline void mf_tensor_map(CUtensorMap *map, const float *X, int rows, int K, int box_rows) {
    mf_tensor_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, X, K, rows, 32, box_rows);
}

// The tensor map of a BF16 operand for the kernel below: K-major (kc: X(d, k) = X[d * K + k], D x K) in
// boxes of 64 k (128 bytes) x box_rows rows; MN-major (X(d, k) = X[k * D + d]) in boxes of 64 d (128
// bytes) x 64 k-rows, each box one 8192-byte panel of the MN-major layout (kernels/fast/matmul/wgmma_kmajor.cuh).
static inline void mf_tensor_map_b16(CUtensorMap *map, const __nv_bfloat16 *X, int D, int K, bool kc, int box_rows) {
    mf_tensor_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, X, kc ? K : D, kc ? D : K, 64, kc ? box_rows : 64);
}

// bytes of dynamic shared memory for tiles of 128 x BN: the stages, their barriers, 1024 to align the atoms
constexpr int mf_wgtma_smem_bytes(int BN, int ST) { return ST * (128 + BN) * 128 + 2 * ST * 8 + 1024; }

#if defined(MF_WGMMA)
// k-tile t of an operand tile of BD rows from row d0 into stage address sa, counted on barrier full,
// in PARTS parts: K-major, PARTS boxes of BD / PARTS rows; MN-major (BF16), a box a 64-row panel,
// panel p at sa + 8192 p. MC: the tile is shared by a cluster's two blocks, and this one (rank) brings
// every other part (parts rank, rank + 2, ...) into both.
template <typename T, bool KC, int BD, int PARTS, int MC>
__device__ __forceinline__ void mf_tma_tile(unsigned sa, const CUtensorMap* map, int d0, int t, unsigned full,
                                            unsigned rank) {
    constexpr int BK = 128 / (int)sizeof(T), NP = KC ? PARTS : BD / 64, PD = BD / NP;
    static_assert(BD % NP == 0 && (KC || BD % 64 == 0), "whole parts");
    #pragma unroll
    for (int p = 0; p < NP; p++) {
        if (MC && p % 2 != (int)rank) continue;
        const unsigned dst = sa + p * PD * 128;
        const int c0 = KC ? t * BK : d0 + PD * p, r0 = KC ? d0 + PD * p : t * BK;
        if (MC) mf_tma_load_mc(dst, map, c0, r0, full, 0x3);
        else mf_tma_load(dst, map, c0, r0, full);
    }
}
#endif

// C (M, N) = epi(A . B^T) through tmA and tmB (mf_tensor_map: TF32 values, K-major; mf_tensor_map_b16:
// BF16, A_KC / B_KC as matmul_wgmma_ops_kernel's), the 128 x BN tile of this block (BN 128, 192 or 256:
// the planners take the width whose tiles fill the GPU's waves best); launched in
// clusters of two blocks along y (M), with an even grid.y. Warpgroups 0 and 1: 64 rows of the tile
// each, as matmul_wgmma_ops_kernel's, then its epilogues (mf_wg_tf32_store4, mf_wg_store_general)
// among themselves; warpgroup 2: the copier (one thread of it), which gives the others its registers.
// A stage is 128 bytes of k (32 TF32 or 64 BF16 values) of both tiles, laid out as the ops kernel's.
// MC = 0: no cluster, each block brings its whole B tile itself (for comparison).
// out_bf16 (BF16): NULL, or (M, N) where C is stored again, rounded to BF16; out_t (TF32): as
// matmul_wgmma_ops_kernel's.
template <typename T, int BN, int ST, int MC, bool A_KC, bool B_KC>
__global__ void __launch_bounds__(384, 1)
matmul_wgmma_tma_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB,
                        float* __restrict__ C, int M, int N, int K, int vec, MatmulFastEpi epi,
                        float* __restrict__ out_t, __nv_bfloat16* __restrict__ out_bf16) {
#if defined(MF_WGMMA) && defined(__CUDA_ARCH__)
    constexpr bool TF32 = sizeof(T) == 4;
    static_assert(!TF32 || (A_KC && B_KC), "TF32: both tiles K-major");
    constexpr int BM = 128, BK = 128 / (int)sizeof(T), KSTEP = TF32 ? 8 : 16, NT = 256;   // NT: the products' threads
    constexpr int A_BYTES = BM * 128, B_BYTES = BN * 128, STAGE = A_BYTES + B_BYTES, LD = BN + 8;
    constexpr int BAR_MMA = 1;   // the products' warpgroups' named barrier
    static_assert(ST >= 2, "a stage fills while another is read");
    static_assert(BM * LD * 4 <= ST * STAGE, "the epilogue's tile fits in the stages");
    extern __shared__ __align__(16) unsigned char mf_wgb16_smem[];
    const unsigned sraw = (unsigned)__cvta_generic_to_shared(mf_wgb16_smem);
    const unsigned sbase = sraw + ((1024u - (sraw & 1023u)) & 1023u);   // atoms start 1024-byte aligned
    const unsigned bars = sbase + ST * STAGE;   // full[s] at bars + 8 s, empty[s] at bars + 8 (ST + s)
    const int tid = threadIdx.x;
    const unsigned rank = MC ? mf_cluster_rank() : 0;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int ntiles = (K + BK - 1) / BK;

    if (tid == 0) {
        for (int s = 0; s < ST; s++) {
            mf_mbar_init(bars + 8 * s, 1);          // the copier's arrival (and the bytes)
            mf_mbar_init(bars + 8 * (ST + s), MC ? 4 : 2);   // two warpgroups of two blocks (or one)
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    mf_cluster_sync();   // both blocks' barriers exist before either block's copies or arrivals reach them
    pdl_wait();          // launched with PDL: A or B may be the previous kernel's output (pdl.cuh)

    if (tid >= NT) {     // ---- warpgroup 2: the copier
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == NT) {
            for (int t = 0; t < ntiles; t++) {
                const int s = t % ST;
                const unsigned full = bars + 8 * s, sa = sbase + s * STAGE;
                if (t >= ST) mf_mbar_wait(bars + 8 * (ST + s), ((t / ST) + 1) & 1);   // both blocks are done with it
                mf_mbar_expect_tx(full, STAGE);
                mf_tma_tile<T, A_KC, BM, 1, 0>(sa, &tmA, m0, t, full, 0);
                mf_tma_tile<T, B_KC, BN, 2, MC>(sa + A_BYTES, &tmB, n0, t, full, rank);   // (MC: half, into both)
            }
        }
    } else {             // ---- warpgroups 0 and 1: the products, then the epilogue
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4, wg = tid / 128;
        float acc[BN / 2];
        #pragma unroll
        for (int i = 0; i < BN / 2; i++) acc[i] = 0.0f;
        for (int t = 0; t < ntiles; t++) {
            const int s = t % ST;
            mf_mbar_wait(bars + 8 * s, (t / ST) & 1);   // the stage's bytes have landed
            const unsigned a = sbase + s * STAGE + wg * 64 * 128, b = sbase + s * STAGE + A_BYTES;
            mf_wg_fence();
            #pragma unroll
            for (int ks = 0; ks < BK / KSTEP; ks++) {   // (a k-step: 32 bytes along a K-major row, 16 k-rows MN-major)
                const uint64_t da = mf_wgb16_desc(a + ks * (A_KC ? 32 : 2048), !A_KC);
                const uint64_t db = mf_wgb16_desc(b + ks * (B_KC ? 32 : 2048), !B_KC);
                mf_wgmma_tile<T, BN, A_KC, B_KC>(acc, da, db);
            }
            mf_wg_commit();
            mf_wg_wait<1>();   // k-tile t - 1's products are done: its stage may be refilled (if it will be)
            if (t >= 1 && t - 1 + ST < ntiles && tid % 128 == 0) {
                const unsigned e = bars + 8 * (ST + (t - 1) % ST);
                mf_mbar_arrive_cluster(e, 0);
                if (MC) mf_mbar_arrive_cluster(e, 1);
            }
        }
        mf_wg_wait<0>();
        mf_bar_sync(BAR_MMA, NT);   // both warpgroups' products are done: every stage has landed and is read

        // the epilogue from shared memory, over the stages (matmul_wgmma_ops_kernel's, by these 256 threads)
        float* red = reinterpret_cast<float*>(mf_wgb16_smem + (sbase - sraw));
        mf_wg_acc_to_smem<BN, LD>(red, acc, warp * 16 + g, q);
        mf_bar_sync(BAR_MMA, NT);
        constexpr bool SGD_COPY = !TF32 && !A_KC && !B_KC;   // (as matmul_wgmma_ops_kernel's)
        if ((TF32 || SGD_COPY) && vec &&
            (epi.kind == MF_EPI_SGD || (TF32 && epi.kind == MF_EPI_DINP && out_t != nullptr)))
            mf_wg_tf32_store4<BM, BN, NT, LD, BAR_MMA>(
                C, red, m0, n0, M, N, epi, out_t, tid, SGD_COPY ? reinterpret_cast<unsigned short*>(out_bf16) : nullptr);
        else
            mf_wg_store_general<BM, BN, NT, LD>(C, red, m0, n0, M, N, vec, epi, TF32 ? nullptr : out_bf16, tid);
    }
    mf_cluster_sync();   // neither block leaves while the other may still write into its shared memory
#endif
}

#if defined(MF_WGMMA)
// The launch: tiles of 128 x BN, in clusters of two blocks along M (MC; grid.y even), PDL where asked.
// A and B: TF32 values, both K-major (T = float), or BF16 in the layouts A_KC and B_KC say (as
// matmul_wgmma_ops_kernel's: A (M, K) or (K, M), B (N, K) or (K, N)).
template <typename T, int BN, int ST, int MC, bool A_KC, bool B_KC>
static void mf_tma_launch(int pdl, cudaStream_t stream, float *C, const T *A, const T *B, int M, int N, int K, int vec,
                          const MatmulFastEpi &epi, float *out_t, __nv_bfloat16 *out_bf16) {
    CUtensorMap ta, tb;
    if constexpr (sizeof(T) == 4) {
        mf_tensor_map(&ta, (const float *)A, M, K, 128);
        mf_tensor_map(&tb, (const float *)B, N, K, BN / 2);
    } else {
        mf_tensor_map_b16(&ta, (const __nv_bfloat16 *)A, M, K, A_KC, 128);
        mf_tensor_map_b16(&tb, (const __nv_bfloat16 *)B, N, K, B_KC, BN / 2);
    }
    auto kernel = matmul_wgmma_tma_kernel<T, BN, ST, MC, A_KC, B_KC>;
    const int smem = mf_wgtma_smem_bytes(BN, ST);
    static bool allowed = false;
    if (!allowed) {
        cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        allowed = true;
    }
    cudaLaunchConfig_t lc = {};
    cudaLaunchAttribute attr[2];
    lc.gridDim = dim3(mf_ceil_div(N, BN), MC ? (mf_ceil_div(M, 128) + 1) / 2 * 2 : mf_ceil_div(M, 128));
    lc.blockDim = dim3(384);
    lc.dynamicSmemBytes = (size_t)smem;
    lc.stream = stream;
    lc.attrs = attr;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1, attr[0].val.clusterDim.y = 2, attr[0].val.clusterDim.z = 1;
    lc.numAttrs = MC ? 1 : 0;
    if (pdl && pdl_available()) {
        attr[lc.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[lc.numAttrs].val.programmaticStreamSerializationAllowed = 1;
        lc.numAttrs++;
    }
    cudaCheck(cudaLaunchKernelEx(&lc, kernel, ta, tb, C, M, N, K, vec, epi, out_t, out_bf16));
}
#endif

#endif  // MLP_FAST_WGMMA_TMA_CUH
