/*
dev/nccl_ranks.cu: run/job.h with NCCL on the GPUs, one process per GPU, as the trainer will use
it. Every rank reads its launcher's environment, joins the bootstrap, receives rank 0's NCCL
unique id, makes its communicator on the GPU of its rank on its machine, all-reduces a buffer and
checks the sum on every element it reads back, times a run of all-reduces, and votes the verdict,
so that every rank says the same. With -k RANK that rank kills itself (SIGKILL) while the others
are inside all-reduces that can then never complete: the liveness watch must end them, each with
a line naming it. Nothing of the trainer is used; a CPU build has no use for it.

    make dev/bin/nccl_ranks
    dev/bin/nccl_ranks -g 2                                        (run/job.h's spawner: 2 ranks)
    torchrun --no-python --nproc-per-node 2 dev/bin/nccl_ranks
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 mpirun --allow-run-as-root -np 2 -x MASTER_ADDR -x MASTER_PORT dev/bin/nccl_ranks
    for r in 0 1; do SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
        dev/bin/nccl_ranks & done; wait                            (what srun would set)
    NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_DEBUG=INFO dev/bin/nccl_ranks -g 2 -m 8 2>&1 | grep via
    dev/bin/nccl_ranks -g 4 -k 2                                   (rank 2 dies mid-run: the others end, naming it)

Flags: -g N (start N ranks of this program), -m MB (the buffer, default 64), -i N (timed
all-reduces, default 20), -k RANK (that rank kills itself after the check). Exit 0 when the sum
was right on every rank; 1 when not; 3 on a rank that ended because another was lost.
*/
#include <cuda_runtime.h>
#include <nccl.h>

#include "../run/job.h"
#include "../kernels/common.cuh"  // cudaCheck

#define ncclCheck(res) nccl_check_at((res), __FILE__, __LINE__)
static void nccl_check_at(ncclResult_t res, const char *file, int line) {
    if (res == ncclSuccess) return;
    fflush(stdout);
    fprintf(stderr, "error: %s:%d: NCCL error: %s (%s) ---> try: NCCL_DEBUG=WARN for NCCL's account of it\n", file,
            line, ncclGetErrorString(res), ncclGetLastError(NULL));
    exit(EXIT_RUNTIME);
}

// buf[i] = value for i < n
__global__ void fill_kernel(float *buf, size_t n, float value) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) buf[i] = value;
}

static int flag_int(const char *flag, const char *value, int lo, int hi) {
    char *end;
    long v = strtol(value, &end, 10);
    if (*end || end == value || v < lo || v > hi) {
        fprintf(stderr, "error: %s %s: a whole number from %d to %d ---> try: the comment at the top of "
                "dev/nccl_ranks.cu\n", flag, value, lo, hi);
        exit(EXIT_USAGE);
    }
    return (int)v;
}

int main(int argc, char **argv) {
    int gpus = 0, mb = 64, iters = 20, victim = -1;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) {
            fprintf(stderr, "error: %s needs a value ---> try: the comment at the top of dev/nccl_ranks.cu\n", argv[i]);
            return EXIT_USAGE;
        }
        if (strcmp(argv[i], "-g") == 0) gpus = flag_int("-g", argv[i + 1], 1, JOB_MAX_SPAWN);
        else if (strcmp(argv[i], "-m") == 0) mb = flag_int("-m", argv[i + 1], 1, 1 << 14);
        else if (strcmp(argv[i], "-i") == 0) iters = flag_int("-i", argv[i + 1], 1, 1 << 20);
        else if (strcmp(argv[i], "-k") == 0) victim = flag_int("-k", argv[i + 1], 0, JOB_MAX_SPAWN - 1);
        else {
            fprintf(stderr, "error: unknown flag %s ---> try: -g N, -m MB, -i N, -k RANK\n", argv[i]);
            return EXIT_USAGE;
        }
    }

    // the job: this process is a rank of one, or starts one (-g N)
    static Job job;
    const int in_job = job_from_env(&job);
    if (in_job < 0) die(job.hint, "%s", job.err);
    if (gpus > 0 && job.world > 1)
        die_at(EXIT_USAGE, __FILE__, __LINE__, "leave -g out: the launcher starts the ranks",
               "-g %d inside a job of %d ranks started by %s", gpus, job.world, job_launcher_name(&job));
    if (gpus > 0) return job_spawn(gpus, job_argv_without(argc, argv, "-g", NULL));
    if (victim >= job.world)
        die_at(EXIT_USAGE, __FILE__, __LINE__, "-k a rank below the number of ranks", "-k %d: the job has %d rank%s",
               victim, job.world, job.world == 1 ? "" : "s");

    int count = 0;
    cudaCheck(cudaGetDeviceCount(&count));
    const int dev = count == 1 ? 0 : job.local_rank;
    if (dev >= count)
        die_at(EXIT_USAGE, __FILE__, __LINE__, "as many ranks on each machine as it has GPUs",
               "rank %d of %d is rank %d on its machine, which shows %d GPUs", job.rank, job.world, job.local_rank, count);
    cudaCheck(cudaSetDevice(dev));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, dev));

    if (job_connect(&job) != 0) die(job.hint, "%s", job.err);
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (job.rank == 0) ncclCheck(ncclGetUniqueId(&id));
    if (job_broadcast(&job, &id, sizeof(id)) != 0) die(job.hint, "%s", job.err);
    ncclComm_t comm;
    const double t_init = now_seconds();
    ncclCheck(ncclCommInitRank(&comm, job.world, id, job.rank));
    const double init_s = now_seconds() - t_init;

    // every rank's buffer holds rank + 1: the sum is world (world + 1) / 2 everywhere
    const size_t n = (size_t)mb << 18;  // floats in mb MiB
    float *buf;
    cudaStream_t stream;
    cudaCheck(cudaMalloc((void **)&buf, n * sizeof(float)));
    cudaCheck(cudaStreamCreate(&stream));
    fill_kernel<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(buf, n, (float)(job.rank + 1));
    cudaCheck(cudaGetLastError());
    ncclCheck(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    const float want = (float)job.world * (job.world + 1) / 2;
    float got[3];
    const size_t at[3] = {0, n / 2, n - 1};
    for (int k = 0; k < 3; k++) cudaCheck(cudaMemcpy(&got[k], buf + at[k], sizeof(float), cudaMemcpyDeviceToHost));
    const int bad = got[0] != want || got[1] != want || got[2] != want;
    if (bad)
        fprintf(stderr, "error: rank %d: the all-reduce gave %g, %g, %g where %g was due\n", job.rank, got[0], got[1],
                got[2], want);
    const int any_bad = job_agree(&job, bad);
    if (any_bad < 0) die(job.hint, "%s", job.err);

    // timed all-reduces; with -k, rank `victim` dies while the others are inside them
    const int loop = victim >= 0 ? 1 << 20 : iters;  // (the others must still be waiting when it dies)
    if (job.rank == victim) {
        job_sleep(0.5);
        printf("rank %d: killing itself (SIGKILL) while the others are in all-reduces\n", job.rank);
        fflush(stdout);
        raise(SIGKILL);
    }
    cudaEvent_t start, stop;
    cudaCheck(cudaEventCreate(&start));
    cudaCheck(cudaEventCreate(&stop));
    cudaCheck(cudaEventRecord(start, stream));
    for (int i = 0; i < loop; i++) ncclCheck(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, stream));
    cudaCheck(cudaEventRecord(stop, stream));
    cudaCheck(cudaEventSynchronize(stop));
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, start, stop));
    const double per = ms / loop, bytes = (double)n * sizeof(float);
    const double bus = job.world > 1 ? 2.0 * (job.world - 1) / job.world * bytes / (per * 1e-3) / 1e9 : 0;
    int version = 0;
    ncclCheck(ncclGetVersion(&version));
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    printf("rank %d of %d (%s, local rank %d, %s, GPU %d %s): NCCL %d.%d.%d, init %.2f s, all-reduce of %d MiB: sum "
           "%s on every rank, %.3f ms, %.1f GB/s bus bandwidth\n", job.rank, job.world, job_launcher_name(&job),
           job.local_rank, host, dev, prop.name, version / 10000, version / 100 % 100, version % 100, init_s, mb,
           any_bad ? "WRONG" : "right", per, bus);
    fflush(stdout);

    if (job_agree(&job, 0) < 0) die(job.hint, "%s", job.err);  // every rank has printed
    ncclCheck(ncclCommDestroy(comm));
    cudaCheck(cudaFree(buf));
    job_finish(&job);
    return any_bad ? EXIT_RUNTIME : 0;
}
