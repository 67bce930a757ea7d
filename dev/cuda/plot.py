"""Plot the CPU-vs-GPU tables of dev/cuda as one PNG.

usage: python3 dev/cuda/plot.py [folder with the CSVs] [out.png]
  folder: default dev/cuda/results (the committed GPU numbers); dev/cuda/out after `make -C dev/cuda run`
  reads vector_add.csv, sigmoid.csv, matmul_cpu_vs_gpu.csv (whichever exist) and draws, for each,
  the time against N on log-log axes: CPU, GPU kernel alone, GPU including the host<->device copies.
"""
import csv
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "dev/cuda/results"
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(folder, "cpu_vs_gpu.png")
    panels = [("vector_add.csv", "vector add c = a + b"), ("sigmoid.csv", "sigmoid y = 1/(1+e^-x)"),
              ("matmul_cpu_vs_gpu.csv", "matmul N x N")]
    panels = [(f, t) for f, t in panels if os.path.exists(os.path.join(folder, f))]
    if not panels:
        sys.exit(f"plot.py: no CSVs in {folder} ---> try: make -C dev/cuda run")
    gpu = ""
    name_file = os.path.join(folder, "gpu_name.txt")
    if os.path.exists(name_file):
        gpu = open(name_file).read().strip()
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2))
    if len(panels) == 1:
        axes = [axes]
    for ax, (fname, title) in zip(axes, panels):
        rows = read(os.path.join(folder, fname))
        N = [float(r["N"]) for r in rows]
        cpu = [(float(r["N"]), float(r["cpu_ms"])) for r in rows if r["cpu_ms"] not in ("", None)]
        ax.plot([n for n, _ in cpu], [t for _, t in cpu], "o-", label="CPU")
        ax.plot(N, [float(r["gpu_kernel_ms"]) for r in rows], "s-", label="GPU kernel")
        ax.plot(N, [float(r["gpu_total_ms"]) for r in rows], "^-", label="GPU incl. copies")
        if "cublas_ms" in rows[0]:
            ax.plot(N, [float(r["cublas_ms"]) for r in rows], "x--", label="cuBLAS SGEMM")
        ax.set_xscale("log", base=2 if fname.startswith("matmul") else 10)
        ax.set_yscale("log")
        ax.set_xlabel("N")
        ax.set_ylabel("time (ms)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"CPU vs GPU{' on ' + gpu if gpu else ''} (dev/cuda)")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
