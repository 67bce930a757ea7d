#!/usr/bin/env python3
"""
mlpcu_init.py -- mlp.cu's initial weights and epoch order in numpy, bit for bit, so that a
PyTorch run (dev/bench_pytorch.py --init mlpcu) does the same computation as train_mlp.

    from mlpcu_init import initial_params, EpochOrder
    params = initial_params([784, 128, 10], seed=1337)   # [(W0, b0), (W1, b1)], float32
    order = EpochOrder(1337)
    perm = order.next_permutation(60000)                  # epoch 1's order; call again for epoch 2
    python3 dev/mlpcu_init.py --self-test                 # checks against values from the C code

The C side is common/rng.h, used by train_mlp_cpu.c and train_mlp.cu:
- Initial weights. The flat parameter buffer (run/args.h param_layout: per layer l, W_l
  as (OUT, IN) row-major like nn.Linear's weight, then b_l (OUT)) has element i =
  uniform_weight(philox_u32(seed, i), bound_l), bound_l = 1.0f / sqrtf((float)IN_l), for
  weights and biases alike (nn.Linear's default range). philox_u32 is Philox4x32-10 with
  counter (0, 0, lo(i), hi(i)) and key (lo(seed), hi(seed)): the first 32 bits of cuRAND's
  curand_init(seed, i, 0) + curand(), which is what the GPU draws.
- Epoch order. One xoshiro256** generator, rng_seed(seed, stream 1) (splitmix64 expands
  seed ^ (0xD1B54A32D192ED03 * 2) into the state), kept across epochs; each epoch is
  rng_permutation: Fisher-Yates from the top, j = rng_below(i + 1) by Lemire's method.
  Steps take rows perm[k*B : (k+1)*B], ceil(N/B) of them, the last one smaller.
"""

import hashlib
import sys
import time

import numpy as np

# -----------------------------------------------------------------------------
# Philox4x32-10 (common/rng.h philox_u32), vectorised over the subsequence (element index)

MASK32 = 0xFFFFFFFF
PHILOX_M0, PHILOX_M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85  # the key's bump per round


def check_seed(seed):
    seed = int(seed)
    if not 0 <= seed < 2**64:
        raise ValueError("seed %d: mlp.cu's seeds are unsigned 64-bit (0 .. 2^64-1)" % seed)
    return seed


def philox_u32(seed, index):
    """index: int or array of element indices (< 2^64) -> uint32 array, philox_u32(seed, i) for each.
    Every 32-bit word is held in a uint64 so the 32x32-bit products are exact."""
    seed = check_seed(seed)
    index = np.asarray(index, dtype=np.uint64)
    c0 = np.zeros(index.shape, dtype=np.uint64)
    c1 = np.zeros(index.shape, dtype=np.uint64)
    c2 = index & np.uint64(MASK32)
    c3 = index >> np.uint64(32)
    k0, k1 = seed & MASK32, seed >> 32
    shift, mask = np.uint64(32), np.uint64(MASK32)
    for round in range(10):
        if round > 0:
            k0, k1 = (k0 + PHILOX_W0) & MASK32, (k1 + PHILOX_W1) & MASK32
        p0, p1 = PHILOX_M0 * c0, PHILOX_M1 * c2
        c0, c1, c2, c3 = ((p1 >> shift) ^ c1 ^ np.uint64(k0), p1 & mask,
                          (p0 >> shift) ^ c3 ^ np.uint64(k1), p0 & mask)
    return c0.astype(np.uint32)


def uniform_weight(bits, bound):
    """uint32 bits -> float32 in [-bound, bound): u = top 24 bits / 2^24 and 2u - 1 are exact,
    the product with bound is the one rounding, as in C."""
    u = (np.asarray(bits, dtype=np.uint32) >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    return (np.float32(2.0) * u - np.float32(1.0)) * np.float32(bound)


def layer_bound(fan_in):
    """1.0f / sqrtf((float)IN): both operations in float32, correctly rounded like C's."""
    return np.float32(1.0) / np.sqrt(np.float32(fan_in))

# -----------------------------------------------------------------------------
# the initial parameters


def flat_params(sizes, seed):
    """The flat float32 parameter buffer of train_mlp(_cpu) -m sizes -s seed, param_layout order."""
    seed = check_seed(seed)
    chunks, offset = [], 0
    for IN, OUT in zip(sizes[:-1], sizes[1:]):
        count = OUT * IN + OUT  # W then b, contiguous, one bound for both
        idx = np.arange(offset, offset + count, dtype=np.uint64)
        chunks.append(uniform_weight(philox_u32(seed, idx), layer_bound(IN)))
        offset += count
    return np.concatenate(chunks)


def initial_params(sizes, seed):
    """[(W, b) per layer]: W (OUT, IN) and b (OUT,) float32, nn.Linear's layout, copies of mlp.cu's."""
    flat = flat_params(sizes, seed)
    out, offset = [], 0
    for IN, OUT in zip(sizes[:-1], sizes[1:]):
        W = flat[offset:offset + OUT * IN].reshape(OUT, IN).copy()
        offset += OUT * IN
        b = flat[offset:offset + OUT].copy()
        offset += OUT
        out.append((W, b))
    return out

# -----------------------------------------------------------------------------
# xoshiro256** and the epoch permutations (common/rng.h rng_seed, rng_u64, rng_below, rng_permutation)

MASK64 = (1 << 64) - 1


def splitmix64(x):
    """(new x, output), as splitmix64(&x)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return x, z ^ (z >> 31)


class Xoshiro256:
    """xoshiro256**, seeded like rng_seed(r, seed, stream)."""

    def __init__(self, seed, stream):
        x = (check_seed(seed) ^ (0xD1B54A32D192ED03 * (stream + 1))) & MASK64
        self.s = []
        for _ in range(4):
            x, z = splitmix64(x)
            self.s.append(z)

    def next_u64(self):
        s0, s1, s2, s3 = self.s
        r = ((s1 * 5) & MASK64)
        result = ((((r << 7) | (r >> 57)) & MASK64) * 9) & MASK64
        t = (s1 << 17) & MASK64
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = ((s3 << 45) | (s3 >> 19)) & MASK64
        self.s = [s0, s1, s2, s3]
        return result

    def below(self, n):
        """uniform in [0, n), n < 2^32, Lemire's method on the top 32 bits, as rng_below."""
        m = (self.next_u64() >> 32) * n
        if (m & MASK32) < n:
            threshold = ((1 << 32) - n) % n  # (uint32_t)(-n) % n
            while (m & MASK32) < threshold:
                m = (self.next_u64() >> 32) * n
        return m >> 32


class EpochOrder:
    """The training order of train_mlp(_cpu) -s seed: next_permutation(N) is the next epoch's."""

    def __init__(self, seed):
        self.rng = Xoshiro256(seed, 1)  # stream 1 = shuffling

    def next_permutation(self, n):
        """int64 array, a permutation of 0..n-1: Fisher-Yates as rng_permutation."""
        perm = list(range(n))
        below = self.rng.below
        for i in range(n - 1, 0, -1):
            j = below(i + 1)
            perm[i], perm[j] = perm[j], perm[i]
        return np.array(perm, dtype=np.int64)

# -----------------------------------------------------------------------------
# self-test: values printed by a C program that includes common/rng.h and run/args.h


# philox_u32(seed, i); (0, 0) is also Random123's known answer for Philox4x32-10, 0x6627e8d5
KNOWN_PHILOX = [
    (0, 0, 1713891541), (0, 100352, 1772050447), (0, 4886718345, 3889381410),
    (1, 100351, 1943197415), (1, 4294967296, 310111809), (1337, 3, 1783053241),
    (1337, 4294967295, 2911946306), (42, 2, 1711173798), (42, 1000000, 2171408095),
    (2**64 - 1, 1, 2806134509), (2**64 - 1, 109385, 243413673),
    (0x123456789ABCDEF, 0, 3092259374), (0x123456789ABCDEF, 4886718345, 3763750580),
]
# uniform_weight(bits, bound): (bits, float bits of bound, float bits of the weight)
KNOWN_UNIFORM = [
    (0x00000000, 0x3D124925, 0xBD124925), (0x00000100, 0x3D124925, 0xBD124924),
    (0x00000100, 0x3F13CD3A, 0xBF13CD39), (0x80000000, 0x3D000000, 0x00000000),
    (0xFFFFFFFF, 0x3D000000, 0x3CFFFFFE), (0xFFFFFFFF, 0x3F13CD3A, 0x3F13CD39),
    (0x12345678, 0x3D124925, 0xBCFAF618), (0x12345678, 0x3F13CD3A, 0xBEFD8FDE),
]
# 1.0f / sqrtf(IN) as float bits
KNOWN_BOUNDS = [(784, 0x3D124925), (128, 0x3DB504F3), (1024, 0x3D000000), (3, 0x3F13CD3A)]
# sha256 of the flat float32 buffer (little-endian), and a few elements' float bits
KNOWN_PARAMS = [
    ([784, 128, 10], 1337, "5165a83346bbee03663b289746bff38b8ab1bc3f828baf9e4484078f8b415ca8"),
    ([784, 1024, 1024, 10], 1337, "2f6a57efbfe7845d0811ff991b1914984c3e00db73221d91c5bb10c99ccb4f84"),
    ([5, 3, 7, 2], 2**64 - 1, "beb948f67a76a97c524fe90120497679183facbe5e39f7ef31092d9b35149c26"),
]
KNOWN_SMALL_ELEMENTS = [(0, 0x3CCF4D27), (1, 0x3BF54478), (100351, 0xBCBEDAEC), (100352, 0xBD0F4738),
                        (100480, 0xBD097F2E), (101760, 0xBD1D4B09), (101769, 0x3D0B8722)]
# EpochOrder(1337): sha256 of each of the first five permutations of 60000 as int32, and the
# first entries of the first two
KNOWN_PERMS_1337 = [
    "ec6470ed6918ca20fe9022c22fc9cc778ef189c336b525cd0019cd7686cd94f1",
    "d2c0eaf3e7160dc46a53cc454bd2c08315dfeeaf49476910b48c87d3e3912cbc",
    "e8c0146403cb6680832f30e6a5db77f3ec6926a2c276318f3ec9b0277afcbb71",
    "ff6ae68651c36bb3ba08e6477cfbadc1ae85a98bc90bfdcd72f21c0b763fe3e3",
    "6b1910c9091322c39068e66aeacf231fe20c2094dcac7759d18b672505e409e6",
]
KNOWN_PERM_HEADS_1337 = [
    [18046, 38783, 41610, 14969, 21459, 10504, 13752, 22948, 58162, 53580,
     20080, 48883, 7993, 42821, 33509, 14574, 22424, 31393, 41745, 53396],
    [48978, 7457, 47792, 46324, 17420, 15635, 33185, 46922, 40576, 54269,
     33804, 6170, 9909, 6970, 52369, 59447, 13497, 26618, 989, 16930],
]
KNOWN_PERM_SEED0_HEAD = [31841, 59282, 27130, 50601, 41990, 35688, 29279, 49532, 27230, 53346]
KNOWN_PERM10_SEED5 = [4, 1, 0, 6, 3, 8, 9, 5, 2, 7]
KNOWN_PERM_MAX_1000 = "3ef6e66a6730e2b1c8e20d9b1da603e9cab0aa514b327aec390a2ae8fc0b5295"


def f32_bits(x):
    return int(np.float32(x).view(np.uint32))


def sha256_of(a, dtype):
    return hashlib.sha256(np.ascontiguousarray(a, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()).hexdigest()


def self_test():
    failures, checks = [], 0

    def check(ok, what):
        nonlocal checks
        checks += 1
        if not ok:
            failures.append(what)

    t0 = time.perf_counter()
    for seed, i, want in KNOWN_PHILOX:
        got = int(philox_u32(seed, i))
        check(got == want, "philox_u32(%d, %d) = %d, C gives %d" % (seed, i, got, want))
    got = philox_u32(0, np.array([i for _, i, _ in KNOWN_PHILOX[:3]], dtype=np.uint64))
    check(list(map(int, got)) == [w for _, _, w in KNOWN_PHILOX[:3]], "philox_u32 on an array of indices")
    for IN, want in KNOWN_BOUNDS:
        got = f32_bits(layer_bound(IN))
        check(got == want, "bound for IN=%d: %08x, C gives %08x" % (IN, got, want))
    for bits, bound, want in KNOWN_UNIFORM:
        got = f32_bits(uniform_weight(bits, np.uint32(bound).view(np.float32)))
        check(got == want, "uniform_weight(%08x, %08x) = %08x, C gives %08x" % (bits, bound, got, want))
    for sizes, seed, want in KNOWN_PARAMS:
        got = sha256_of(flat_params(sizes, seed), np.float32)
        check(got == want, "initial params %s seed %d: sha256 %s, C gives %s" % (sizes, seed, got[:16], want[:16]))
    flat = flat_params([784, 128, 10], 1337)
    for i, want in KNOWN_SMALL_ELEMENTS:
        check(f32_bits(flat[i]) == want, "params[%d] = %08x, C gives %08x" % (i, f32_bits(flat[i]), want))
    (W0, b0), (W1, b1) = initial_params([784, 128, 10], 1337)
    check(W0.shape == (128, 784) and b0.shape == (128,) and W1.shape == (10, 128) and b1.shape == (10,)
          and W0.dtype == np.float32, "initial_params shapes or dtype")
    check(f32_bits(W0[127, 783]) == 0xBCBEDAEC and f32_bits(b0[0]) == 0xBD0F4738
          and f32_bits(W1[0, 0]) == 0xBD097F2E and f32_bits(b1[9]) == 0x3D0B8722,
          "initial_params: W and b not where param_layout puts them")
    t1 = time.perf_counter()
    order = EpochOrder(1337)
    for epoch, want in enumerate(KNOWN_PERMS_1337):
        perm = order.next_permutation(60000)
        if epoch < len(KNOWN_PERM_HEADS_1337):
            check(perm[:20].tolist() == KNOWN_PERM_HEADS_1337[epoch],
                  "seed 1337 epoch %d starts %s, C gives %s" % (epoch + 1, perm[:5].tolist(),
                                                               KNOWN_PERM_HEADS_1337[epoch][:5]))
        got = sha256_of(perm, np.int32)
        check(got == want, "seed 1337 epoch %d: sha256 %s, C gives %s" % (epoch + 1, got[:16], want[:16]))
    t2 = time.perf_counter()
    check(EpochOrder(0).next_permutation(60000)[:10].tolist() == KNOWN_PERM_SEED0_HEAD, "seed 0 epoch 1")
    check(EpochOrder(5).next_permutation(10).tolist() == KNOWN_PERM10_SEED5, "seed 5, n = 10")
    check(sha256_of(EpochOrder(2**64 - 1).next_permutation(1000), np.int32) == KNOWN_PERM_MAX_1000,
          "seed 2^64-1, n = 1000")
    for what in failures:
        print("FAIL %s" % what)
    print("mlpcu_init self-test: %s, %d/%d checks match common/rng.h (params %.2f s, "
          "5 permutations of 60000 %.2f s)" % ("FAILED" if failures else "OK", checks - len(failures), checks,
                                                t1 - t0, t2 - t1))
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    print(__doc__.strip().split("\n\n")[1])
    sys.exit(2)
