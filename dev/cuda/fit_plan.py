"""
fit_plan.py: fit the cost model of kernels/fast/matmul/planner.cuh (mf_cost: EFF, FILL, OCC per tile
configuration, the columns of kernels/fast/matmul/configs.cuh) to the GPU's timings of every plan of
every product of a spread of models, so that the planner picks the fastest tile x K split on each shape.

    dev/bin/tune_check --times fp32 SIZES B ... > times.csv      (then --times tf32, appended)
    python3 dev/cuda/fit_plan.py --times dev/results/plan_times_h200.csv

Prints, for each list, the fitted EFF, FILL and OCC of every row the data times, the picks' total time
against the fastest plans', and every product whose pick is more than 15 % behind its fastest plan.

    python3 dev/cuda/fit_plan.py --estimate dev/results/plan_times_h200.csv dev/results/sweep_h200_2026-11-29b.log

fits -P's expected time (kernels/fast/step/plan.cuh, plan_estimate_us) to the same timings and to the
copies' kernels' (tune_check --families, section 2 of that log): per kernel family, a wave of tiles
costs a fixed time plus its FLOPs at a rate, both in the SMs' clocks (--clock MHz, 1980: the H200's).
"""
import csv, collections, math, random, re, sys

SMS = 132

def cdiv(a, b): return (a + b - 1) // b

def cost(g, p, M, N, K, s):
    (bm, bn, bk), (eff, fill, occ) = g, p
    waves = cdiv(cdiv(M, bm) * cdiv(N, bn) * s, SMS * occ)
    return waves * bm * bn * bk * (cdiv(cdiv(K, s), bk) + fill) / eff

# The trainer's lists as kernels/fast/matmul/configs.cuh has them (every row, the FFMA and
# 3xTF32 rows of FP32 together, the mma.sync and wgmma rows of TF32 together), fitted to every plan of
# every product of a spread of models timed on the GPU (dev/bin/tune_check --times fp32|tf32; one CSV
# may hold both). FP32 and TF32 have no large-product rule in the planner (mf_large is BF16's): the
# cost model picks every tile.
# The score: each product's regret (the pick's time over the fastest's, as a log) plus the picks'
# total time over the fastest's (per 500 us), so that neither the many small products nor the few
# large ones decide alone. Three random searches from fixed seeds; prints the rows' new EFF, FILL, OCC.
def config_rows(path="kernels/fast/matmul/configs.cuh"):
    """{list: {id: (bm, bn, bk)}} of the lists' X rows (list 0: FP32 and 3xTF32, 1: mma.sync and wgmma)"""
    text = open(path).read()
    geo = {0: {}, 1: {}}
    for name, lst in (("MF_FP32_CONFIGS", 0), ("MF_3XTF32_CONFIGS", 0), ("MF_MMA_CONFIGS", 1), ("MF_WGMMA_CONFIGS", 1)):
        body = text.split("#define " + name + "(X)")[1].split("\n\n")[0]
        for row in re.findall(r"X\(([^)]*)\)", body):
            v = [x.strip() for x in row.split(",")]
            if name == "MF_WGMMA_CONFIGS": geo[lst][int(v[0])] = (64 * int(v[1]), 64 * int(v[2]), 32)
            else: geo[lst][int(v[0])] = (int(v[1]), int(v[2]), int(v[3]))
    return geo

def fit_times(path, lst):
    times = collections.defaultdict(dict)
    for r in csv.DictReader(open(path)):
        tf = int(r["tf32"])
        if tf == 5 or (tf != 0) != (lst == 1): continue   # (pixel bytes: the FP32 plan decides them)
        times[(r["prod"], int(r["M"]), int(r["N"]), int(r["K"]))][(int(r["cfg"]), int(r["splits"]))] = float(r["us"])
    if not times: return
    geo = {c: g for c, g in config_rows()[lst].items() if any(c == cs[0] for v in times.values() for cs in v)}

    def pick(key, v, P):
        prod, M, N, K = key
        return min((cost(geo[c], P[c], M, N, K, s), (c, s)) for (c, s) in v if c in P)[1]

    def score(P):
        regret, picked, fastest = 0.0, 0.0, 0.0
        for key, v in times.items():
            t, b = v[pick(key, v, P)], min(v.values())
            regret, picked, fastest = regret + math.log(t / b), picked + t, fastest + b
        return regret + (picked - fastest) / 500.0, regret, picked, fastest

    best_all = None
    for seed in (1, 2, 3):
        rng = random.Random(seed)
        P = {c: (1.0, 10.0, 2) for c in geo}
        best = score(P)[0]
        for _ in range(15000):
            Q = dict(P)
            c = rng.choice(sorted(geo))
            e, f, o = Q[c]
            w = rng.random()
            if w < 0.4: e = min(100.0, max(0.01, e * math.exp(rng.gauss(0, 0.3))))
            elif w < 0.8: f = max(0.0, f + rng.gauss(0, 4))
            else: o = rng.choice([1, 2, 3, 4])
            Q[c] = (round(e, 3), round(f, 1), o)
            v = score(Q)[0]
            if v <= best: best, P = v, Q
        if best_all is None or best < best_all[0]: best_all = (best, P)
    P = best_all[1]
    _, regret, picked, fastest = score(P)
    print(f"{path}, {('FP32', 'TF32')[lst]}: {len(times)} products; the fitted picks take {picked:.0f} us against the fastest's "
          f"{fastest:.0f} us ({100 * (picked / fastest - 1):.1f} % more), regret {regret:.2f}")
    for c in sorted(P): print(f"  configuration {c:2d} {geo[c]}: EFF {P[c][0]:.3f}f, FILL {P[c][1]:.1f}f, OCC {P[c][2]}")
    for key, v in sorted(times.items()):
        p = pick(key, v, P)
        if v[p] > 1.15 * min(v.values()):
            print(f"  {key[0]:7s} M {key[1]:5d} N {key[2]:5d} K {key[3]:5d}: pick c{p[0]}/s{p[1]} {v[p]:7.1f} us, "
                  f"fastest c{min(v, key=v.get)[0]}/s{min(v, key=v.get)[1]} {min(v.values()):7.1f} us")

# -P's estimate: us = 2 + waves * (WAVE + tile FLOPs / RATE) / MHz, waves = ceil(tiles / (SMs * OCC)),
# a wave's FLOPs those of OCC tiles of bm x bn over K / splits (rounded up to bk). Fitted per family on
# each product's fastest plan (the one the planner means to pick), in log space.
def fit_estimate(times_csv, families_log, mhz):
    lists, fams, occ = config_rows(), collections.defaultdict(dict), {}
    text = open("kernels/fast/matmul/configs.cuh").read()
    for name, lst, fam in (("MF_FP32_CONFIGS", 0, "FAM_FFMA"), ("MF_3XTF32_CONFIGS", 0, "FAM_3XTF32"),
                           ("MF_MMA_CONFIGS", 1, "FAM_MMA_TF32"), ("MF_WGMMA_CONFIGS", 1, "FAM_WGMMA_TF32")):
        for row in re.findall(r"X\(([^)]*)\)", text.split("#define " + name + "(X)")[1].split("\n\n")[0]):
            v = [x.strip() for x in row.split(",")]
            occ[(lst, int(v[0]))] = (fam, int(v[6] if name == "MF_WGMMA_CONFIGS" else v[9]))

    def add(fam, key, bm, bn, bk, o, s, us):
        M, N, K = key[1:4]
        waves = cdiv(cdiv(M, bm) * cdiv(N, bn) * s, SMS * o)
        flops = 2.0 * o * bm * bn * cdiv(cdiv(K, s), bk) * bk
        if key not in fams[fam] or us < fams[fam][key][2]: fams[fam][key] = (waves, flops, us)
    for r in csv.DictReader(open(times_csv)):
        tf, c = int(r["tf32"]), int(r["cfg"])
        lst = 0 if tf in (0, 5) else 1
        if (lst, c) not in occ: continue
        fam, o = occ[(lst, c)]
        if tf == 5: fam += "_PIXELS"
        add(fam, (r["prod"], int(r["M"]), int(r["N"]), int(r["K"])), *lists[lst][c], o, int(r["splits"]), float(r["us"]))
    section = open(families_log).read().split("\n## 2.")[1].split("\n## 3.")[0].split("\n")[1:]
    names = {"tf32-tiled": "FAM_MMA_TF32", "bf16-tiled": "FAM_MMA_BF16", "tf32-kmajor": "FAM_TF32_KMAJOR"}
    for r in csv.DictReader(l for l in section if l and not l.startswith("#")):
        if r["tile"].startswith("x") or r["tile"] == "tile": continue   # (a header again; the tiled kernels' rows: the CSV above times them with their tiles)
        bm, bn = map(int, r["tile"].split("x"))
        fam = names.get(r["family"]) or ("FAM_WGMMA_BF16_COPIES" if int(r["cfg"]) >= 10 else "FAM_BF16_COPIES")
        add(fam, (r["prod"], int(r["M"]), int(r["N"]), int(r["K"])), bm, bn, 64 if int(r["cfg"]) >= 10 else 32, 1, 1,
            float(r["us"]))
    for fam, rows in sorted(fams.items()):
        rows = list(rows.values())
        def err(w, rate): return sum(math.log((2 + n * (w + f / rate) / mhz) / us) ** 2 for n, f, us in rows)
        best = min((err(w, rate), w, rate) for rate in (10 ** (2 + i / 200) for i in range(500))
                   for w in range(0, 40000, 250))
        rel = sorted(abs((2 + n * (best[1] + f / best[2]) / mhz) / us - 1) for n, f, us in rows)
        print(f"  {fam:22s} WAVE {best[1]:6d} clocks, RATE {best[2]:7.1f} FLOP/clock/SM ({len(rows):3d} products; "
              f"off by {100 * rel[len(rel) // 2]:.0f} % at the median, {100 * rel[int(0.9 * len(rel))]:.0f} % at the 90th percentile)")

if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "--estimate":
        fit_estimate(sys.argv[2], sys.argv[3], float(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[4] == "--clock" else 1980.0)
    elif len(sys.argv) > 2 and sys.argv[1] == "--times":
        for path in sys.argv[2:]:
            for lst in (0, 1): fit_times(path, lst)
    else:
        sys.exit("usage: python3 dev/cuda/fit_plan.py --times TIMES.csv ... (from dev/bin/tune_check --times)\n"
                 "       python3 dev/cuda/fit_plan.py --estimate TIMES.csv FAMILIES.log [--clock MHz]")
