/*
run/job.h, the ranks of a job, on this machine's loopback and in seconds (no GPU, no NCCL):
  1. the launchers' environments: torchrun, mpirun, srun and -g's; which one names the job when
     several are set; every bad value gets one line naming the variable (and how to set it);
     NCCL_NVLS_ENABLE=0 whatever it was;
  2. the bootstrap between forked processes, for 1, 2 and 4 ranks: rank 0's 128-byte id and a
     5000-byte blob reach every rank, votes give every rank the largest value, the end is clean;
     MASTER_ADDR as a name, as IPv6, as a non-loopback address (rank 0 on every address); a stray
     connection to the port is ignored;
  3. refusals: a rank with another world size, two processes saying they are one rank;
  4. timeouts: a rank that never comes, a rank 0 that never listens, a MASTER_ADDR that does not
     resolve: every rank ends within the bound with a line;
  5. liveness: a rank killed with SIGKILL (rank 2, and rank 0), a rank stopped with SIGSTOP, a
     rank that exits with an error: every other rank ends with exit 3 and a line naming it;
  6. stopping: a vote to stop on one rank stops all three at the same vote, and the others wait
     at their exit for rank 0 (its checkpoint) before they end, with exit 130;
  7. -g N: job_spawn starts this binary as three ranks (in its --child mode): the environment
     torchrun would give them, NVLS off; one killed with SIGKILL ends the job with a line naming
     it; one that fails before the bootstrap gets the others killed after the spawner's grace,
     and so does rank 0's usage error (exit 2, its line alone); SIGHUP to the spawner stops every
     rank cleanly; the spawner killed takes its ranks along;
  8. the real launchers where they are installed (mpirun, torchrun): three ranks of this binary
     meet under each (else skipped).
Each case runs its ranks as processes with a time limit: a rank that hangs is killed and fails.
Usage: tests/bin/test_job [ANY]   (make test passes the CPU trainer's path; it is not used)
       tests/bin/test_job --child MODE WORLD [FILE]   (a rank started by job_spawn in case 7)
The child mode `any` is a rank under any launcher, to check the bootstrap under the real ones
(each rank prints one line and exits 0 when the id, a vote and the end went through):
    torchrun --no-python --nproc-per-node 4 tests/bin/test_job --child any 4
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 mpirun --allow-run-as-root -np 4 -x MASTER_ADDR -x MASTER_PORT \
        tests/bin/test_job --child any 4
*/
#include "../run/job.h"
#include "check.h"

#include <fcntl.h>
#include <ifaddrs.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char tmpdir[256];
static double t_start;  // when the case's ranks started

// ----------------------------------------------------------------------------
// helpers: the environment, ranks as processes, their output

static const char *const LAUNCHER_VARS[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "MLP_BOOTSTRAP_PORT",
    "MLP_JOB_SPAWNED", "MLP_BOOTSTRAP_TIMEOUT", "MLP_LIVENESS_TIMEOUT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"};

static void env_clear(void) {
    for (size_t i = 0; i < sizeof(LAUNCHER_VARS) / sizeof(LAUNCHER_VARS[0]); i++) unsetenv(LAUNCHER_VARS[i]);
}

static void env_int(const char *name, int v) {
    char s[32];
    snprintf(s, sizeof(s), "%d", v);
    setenv(name, s, 1);
}

// the environment torchrun gives a rank, on this machine, meeting at `port`
static void env_rank(int rank, int world, int port) {
    env_clear();
    env_int("RANK", rank);
    env_int("WORLD_SIZE", world);
    env_int("LOCAL_RANK", rank);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    env_int("MASTER_PORT", port);
    env_int("MLP_BOOTSTRAP_PORT", port);
    setenv("MLP_BOOTSTRAP_TIMEOUT", "10", 1);  // generous for a loaded machine, still bounded
    setenv("MLP_LIVENESS_TIMEOUT", "10", 1);
}

static int free_port(void) {
    int p = job_free_port();
    if (p < 0) {
        fprintf(stderr, "error: no free port on 127.0.0.1: %s\n", strerror(errno));
        exit(1);
    }
    return p;
}

typedef struct {
    pid_t pid;
    int rank, status, done;
    double t0;       // t_start when it was started: the case's start
    double seconds;  // from t0 to its end
    char out[320];   // its stderr
} Proc;

typedef void (*RankBody)(int rank, int world, void *arg);

// rank `rank` of `world` meeting at `port` as a process running body; its stderr goes to a file.
// extra: "NAME=VALUE" settings after the usual ones (NULL: none)
static void start_rank(Proc *p, int rank, int world, int port, RankBody body, void *arg, const char *const *extra) {
    static int count = 0;
    memset(p, 0, sizeof(*p));
    p->rank = rank;
    p->t0 = t_start;
    snprintf(p->out, sizeof(p->out), "%s/rank%d_%d.err", tmpdir, rank, count++);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        int fd = open(p->out, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
        if (fd >= 0) dup2(fd, 2), close(fd);
        env_rank(rank, world, port);
        for (int i = 0; extra && extra[i]; i++) {
            char name[64];
            const char *eq = strchr(extra[i], '=');
            snprintf(name, sizeof(name), "%.*s", (int)(eq - extra[i]), extra[i]);
            setenv(name, eq + 1, 1);
        }
        body(rank, world, arg);
        exit(0);
    }
    p->pid = pid;
}

// Waits for the processes ps[0..n) together, each one's end timed from its t0, until t0 + limit
// seconds; a process still running then is killed and fails (status -1)
static void wait_set(Proc **ps, int n, double limit) {
    for (int left = n; left > 0;) {
        left = 0;
        for (int i = 0; i < n; i++) {
            Proc *p = ps[i];
            if (p->done) continue;
            int st;
            if (waitpid(p->pid, &st, WNOHANG) == p->pid) p->status = st;
            else if (now_seconds() - p->t0 > limit) {
                kill(p->pid, SIGKILL);
                waitpid(p->pid, &st, 0);
                p->status = -1;
            } else {
                left++;
                continue;
            }
            p->seconds = now_seconds() - p->t0;
            p->done = 1;
        }
        if (left) job_sleep(0.005);
    }
}

static void wait_proc(Proc *p, double limit) { wait_set(&p, 1, limit); }

static void wait_all(Proc *ps, int n, double limit) {
    Proc *set[8];
    for (int i = 0; i < n; i++) set[i] = &ps[i];
    wait_set(set, n, limit);
}

// the exit status (0..255), 128 + the signal, or -1 when it had to be killed
static int exit_code(const Proc *p) {
    if (p->status == -1) return -1;
    if (WIFEXITED(p->status)) return WEXITSTATUS(p->status);
    if (WIFSIGNALED(p->status)) return 128 + WTERMSIG(p->status);
    return -1;
}

// a file's text (at most 16 KB), "" when it cannot be read
static const char *slurp(const char *path) {
    static char buf[16384];
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int has(const char *text, const char *what) { return strstr(text, what) != NULL; }

// the number of lines in a text
static int lines(const char *text) {
    int n = 0;
    for (const char *c = text; *c; c++) n += *c == '\n';
    return n;
}

// the first line of a rank's stderr, for the check's message
static const char *first_line(const Proc *p) {
    static char line[700];
    snprintf(line, sizeof(line), "%s", slurp(p->out));
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    return line;
}

// the line of text that holds `what` (from `what` on), or "" when none does
static const char *line_of(const char *text, const char *what) {
    static char line[700];
    const char *at = strstr(text, what);
    snprintf(line, sizeof(line), "%s", at ? at : "");
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    return line;
}

// a rank's failure, as the trainer would print it (die), and its exit
static void rank_fail(Job *j, int code) {
    fprintf(stderr, "error: %s ---> try: %s\n", j->err, j->hint);
    exit(code);
}

// the bytes rank 0 broadcasts: a pattern every rank can check
static void pattern(unsigned char *b, size_t n, int seed) {
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 131u + (unsigned)seed * 7u + (i >> 8));
}

// ----------------------------------------------------------------------------
// what the ranks do

// connect, the id and a blob from rank 0, two votes, the end. The exit status says which step failed.
static void rank_exchange(int rank, int world, void *arg) {
    const int seed = *(int *)arg;
    Job j;
    if (job_from_env(&j) != 1 || j.rank != rank || j.world != world) exit(10);
    if (job_connect(&j) != 0) rank_fail(&j, 11);
    unsigned char id[128], want[128];
    static unsigned char plan[5000], plan_want[5000];
    pattern(want, sizeof(want), seed);
    pattern(plan_want, sizeof(plan_want), seed + 1);
    if (rank == 0) memcpy(id, want, sizeof(id)), memcpy(plan, plan_want, sizeof(plan));
    else memset(id, 0, sizeof(id)), memset(plan, 0, sizeof(plan));
    if (job_broadcast(&j, id, sizeof(id)) != 0) rank_fail(&j, 12);
    if (memcmp(id, want, sizeof(id)) != 0) exit(13);
    if (job_broadcast(&j, plan, sizeof(plan)) != 0) rank_fail(&j, 14);
    if (memcmp(plan, plan_want, sizeof(plan)) != 0) exit(15);
    if (job_agree(&j, rank * 10) != (world - 1) * 10) exit(16);
    if (job_agree(&j, 0) != 0) exit(17);
    if (job_finish(&j) != 0) exit(18);
    exit(0);
}

// connect and end: 0 when the bootstrap worked, 1 with the line when it did not
static void rank_connect(int rank, int world, void *arg) {
    (void)rank, (void)world, (void)arg;
    Job j;
    if (job_from_env(&j) != 1) rank_fail(&j, 20);
    if (job_connect(&j) != 0) rank_fail(&j, 1);
    job_finish(&j);
    exit(0);
}

// The liveness cases: connect; the victim then dies one way; the others sleep, as a rank waiting
// on the GPU would, so that only the watcher can end them.
enum { DIE_KILL, DIE_STOP, DIE_ERROR };
typedef struct {
    int victim, how;
} Death;
static void rank_idle(int rank, int world, void *arg) {
    (void)world;
    const Death *d = (const Death *)arg;
    Job j;
    if (job_from_env(&j) != 1) rank_fail(&j, 20);
    if (job_connect(&j) != 0) rank_fail(&j, 21);
    if (job_agree(&j, 0) != 0) exit(22);  // every rank is up
    if (rank == d->victim) {
        if (d->how == DIE_KILL) raise(SIGKILL);
        if (d->how == DIE_STOP) raise(SIGSTOP);
        fprintf(stderr, "error: rank %d fails on purpose\n", rank);
        exit(3);
    }
    job_sleep(30);
    exit(0);  // (the watcher should have ended this process long before)
}

// The vote to stop: rank 1 votes SIGHUP at its fourth log line; everyone must stop at that vote.
// Rank 0 then writes its "checkpoint" (a file, after half a second); the others check at their
// very end, after the job's own exit handler, that it exists: they waited for rank 0.
static char stop_marker[320];
static void check_marker_at_exit(void) {
    if (access(stop_marker, F_OK) != 0) _exit(99);
}
static void rank_vote_stop(int rank, int world, void *arg) {
    (void)world, (void)arg;
    Job j;
    if (job_from_env(&j) != 1) rank_fail(&j, 20);
    if (rank != 0) atexit(check_marker_at_exit);  // registered first: runs after the job's handler
    if (job_connect(&j) != 0) rank_fail(&j, 21);
    for (int line = 0; line < 100; line++) {
        int sig = job_agree(&j, rank == 1 && line == 3 ? SIGHUP : 0);
        if (sig < 0) rank_fail(&j, 23);
        if (sig == 0) continue;
        if (sig != SIGHUP || line != 3) exit(24);
        if (rank == 0) {
            job_sleep(0.5);
            FILE *f = fopen(stop_marker, "w");
            if (f) fclose(f);
        }
        exit(130);  // as run_after_steps does
    }
    exit(25);
}

// ----------------------------------------------------------------------------
// --child: a rank started by job_spawn (case 7)

static volatile sig_atomic_t child_stop = 0;
static void child_on_signal(int sig) { child_stop = sig; }

static int child_main(int argc, char **argv) {
    if (argc < 4) return 40;
    const char *mode = argv[2];
    const int world = atoi(argv[3]);
    const int any = strcmp(mode, "any") == 0;  // (any launcher: the others are job_spawn's ranks)
    Job j;
    if (job_from_env(&j) != 1) rank_fail(&j, 41);
    if (j.world != world) {
        fprintf(stderr, "error: rank %d: the launcher says %d ranks, the command line %d\n", j.rank, j.world, world);
        return 42;
    }
    if (!any && (j.launcher != JOB_SPAWN || strcmp(j.master_addr, "127.0.0.1") != 0)) return 42;
    const char *nvls = getenv("NCCL_NVLS_ENABLE");
    if (!nvls || strcmp(nvls, "0") != 0) return 43;
    if (!any && (getenv("OMPI_COMM_WORLD_RANK") || getenv("SLURM_PROCID"))) return 44;  // (not set by the test)
    if (strcmp(mode, "early") == 0 && j.rank == 1) {  // ends before the bootstrap: no liveness yet
        fprintf(stderr, "error: rank 1 fails before the bootstrap, on purpose\n");
        return 5;
    }
    if (strcmp(mode, "usage") == 0 && j.rank == 0) {  // a usage error rank 0 alone finds (its outputs)
        fprintf(stderr, "error: rank 0 refuses its command line, on purpose\n");
        return EXIT_USAGE;
    }
    if (strcmp(mode, "stop") == 0) {
        signal(SIGHUP, child_on_signal);
        signal(SIGINT, child_on_signal);
    }
    if (job_connect(&j) != 0) rank_fail(&j, 45);
    if (strcmp(mode, "ok") == 0 || any) {
        unsigned char id[128], want[128];
        pattern(want, sizeof(want), 77);
        if (j.rank == 0) memcpy(id, want, sizeof(id));
        else memset(id, 0, sizeof(id));
        if (job_broadcast(&j, id, sizeof(id)) != 0) rank_fail(&j, 46);
        if (memcmp(id, want, sizeof(id)) != 0) return 47;
        if (job_agree(&j, j.rank) != world - 1) return 48;
        job_finish(&j);
        if (any)
            printf("rank %d of %d (%s, local rank %d, rank 0 at %s port %d): bootstrap, broadcast, vote and end ok\n",
                   j.rank, j.world, job_launcher_name(&j), j.local_rank, j.world > 1 ? j.master_addr : "-", j.port);
        return 0;
    }
    if (strcmp(mode, "kill1") == 0 || strcmp(mode, "early") == 0) {
        if (job_agree(&j, 0) != 0) return 49;
        if (j.rank == 1) raise(SIGKILL);
        job_sleep(30);
        return 0;
    }
    if (strcmp(mode, "stop") == 0 && argc >= 5) {
        if (job_agree(&j, 0) != 0) return 50;
        if (j.rank == 0) {
            FILE *f = fopen(argv[4], "w");  // every rank is up: the test may send its signal
            if (f) fclose(f);
        }
        for (int i = 0; i < 1000; i++) {
            int sig = job_agree(&j, child_stop);
            if (sig < 0) rank_fail(&j, 51);
            if (sig) exit(130);  // (the exit handler ends the job with the others)
            job_sleep(0.02);
        }
        return 52;
    }
    if (strcmp(mode, "orphan") == 0 && argc >= 5) {
        char path[400];
        snprintf(path, sizeof(path), "%s.%d", argv[4], j.rank);
        FILE *f = fopen(path, "w");
        if (f) fprintf(f, "%d\n", (int)getpid()), fclose(f);
        job_sleep(30);
        return 0;
    }
    return 53;
}

// 1 while process pid runs (a zombie, ended but not yet reaped, counts as ended)
static int running(pid_t pid) {
    char path[64], stat[256] = "";
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(stat, 1, sizeof(stat) - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *close_paren = strrchr(stat, ')');
    return close_paren && close_paren[1] == ' ' && close_paren[2] != 'Z' && close_paren[2] != 'X';
}

// job_spawn(n, argv) in a process of its own (its stderr, and its ranks', into a file)
static void start_spawner(Proc *p, int n, char **argv) {
    memset(p, 0, sizeof(*p));
    p->t0 = t_start;
    snprintf(p->out, sizeof(p->out), "%s/spawner_%s.err", tmpdir, argv[2]);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(p->out, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
        if (fd >= 0) dup2(fd, 2), close(fd);
        env_clear();
        setenv("MLP_BOOTSTRAP_TIMEOUT", "10", 1);
        setenv("MLP_LIVENESS_TIMEOUT", "10", 1);
        setenv("NCCL_NVLS_ENABLE", "1", 1);  // the spawner must override it
        exit(job_spawn(n, argv));
    }
    p->pid = pid;
}

// ----------------------------------------------------------------------------
// 1. the launchers' environments

// job_from_env with only `sets` ("NAME=VALUE", NULL-terminated) of the launchers' variables set
static int env_case(Job *j, const char *const *sets) {
    env_clear();
    for (int i = 0; sets[i]; i++) {
        char name[64];
        const char *eq = strchr(sets[i], '=');
        snprintf(name, sizeof(name), "%.*s", (int)(eq - sets[i]), sets[i]);
        setenv(name, eq + 1, 1);
    }
    int rc = job_from_env(j);
    env_clear();
    return rc;
}

// a bad environment: -1, one line that holds `want`, and a hint that holds `hint_want`
static void env_bad(const char *what, const char *const *sets, const char *want, const char *hint_want) {
    Job j;
    int rc = env_case(&j, sets);
    check(rc == -1 && has(j.err, want) && !strchr(j.err, '\n') && (!hint_want || has(j.hint, hint_want)),
          "%s: refused with \"%s\" (got %d: %s ---> try: %s)", what, want, rc, j.err, j.hint);
}

static void test_environment(void) {
    section("1. the launchers' environments");
    Job j;
    const char *none[] = {NULL};
    int rc = env_case(&j, none);
    check(rc == 0 && j.world == 1 && j.rank == 0 && j.launcher == JOB_NONE, "no launcher: a plain run, rank 0 of 1");

    const char *torchrun[] = {"RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=1", "MASTER_ADDR=node-a", "MASTER_PORT=29500", NULL};
    rc = env_case(&j, torchrun);
    check(rc == 1 && j.launcher == JOB_TORCHRUN && j.rank == 1 && j.world == 4 && j.local_rank == 1 &&
              strcmp(j.master_addr, "node-a") == 0 && j.master_port == 29500 && j.port == 29501,
          "torchrun: rank 1 of 4, local rank 1, node-a, the bootstrap on MASTER_PORT + 1 = %d", j.port);
    check(j.timeout_s == JOB_BOOTSTRAP_TIMEOUT && j.liveness_s == JOB_LIVENESS_TIMEOUT,
          "the default timeouts: %.0f s bootstrap, %.0f s liveness", j.timeout_s, j.liveness_s);
    const char *override[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500",
                              "MLP_BOOTSTRAP_PORT=40123", "MLP_BOOTSTRAP_TIMEOUT=7.5", "MLP_LIVENESS_TIMEOUT=3", NULL};
    rc = env_case(&j, override);
    check(rc == 1 && j.port == 40123 && j.timeout_s == 7.5 && j.liveness_s == 3,
          "MLP_BOOTSTRAP_PORT, MLP_BOOTSTRAP_TIMEOUT and MLP_LIVENESS_TIMEOUT are taken");
    const char *mpirun[] = {"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=0",
                            "MASTER_ADDR=node-b", "MASTER_PORT=1234", NULL};
    rc = env_case(&j, mpirun);
    check(rc == 1 && j.launcher == JOB_MPIRUN && j.rank == 2 && j.world == 4 && j.local_rank == 0 && j.port == 1235,
          "mpirun: rank 2 of 4 (OMPI_COMM_WORLD_*), local rank 0");
    const char *srun[] = {"SLURM_PROCID=3", "SLURM_NTASKS=8", "SLURM_LOCALID=3", "MASTER_ADDR=node-c",
                          "MASTER_PORT=5000", NULL};
    rc = env_case(&j, srun);
    check(rc == 1 && j.launcher == JOB_SRUN && j.rank == 3 && j.world == 8 && j.local_rank == 3,
          "srun: rank 3 of 8 (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID)");
    const char *srun1[] = {"SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_LOCALID=0", NULL};
    rc = env_case(&j, srun1);
    check(rc == 1 && j.world == 1, "srun with one task: no MASTER_ADDR needed");
    const char *both[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=1",
                          "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_LOCALID=0", "MASTER_ADDR=x", "MASTER_PORT=9", NULL};
    rc = env_case(&j, both);
    check(rc == 1 && j.launcher == JOB_MPIRUN && j.rank == 1, "mpirun inside an sbatch script (SLURM_PROCID set): mpirun's");
    const char *tr_slurm[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=x", "MASTER_PORT=9",
                              "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_LOCALID=0", NULL};
    rc = env_case(&j, tr_slurm);
    check(rc == 1 && j.launcher == JOB_TORCHRUN && j.rank == 1, "torchrun under Slurm: torchrun's");
    const char *spawned[] = {"MLP_JOB_SPAWNED=1", "RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=127.0.0.1",
                             "MASTER_PORT=9", "MLP_BOOTSTRAP_PORT=9", NULL};
    rc = env_case(&j, spawned);
    check(rc == 1 && j.launcher == JOB_SPAWN && strcmp(job_launcher_name(&j), "-g N") == 0 && j.port == 9,
          "-g's ranks: named as such");

    const char *r4[] = {"RANK=4", "WORLD_SIZE=4", "LOCAL_RANK=0", "MASTER_ADDR=x", "MASTER_PORT=9", NULL};
    env_bad("rank >= world size", r4, "RANK=4 is not below WORLD_SIZE=4", NULL);
    const char *rx[] = {"RANK=one", "WORLD_SIZE=4", "LOCAL_RANK=0", "MASTER_ADDR=x", "MASTER_PORT=9", NULL};
    env_bad("a rank that is not a number", rx, "RANK=one is not a whole number", NULL);
    const char *rneg[] = {"RANK=-1", "WORLD_SIZE=4", "LOCAL_RANK=0", "MASTER_ADDR=x", "MASTER_PORT=9", NULL};
    env_bad("a negative rank", rneg, "RANK=-1 is out of range", NULL);
    const char *w0[] = {"RANK=0", "WORLD_SIZE=0", "LOCAL_RANK=0", NULL};
    env_bad("a world of no ranks", w0, "WORLD_SIZE=0 is out of range", NULL);
    const char *w2x[] = {"RANK=0", "WORLD_SIZE=2x", "LOCAL_RANK=0", NULL};
    env_bad("a world size with trailing letters", w2x, "WORLD_SIZE=2x is not a whole number", NULL);
    const char *nows[] = {"RANK=0", NULL};
    env_bad("RANK without WORLD_SIZE", nows, "RANK is set but WORLD_SIZE is not", "unset RANK");
    const char *norank[] = {"WORLD_SIZE=2", "LOCAL_RANK=0", NULL};
    env_bad("WORLD_SIZE without RANK", norank, "WORLD_SIZE is set but RANK is not", "unset RANK and WORLD_SIZE");
    const char *nolocal[] = {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=x", "MASTER_PORT=9", NULL};
    env_bad("torchrun's LOCAL_RANK missing", nolocal, "LOCAL_RANK is not", NULL);
    const char *local4[] = {"RANK=0", "WORLD_SIZE=4", "LOCAL_RANK=4", "MASTER_ADDR=x", "MASTER_PORT=9", NULL};
    env_bad("local rank >= world size", local4, "LOCAL_RANK=4 is not below WORLD_SIZE=4", NULL);
    const char *mpi_noaddr[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=0", NULL};
    env_bad("mpirun without MASTER_ADDR", mpi_noaddr, "mpirun sets no MASTER_ADDR", "mpirun -x MASTER_ADDR -x MASTER_PORT");
    const char *slurm_noaddr[] = {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=0", NULL};
    env_bad("srun without MASTER_ADDR", slurm_noaddr, "srun sets no MASTER_ADDR", "export MASTER_ADDR=");
    const char *slurm_noport[] = {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "MASTER_ADDR=n1", NULL};
    env_bad("srun without MASTER_PORT", slurm_noport, "srun sets no MASTER_PORT", "MASTER_PORT=29500");
    const char *slurm_nolocal[] = {"SLURM_PROCID=1", "SLURM_NTASKS=2", NULL};
    env_bad("srun without SLURM_LOCALID", slurm_nolocal, "SLURM_PROCID is set but SLURM_LOCALID is not", NULL);
    const char *port_big[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=x", "MASTER_PORT=70000", NULL};
    env_bad("MASTER_PORT out of range", port_big, "MASTER_PORT=70000 is out of range", NULL);
    const char *port_top[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=x", "MASTER_PORT=65535", NULL};
    env_bad("MASTER_PORT 65535, no port above", port_top, "MASTER_PORT=65535 leaves no port above it", "MLP_BOOTSTRAP_PORT");
    const char *bport[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=x", "MASTER_PORT=9",
                           "MLP_BOOTSTRAP_PORT=port", NULL};
    env_bad("MLP_BOOTSTRAP_PORT not a number", bport, "MLP_BOOTSTRAP_PORT=port is not a whole number", NULL);
    const char *tmo[] = {"RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", "MLP_BOOTSTRAP_TIMEOUT=0", NULL};
    env_bad("a bootstrap timeout of 0", tmo, "MLP_BOOTSTRAP_TIMEOUT=0 is not a number of seconds", NULL);
    const char *live[] = {"RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", "MLP_LIVENESS_TIMEOUT=soon", NULL};
    env_bad("a liveness timeout that is not a number", live, "MLP_LIVENESS_TIMEOUT=soon is not a number", NULL);

    setenv("NCCL_NVLS_ENABLE", "1", 1);
    env_case(&j, none);
    const char *nvls = getenv("NCCL_NVLS_ENABLE");
    check(nvls && strcmp(nvls, "0") == 0, "NCCL_NVLS_ENABLE=1 becomes 0 in the process (got %s)", nvls ? nvls : "unset");

    char *argv[] = {(char *)"prog", (char *)"-g", (char *)"4", (char *)"-b", (char *)"64", (char *)"--gpus",
                    (char *)"2", (char *)"-o", (char *)"-g", NULL};
    char **out = job_argv_without(9, argv, "-g", "--gpus");
    int ok = out && out[0] == argv[0] && out[1] && strcmp(out[1], "-b") == 0 && strcmp(out[2], "64") == 0 &&
             strcmp(out[3], "-o") == 0 && strcmp(out[4], "-g") == 0 && out[5] == NULL;
    check(ok, "job_argv_without: -g 4 and --gpus 2 dropped, the value \"-g\" of -o kept");
    free(out);
}

// ----------------------------------------------------------------------------
// 2. the bootstrap

static void test_bootstrap(void) {
    section("2. the bootstrap over loopback");
    const int worlds[] = {1, 2, 4};
    for (int w = 0; w < 3; w++) {
        const int world = worlds[w], port = free_port();
        int seed = port;
        Proc ps[4];
        t_start = now_seconds();
        for (int r = 0; r < world; r++) start_rank(&ps[r], r, world, port, rank_exchange, &seed, NULL);
        wait_all(ps, world, 20);
        int ok = 1;
        for (int r = 0; r < world; r++) ok &= exit_code(&ps[r]) == 0;
        check(ok, "%d rank%s: the 128-byte id and a 5000-byte blob on every rank, the votes' largest, a clean end "
              "(%.2f s; exits %d %d %d %d: %s)", world, world > 1 ? "s" : "", ps[world - 1].seconds, exit_code(&ps[0]),
              world > 1 ? exit_code(&ps[1]) : 0, world > 2 ? exit_code(&ps[2]) : 0, world > 3 ? exit_code(&ps[3]) : 0,
              ok ? "ok" : first_line(&ps[0]));
    }

    // MASTER_ADDR as a name, as IPv6's loopback, and as this machine's own non-loopback address (rank 0
    // then listens on every address, IPv6 and IPv4)
    char own[INET_ADDRSTRLEN] = "";
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i && !own[0]; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
                (ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr) >> 24) != 127)
                inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, own, sizeof(own));
        freeifaddrs(ifs);
    }
    int have_v6 = 0;
    int fd6 = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd6 >= 0) {
        struct sockaddr_in6 a6;
        memset(&a6, 0, sizeof(a6));
        a6.sin6_family = AF_INET6;
        a6.sin6_addr = in6addr_loopback;
        have_v6 = bind(fd6, (struct sockaddr *)&a6, sizeof(a6)) == 0;
        close(fd6);
    }
    const char *addrs[3] = {"localhost", have_v6 ? "::1" : NULL, own[0] ? own : NULL};
    const char *names[3] = {"a name (localhost)", "IPv6 (::1)", "this machine's non-loopback address"};
    for (int a = 0; a < 3; a++) {
        if (!addrs[a]) {
            skip("MASTER_ADDR as %s: none on this machine", names[a]);
            continue;
        }
        char setting[80];
        snprintf(setting, sizeof(setting), "MASTER_ADDR=%s", addrs[a]);
        const char *const extra[] = {setting, NULL};
        const int port = free_port();
        int seed = port;
        Proc ps[2];
        t_start = now_seconds();
        for (int r = 0; r < 2; r++) start_rank(&ps[r], r, 2, port, rank_exchange, &seed, extra);
        wait_all(ps, 2, 20);
        check(exit_code(&ps[0]) == 0 && exit_code(&ps[1]) == 0, "MASTER_ADDR as %s, %s: 2 ranks meet (exits %d %d: %s)",
              names[a], addrs[a], exit_code(&ps[0]), exit_code(&ps[1]), first_line(&ps[1]));
    }

    // a stray client on the port before the ranks: dropped, the job goes on
    const int port = free_port();
    int seed = port;
    Proc ps[3];
    t_start = now_seconds();
    start_rank(&ps[0], 0, 3, port, rank_exchange, &seed, NULL);
    int stray = -1;
    for (int tries = 0; tries < 500 && stray < 0; tries++) {  // rank 0 may take a moment to listen
        struct addrinfo hints, *res = NULL;
        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        char ps_port[16];
        snprintf(ps_port, sizeof(ps_port), "%d", port);
        if (getaddrinfo("127.0.0.1", ps_port, &hints, &res) == 0) {
            stray = job_connect_once(res, 1);
            freeaddrinfo(res);
        }
        if (stray < 0) job_sleep(0.01);
    }
    const char junk[] = "GET / HTTP/1.0\r\nHost: nobody\r\n\r\n";
    int sent = stray >= 0 && job_write_all(stray, junk, sizeof(junk) - 1) == 0;
    if (stray >= 0) close(stray);
    start_rank(&ps[1], 1, 3, port, rank_exchange, &seed, NULL);
    start_rank(&ps[2], 2, 3, port, rank_exchange, &seed, NULL);
    wait_all(ps, 3, 20);
    check(sent && exit_code(&ps[0]) == 0 && exit_code(&ps[1]) == 0 && exit_code(&ps[2]) == 0,
          "a stray client sending HTTP to the port is dropped; the 3 ranks still meet (exits %d %d %d)",
          exit_code(&ps[0]), exit_code(&ps[1]), exit_code(&ps[2]));
}

// ----------------------------------------------------------------------------
// 3. refusals

static void test_refusals(void) {
    section("3. the bootstrap refuses ranks that do not agree");
    int port = free_port();
    Proc ps[3];
    t_start = now_seconds();
    start_rank(&ps[0], 0, 2, port, rank_connect, NULL, NULL);
    start_rank(&ps[1], 1, 3, port, rank_connect, NULL, NULL);  // says the job has 3 ranks
    wait_all(ps, 2, 20);
    const char *e0 = slurp(ps[0].out);
    check(exit_code(&ps[0]) == 1 && has(e0, "rank 0 of 2: bootstrap: rank 1 (host") &&
              has(e0, "says the job has 3 ranks, rank 0 says 2") && lines(e0) == 1,
          "another world size: rank 0 ends with one line: %s", first_line(&ps[0]));
    const char *e1 = slurp(ps[1].out);
    check(exit_code(&ps[1]) == 1 && has(e1, "rank 1 of 3: bootstrap: rank 0 ended it: rank 1 (host") &&
              has(e1, "---> try: the same launcher command") && lines(e1) == 1,
          "and so does the rank it refused, with rank 0's reason: %s", first_line(&ps[1]));

    port = free_port();
    t_start = now_seconds();
    start_rank(&ps[0], 0, 3, port, rank_connect, NULL, NULL);
    start_rank(&ps[1], 1, 3, port, rank_connect, NULL, NULL);
    start_rank(&ps[2], 1, 3, port, rank_connect, NULL, NULL);  // a second rank 1
    wait_all(ps, 3, 20);
    check(exit_code(&ps[0]) == 1 && has(slurp(ps[0].out), "two processes say they are rank 1"),
          "two processes as rank 1: rank 0 ends: %s", first_line(&ps[0]));
    check(exit_code(&ps[1]) == 1 && exit_code(&ps[2]) == 1 && has(slurp(ps[1].out), "two processes say they are rank 1") &&
              has(slurp(ps[2].out), "two processes say they are rank 1"),
          "and both of them, with rank 0's reason");
}

// ----------------------------------------------------------------------------
// 4. timeouts

static void test_timeouts(void) {
    section("4. the bootstrap's timeouts (2 s here), all three at once");
    const char *const two[] = {"MLP_BOOTSTRAP_TIMEOUT=2", NULL};
    const char *const nohost[] = {"MLP_BOOTSTRAP_TIMEOUT=2", "MASTER_ADDR=no-such-host.invalid", NULL};
    const int p_missing = free_port(), p_nobody = free_port(), p_nohost = free_port();
    Proc ps[4];
    t_start = now_seconds();
    start_rank(&ps[0], 0, 3, p_missing, rank_connect, NULL, two);  // rank 2 of 3 never comes
    start_rank(&ps[1], 1, 3, p_missing, rank_connect, NULL, two);
    start_rank(&ps[2], 1, 2, p_nobody, rank_connect, NULL, two);   // nothing listens on p_nobody
    start_rank(&ps[3], 1, 2, p_nohost, rank_connect, NULL, nohost);
    wait_all(ps, 4, 20);
    // each ends once its 2 s have passed, and well before twice that plus a margin (rank 1, which
    // waits for rank 0's word, gets it as rank 0 gives up)
    check(exit_code(&ps[0]) == 1 && ps[0].seconds >= 1.9 && ps[0].seconds < 6 &&
              has(slurp(ps[0].out), "waited 2 s for rank 2 to connect") && lines(slurp(ps[0].out)) == 1,
          "a rank that never comes: rank 0 ends after %.2f s: %s", ps[0].seconds, first_line(&ps[0]));
    check(exit_code(&ps[1]) == 1 && ps[1].seconds < 6 && has(slurp(ps[1].out), "rank 0 ended it") &&
              has(slurp(ps[1].out), "for rank 2 to connect"),
          "and the rank that came, after %.2f s, with rank 0's reason: %s", ps[1].seconds, first_line(&ps[1]));
    char want[120];
    snprintf(want, sizeof(want), "could not reach rank 0 at 127.0.0.1 port %d for 2 s", p_nobody);
    check(exit_code(&ps[2]) == 1 && ps[2].seconds >= 1.9 && ps[2].seconds < 6 && has(slurp(ps[2].out), want) &&
              has(slurp(ps[2].out), "---> try: is rank 0 running?"),
          "a rank 0 that never listens: rank 1 ends after %.2f s: %s", ps[2].seconds, first_line(&ps[2]));
    check(exit_code(&ps[3]) == 1 && ps[3].seconds < 3 && has(slurp(ps[3].out), "no-such-host.invalid"),
          "a MASTER_ADDR that does not resolve: ends after %.2f s: %s", ps[3].seconds, first_line(&ps[3]));
}

// ----------------------------------------------------------------------------
// 5. liveness

// three ranks, `victim` dies `how`; the other two must end with exit JOB_EXIT_LOST and a line holding `want`
// within `limit` seconds of the start
static void liveness_case(const char *what, int victim, int how, const char *const *extra, const char *want,
                          double limit) {
    const int port = free_port();
    Death d = {victim, how};
    Proc ps[3];
    t_start = now_seconds();
    for (int r = 0; r < 3; r++) start_rank(&ps[r], r, 3, port, rank_idle, &d, extra);
    Proc *others[2] = {&ps[victim == 0 ? 1 : 0], &ps[victim == 2 ? 1 : 2]};
    wait_set(others, 2, 25);
    if (how == DIE_STOP) kill(ps[victim].pid, SIGKILL);
    wait_proc(&ps[victim], 25);
    for (int r = 0; r < 3; r++) {
        if (r == victim) continue;
        const char *e = slurp(ps[r].out);
        char lost[40];
        snprintf(lost, sizeof(lost), "rank %d of 3: lost rank %d (host", r, victim);
        check(exit_code(&ps[r]) == JOB_EXIT_LOST && ps[r].seconds < limit && has(e, lost) && has(e, want) && lines(e) == 1,
              "%s: rank %d ends after %.2f s: %s", what, r, ps[r].seconds, first_line(&ps[r]));
    }
}

static void test_liveness(void) {
    section("5. liveness: a lost rank ends every rank, with a line naming it");
    liveness_case("rank 2 killed with SIGKILL", 2, DIE_KILL, NULL, "its connection closed without a word", 8);
    liveness_case("rank 0 killed with SIGKILL", 0, DIE_KILL, NULL, "its connection closed without a word", 8);
    const char *const short_live[] = {"MLP_LIVENESS_TIMEOUT=2", NULL};
    liveness_case("rank 1 stopped (SIGSTOP), 2 s liveness", 1, DIE_STOP, short_live, "nothing heard from it for 2 s", 9);
    liveness_case("rank 1 exits with an error", 1, DIE_ERROR, NULL, "it ended early, with an error of its own", 8);
}

// ----------------------------------------------------------------------------
// 6. stopping

static void test_stop(void) {
    section("6. a vote to stop on one rank stops them all");
    const int port = free_port();
    snprintf(stop_marker, sizeof(stop_marker), "%s/checkpoint_written", tmpdir);
    unlink(stop_marker);
    Proc ps[3];
    t_start = now_seconds();
    for (int r = 0; r < 3; r++) start_rank(&ps[r], r, 3, port, rank_vote_stop, NULL, NULL);
    wait_all(ps, 3, 20);
    int clean = 1;
    for (int r = 0; r < 3; r++) clean &= slurp(ps[r].out)[0] == '\0';
    check(exit_code(&ps[0]) == 130 && exit_code(&ps[1]) == 130 && exit_code(&ps[2]) == 130 && clean,
          "rank 1's SIGHUP at its fourth vote: every rank stops at that vote, exit 130, no error line (exits %d %d %d)",
          exit_code(&ps[0]), exit_code(&ps[1]), exit_code(&ps[2]));
    check(ps[1].seconds >= 0.45 && ps[2].seconds >= 0.45,
          "ranks 1 and 2 end after rank 0 wrote its checkpoint (%.2f s, %.2f s; rank 0 took 0.5 s for it)",
          ps[1].seconds, ps[2].seconds);
}

// ----------------------------------------------------------------------------
// 7. -g N

// Rank 1 fails before the bootstrap, so the liveness watch cannot end the others: the spawner kills
// them after its grace. Started as the file begins and checked at the end of case 7, so that the
// other cases run during the grace.
// Likewise rank 0 ending with a usage error of its own (exit 2, its one line) while the others wait
// for it at the bootstrap: the spawner ends them after the grace, exits 2 and adds no line.
static Proc early, usage;
static void start_early(const char *self) {
    static char world[] = "3", *argv_early[] = {NULL, (char *)"--child", (char *)"early", world, NULL};
    static char *argv_usage[] = {NULL, (char *)"--child", (char *)"usage", world, NULL};
    argv_early[0] = argv_usage[0] = (char *)self;
    t_start = now_seconds();
    start_spawner(&early, 3, argv_early);
    start_spawner(&usage, 3, argv_usage);
}

static void test_spawn(const char *self) {
    section("7. -g N: job_spawn starts this binary as 3 ranks");
    char world[] = "3", *argv_ok[] = {(char *)self, (char *)"--child", (char *)"ok", world, (char *)"-g", world, NULL};
    char **argv = job_argv_without(6, argv_ok, "-g", "--gpus");
    Proc sp;
    t_start = now_seconds();
    start_spawner(&sp, 3, argv);
    wait_proc(&sp, 25);
    free(argv);
    check(exit_code(&sp) == 0 && slurp(sp.out)[0] == '\0',
          "three ranks: launcher -g N, RANK/WORLD_SIZE/MASTER_ADDR=127.0.0.1, NCCL_NVLS_ENABLE=0 over the parent's 1, "
          "the id on every rank, exit 0 (%.2f s; %d: %s)", sp.seconds, exit_code(&sp), first_line(&sp));

    char *argv_kill[] = {(char *)self, (char *)"--child", (char *)"kill1", world, NULL};
    t_start = now_seconds();
    start_spawner(&sp, 3, argv_kill);
    wait_proc(&sp, 25);
    const char *e = slurp(sp.out);
    check(exit_code(&sp) == 128 + SIGKILL && sp.seconds < 8 && has(e, "error: -g 3: rank 1 was killed by SIGKILL") &&
              has(e, "rank 0 of 3: lost rank 1") && has(e, "rank 2 of 3: lost rank 1"),
          "rank 1 killed with SIGKILL: the others end naming it, the spawner exits %d after %.2f s: %s", exit_code(&sp),
          sp.seconds, line_of(e, "error: -g"));

    char ready[320];
    snprintf(ready, sizeof(ready), "%s/spawn_ready", tmpdir);
    unlink(ready);
    char *argv_stop[] = {(char *)self, (char *)"--child", (char *)"stop", world, ready, NULL};
    t_start = now_seconds();
    start_spawner(&sp, 3, argv_stop);
    while (access(ready, F_OK) != 0 && now_seconds() - t_start < 20) job_sleep(0.01);
    const double signalled = now_seconds() - t_start;
    kill(sp.pid, SIGHUP);
    wait_proc(&sp, 25);
    check(exit_code(&sp) == 130 && slurp(sp.out)[0] == '\0' && sp.seconds - signalled < 5,
          "SIGHUP to the spawner reaches every rank: they stop together, exit 130, %.2f s after the signal (%d: %s)",
          sp.seconds - signalled, exit_code(&sp), first_line(&sp));

    // the spawner itself killed with SIGKILL (nothing it can forward): its ranks go with it
    char pids[320];
    snprintf(pids, sizeof(pids), "%s/orphan", tmpdir);
    char *argv_orphan[] = {(char *)self, (char *)"--child", (char *)"orphan", world, pids, NULL};
    t_start = now_seconds();
    start_spawner(&sp, 3, argv_orphan);
    pid_t ranks[3] = {0, 0, 0};
    for (int r = 0; r < 3; r++) {
        char path[400];
        snprintf(path, sizeof(path), "%s.%d", pids, r);
        while (now_seconds() - t_start < 20) {
            FILE *f = fopen(path, "r");
            int pid = 0;
            if (f && fscanf(f, "%d", &pid) == 1 && pid > 0) ranks[r] = pid;
            if (f) fclose(f);
            if (ranks[r]) break;
            job_sleep(0.01);
        }
    }
    kill(sp.pid, SIGKILL);
    wait_proc(&sp, 25);
    const double killed = now_seconds();
    int alive = 3;
    while (alive > 0 && now_seconds() - killed < 5) {
        alive = 0;
        for (int r = 0; r < 3; r++) alive += ranks[r] > 0 && running(ranks[r]);
        if (alive) job_sleep(0.01);
    }
    for (int r = 0; r < 3; r++)
        if (ranks[r] > 0 && running(ranks[r])) kill(ranks[r], SIGKILL);  // (the test's own clean-up)
    check(ranks[0] && ranks[1] && ranks[2] && alive == 0, "the spawner killed with SIGKILL: its 3 ranks end with it "
          "(%.2f s)", now_seconds() - killed);

    wait_proc(&early, 25);
    e = slurp(early.out);
    check(exit_code(&early) == 5 && early.seconds > JOB_SPAWN_GRACE - 0.5 && early.seconds < JOB_SPAWN_GRACE + 4 &&
              has(e, "error: -g 3: rank 1 exited with status 5"),
          "rank 1 fails before the bootstrap: the spawner kills the others after its %.0f s grace and exits 5 after "
          "%.2f s: %s", JOB_SPAWN_GRACE, early.seconds, line_of(e, "error: -g"));
    wait_proc(&usage, 25);
    e = slurp(usage.out);
    int lines = 0;
    for (const char *c = e; *c; c++) lines += *c == '\n';
    check(exit_code(&usage) == EXIT_USAGE && usage.seconds < JOB_SPAWN_GRACE + 4 && lines == 1 &&
              has(e, "rank 0 refuses its command line"),
          "rank 0's usage error while the others wait at the bootstrap: they are ended after the grace, the spawner "
          "exits %d after %.2f s with rank 0's line alone (%d line%s)", exit_code(&usage), usage.seconds, lines,
          lines == 1 ? "" : "s");
}

// ----------------------------------------------------------------------------
// 8. the real launchers

// a shell command as a "rank": its stdout and stderr into the rank's file
static void rank_shell(int rank, int world, void *arg) {
    (void)rank, (void)world;
    env_clear();
    dup2(2, 1);
    execl("/bin/sh", "sh", "-c", (const char *)arg, (char *)NULL);
    exit(127);
}

static void launcher_case(const char *name, const char *cmd) {
    char probe[120];
    snprintf(probe, sizeof(probe), "command -v %s >/dev/null 2>&1", name);
    if (system(probe) != 0) {
        skip("%s: not installed here", name);
        return;
    }
    Proc p;
    t_start = now_seconds();
    start_rank(&p, 0, 1, 0, rank_shell, (void *)cmd, NULL);
    wait_proc(&p, 90);
    const char *out = slurp(p.out);
    char tag[40];
    snprintf(tag, sizeof(tag), "of 3 (%s, ", name);
    int ok_lines = 0;  // one line per rank: "rank R of 3 (NAME, ...): ... end ok"
    for (const char *line = out; *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        char one[600];
        snprintf(one, sizeof(one), "%.*s", (int)(n < sizeof(one) ? n : sizeof(one) - 1), line);
        ok_lines += has(one, tag) && has(one, "end ok");
        line += n + (end != NULL);
    }
    check(exit_code(&p) == 0 && ok_lines == 3, "%s: 3 ranks of this binary meet, broadcast, vote and end (%.2f s; exit %d: %s)",
          name, p.seconds, exit_code(&p), first_line(&p));
}

static void test_launchers(const char *self) {
    section("8. the real launchers, where they are installed");
    char cmd[1200];
    int port = free_port();
    snprintf(cmd, sizeof(cmd), "MASTER_ADDR=127.0.0.1 MASTER_PORT=%d MLP_BOOTSTRAP_PORT=%d MLP_BOOTSTRAP_TIMEOUT=20 "
             "mpirun --allow-run-as-root --oversubscribe -np 3 -x MASTER_ADDR -x MASTER_PORT -x MLP_BOOTSTRAP_PORT "
             "-x MLP_BOOTSTRAP_TIMEOUT %s --child any 3", port, port, self);
    launcher_case("mpirun", cmd);
    // torchrun's agent holds --master-port: the ranks meet on the port above it, the default
    port = free_port();
    snprintf(cmd, sizeof(cmd), "MLP_BOOTSTRAP_TIMEOUT=20 torchrun --no-python --nproc-per-node 3 --master-addr 127.0.0.1 "
             "--master-port %d %s --child any 3", port, self);
    launcher_case("torchrun", cmd);
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--child") == 0) return child_main(argc, argv);
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_job_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    const double t0 = now_seconds();
    start_early(argv[0]);
    test_environment();
    env_clear();
    test_bootstrap();
    test_refusals();
    test_timeouts();
    test_liveness();
    test_stop();
    test_spawn(argv[0]);
    test_launchers(argv[0]);
    printf("\n(%.1f s)\n", now_seconds() - t0);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (system(cmd) != 0) printf("(could not remove %s)\n", tmpdir);
    return test_exit();
}
