/*
The host's seeded random number generator: xoshiro256** (Blackman & Vigna), seeded
through splitmix64 as its authors recommend. Small, fast, and the same sequence on every
platform and compiler, so a seed names one run.

Used for every epoch's shuffle: both trainers draw the epoch permutation here, so the CPU
and GPU trainers see the same batches for the same -s.

The initial weights come from Philox4x32-10 (Salmon et al., "Parallel random numbers: as
easy as 1, 2, 3", SC 2011), the counter-based generator that cuRAND's
curandStatePhilox4_32_10_t implements. Being counter-based, the number for element i is a
pure function of (seed, i): the GPU draws all of them at once with cuRAND (one thread per
element, curand_init(seed, i, 0) then curand()), and philox_u32() below computes the very
same 32 bits on the CPU. So the CPU and GPU trainers start from identical weights, bit for
bit, and test_mlp checks that they do.
*/
#ifndef MLP_RNG_H
#define MLP_RNG_H

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint64_t s[4];
} Rng;

static inline uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// stream lets one seed give independent generators (e.g. 0 = init, 1 = shuffling)
static inline void rng_seed(Rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (0xD1B54A32D192ED03ull * (stream + 1));
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_u64(Rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

// uniform in [0, 1) with 24 random bits: exactly representable as a float
static inline float rng_uniform(Rng *r) { return (float)(rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

// uniform integer in [0, n), without modulo bias (Lemire's method)
static inline uint32_t rng_below(Rng *r, uint32_t n) {
    uint64_t m = (uint64_t)(uint32_t)(rng_u64(r) >> 32) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)(uint32_t)(rng_u64(r) >> 32) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

// Fisher-Yates: perm becomes a uniformly random permutation of 0..n-1
static inline void rng_permutation(Rng *r, int *perm, int n) {
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(r, (uint32_t)(i + 1));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

// ----------------------------------------------------------------------------
// Philox4x32-10, as in cuRAND (curand_philox4x32_x.h)

static inline void philox_round(uint32_t ctr[4], const uint32_t key[2]) {
    uint64_t p0 = (uint64_t)0xD2511F53u * ctr[0], p1 = (uint64_t)0xCD9E8D57u * ctr[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0, hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t out[4] = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    memcpy(ctr, out, sizeof(out));
}

// The first 32-bit number of cuRAND's Philox state after curand_init(seed, subsequence, 0):
// the counter starts at (0, 0, subsequence) and the key is the seed.
static inline uint32_t philox_u32(uint64_t seed, uint64_t subsequence) {
    uint32_t ctr[4] = {0, 0, (uint32_t)subsequence, (uint32_t)(subsequence >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            key[0] += 0x9E3779B9u;
            key[1] += 0xBB67AE85u;
        }
        philox_round(ctr, key);
    }
    return ctr[0];
}

// A weight in [-bound, bound) from 32 random bits. The top 24 bits make u in [0, 1) exactly,
// 2u - 1 is exact too, so the only rounding is the final product: identical on CPU and GPU.
#ifdef __CUDACC__
__host__ __device__
#endif
static inline float uniform_weight(uint32_t bits, float bound) {
    float u = (float)(bits >> 8) * (1.0f / 16777216.0f);
    return (2.0f * u - 1.0f) * bound;
}

#endif // MLP_RNG_H
