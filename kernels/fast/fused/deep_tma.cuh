/*
kernels/fast/fused/deep_tma.cuh: -x 1's forward and dinp tiles of the deep fused step on the Tensor
Memory Accelerator and wgmma (fd_tma_tile, sm_90a only), whole or split in K between the two blocks
of a thread-block cluster: the same tiles as deep_tiles.cuh's mma.sync ones, with their operands
brought by the TMA instead of the threads.
*/
#ifndef MLP_FAST_DEEP_TMA_CUH
#define MLP_FAST_DEEP_TMA_CUH

#include "../matmul/matmul.cuh"  // mf_wgmma_tf32_n32_rs, mf_tma_load, mf_mbar_*
#include "deep_config.cuh"       // FD_TMA_*, FdTmaMaps
#include "deep_tiles.cuh"        // fd_epi_tile, fd_head_w_load

#if defined(MF_WGMMA)
// fd_tma_tile's barriers: full[s] (the copier's arrival and the stage's bytes), then empty[s] (the
// products' arrival once they are done with the stage); outside the dynamic shared memory, which the
// other jobs use for their own arrays
static __shared__ unsigned long long fd_tma_bar[2 * FD_TMA_ST_MAX];
#endif

// keeps the registers of one k step's W fragments (fd_tma_tile) from the compiler's other uses until
// here, as mf_wg_pin does an accumulator's: wgmma reads them while it runs (init: zeroed first, so that
// the first pin reads defined values)
__device__ __forceinline__ void fd_pin_frag(uint32_t (&f)[4], bool init) {
#pragma unroll
    for (int e = 0; e < 4; e++) {
        if (init) f[e] = 0u;
        asm volatile("" : "+r"(f[e]));
    }
}

// fd_tma_tile's barriers initialised, once a launch, by thread 0, before the first grid barrier
__device__ __forceinline__ void fd_tma_init() {
#if defined(MF_WGMMA) && defined(__CUDA_ARCH__)
    if (threadIdx.x == 0) {
        const unsigned bars = (unsigned)__cvta_generic_to_shared(fd_tma_bar);
        for (int s = 0; s < FD_TMA_ST_MAX; s++) {
            mf_mbar_init(bars + 8 * s, 1);
            mf_mbar_init(bars + 8 * (FD_TMA_ST_MAX + s), 4);   // (each products warp: fd_tma_tile)
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
#endif
}

// One forward or dinp tile of -x 1 on the TMA and wgmma, C (M, N) = epi(A · Wᵀ) (forward: W (N, K) as
// the trainer keeps it) or epi(A · W) (DINP: W (K, N)), at rows m0 .. m0 + R - 1 of the batch (R = 32 KS)
// and columns n0 .. n0 + 63: all of K (KS 1), or split in K between the KS blocks of this block's
// thread-block cluster (KS 2: FusedPlan.tma 3), this one, of rank r, taking the r-th of KS slices of
// the k-tiles and, in the end, rows m0 + 32 r .. m0 + 32 r + 31 of the tile. A (M, K) holds TF32 values:
// the batch and the hidden activations are stored rounded, and so is the copy of each hidden layer's
// gradient that the dinp tiles read (dacts_r); W holds the FP32 weights, rounded as they enter the
// products. Operands through the tensor maps tmA (boxes of 32 k x R rows) and tmW (forward: 32 k x 64
// rows; DINP: 32 k rows x 32 columns, two a stage), 128-byte swizzle, zeros outside the matrix.
// Why: the mma.sync tiles (fd_tile) read their operands through cp.async and are bound by those reads;
// the TMA brings the same boxes with no thread's help (dev/cuda/phase_tma.cu times both). wgmma
// reads A's box from shared memory as it lies (K-major), and W's products from registers: there
// wgmma takes any layout (the dinp's W is N-major, which wgmma cannot read from shared memory in TF32)
// and the values rounded to TF32 first (wgmma itself would truncate FP32 ones), so W needs no TF32
// copy for the TMA to read (7.4 MB of stores a step in the wide model) and no pass over the stage to
// round it. Why the split: these phases are bound by the bytes the SMs take
// in from L2, A's rows re-read by every column of tiles and W's by every row; a block with a 64-row
// tile over half of K takes in a third fewer bytes for the same products as one with a 32-row tile over
// all of it, and the two halves' sums meet through distributed shared memory, 8 KB a block.
// Who does what: thread 128 (warp 4) is the copier: for each k-tile it waits until its stage is free,
// arms the stage's full barrier with its bytes and asks the TMA for the boxes. Warpgroup 0 (threads
// 0-127) runs the products as Wᵀ's tile times A's, wgmma.m64nRk8 (the tile's columns are wgmma's M,
// the rows of the batch its N): for each k-tile, once the stage has landed, each warp loads its 16
// columns x 32 k of W (ldmatrix from the forward's K-major box, single floats from the dinp's N-major
// ones), rounds them (round_tf32's rounding) and hands them to wgmma with A's box; the stage is free
// once each of the four warps has arrived on its empty barrier, after its wgmma.wait_group says its own
// products that read the stage are done (wait_group speaks for its warp alone). Then the sums go
// through shared memory (transposed to rows of the batch; split: the
// partial sums of all R rows over the stages, a cluster barrier, then this block's 32 rows added up
// from every block of the cluster in the order of the ranks, the same bits on every run) to
// fd_epi_tile, by all the block's threads (the dinp epilogue also stores Cr, its output rounded, where
// the next dinp reads it). g counts the k-tiles this block has taken through the stages since the
// launch: k-tile g uses stage g % ST in that barrier's (g / ST)-th phase, whose parity each wait
// names; the copier and the products keep the same count.
// A stage (from the 1024-aligned base): W's 64 columns x 32 k (forward: one box of 64 rows; DINP: two
// boxes of 32 k rows x 32 columns), then A's box; the sums after the stages (split: in them).
template <bool DINP, int KS>
__device__ __forceinline__ void fd_tma_tile(float *smem, unsigned &g, const CUtensorMap *tmA, const CUtensorMap *tmW,
                                            float *C, float *Cr, int M, int N, int K, int m0, int n0,
                                            const MatmulFastEpi &epi, const FdHeadPart &hp) {
#if defined(MF_WGMMA) && defined(__CUDA_ARCH__)
    constexpr int ST = fd_tma_st(KS), STAGE = fd_tma_stage(KS), R = KS * FD_TMA_BB;   // R: rows of A's box
    static_assert(FD_TMA_BB == 32 && FD_TMA_BO == 64 && (KS == 1 || KS == 2),
                  "a stage holds W's 64 columns x 32 k (8192 bytes), then A's 32 or 64 rows x 32 k");
    const unsigned sraw = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned sbase = sraw + ((1024u - (sraw & 1023u)) & 1023u);   // swizzle atoms 1024-byte aligned
    const unsigned bars = (unsigned)__cvta_generic_to_shared(fd_tma_bar);
    unsigned char *stages = reinterpret_cast<unsigned char *>(smem) + (sbase - sraw);
    // the sums, [row of the batch][output]: KS 1, after the stages; split, this block's partial sums of
    // all R rows over the stages (free once the products are done), its reduced 32 rows after them
    float *out = reinterpret_cast<float *>(stages + (KS == 1 ? ST * STAGE : R * FD_TMA_BO * 4));
    float *part = KS == 1 ? out : reinterpret_cast<float *>(stages);
    const unsigned rank = KS == 1 ? 0 : mf_cluster_rank();
    const int tid = threadIdx.x, ntk = CEIL_DIV(K, 32), t0 = (int)rank * ntk / KS;
    const int nt = ((int)rank + 1) * ntk / KS - t0;   // this block's k-tiles: t0 .. t0 + nt - 1 (nt may be 0)
    constexpr int W_OFF = fd_head_w_off(fd_w_bk(MF_TF32_ROUND));   // (a TF32 kernel's tile)
    if (hp.part) fd_head_w_load<FD_TMA_BO>(hp, smem + W_OFF, N, n0);   // (waited for before the epilogue)
    float acc[16 * KS];   // the products' sums (warpgroup 0)
#pragma unroll
    for (int i = 0; i < 16 * KS; i++) acc[i] = 0.0f;
    mf_fence_proxy_async();   // the jobs before wrote this shared memory through the generic proxy: their
    __syncthreads();          // accesses ordered before the TMA's writes
    if (tid == 128) {
        mf_fence_proxy_async_global();   // (the operands: other blocks' stores before the grid barrier)
        for (int t = 0; t < nt; t++) {
            const unsigned G = g + t, s = G % ST, k = 32 * (t0 + t);
            const unsigned full = bars + 8 * s, sa = sbase + s * STAGE;
            if (G >= ST) mf_mbar_wait(bars + 8 * (FD_TMA_ST_MAX + s), ((G / ST) + 1) & 1);   // freed
            mf_mbar_expect_tx(full, STAGE);
            if constexpr (DINP) {
                mf_tma_load(sa, tmW, n0, k, full);
                mf_tma_load(sa + 4096, tmW, n0 + 32, k, full);
            } else {
                mf_tma_load(sa, tmW, k, n0, full);
            }
            mf_tma_load(sa + 8192, tmA, k, m0, full);
        }
    } else if (tid < 128) {
        // forward: this lane's row of W's box for ldmatrix (rows 16 w + 0..15 of warp w, the k chunk after
        // for lanes 16-31). DINP (below, o): where its elements lie, (column c, k) = (n, q), (n + 8, q),
        // (n, q + 4) and (n + 8, q + 4) of each k step, n = 16 w + gq: in box c / 32 at row k, 16-byte chunk
        // (c % 32) / 4 ^ (k % 8) (the swizzle). o is the first's address at k step 0; the others' differ
        // from it in the chunk (n's and n + 8's chunks, (n % 32) / 4 in {0, 1, 4, 5} and that + 2, differ
        // in bit 1; q's and q + 4's in bit 2) and by 4 rows for q + 4; each k step adds 8 rows, 1024
        // bytes, and leaves k % 8 as it was (the stage is 1024-byte aligned: the XORs touch the offset alone).
        const int r = 16 * (tid / 32) + (tid & 7) + ((tid >> 3) & 1) * 8, hi = (tid >> 4) & 1;
        // W's fragments of the four k steps, rounded to TF32 (round_tf32). wgmma reads its A registers
        // while it runs, until a wait_group says it is done, so a k-tile's fragments are loaded only once
        // the wait says the last k-tile's products are done, and they are pinned (fd_pin_frag) there,
        // which keeps the compiler from giving their registers to anything else while the products run.
        // (Loads issued after a wait that leaves the last products running would overwrite registers
        // those still read: wrong sums, which show under compute-sanitizer's memcheck, as it slows the
        // warps. Loads in flight beside the products, in two sets or in smaller groups, are slower.)
        uint32_t af[4][4];
#pragma unroll
        for (int ks = 0; ks < 4; ks++) fd_pin_frag(af[ks], true);
        for (int t = 0; t < nt; t++) {
            const unsigned G = g + t, s = G % ST;
            mf_mbar_wait(bars + 8 * s, (G / ST) & 1);   // the stage's bytes have landed
            // this warp's products of k-tile t - 1 are done: its fragments are free, and so is its stage
            // once every warp has arrived
            mf_wg_wait<0>();
#pragma unroll
            for (int ks = 0; ks < 4; ks++) fd_pin_frag(af[ks], false);
            if (t >= 1 && (tid & 31) == 0) mf_mbar_arrive(bars + 8 * (FD_TMA_ST_MAX + (G - 1) % ST));
            const float *Ws = reinterpret_cast<const float *>(stages + s * STAGE);
            const unsigned sw = sbase + s * STAGE, sx = sw + 8192;
            unsigned o = 0;
            if constexpr (DINP) {   // (made here at each k-tile from tid: kept, it cost the kernel registers it spilled)
                unsigned u = tid;
                asm volatile("" : "+r"(u));
                const unsigned c0 = 16 * (u / 32) + (u % 32) / 4, q = u % 4;
                o = sw + 4u * ((c0 / 32) * 1024 + q * 32 + ((((c0 % 32) >> 2) ^ q) << 2) + (c0 & 3));
            }
#pragma unroll
            for (int ks = 0; ks < 4; ks++) {
                if constexpr (DINP) {
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        af[ks][e] = mf_to_tf32(mf_lds_f32((o ^ (32u * (e & 1) + 64u * (e >> 1))) + 512u * (e >> 1) + 1024u * ks));
                } else {
                    mf_ldsm_x4(af[ks], Ws + r * 32 + (((2 * ks + hi) ^ (r & 7)) * 4));
#pragma unroll
                    for (int e = 0; e < 4; e++) af[ks][e] = mf_to_tf32(__uint_as_float(af[ks][e]));
                }
            }
            mf_wg_fence();
#pragma unroll
            for (int ks = 0; ks < 4; ks++) {
                const uint64_t db = mf_wgb16_desc(sx + ks * 32, false);
                if constexpr (KS == 1) mf_wgmma_tf32_n32_rs(acc, af[ks], db);
                else mf_wgmma_tf32_n64_rs(acc, af[ks], db);
            }
            mf_wg_commit();
        }
        mf_wg_wait<0>();
#pragma unroll
        for (int ks = 0; ks < 4; ks++) fd_pin_frag(af[ks], false);
        if (nt > 0 && (tid & 31) == 0) mf_mbar_arrive(bars + 8 * (FD_TMA_ST_MAX + (g + nt - 1) % ST));
        if constexpr (KS == 1) mf_wg_n32_store_t(out, FD_TMA_BO, acc, tid);   // (after the stages)
    }
    g += nt;
    mf_cp_wait<0>();   // (W_{L-1}'s columns: fd_head_w_load)
    if constexpr (KS > 1) {
        // the tile's KS partial sums, one a block of the cluster, stored over the stages once every warp's
        // products are done with them (a warp's wait_group speaks for its own products alone); then this
        // block adds up rows 32 rank .. 32 rank + 31 of them from every block's shared memory, in the order
        // of the ranks (the same bits on every run), into out. (The cluster barrier's .aligned form wants
        // whole warps: the copier's warp came apart above, the __syncthreads brings it together.)
        __syncthreads();
        if (tid < 128) {
#pragma unroll
            for (int j = 0; j < KS; j++) mf_wg_n32_store_t(part + j * FD_TMA_BB * FD_TMA_BO, FD_TMA_BO, acc + 16 * j, tid);
        }
        __syncthreads();
        mf_cluster_arrive();
        mf_cluster_wait();   // every block's partial sums are in its shared memory
        const unsigned pa = (unsigned)__cvta_generic_to_shared(part) + rank * (FD_TMA_BB * FD_TMA_BO * 4);
        if (m0 + (int)rank * FD_TMA_BB < M) {
#pragma unroll
            for (int i = tid; i < FD_TMA_BB * FD_TMA_BO / 4; i += FD_THREADS) {
                float4 v[KS];
#pragma unroll
                for (int z = 0; z < KS; z++) v[z] = mf_lds_cluster_f4(pa + 16u * i, z);
#pragma unroll
                for (int z = 1; z < KS; z++) {
                    v[0].x += v[z].x;
                    v[0].y += v[z].y;
                    v[0].z += v[z].z;
                    v[0].w += v[z].w;
                }
                reinterpret_cast<float4 *>(out)[i] = v[0];
            }
        }
        mf_cluster_arrive();   // this block is done with the others' shared memory (waited for below)
    }
    __syncthreads();
    fd_epi_tile<FD_TMA_BB, FD_TMA_BO>(reinterpret_cast<float4 *>(out), C, M, N, m0 + (int)rank * FD_TMA_BB, n0, epi,
                                      hp, smem + W_OFF, Cr);
    __syncthreads();   // the shared memory is the next job's (split: once the others are done with it too)
    if constexpr (KS > 1) mf_cluster_wait();
#endif
}

#endif  // MLP_FAST_DEEP_TMA_CUH
