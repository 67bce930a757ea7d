/*
kernels/fast/fused/deep_tiles.cuh: the deep fused step's tiles of a matrix product on mma.sync
(fd_tile: the forward, dinp and weight-gradient products of every precision), their epilogues through
shared memory (the bias and activation, act', or the SGD step on float4s), and the last hidden
layer's share of the head's logits (fd_head_part), which rides on its forward tiles' epilogue.
*/
#ifndef MLP_FAST_DEEP_TILES_CUH
#define MLP_FAST_DEEP_TILES_CUH

#include "../matmul/matmul.cuh"  // mf_epi_load, mf_epi_apply, mf_sgd_step_store4, mf_mma_sums, mf_mma_stage
#include "../ops/round.cuh"      // mf_round_tf32
#include "deep_config.cuh"       // the tiles' sizes, FusedDeepArgs

// One tile of a product, C (M, N) = epi(A . B), the layouts of MfProduct (A_KC, B_KC), at (m0, n0),
// all of K: the sums (mf_mma_sums), then through shared memory to the epilogue (fd_epi_tile). The SGD
// epilogue (a weight gradient) takes W and its momentum as float4s too, and stores the gradient itself
// (and W's TF32 copy, which the caller's other paths read; this kernel's TMA tiles round W as they
// read it) only when keep: the last step of a run, whose gradient the caller may read; the steps
// before it leave that traffic out.
#ifdef MF_PROF_LOOP
// dev/fused_profile.cu's tile profile only: for each block and kind of tile (0 forward and dinp, 1 weight
// gradient), the cycles of thread 0 in: the tile, its mainloop, the mainloop's waits, the wait for its
// first k step; and the tiles
static __device__ long long fd_prof_tile[1024][2][5];
#define FD_PROF_TILE_START                                      \
    const long long pt0 = clock64();                            \
    if (threadIdx.x == 0) mf_prof_wait[blockIdx.x] = mf_prof_first[blockIdx.x] = 0;
#define FD_PROF_TILE_LOOP const long long pt1 = clock64();
#define FD_PROF_TILE_END(kind)                                                       \
    if (threadIdx.x == 0) {                                                          \
        long long *q = fd_prof_tile[blockIdx.x][kind];                               \
        q[0] += clock64() - pt0;                                                     \
        q[1] += pt1 - pt0;                                                           \
        q[2] += mf_prof_wait[blockIdx.x];                                            \
        q[3] += mf_prof_first[blockIdx.x];                                           \
        q[4]++;                                                                      \
    }
#else
#define FD_PROF_TILE_START
#define FD_PROF_TILE_LOOP
#define FD_PROF_TILE_END(kind)
#endif

// The head's logits begin in the last hidden layer's forward tiles: each tile, once it has its outputs
// h (B x N, the layer's width N), adds up its share of z = h · W_{L-1}ᵀ, its BN columns of h times
// W_{L-1}'s, for its rows and every class, into part[tile column][row][class]; the head's phase then adds
// the FD_HEAD_TILES shares of each logit in order (fd_head_job). Why: the head's phase would otherwise
// read h and W_{L-1} again and add up 1024-long sums across each block before its softmax could start;
// here the products ride on the epilogue, with h already in shared memory.
typedef struct {
    const float *w;   // W_{L-1} (C, N)
    float *part;      // (FD_HEAD_TILES(N), B, C); NULL: not the last hidden layer's tile
    int B, C;
} FdHeadPart;
#define FD_HEAD_TILES(width) CEIL_DIV(width, FD_FB_BN)

// W_{L-1}'s columns n0 .. n0 + BN - 1 for every class into shared memory at ws, [class][BN + 4] (rows
// padded against bank conflicts; zeros past N, and a class of zeros after an odd C), as one group of
// asynchronous copies: a tile issues them at its start, and they land while it runs
template <int BN>
__device__ __forceinline__ void fd_head_w_load(const FdHeadPart &hp, float *ws, int N, int n0) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(ws);
    for (int t = threadIdx.x; t < (hp.C + 1) / 2 * 2 * (BN / 4); t += FD_THREADS) {
        const int c = t / (BN / 4), k4 = t % (BN / 4), n = n0 + 4 * k4;
        const bool ok = c < hp.C && n < N;
        mf_cp16(sa + 4u * (unsigned)(c * (BN + 4) + 4 * k4), ok ? hp.w + (size_t)c * N + n : hp.w, ok);
    }
    mf_cp_commit();
}

// The tile's share of the logits: h's rows m0 .. (their outputs n0 .. n0 + BN - 1, in shared memory at hs,
// rows BN apart, zeros past N) times ws's columns (fd_head_w_load), a thread two rows x two classes
// (each h and W value it loads used twice), the BN products of each logit added in order
template <int BM, int BN>
__device__ __forceinline__ void fd_head_part(const FdHeadPart &hp, const float *hs, const float *ws, int M, int m0,
                                             int tn) {
    static_assert(BM % 2 == 0, "rows in pairs");
    const int C = hp.C, CP = (C + 1) / 2;
    for (int t = threadIdx.x; t < BM / 2 * CP; t += FD_THREADS) {
        const int r = 2 * (t / CP), c = 2 * (t % CP);
        if (m0 + r >= M) break;
        const float4 *h0 = reinterpret_cast<const float4 *>(hs + r * BN), *h1 = h0 + BN / 4;
        const float4 *w0 = reinterpret_cast<const float4 *>(ws + c * (BN + 4)), *w1 = w0 + (BN + 4) / 4;
        float p00 = 0.0f, p01 = 0.0f, p10 = 0.0f, p11 = 0.0f;   // (row, class)
#pragma unroll 4
        for (int k = 0; k < BN / 4; k++) {
            const float4 a = h0[k], b = h1[k], u = w0[k], v = w1[k];
            p00 = fmaf(a.w, u.w, fmaf(a.z, u.z, fmaf(a.y, u.y, fmaf(a.x, u.x, p00))));
            p01 = fmaf(a.w, v.w, fmaf(a.z, v.z, fmaf(a.y, v.y, fmaf(a.x, v.x, p01))));
            p10 = fmaf(b.w, u.w, fmaf(b.z, u.z, fmaf(b.y, u.y, fmaf(b.x, u.x, p10))));
            p11 = fmaf(b.w, v.w, fmaf(b.z, v.z, fmaf(b.y, v.y, fmaf(b.x, v.x, p11))));
        }
        float *out = hp.part + ((size_t)tn * hp.B + m0 + r) * C + c;
        out[0] = p00;
        if (c + 1 < C) out[1] = p01;
        if (m0 + r + 1 < M) {
            out[C] = p10;
            if (c + 1 < C) out[C + 1] = p11;
        }
    }
}

// The forward or dinp epilogue (the bias and activation, or act') of a BM x BN tile of sums staged in
// shared memory (rows BN floats apart) into C (M, N) at (m0, n0): a float4 of outputs a thread at a
// time, the epilogue's loads for the four in flight together (N % 4 == 0). hp.part: the last hidden
// layer's forward tile (else NULL), whose outputs then go back into red (zeros outside the matrix) for
// its share of the logits (fd_head_part, with W's columns at ws: fd_head_w_load).
template <int BM, int BN>
__device__ __forceinline__ void fd_epi_tile(float4 *red, float *C, int M, int N, int m0, int n0,
                                            const MatmulFastEpi &epi, const FdHeadPart &hp, const float *ws,
                                            float *Cr = nullptr) {
#pragma unroll 2
    for (int e4 = threadIdx.x; e4 < BM * BN / 4; e4 += FD_THREADS) {
        const int m = m0 + e4 * 4 / BN, n = n0 + e4 * 4 % BN;
        if (m >= M || n >= N) {
            if (hp.part) red[e4] = make_float4(0.f, 0.f, 0.f, 0.f);
            continue;
        }
        MfEpiIn in[4];
#pragma unroll
        for (int j = 0; j < 4; j++) in[j] = mf_epi_load(m, n + j, N, epi);
        const float4 v = red[e4];
        float o[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; j++) o[j] = mf_epi_apply(o[j], in[j], m, n + j, N, epi);
        const float4 out = make_float4(o[0], o[1], o[2], o[3]);
        *reinterpret_cast<float4 *>(&C[(size_t)m * N + n]) = out;
        if (Cr) *reinterpret_cast<float4 *>(&Cr[(size_t)m * N + n]) = mf_round_tf32(out);
        if (hp.part) red[e4] = out;
    }
    if (hp.part) {
        __syncthreads();
        fd_head_part<BM, BN>(hp, reinterpret_cast<const float *>(red), ws, M, m0, n0 / BN);
    }
}

// The SGD step of W's float4 at i (mf_sgd_step_store4); keep (a run's last step) also the gradient into
// grad and the new W's TF32 copy, where there is one
__device__ __forceinline__ void fd_sgd_step4(const MatmulFastSgd &sg, float *grad, size_t i, float4 w, float4 mb,
                                             float4 g, bool keep) {
    mf_sgd_step_store4(sg, i, w, mb, g);
    if (keep) {
        *reinterpret_cast<float4 *>(grad + i) = g;
        if (sg.param_tf32) *reinterpret_cast<float4 *>(sg.param_tf32 + i) = mf_round_tf32(w);
    }
}

// The SGD epilogue's W and momentum through shared memory (FD_SGD_STAGE_TF32). A thread's float4s of
// the tile are e4 = threadIdx.x + e * FD_THREADS, e = 0 .. E4 - 1; a round stages R of them of W and R of
// the momentum, all of a round's copies in flight at once, where a float4 at a time from registers waits
// on each load in turn. Each thread reads back only what it copied (cp.async.wait_group makes a
// thread's own copies visible to it), so the rounds need no barrier. FREE: the floats of shared memory
// the tile leaves free after its staged sums; RMAX: FD_SGD_STAGE_TF32.
template <int BM, int BN, int FREE, int RMAX>
struct FdSgdStage {
    static constexpr int E4 = BM * BN / 4 / FD_THREADS;
    static constexpr int fit(int r) {   // the largest power of two up to r that divides E4 and fits
        return (E4 % r == 0 && 2 * r * 4 * FD_THREADS <= FREE) || r == 1 ? r : fit(r / 2);
    }
    static constexpr int R = fit(RMAX < E4 ? RMAX : E4);
    static_assert(2 * R * 4 * FD_THREADS <= FREE, "a round's copies fit past the staged sums");

    // round r0 / R's copies into st (R float4s of W, then R of the momentum, FD_THREADS apart)
    __device__ __forceinline__ static void issue(float *st, const MatmulFastSgd &sg, int M, int N, int m0, int n0,
                                                 int r0) {
#pragma unroll
        for (int b = 0; b < R; b++) {
            const int e4 = threadIdx.x + (r0 + b) * FD_THREADS, m = m0 + e4 * 4 / BN, n = n0 + e4 * 4 % BN;
            const bool ok = m < M && n < N;
            const size_t i = ok ? (size_t)m * N + n : 0;
            mf_cp16(st + 4 * (b * FD_THREADS + threadIdx.x), sg.param + i, ok);
            mf_cp16(st + 4 * ((R + b) * FD_THREADS + threadIdx.x), sg.mbuf + i, ok);
        }
        mf_cp_commit();
    }
};

template <int PREC, bool A_KC, bool B_KC, int BM, int BN, int BK, int WM, int WN, int ST>
__device__ __forceinline__ void fd_tile(float *smem, float *C, const float *A, const float *B, int M, int N, int K,
                                        int m0, int n0, const MatmulFastEpi &epi, bool keep,
                                        const FdHeadPart &hp = FdHeadPart{}) {
    FD_PROF_TILE_START
    constexpr int W_OFF = fd_head_w_off(fd_w_bk(PREC));
    if (hp.part) fd_head_w_load<BN>(hp, smem + W_OFF, N, n0);   // (landed by the mainloop's last wait)
    float acc[WM / 16][WN / 8][4];
    mf_mma_sums<BM, BN, BK, WM, WN, ST, A_KC, B_KC, PREC>(acc, smem, A, B, M, N, K, m0, n0, 0, K, true);
    FD_PROF_TILE_LOOP
    // The staged SGD epilogue (the TF32 kernel's weight-gradient tiles): its first round's copies go out
    // before the sums are staged, into the shared memory past them, which the mainloop has left free
    // (the head's W region at the end among it: only a forward tile uses that, within the tile).
    constexpr int SGD_FREE = fd_smem_floats(fd_w_bk(PREC)) - BM * BN;
    using Stage = FdSgdStage<BM, BN, SGD_FREE, (FD_SGD_STAGE_TF32 > 0 ? FD_SGD_STAGE_TF32 : 1)>;
    constexpr bool STAGED = FD_SGD_STAGE_TF32 > 0 && PREC == MF_TF32_ROUND && BM == FD_W_BM && BN == FD_W_BN;
    float *sgd_st = smem + BM * BN;
    if (STAGED && epi.kind == MF_EPI_SGD) Stage::issue(sgd_st, epi.sgd, M, N, m0, n0, 0);
    mf_mma_stage<BM, BN, WM, WN>(acc, smem);
    __syncthreads();
    float4 *red = reinterpret_cast<float4 *>(smem);
    if (STAGED && epi.kind == MF_EPI_SGD) {
        const MatmulFastSgd &sg = epi.sgd;
        const float4 *sw = reinterpret_cast<const float4 *>(sgd_st);
        for (int r0 = 0; r0 < Stage::E4; r0 += Stage::R) {
            if (r0 > 0) Stage::issue(sgd_st, sg, M, N, m0, n0, r0);   // (the round before has been used)
            mf_cp_wait<0>();
#pragma unroll
            for (int b = 0; b < Stage::R; b++) {
                const int e4 = threadIdx.x + (r0 + b) * FD_THREADS, m = m0 + e4 * 4 / BN, n = n0 + e4 * 4 % BN;
                if (m >= M || n >= N) continue;
                const size_t i = (size_t)m * N + n;
                fd_sgd_step4(sg, C, i, sw[b * FD_THREADS + threadIdx.x], sw[(Stage::R + b) * FD_THREADS + threadIdx.x],
                             red[e4], keep);
            }
        }
    } else if (epi.kind == MF_EPI_SGD) {
        const MatmulFastSgd &sg = epi.sgd;
#pragma unroll 2
        for (int e4 = threadIdx.x; e4 < BM * BN / 4; e4 += FD_THREADS) {
            const int m = m0 + e4 * 4 / BN, n = n0 + e4 * 4 % BN;
            if (m >= M || n >= N) continue;
            const size_t i = (size_t)m * N + n;
            fd_sgd_step4(sg, C, i, *reinterpret_cast<const float4 *>(sg.param + i),
                         *reinterpret_cast<const float4 *>(sg.mbuf + i), red[e4], keep);
        }
    } else {
        fd_epi_tile<BM, BN>(red, C, M, N, m0, n0, epi, hp, smem + W_OFF);
    }
    __syncthreads();   // the shared memory is the next job's
    FD_PROF_TILE_END(BM == FD_W_BM && BN == FD_W_BN ? 1 : 0)
}

#endif  // MLP_FAST_DEEP_TILES_CUH
