/*
The host's seeded random number generator: xoshiro256** (Blackman & Vigna), seeded
through splitmix64 as its authors recommend. Small, fast, and the same sequence on every
platform and compiler, so a seed names one run.

Used for: the CPU trainer's weight init, and every epoch's shuffle (both trainers draw the
epoch permutation here, so the CPU and GPU trainers see the same batches for the same -s).
The GPU trainer draws its initial weights on the device with cuRAND instead.
*/
#ifndef MLP_RNG_H
#define MLP_RNG_H

#include <math.h>
#include <stdint.h>

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

#endif // MLP_RNG_H
