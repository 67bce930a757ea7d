/*
kernels/fast/matmul/wgmma_kmajor.cuh: the matmul through wgmma on operands stored the way the tensor cores take
them (sm_90a; built where MF_WGMMA is defined): BF16 copies of the operands for -x 2's large products,
and, with the same kernel, TF32 values stored K-major for -x 1's (below). The same job as
matmul_bf16_kernel (kernels/fast/matmul/mma_bf16.cuh: copies of the operands in memory, FP32 sums, the fast
kernels' epilogues), on Hopper's warpgroup instructions.
Why: wgmma reads both tiles from shared memory itself (kernels/fast/matmul/wgmma_tf32.cuh tells how), so the
threads issue no fragment loads; and for 16-bit operands it takes either layout: a tile may be
K-major (k along its 128-byte rows) or MN-major (m or n along them), the instruction's imm-trans bits
say which. So no BF16 product needs a transpose.
32-bit operands (TF32) it takes K-major only. So -x 1's large products run here on copies that are
K-major where the FP32 tensor is not (the trainer keeps them: W transposed for dinp, the layer's input
and output gradient transposed for dweight; train_mlp_fast.cu, model_tf32k), each a TF32 value
already: a 128-byte row is 32 of them, a k-step of 8 the same 32 bytes as BF16's 16, so the tiles,
descriptors and pipeline are the same and only the instruction differs (T = float). Where the
operand is not K-major in memory, kernels/fast/matmul/wgmma_tf32.cuh's kernel transposes tiles through the
threads instead, which costs it the speed this kernel has.
Shared layout, 128-byte swizzle, BK = 128 bytes of k (64 BF16 or 32 TF32 values), per stage and operand:
  K-major (A_KC / B_KC): row d (of the BM or BN rows) at d * 128, its 16-byte chunk c at chunk
    c ^ (d % 8): the TF32 kernel's layout. A descriptor: the 8-row atoms 1024 bytes apart (stride
    byte offset); a k-step (16 BF16, 8 TF32) moves its address 32 bytes along the row.
  MN-major (BF16 only): the tile's m (or n) in panels of 64 (128 bytes), panel p at p * 8192; in a
    panel, k-row r at r * 128, its chunk c at c ^ (r % 8). A descriptor: 8-row atoms 1024 bytes apart
    (stride byte offset), panels 8192 bytes apart (leading byte offset); a k-step of 16 moves it two
    atoms, 2048 bytes. (PTX ISA, "Shared Memory Matrix Layout": the canonical MN-major layout with
    128-byte swizzle is ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO)), T = 8 BF16 values.)
A tile is 128 bytes per row or per k-row either way: BM x 128 and BN x 128 bytes a stage.
Block: WGS warpgroups, each 64 rows of the tile and all BN columns (one wgmma.m64nBNk16, or k8 for
TF32, per k-step); the pipeline is the TF32 kernel's: copies ST - 2 tiles ahead, one barrier per
tile, the products of one tile in flight while the next is issued.
*/
#ifndef MLP_FAST_WGMMA_KMAJOR_CUH
#define MLP_FAST_WGMMA_KMAJOR_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "epilogue.cuh"    // mf_store_pair
#include "mma_bf16.cuh"    // mf_cp16_b16
#include "../ops/pdl.cuh"  // pdl_wait
#include "pipeline.cuh"    // mf_cp_commit, mf_cp_wait, mf_prefetch
#include "wgmma_tf32.cuh"  // mf_wg_fence, mf_wg_commit, mf_wg_wait, mf_wg_pin, mf_fence_proxy_async

// A named barrier (IDs 1 to 15; 0 is __syncthreads'): waits until n threads (whole warps, the same n
// in each) have reached it, and orders their shared-memory accesses before it against theirs after it
__device__ __forceinline__ void mf_bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;\n" :: "r"(id), "r"(n) : "memory"); }

// the barrier of the NT threads that run a piece of a kernel: BAR 0 is __syncthreads (the whole
// block), another ID the named barrier of that ID for NT threads
template <int BAR, int NT>
__device__ __forceinline__ void mf_bar_threads() {
    if constexpr (BAR == 0) __syncthreads();
    else mf_bar_sync(BAR, NT);
}

#if defined(MF_WGMMA)
// mbarriers (barrier objects in shared memory; PTX ISA, "mbarrier"): init with the arrivals a phase
// takes; arrive (release: this thread's earlier accesses are ordered before the phase completes);
// wait until the phase of the given parity has completed (acquire)
__device__ __forceinline__ void mf_mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mf_mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mf_mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n.reg .pred p;\nMF_WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra MF_WAIT_%=;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
#endif

// bytes of dynamic shared memory of a configuration (the stages, and 1024 to align the atoms)
// (the epilogue's tile, 64 WGS rows of BN + 8 floats, reuses them: it must fit)
constexpr int mf_wgb16_smem_bytes(int WGS, int BN, int ST) { return ST * (64 * WGS + BN) * 128 + 1024; }

#if defined(MF_WGMMA)
// the descriptor of a tile with 128-byte swizzle at shared address sa: K-major (LBO unused, 1) or
// MN-major (LBO = 8192, the panel stride); SBO 1024 either way
__device__ __forceinline__ uint64_t mf_wgb16_desc(unsigned sa, bool mn_major) {
    return (uint64_t)((sa & 0x3FFFF) >> 4) | ((uint64_t)(mn_major ? 8192 >> 4 : 1) << 16) |
           ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

// the 64 accumulators of a thread in a 64 x 128 wgmma: their operand list in the assembly, and the
// asm statement's outputs d[0] .. d[63] (on the 32 of kernels/fast/matmul/wgmma_tf32.cuh)
#define MF_WG_REGS64 \
    MF_WG_REGS32 "," \
    "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47," \
    "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define MF_WG_OUTS64 \
    MF_WG_OUTS32, \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// the 96 and 128 accumulators of a thread in a 64 x 192 and a 64 x 256 wgmma: their operand lists in
// the assembly, and the asm statement's outputs d[0] .. d[95], d[0] .. d[127]
#define MF_WG_REGS96 \
    MF_WG_REGS64 "," \
    "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79" "," \
    "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95"
#define MF_WG_OUTS96 \
    MF_WG_OUTS64, \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define MF_WG_REGS128 \
    MF_WG_REGS96 "," \
    "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111" "," \
    "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
#define MF_WG_OUTS128 \
    MF_WG_OUTS96, \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// d (the warpgroup's 64 x 128 of C, 64 per thread) += A (64 x 16) . B (128 x 16)^T, both BF16 in shared
// memory; TA / TB: A / B MN-major (1) or K-major (0)
template <int TA, int TB>
__device__ __forceinline__ void mf_wgmma_bf16_n128(float* d, uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{" MF_WG_REGS64 "}, "
                 "%64, %65, p, 1, 1, %66, %67;\n}\n"
                 : MF_WG_OUTS64
                 : "l"(da), "l"(db), "n"(TA), "n"(TB));
}

// d (the warpgroup's 64 x 192 of C, 96 per thread) += A (64 x 16) . B (192 x 16)^T, as mf_wgmma_bf16_n128
template <int TA, int TB>
__device__ __forceinline__ void mf_wgmma_bf16_n192(float* d, uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 "
                 "{" MF_WG_REGS96 "}, "
                 "%96, %97, p, 1, 1, %98, %99;\n}\n"
                 : MF_WG_OUTS96
                 : "l"(da), "l"(db), "n"(TA), "n"(TB));
}

// d (the warpgroup's 64 x 256 of C, 128 per thread) += A (64 x 16) . B (256 x 16)^T, both BF16 in shared
// memory; TA / TB: A / B MN-major (1) or K-major (0)
template <int TA, int TB>
__device__ __forceinline__ void mf_wgmma_bf16_n256(float* d, uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                 "{" MF_WG_REGS128 "}, "
                 "%128, %129, p, 1, 1, %130, %131;\n}\n"
                 : MF_WG_OUTS128
                 : "l"(da), "l"(db), "n"(TA), "n"(TB));
}

// d (the warpgroup's 64 x 128 of C, 64 per thread) += A (64 x 8) . B (128 x 8)^T, both TF32 values in
// shared memory, K-major (32-bit operands have no transposed form)
__device__ __forceinline__ void mf_wgmma_tf32_n128(float* d, uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
                 "{" MF_WG_REGS64 "}, "
                 "%64, %65, p, 1, 1;\n}\n"
                 : MF_WG_OUTS64
                 : "l"(da), "l"(db));
}

// d (the warpgroup's 64 x 192 of C, 96 per thread) += A (64 x 8) . B (192 x 8)^T, as mf_wgmma_tf32_n128
__device__ __forceinline__ void mf_wgmma_tf32_n192(float* d, uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n192k8.f32.tf32.tf32 "
                 "{" MF_WG_REGS96 "}, "
                 "%96, %97, p, 1, 1;\n}\n"
                 : MF_WG_OUTS96
                 : "l"(da), "l"(db));
}

// d (the warpgroup's 64 x 256 of C, 128 per thread) += A (64 x 8) . B (256 x 8)^T, both TF32 values in
// shared memory, K-major (32-bit operands have no transposed form)
__device__ __forceinline__ void mf_wgmma_tf32_n256(float* d, uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
                 "{" MF_WG_REGS128 "}, "
                 "%128, %129, p, 1, 1;\n}\n"
                 : MF_WG_OUTS128
                 : "l"(da), "l"(db));
}

// one k-step of the warpgroup's 64 x BN (128, 192 or 256) of C: TF32 values (T = float, both K-major)
// or BF16 in the layouts A_KC / B_KC say (true: K-major)
template <typename T, int BN, bool A_KC, bool B_KC>
__device__ __forceinline__ void mf_wgmma_tile(float* d, uint64_t da, uint64_t db) {
    static_assert(BN == 128 || BN == 192 || BN == 256, "a tile 128, 192 or 256 wide");
    constexpr int TA = A_KC ? 0 : 1, TB = B_KC ? 0 : 1;
    if constexpr (sizeof(T) == 4 && BN == 256) mf_wgmma_tf32_n256(d, da, db);
    else if constexpr (sizeof(T) == 4 && BN == 192) mf_wgmma_tf32_n192(d, da, db);
    else if constexpr (sizeof(T) == 4) mf_wgmma_tf32_n128(d, da, db);
    else if constexpr (BN == 256) mf_wgmma_bf16_n256<TA, TB>(d, da, db);
    else if constexpr (BN == 192) mf_wgmma_bf16_n192<TA, TB>(d, da, db);
    else mf_wgmma_bf16_n128<TA, TB>(d, da, db);
}
#endif

// One operand tile into the swizzled stage at shared address sa: rows d0 .. d0 + BD - 1 of X, k in
// [k0, k0 + BK) (BK: 128 bytes of T), outside the matrix 0. KC: X(d, k) = X[d * ld + k] (K-major
// tile); else X(d, k) = X[k * ld + d] (MN-major tile, BF16 only). The contiguous width is a multiple
// of a 16-byte chunk (8 BF16 or 4 TF32 values).
template <typename T, int BD, int NT, bool KC>
__device__ __forceinline__ void mf_wgb16_load(unsigned sa, const T* __restrict__ X, int D, int K, int ld, int d0,
                                              int k0, int tid) {
    constexpr int EPC = 16 / (int)sizeof(T);   // values a chunk
    constexpr int CHUNKS = BD * 8;             // BD rows (or k-rows) of 128 bytes, 8 chunks each
    static_assert(CHUNKS % NT == 0, "whole chunks per thread");
    static_assert(KC || sizeof(T) == 2, "32-bit tiles are K-major");
    #pragma unroll
    for (int i = 0; i < CHUNKS / NT; i++) {
        const int c = tid + i * NT;
        if constexpr (KC) {   // row r of the tile, chunk kc of its 128 bytes (a warp: 4 rows x 128 bytes)
            const int r = c / 8, kc = c % 8;
            const int d = d0 + r, k = k0 + kc * EPC;
            const bool ok = d < D && k < K;
            mf_cp16_b16(sa + (unsigned)(r * 128 + ((kc ^ (r & 7)) << 4)), ok ? X + (size_t)d * ld + k : X, ok);
        } else {              // k-row r, chunk cm of its BD values (a warp: 512 contiguous bytes)
            const int r = c / (BD / 8), cm = c % (BD / 8);
            const int p = cm / 8, e = cm % 8;   // panel, chunk in the panel's 128-byte row
            const int d = d0 + cm * 8, k = k0 + r;
            const bool ok = d < D && k < K;
            mf_cp16_b16(sa + (unsigned)(p * 8192 + r * 128 + ((e ^ (r & 7)) << 4)), ok ? X + (size_t)k * ld + d : X, ok);
        }
    }
}

// The float4 epilogues of -x 1 (and -x 2's SGD step) that also store the tile rounded to TF32 and
// transposed into out_t (N, M) (NULL: not): the tile's sums are staged in shared memory (red, BM x BN,
// rows LD floats apart).
//   MF_EPI_SGD   dW = the sums is stored in C (unless C is NULL: a gradient nobody reads), and each
//                weight W[m][n] takes its SGD step (mf_sgd_step_store4, epilogue.cuh) with its momentum,
//                the new weight also stored rounded to TF32 where sgd.param_tf32 is set, and to BF16
//                into w_bf16 where that is set (-x 2's copy of W, on the BF16 kernels); out_t: W^T,
//                what the next step's dinp reads on this kernel.
//   MF_EPI_DINP  dinp = the sums times act'(y) is stored in C; out_t: dinp^T, the next layer down's
//                weight-gradient operand (train_mlp_fast.cu, model_tf32k0).
// Where the general epilogue (mf_epi_load, mf_epi_apply) loads and stores each weight and momentum as
// a float of its own, here a thread's loads are 16 bytes, several float4s of them in flight before
// the first is used, so that the memory traffic (for SGD, W and its momentum in, up to five tensors
// out) keeps up with the tiles. For SGD the MF_WG_SGD_BATCH float4s of W and of the momentum are
// loaded as a batch: a store to W may alias the next float4's loads as far as the compiler knows, so
// each float4's loads otherwise wait for the stores before them, one round trip to memory after
// another (W and its momentum are far larger than L2 in the big model). Needs N % 4 == 0 and every pointer 16-byte aligned (the caller's vec); out_t also
// M % 4 == 0.
// The transposed copy: each thread writes its rounded outputs back over their sums in red, and after
// a barrier the tile goes out column by column: a column n of the tile is a row of out_t, its BM
// values contiguous there. Lane l takes column l % 16 and rows 4 (l / 16) .. + 3 of a group of 8 (a
// float4 in out_t: two lanes fill a 32-byte sector); its four loads from red, LD = 8 (mod 32) floats
// apart, hit banks that only lanes l and l + 16 share.
// The NT threads that run it are numbered tid; BAR: the barrier they meet at (0: __syncthreads, the
// whole block; else the named barrier of that ID, for NT threads).
#define MF_WG_SGD_BATCH 4   // float4s of W and its momentum whose loads are in flight together
template <int BM, int BN, int NT, int LD, int BAR = 0>
__device__ __forceinline__ void mf_wg_tf32_store4(float* __restrict__ C, float* red, int m0, int n0, int M, int N,
                                                  const MatmulFastEpi& epi, float* __restrict__ out_t, int tid,
                                                  unsigned short* __restrict__ w_bf16 = nullptr) {
    const MatmulFastSgd& sg = epi.sgd;
    if (epi.kind == MF_EPI_SGD) {
        constexpr int SB = MF_WG_SGD_BATCH;
        for (int e0 = tid; e0 < BM * BN / 4; e0 += SB * NT) {
            float4 w[SB], mb[SB];
            #pragma unroll
            for (int b = 0; b < SB; b++) {
                const int e4 = e0 + b * NT, m = m0 + e4 / (BN / 4), n = n0 + e4 % (BN / 4) * 4;
                if (e4 < BM * BN / 4 && m < M && n < N) {
                    const size_t i = (size_t)m * N + n;
                    w[b] = *reinterpret_cast<const float4*>(sg.param + i);
                    mb[b] = *reinterpret_cast<const float4*>(sg.mbuf + i);
                }
            }
            #pragma unroll
            for (int b = 0; b < SB; b++) {
                const int e4 = e0 + b * NT, r = e4 / (BN / 4), cc = e4 % (BN / 4) * 4;
                const int m = m0 + r, n = n0 + cc;
                if (e4 >= BM * BN / 4 || m >= M || n >= N) continue;
                const size_t i = (size_t)m * N + n;
                const float4 g = *reinterpret_cast<const float4*>(&red[r * LD + cc]);
                if (C != nullptr) *reinterpret_cast<float4*>(C + i) = g;
                mf_sgd_step_store4(sg, i, w[b], mb[b], g);
                const float4 o = mf_round_tf32(w[b]);
                if (sg.param_tf32 != nullptr) *reinterpret_cast<float4*>(sg.param_tf32 + i) = o;
                if (w_bf16 != nullptr)   // (i a multiple of 4: 8-byte aligned)
                    *reinterpret_cast<uint2*>(w_bf16 + i) =
                        make_uint2(mf_bf16x2_bits(w[b].x, w[b].y), mf_bf16x2_bits(w[b].z, w[b].w));
                if (out_t != nullptr) *reinterpret_cast<float4*>(&red[r * LD + cc]) = o;
            }
        }
    } else {   // MF_EPI_DINP
        #pragma unroll 4
        for (int e4 = tid; e4 < BM * BN / 4; e4 += NT) {
            const int r = e4 / (BN / 4), cc = e4 % (BN / 4) * 4;
            const int m = m0 + r, n = n0 + cc;
            if (m >= M || n >= N) continue;
            const size_t i = (size_t)m * N + n;
            float4 v = *reinterpret_cast<const float4*>(&red[r * LD + cc]);
            if (epi.act != ACT_NONE)
                v = activation_grad_times4(v, *reinterpret_cast<const float4*>(epi.aux + i), epi.act);
            *reinterpret_cast<float4*>(C + i) = v;
            if (out_t != nullptr) *reinterpret_cast<float4*>(&red[r * LD + cc]) = mf_round_tf32(v);
        }
    }
    if (out_t == nullptr) return;
    mf_bar_threads<BAR, NT>();
    static_assert(BN % 16 == 0 && BM % 8 == 0 && (BN * BM / 4) % NT == 0, "whole groups of 16 columns x 8 rows");
    #pragma unroll 4
    for (int e = tid; e < BN * BM / 4; e += NT) {
        const int lane = e % 32, grp = e / 32;
        const int n = (grp % (BN / 16)) * 16 + lane % 16, r = ((grp / (BN / 16)) * 2 + lane / 16) * 4;
        if (n0 + n >= N || m0 + r >= M) continue;   // (M % 4 == 0: the four rows are in range together)
        *reinterpret_cast<float4*>(out_t + (size_t)(n0 + n) * M + m0 + r) =
            make_float4(red[r * LD + n], red[(r + 1) * LD + n], red[(r + 2) * LD + n], red[(r + 3) * LD + n]);
    }
}

// A thread's wgmma accumulators (acc[c * 4 + h * 2 + e]: row r0 + 8 h, column 8 c + 2 q + e of the
// tile) into the tile's sums in shared memory, red (rows LD floats apart: a warp's float2 stores then
// conflict at most two ways)
template <int BN, int LD>
__device__ __forceinline__ void mf_wg_acc_to_smem(float* red, const float* acc, int r0, int q) {
    #pragma unroll
    for (int h = 0; h < 2; h++)
        #pragma unroll
        for (int c = 0; c < BN / 8; c++)
            *reinterpret_cast<float2*>(&red[(r0 + h * 8) * LD + c * 8 + 2 * q]) =
                make_float2(acc[c * 4 + h * 2], acc[c * 4 + h * 2 + 1]);
}

// Every other epilogue, from the tile's sums in red (BM x BN, rows LD floats apart), by NT threads
// numbered tid: each takes a float4 of a row at a time through the epilogue (mf_epi_load,
// mf_epi_store4) and stores it (and its BF16 copy, out_bf16) whole.
template <int BM, int BN, int NT, int LD>
__device__ __forceinline__ void mf_wg_store_general(float* __restrict__ C, const float* red, int m0, int n0, int M,
                                                    int N, int vec, const MatmulFastEpi& epi,
                                                    __nv_bfloat16* __restrict__ out_bf16, int tid) {
    for (int e4 = tid; e4 < BM * BN / 4; e4 += NT) {
        const int r = e4 / (BN / 4), cc = e4 % (BN / 4) * 4;
        const int m = m0 + r, n = n0 + cc;
        if (m >= M || n >= N) continue;
        MfEpiIn in[4];   // the epilogue's loads of the four first, then the arithmetic
        #pragma unroll
        for (int j = 0; j < 4; j++) in[j] = n + j < N ? mf_epi_load(m, n + j, N, epi) : MfEpiIn{0.0f, 0.0f};
        mf_epi_store4(C, *reinterpret_cast<const float4*>(&red[r * LD + cc]), in, m, n, N, vec != 0, epi,
                      reinterpret_cast<unsigned short*>(out_bf16));
    }
}

// The products of one BM x BN tile (BM = 64 x the warpgroups), the whole of K, on a ring of ST stages
// of cp.async copies at sbase (each stage A's tile, then B's: BM + BN rows of 128 bytes), run by the
// NT = 2 BM threads tid that meet at barrier BAR (mf_bar_threads). The copies run ST - 2 k-tiles
// ahead; mf_wg_prefetch puts the first ones in flight, so that a persistent kernel can issue its next
// tile's before it hands this one's sums over. acc: the warpgroup's accumulators (BN / 2 a thread),
// added to. On return every copy has landed and every product is done: the stages are free.
// mf_wg_load_ktile: k-tile t's copies (A's rows, then B's) into its stage
#if defined(MF_WGMMA)   // (the mainloop's helpers use the sm_90a instructions above)
template <typename T, int BM, int BN, int ST, bool A_KC, bool B_KC, int NT>
__device__ __forceinline__ void mf_wg_load_ktile(unsigned sbase, const T* __restrict__ A, const T* __restrict__ B,
                                                 int M, int N, int K, int lda, int ldb, int m0, int n0, int t, int tid) {
    constexpr int BK = 128 / (int)sizeof(T), STAGE = (BM + BN) * 128;
    const unsigned s = sbase + (t % ST) * STAGE;
    mf_wgb16_load<T, BM, NT, A_KC>(s, A, M, K, lda, m0, t * BK, tid);
    mf_wgb16_load<T, BN, NT, B_KC>(s + BM * 128, B, N, K, ldb, n0, t * BK, tid);
}
// mf_wg_prefetch: the first ST - 2 k-tiles' copies in flight
template <typename T, int BM, int BN, int ST, bool A_KC, bool B_KC, int NT>
__device__ __forceinline__ void mf_wg_prefetch(unsigned sbase, const T* __restrict__ A, const T* __restrict__ B, int M,
                                               int N, int K, int lda, int ldb, int m0, int n0, int tid) {
    constexpr int BK = 128 / (int)sizeof(T);
    mf_prefetch<ST - 2>((K + BK - 1) / BK, [&](int t) {
        mf_wg_load_ktile<T, BM, BN, ST, A_KC, B_KC, NT>(sbase, A, B, M, N, K, lda, ldb, m0, n0, t, tid);
    });
}
// mf_wg_products: the k-tiles' products, each tile's copies ST - 2 ahead
template <typename T, int BM, int BN, int ST, bool A_KC, bool B_KC, int NT, int BAR>
__device__ __forceinline__ void mf_wg_products(float (&acc)[BN / 2], unsigned sbase, const T* __restrict__ A,
                                               const T* __restrict__ B, int M, int N, int K, int lda, int ldb, int m0,
                                               int n0, int tid) {
    constexpr bool TF32 = sizeof(T) == 4;
    constexpr int BK = 128 / (int)sizeof(T), KSTEP = TF32 ? 8 : 16, STAGE = (BM + BN) * 128;
    static_assert(ST >= 3, "copies run ST - 2 tiles ahead");
    const int ntiles = (K + BK - 1) / BK, wg = tid / 128;
    for (int t = 0; t < ntiles; t++) {
        mf_cp_wait<ST - 3>();         // tile t has landed (this thread's copies) ...
        mf_fence_proxy_async();       // ... visible to the tensor cores ...
        mf_bar_threads<BAR, NT>();    // ... everybody's; and every thread is past tile t - 1's wait
        if (t + ST - 2 < ntiles)      // into the stage of tile t - 2
            mf_wg_load_ktile<T, BM, BN, ST, A_KC, B_KC, NT>(sbase, A, B, M, N, K, lda, ldb, m0, n0, t + ST - 2, tid);
        mf_cp_commit();
        const unsigned a = sbase + (t % ST) * STAGE + wg * 64 * 128;   // this warpgroup's 64 rows (or panel)
        const unsigned b = sbase + (t % ST) * STAGE + BM * 128;
        mf_wg_fence();
        #pragma unroll
        for (int ks = 0; ks < BK / KSTEP; ks++) {   // (a k-step: 32 bytes along a K-major row)
            const uint64_t da = mf_wgb16_desc(a + ks * (A_KC ? 32 : 2048), !A_KC);
            const uint64_t db = mf_wgb16_desc(b + ks * (B_KC ? 32 : 2048), !B_KC);
            mf_wgmma_tile<T, BN, A_KC, B_KC>(acc, da, db);
        }
        mf_wg_commit();
        mf_wg_wait<1>();              // tile t - 1's products are done
    }
    mf_wg_wait<0>();
    mf_cp_wait<0>();
    mf_bar_threads<BAR, NT>();        // every warpgroup's products are done: the stages are free
}
#endif

// C (M, N) = epi(A . B) for the (64 WGS) x BN tile of this block, the whole of K; A_KC / B_KC as in
// matmul_bf16_kernel. T: __nv_bfloat16, or float for TF32 values (then A_KC and B_KC: C = A . B^T,
// A (M, K), B (N, K)). out_bf16: NULL, or (M, N) where C is stored again, rounded to BF16.
// out_t: for T = float with MF_EPI_SGD or MF_EPI_DINP on the float4 path, NULL or (N, M), where the
// new weights or dinp are stored rounded and transposed (mf_wg_tf32_store4); else unused.
template <typename T, int WGS, int BN, int ST, bool A_KC, bool B_KC>
__global__ void __launch_bounds__(128 * WGS)
matmul_wgmma_ops_kernel(float* __restrict__ C, const T* __restrict__ A, const T* __restrict__ B, int M, int N, int K,
                        int vec, MatmulFastEpi epi, __nv_bfloat16* __restrict__ out_bf16, float* __restrict__ out_t) {
#if defined(MF_WGMMA) && defined(__CUDA_ARCH__)
    constexpr bool TF32 = sizeof(T) == 4;
    constexpr int BM = 64 * WGS, NT = 128 * WGS;
    static_assert(!TF32 || (A_KC && B_KC), "TF32: both tiles K-major");
    constexpr int STAGE = (BM + BN) * 128;   // a multiple of 1024
    static_assert(BN == 128 || BN == 256, "one wgmma.m64n128k16 or m64n256k16 (k8: TF32) per k-step");
    static_assert(BM * (BN + 8) * 4 <= ST * STAGE, "the epilogue's tile fits in the stages");
    extern __shared__ __align__(16) unsigned char mf_wgb16_smem[];
    const unsigned sraw = (unsigned)__cvta_generic_to_shared(mf_wgb16_smem);
    const unsigned sbase = sraw + ((1024u - (sraw & 1023u)) & 1023u);   // atoms start 1024-byte aligned

    pdl_wait();   // launched with PDL: A or B may be the previous kernel's output (pdl.cuh)
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int lda = A_KC ? K : M, ldb = B_KC ? K : N;

    // thread (warp w, g, q) holds rows 16 w + g (+ 8) of the tile (a warpgroup's wgmma gives its warp
    // w % 4 rows 16 (w % 4) + .., and its A rows start at 64 wg): acc[c * 4 + h * 2 + e] is row
    // 16 w + g + 8 h, column 8 c + 2 q + e
    float acc[BN / 2];
    #pragma unroll
    for (int i = 0; i < BN / 2; i++) acc[i] = 0.0f;
    mf_wg_prefetch<T, BM, BN, ST, A_KC, B_KC, NT>(sbase, A, B, M, N, K, lda, ldb, m0, n0, tid);
    mf_wg_products<T, BM, BN, ST, A_KC, B_KC, NT, 0>(acc, sbase, A, B, M, N, K, lda, ldb, m0, n0, tid);

    // The epilogue from shared memory: the tile goes there first (rows of BN + 8 floats: a warp's
    // float2 stores then conflict at most two ways), then each thread takes a float4 of a row at a
    // time through the epilogue, and stores it (and its BF16 copy, out_bf16) whole: 16-byte stores of
    // consecutive columns, where the accumulators' own layout gives 8-byte ones 32 bytes apart. And
    // no call per output (mf_store_pair's mf_epilogue): with a call in the kernel the compiler
    // serialised the wgmmas of the 256-column tile (ptxas warning C7514).
    constexpr int LD = BN + 8;
    float* red = reinterpret_cast<float*>(mf_wgb16_smem + (sbase - sraw));
    mf_wg_acc_to_smem<BN, LD>(red, acc, warp * 16 + g, q);
    __syncthreads();
    // -x 1's weight gradient with its SGD step and dinp with its transposed copy, on float4s; and -x 2's
    // weight gradient with its SGD step, which stores the new W's BF16 copy into out_bf16. Only the
    // weight gradient's layout (A and B not K-major) compiles the latter: the other products' kernels
    // stay as they were without it.
    constexpr bool SGD_COPY = !TF32 && !A_KC && !B_KC;
    if ((TF32 || SGD_COPY) && vec &&
        (epi.kind == MF_EPI_SGD || (TF32 && epi.kind == MF_EPI_DINP && out_t != nullptr))) {
        mf_wg_tf32_store4<BM, BN, NT, LD>(C, red, m0, n0, M, N, epi, out_t, tid,
                                          SGD_COPY ? reinterpret_cast<unsigned short*>(out_bf16) : nullptr);
        return;
    }
    mf_wg_store_general<BM, BN, NT, LD>(C, red, m0, n0, M, N, vec, epi, out_bf16, tid);
#endif
}

// The same product for TF32 values, persistent, its epilogue beside the next tile's products.
// Why: -x 1's weight gradient carries the layer's SGD step in its epilogue, which moves six floats per
// weight (W and its momentum in; W, its momentum and both TF32 copies out) and, in the kernel above,
// waits for the tile's products and keeps the tensor cores idle while it runs: one block an SM, every
// block at the same point. Here a block of four warpgroups stays on its SM and takes tiles in turn
// (tile, tile + gridDim.x, ...; the grid at most one block an SM): warpgroups 0 and 1 run the
// products of a 128 x BN tile as the kernel above does, then put its sums in a staging tile in shared
// memory of its own and go on to the next tile at once; warpgroups 2 and 3 take the staging tile
// through the epilogue meanwhile. Two mbarriers hand the staging tile over, a phase per tile: full
// (every products' thread has stored its sums) and free (every epilogue thread has read them); each
// side arrives at one and waits at the other, so neither blocks the other beyond the tile between
// them. (Named barriers that one side arrives at and the other waits at do the same, but
// compute-sanitizer's racecheck reports the accesses across them as hazards.) The next
// tile's first copies are issued before the products' warpgroups wait for free, so that its operands
// are on their way meanwhile.
// BN = 128 (64 accumulators a thread): 512 threads leave a thread 128 registers.
template <int BN, int ST>
__global__ void __launch_bounds__(512, 1)
matmul_wgmma_tf32p_kernel(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B, int M, int N,
                          int K, int vec, MatmulFastEpi epi, float* __restrict__ out_t) {
#if defined(MF_WGMMA) && defined(__CUDA_ARCH__)
    constexpr int BM = 128, NT = 256, NE = 256;   // NT products' threads, NE epilogue's
    constexpr int STAGE = (BM + BN) * 128, LD = BN + 8;
    constexpr int BAR_MMA = 1, BAR_EPI = 2;   // each side's named barrier (0, __syncthreads, is unused here)
    static_assert(ST >= 3, "copies run ST - 2 tiles ahead");
    static_assert(BN == 128, "64 accumulators a thread: 512 threads leave 128 registers each");
    extern __shared__ __align__(16) unsigned char mf_wgb16_smem[];
    const unsigned sraw = (unsigned)__cvta_generic_to_shared(mf_wgb16_smem);
    const unsigned sbase = sraw + ((1024u - (sraw & 1023u)) & 1023u);   // atoms start 1024-byte aligned
    float* red = reinterpret_cast<float*>(mf_wgb16_smem + (sbase - sraw) + ST * STAGE);   // the staging tile
    const unsigned mb_full = sbase + ST * STAGE + BM * LD * 4, mb_free = mb_full + 8;   // after the staging tile
    if (threadIdx.x == 0) {
        mf_mbar_init(mb_full, NT);   // a phase a tile: every products' thread has stored its sums
        mf_mbar_init(mb_free, NE);   // every epilogue thread has read them
    }
    __syncthreads();

    pdl_wait();   // launched with PDL: A or B may be the previous kernel's output (pdl.cuh)
    const int tid = threadIdx.x;
    const int tiles_n = (N + BN - 1) / BN, tiles = tiles_n * ((M + BM - 1) / BM);

    if (tid < NT) {   // ---- warpgroups 0 and 1: the products
        asm volatile("setmaxnreg.inc.sync.aligned.u32 160;\n");   // (of the epilogue's: 160 + 96 = 2 x 128)
        const int warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
        auto prefetch = [&](int tile) {   // the first ST - 2 k-tiles of a tile
            mf_wg_prefetch<float, BM, BN, ST, true, true, NT>(sbase, A, B, M, N, K, K, K, tile / tiles_n * BM,
                                                             tile % tiles_n * BN, tid);
        };
        if (blockIdx.x < tiles) prefetch(blockIdx.x);
        for (int tile = blockIdx.x, j = 0; tile < tiles; tile += gridDim.x, j++) {
            float acc[BN / 2];
            #pragma unroll
            for (int i = 0; i < BN / 2; i++) acc[i] = 0.0f;
            mf_wg_products<float, BM, BN, ST, true, true, NT, BAR_MMA>(acc, sbase, A, B, M, N, K, K, K,
                                                                       tile / tiles_n * BM, tile % tiles_n * BN, tid);
            if (tile + (int)gridDim.x < tiles) prefetch(tile + gridDim.x);
            if (j > 0) mf_mbar_wait(mb_free, (j - 1) & 1);   // the epilogue has read the staging tile's last sums
            mf_wg_acc_to_smem<BN, LD>(red, acc, warp * 16 + g, q);
            mf_mbar_arrive(mb_full);         // the sums are in it
        }
    } else {          // ---- warpgroups 2 and 3: the epilogue of each tile, from the staging tile
        asm volatile("setmaxnreg.dec.sync.aligned.u32 96;\n");
        const int et = tid - NT;
        for (int tile = blockIdx.x, j = 0; tile < tiles; tile += gridDim.x, j++) {
            const int m0 = tile / tiles_n * BM, n0 = tile % tiles_n * BN;
            mf_mbar_wait(mb_full, j & 1);
            if (vec && (epi.kind == MF_EPI_SGD || (epi.kind == MF_EPI_DINP && out_t != nullptr)))
                mf_wg_tf32_store4<BM, BN, NE, LD, BAR_EPI>(C, red, m0, n0, M, N, epi, out_t, et);
            else
                mf_wg_store_general<BM, BN, NE, LD>(C, red, m0, n0, M, N, vec, epi, nullptr, et);
            mf_mbar_arrive(mb_free);   // read: the next may come
        }
    }
#endif
}

// bytes of dynamic shared memory of the persistent kernel: its stages, its staging tile (128 rows of
// BN + 8 floats), its two mbarriers and 1024 to align the atoms
constexpr int mf_wgtp_smem_bytes(int BN, int ST) { return ST * (128 + BN) * 128 + 128 * (BN + 8) * 4 + 16 + 1024; }

#endif  // MLP_FAST_WGMMA_KMAJOR_CUH
