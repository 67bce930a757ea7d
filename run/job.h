/*
run/job.h: the job this process is one rank of, when a run spans several processes (one per GPU):
which launcher started it and where the ranks meet (the launcher's environment), the bootstrap
over TCP that joins the ranks and hands rank 0's bytes to all of them (NCCL's unique id, a plan),
the liveness watch that ends every rank when one is lost, the vote that stops every rank at the
same step, and -g N's spawner that starts N ranks of this program on one machine.

Plain C over POSIX sockets and threads: no NCCL and no MPI. To it NCCL's unique id is 128 opaque
bytes, broadcast like any others.

    static Job job;       // static: the watcher thread and the exit handler keep its address to the end
    int in_job = job_from_env(&job);             // 1: a launcher started this rank; 0: a plain run
    if (in_job < 0) die(job.hint, "%s", job.err);
    if (cfg.gpus > 0 && job.world == 1)           // -g N: N ranks of this program, this process waits
        return job_spawn(cfg.gpus, job_argv_without(argc, argv, "-g", "--gpus"));
    ... a job of one rank (torchrun or srun of one task) may run as a plain run; otherwise:
    if (job_connect(&job) != 0) die(job.hint, "%s", job.err);      // every rank, before NCCL
    if (job.rank == 0) ncclGetUniqueId(&id);
    if (job_broadcast(&job, &id, sizeof(id)) != 0) die(job.hint, "%s", job.err);
    ncclCommInitRank(&comm, job.world, id, job.rank);            // on GPU job.local_rank
    ... at every log line, on every rank:
        int sig = job_agree(&job, stop_requested());   // the same answer on every rank
        if (sig) { rank 0 writes its checkpoint; every rank exits 130 }
    job_finish(&job);                             // the normal end, on every rank

Launchers (job_from_env), one rank per process:
    torchrun      RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (it sets them all)
    mpirun        OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK (Open MPI);
                  MASTER_ADDR and MASTER_PORT come from the job script (mpirun -x MASTER_ADDR ...)
    srun          SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; MASTER_ADDR and MASTER_PORT exported by
                  the job script (srun passes the environment on)
    -g N          job_spawn sets torchrun's five variables for each rank, and MLP_JOB_SPAWNED=1
When several are set, the first in that order names the job (-g, torchrun, mpirun, then srun:
an sbatch script sets SLURM_PROCID for the launchers it starts, too).

Settings, from the environment (the same on every rank):
    MLP_BOOTSTRAP_PORT     the port rank 0 listens on; default MASTER_PORT + 1, because torchrun's
                           agent holds MASTER_PORT itself
    MLP_BOOTSTRAP_TIMEOUT  seconds the ranks wait for each other at the bootstrap (default 120)
    MLP_LIVENESS_TIMEOUT   seconds of silence after which a rank is lost (default 15)
    NCCL_NVLS_ENABLE       set to 0 by job_from_env and job_spawn in their own process, whatever
                           it was, and so in every process they start: NVLink multicast stays off

The bootstrap. Rank 0 listens; every other rank connects (retrying while rank 0 is not up yet)
and says who it is (its rank, the world size, its host); rank 0 checks that they agree (the same
world size, each rank once) and, once all have come, welcomes them. A rank that never comes ends
rank 0 after MLP_BOOTSTRAP_TIMEOUT with a line naming it, and rank 0 tells the others why before
closing; a rank 0 that never listens ends the others after the same time. Every rank is over
within twice the timeout and a few seconds, whatever happens.

The frames on the sockets: a 20-byte header, then `len` bytes (integers big-endian):
    magic "MLPJ" | version u16 | type u16 | a u32 | b u32 | len u32
    HELLO   rank -> 0     a = rank, b = world size, the host's name
    WELCOME 0 -> rank     every rank has come
    REFUSE  0 -> rank     the bootstrap failed: rank 0's reason
    BCAST   0 -> rank     a = the broadcast's number, its bytes
    VOTE    rank -> 0     a = the vote's number, b = this rank's value
    RESULT  0 -> rank     a = the vote's number, b = the largest value
    PING    either way    nothing but being alive
    BYE     either way    the normal end (job_finish): a closed socket after it is no loss
    QUIT    either way    the sender is ending early (an error line of its own says why)
    LOST    0 -> rank     a = the rank rank 0 lost, and why

Liveness. After the bootstrap the sockets stay open: rank 0 holds one to every rank, each rank
one to rank 0. A thread of each process (the watcher) reads them, pings along each once in a
while, and ends the process with one line naming the lost rank and exit 3 (JOB_EXIT_LOST: a
launcher tells the lost rank from those it took along) when a socket closes
without a BYE (the process at the other end died: kill -9, a crash, the OOM killer) or stays silent
for MLP_LIVENESS_TIMEOUT (its machine or the network is gone, or it is stopped); rank 0 first tells
the others which rank it lost, so that every line names the same one. It is a thread, not a
function the trainer calls between steps, because a rank whose peer died is typically waiting on
the GPU for a collective that will never complete: its main thread calls nothing until then. The
thread ends the process with _exit, as a signal would: the CSV log flushes every row, and a
checkpoint is renamed into place only once complete, so the last one stays whole.

Stopping. Ctrl-C, SIGTERM or SIGHUP reaching any rank stops them all at the same step: each rank
votes its stop signal at its log lines (job_agree, a vote over the sockets; the largest value
wins), so all of them learn it at the same step. Rank 0 then writes its checkpoint while the others
wait for it at the exit (the end's BYE), and every rank exits 130. A rank that exits with an error
sends QUIT first, and the others end with a line saying so.
*/
#ifndef MLP_JOB_H
#define MLP_JOB_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "../common/utils.h"  // EXIT_RUNTIME, now_seconds

extern char **environ;

// ----------------------------------------------------------------------------
// the job: which launcher, which rank, where the ranks meet

enum { JOB_NONE, JOB_SPAWN, JOB_TORCHRUN, JOB_MPIRUN, JOB_SRUN };
static const char *const JOB_LAUNCHER_NAMES[] = {"no launcher", "-g N", "torchrun", "mpirun", "srun"};

#define JOB_BOOTSTRAP_TIMEOUT 120.0  // seconds, MLP_BOOTSTRAP_TIMEOUT
#define JOB_LIVENESS_TIMEOUT 15.0    // seconds, MLP_LIVENESS_TIMEOUT
#define JOB_MAX_BYTES (64u << 20)    // the largest frame a rank accepts: a broadcast of at most 64 MiB
#define JOB_EXIT_LOST 3              // the exit status of a rank that ends because another was lost

// One queued broadcast, received by a rank's watcher before its main thread asked for it
typedef struct JobBlob {
    struct JobBlob *next;
    uint32_t seq;
    size_t len;
    unsigned char *bytes;
} JobBlob;

// One socket of the job: on rank 0 one per other rank, on the others one to rank 0
typedef struct {
    int fd;                  // -1 once closed
    int rank;                // the rank at the other end
    char host[256];          // its host's name, or MASTER_ADDR for rank 0 (for the lines that name it)
    double last_heard;       // now_seconds() when its last frame came
    int bye;                 // it said BYE: its socket closing is the normal end
    uint32_t vote_seq;       // rank 0: the number of this rank's last vote; others: of rank 0's last result
    int vote;                // that vote, or that result
    JobBlob *blobs;          // others: rank 0's broadcasts, in order, not yet taken
} JobLink;

// One per process. Keep it static or global: after job_connect the watcher thread and the exit
// handler hold its address until the process ends (a Job on main's stack is gone once main returns).
typedef struct {
    // from the launcher's environment (job_from_env)
    int launcher;            // JOB_NONE .. JOB_SRUN
    int rank, world, local_rank;
    char master_addr[256];   // where rank 0 is (a name or an address)
    int master_port;         // the launcher's (torchrun's agent listens there)
    int port;                // the bootstrap's: MLP_BOOTSTRAP_PORT, else master_port + 1
    double timeout_s;        // MLP_BOOTSTRAP_TIMEOUT
    double liveness_s;       // MLP_LIVENESS_TIMEOUT
    // after job_connect
    JobLink *links;
    int nlinks;              // rank 0: world - 1 (links[i] is rank i + 1); the others: 1 (rank 0)
    int connected, finished;
    volatile int stopping;   // a vote said stop: the ranks end now, so a closing socket is no loss
    uint32_t vote_seq, bcast_seq;
    pthread_t watcher;
    int watching;
    int wake[2];             // a pipe: a byte written to wake[1] ends the watcher
    pthread_mutex_t mu;      // the links' mailboxes (votes, broadcasts, bye); cv says they changed
    pthread_cond_t cv;
    pthread_mutex_t send_mu; // one frame at a time on the sockets (the main thread and the watcher)
    // the last failure: one line, and what to try; err + err_at is the line without "rank R of N: "
    char err[640], hint[320];
    int err_at;
} Job;

static inline const char *job_launcher_name(const Job *j) { return JOB_LAUNCHER_NAMES[j->launcher]; }

// Records a failure in j->err (prefixed with "rank R of N: " once the rank is known) and j->hint;
// returns -1 for the caller to return
static int job_fail(Job *j, const char *hint, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int job_fail(Job *j, const char *hint, const char *fmt, ...) {
    size_t k = 0;
    if (j->world > 0) k = (size_t)snprintf(j->err, sizeof(j->err), "rank %d of %d: ", j->rank, j->world);
    if (k >= sizeof(j->err)) k = sizeof(j->err) - 1;
    j->err_at = (int)k;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->err + k, sizeof(j->err) - k, fmt, ap);
    va_end(ap);
    snprintf(j->hint, sizeof(j->hint), "%s", hint ? hint : "");
    return -1;
}

// An integer from the environment variable `name`, in [lo, hi]. Returns 1 when read, 0 when the
// variable is unset or empty, -1 (j->err) when it is not a whole number in range. `who`: the
// launcher that sets it, for the message.
static int job_env_int(Job *j, const char *name, const char *who, long lo, long hi, int *out) {
    const char *s = getenv(name);
    if (!s || !s[0]) return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0')
        return job_fail(j, "the launcher's own command, not a hand-set variable", "%s=%s is not a whole number (%s)",
                        name, s, who);
    if (v < lo || v > hi)
        return job_fail(j, "the launcher's own command, not a hand-set variable", "%s=%s is out of range (%s): %ld to %ld",
                        name, s, who, lo, hi);
    *out = (int)v;
    return 1;
}

// A number of seconds from the environment variable `name`, in (0, 1 day]; unset: `dflt`
static int job_env_seconds(Job *j, const char *name, double dflt, double *out) {
    *out = dflt;
    const char *s = getenv(name);
    if (!s || !s[0]) return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !(v > 0 && v <= 86400))
        return job_fail(j, "a number of seconds, e.g. 60", "%s=%s is not a number of seconds in (0, 86400]", name, s);
    *out = v;
    return 1;
}

// Reads the launcher's environment into j. Returns 1 when this process is one rank of a job (a
// launcher, or -g's spawner, started it), 0 when no launcher's variables are set (a plain run: j
// holds rank 0 of 1), -1 when they are inconsistent (j->err, j->hint). Also sets NCCL_NVLS_ENABLE=0
// in this process, whatever the answer (see the top of the file).
static int job_from_env(Job *j) {
    memset(j, 0, sizeof(*j));
    j->world = 0;  // (job_fail adds no rank to the messages of this function)
    j->timeout_s = JOB_BOOTSTRAP_TIMEOUT;
    j->liveness_s = JOB_LIVENESS_TIMEOUT;
    j->wake[0] = j->wake[1] = -1;
    setenv("NCCL_NVLS_ENABLE", "0", 1);

    // which launcher: the first whose rank variable is set
    const char *rank_var, *size_var, *local_var;
    if (getenv("MLP_JOB_SPAWNED") && getenv("RANK")) j->launcher = JOB_SPAWN;
    else if (getenv("RANK") || getenv("WORLD_SIZE")) j->launcher = JOB_TORCHRUN;
    else if (getenv("OMPI_COMM_WORLD_RANK")) j->launcher = JOB_MPIRUN;
    else if (getenv("SLURM_PROCID")) j->launcher = JOB_SRUN;
    else {
        j->launcher = JOB_NONE;
        j->world = 1;
        return 0;
    }
    if (j->launcher == JOB_MPIRUN) {
        rank_var = "OMPI_COMM_WORLD_RANK", size_var = "OMPI_COMM_WORLD_SIZE", local_var = "OMPI_COMM_WORLD_LOCAL_RANK";
    } else if (j->launcher == JOB_SRUN) {
        rank_var = "SLURM_PROCID", size_var = "SLURM_NTASKS", local_var = "SLURM_LOCALID";
    } else {
        rank_var = "RANK", size_var = "WORLD_SIZE", local_var = "LOCAL_RANK";
    }
    const char *who = job_launcher_name(j);
    const char *needs[] = {rank_var, size_var, local_var};
    const char *set = getenv(rank_var) ? rank_var : size_var;  // (the one that named the launcher)
    for (int i = 0; i < 3; i++)
        if (!getenv(needs[i]) || !getenv(needs[i])[0])
            return job_fail(j, j->launcher == JOB_TORCHRUN ? "torchrun sets RANK, WORLD_SIZE and LOCAL_RANK together; "
                                                             "unset RANK and WORLD_SIZE for a plain run"
                                                           : "start the ranks with the launcher itself",
                            "%s is set but %s is not (%s's environment)", set, needs[i], who);
    int rank = 0, world = 0, local = 0;
    if (job_env_int(j, size_var, who, 1, 1 << 20, &world) < 0) return -1;
    if (job_env_int(j, rank_var, who, 0, 1 << 20, &rank) < 0) return -1;
    if (job_env_int(j, local_var, who, 0, 1 << 20, &local) < 0) return -1;
    if (rank >= world)
        return job_fail(j, "the launcher's own command, not hand-set variables", "%s=%d is not below %s=%d (%s's environment)",
                        rank_var, rank, size_var, world, who);
    if (local >= world)
        return job_fail(j, "the launcher's own command, not hand-set variables", "%s=%d is not below %s=%d (%s's environment)",
                        local_var, local, size_var, world, who);

    // where rank 0 is: needed as soon as there is another rank
    const char *addr = getenv("MASTER_ADDR");
    int have_port = job_env_int(j, "MASTER_PORT", who, 1, 65535, &j->master_port);
    if (have_port < 0) return -1;
    if (world > 1) {
        const char *how = j->launcher == JOB_MPIRUN ? "export MASTER_ADDR=$(hostname) MASTER_PORT=29500 in the job "
                                                      "script and pass them on: mpirun -x MASTER_ADDR -x MASTER_PORT ..."
                        : j->launcher == JOB_SRUN ? "export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" "
                                                    "| head -n 1) MASTER_PORT=29500 in the job script, before srun"
                                                  : "the launcher's own command (torchrun sets both)";
        if (!addr || !addr[0])
            return job_fail(j, how, "%s sets no MASTER_ADDR (the host of rank 0, where the ranks meet)", who);
        if (!have_port) return job_fail(j, how, "%s sets no MASTER_PORT (the ranks meet at MASTER_PORT + 1)", who);
        if (strlen(addr) >= sizeof(j->master_addr))
            return job_fail(j, "a shorter host name or an address", "MASTER_ADDR is longer than %zu characters",
                            sizeof(j->master_addr) - 1);
        snprintf(j->master_addr, sizeof(j->master_addr), "%s", addr);
    }
    int have_bport = job_env_int(j, "MLP_BOOTSTRAP_PORT", "the bootstrap's port", 1, 65535, &j->port);
    if (have_bport < 0) return -1;
    if (!have_bport && world > 1) {
        if (j->master_port + 1 > 65535)
            return job_fail(j, "MASTER_PORT below 65535, or MLP_BOOTSTRAP_PORT=a free port",
                            "MASTER_PORT=%d leaves no port above it for the bootstrap (MASTER_PORT + 1)", j->master_port);
        j->port = j->master_port + 1;
    }
    if (job_env_seconds(j, "MLP_BOOTSTRAP_TIMEOUT", JOB_BOOTSTRAP_TIMEOUT, &j->timeout_s) < 0) return -1;
    if (job_env_seconds(j, "MLP_LIVENESS_TIMEOUT", JOB_LIVENESS_TIMEOUT, &j->liveness_s) < 0) return -1;
    j->rank = rank;
    j->world = world;
    j->local_rank = local;
    return 1;
}

// ----------------------------------------------------------------------------
// sockets and frames

#define JOB_MAGIC 0x4d4c504au  // "MLPJ"
#define JOB_VERSION 1
#define JOB_HEADER 20
enum { JOB_HELLO = 1, JOB_WELCOME, JOB_REFUSE, JOB_BCAST, JOB_VOTE, JOB_RESULT, JOB_PING, JOB_BYE, JOB_QUIT, JOB_LOST };

typedef struct {
    uint32_t magic, version, type, a, b, len;
} JobFrame;

// every byte of buf out, retrying after signals; 0, or -1 with errno (EAGAIN: SO_SNDTIMEO ran out)
static int job_write_all(int fd, const void *buf, size_t n) {
    const unsigned char *p = (const unsigned char *)buf;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);  // a closed peer is an error here, not SIGPIPE
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

// n bytes into buf: 1 when all came, 0 at the end of the stream, -1 on an error (errno; EAGAIN:
// SO_RCVTIMEO ran out)
static int job_read_all(int fd, void *buf, size_t n) {
    unsigned char *p = (unsigned char *)buf;
    while (n > 0) {
        ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k == 0) return 0;
        if (k < 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 1;
}

static void job_put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}
static uint32_t job_get32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

// One frame on fd: the header, then len bytes. The caller holds send_mu once the watcher runs.
static int job_send_fd(int fd, uint32_t type, uint32_t a, uint32_t b, const void *bytes, size_t len) {
    unsigned char h[JOB_HEADER];
    job_put32(h, JOB_MAGIC);
    h[4] = 0, h[5] = JOB_VERSION, h[6] = (unsigned char)(type >> 8), h[7] = (unsigned char)type;
    job_put32(h + 8, a);
    job_put32(h + 12, b);
    job_put32(h + 16, (uint32_t)len);
    if (job_write_all(fd, h, sizeof(h)) != 0) return -1;
    return len ? job_write_all(fd, bytes, len) : 0;
}

// One frame to a link, with the send lock (frames of the main thread and the watcher never mix)
static int job_send(Job *j, JobLink *l, uint32_t type, uint32_t a, uint32_t b, const void *bytes, size_t len) {
    pthread_mutex_lock(&j->send_mu);
    int rc = l->fd >= 0 ? job_send_fd(l->fd, type, a, b, bytes, len) : -1;
    if (l->fd < 0) errno = ENOTCONN;
    pthread_mutex_unlock(&j->send_mu);
    return rc;
}

// One frame's header from fd into f, and its bytes into *bytes (malloc'd, NUL-terminated; NULL when
// len is 0). Returns 1, 0 at the end of the stream, -1 on an error (errno), -2 when what came is not
// a frame of this protocol (a stray connection), -3 when it is a frame of another version.
static int job_recv_fd(int fd, JobFrame *f, unsigned char **bytes) {
    unsigned char h[JOB_HEADER];
    *bytes = NULL;
    int rc = job_read_all(fd, h, sizeof(h));
    if (rc <= 0) return rc;
    f->magic = job_get32(h);
    f->version = (uint32_t)h[4] << 8 | h[5];
    f->type = (uint32_t)h[6] << 8 | h[7];
    f->a = job_get32(h + 8);
    f->b = job_get32(h + 12);
    f->len = job_get32(h + 16);
    if (f->magic != JOB_MAGIC || f->len > JOB_MAX_BYTES) return -2;
    if (f->version != JOB_VERSION) return -3;
    if (f->len) {
        *bytes = (unsigned char *)malloc((size_t)f->len + 1);
        if (!*bytes) {
            errno = ENOMEM;
            return -1;
        }
        rc = job_read_all(fd, *bytes, f->len);
        if (rc <= 0) {
            free(*bytes);
            *bytes = NULL;
            return rc;
        }
        (*bytes)[f->len] = '\0';
    }
    return 1;
}

// reads and writes on fd give up after `seconds` (EAGAIN)
static void job_set_timeouts(int fd, double seconds) {
    struct timeval tv;
    tv.tv_sec = (time_t)seconds;
    tv.tv_usec = (suseconds_t)((seconds - (double)tv.tv_sec) * 1e6);
    if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1000;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static void job_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // frames are small: send them now
}

// waits up to `seconds` for fd to be ready for `events`: 1 ready, 0 timed out, -1 error
static int job_poll1(int fd, short events, double seconds) {
    struct pollfd p;
    p.fd = fd, p.events = events, p.revents = 0;
    int ms = seconds <= 0 ? 0 : seconds > 1e6 ? 1000000000 : (int)(seconds * 1e3) + 1;
    int rc;
    do rc = poll(&p, 1, ms);
    while (rc < 0 && errno == EINTR);
    return rc;
}

static void job_sleep(double seconds) {
    if (seconds <= 0) return;
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static void job_close_links(Job *j) {
    for (int i = 0; i < j->nlinks; i++)
        if (j->links[i].fd >= 0) close(j->links[i].fd), j->links[i].fd = -1;
}

// ----------------------------------------------------------------------------
// the bootstrap

// Rank 0's listening socket on j->port: on the loopback address when MASTER_ADDR names this
// machine's loopback (nothing outside can connect then), else on every address (IPv6 and IPv4
// both when the machine has IPv6). Returns the socket, or -1 (j->err).
static int job_listen(Job *j) {
    struct sockaddr_storage ss;
    socklen_t sslen = 0;
    memset(&ss, 0, sizeof(ss));
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (j->master_addr[0] && getaddrinfo(j->master_addr, NULL, &hints, &res) == 0 && res) {
        if (res->ai_family == AF_INET &&
            (ntohl(((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr) >> 24) == 127) {
            memcpy(&ss, res->ai_addr, res->ai_addrlen);
            sslen = res->ai_addrlen;
        } else if (res->ai_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr)) {
            memcpy(&ss, res->ai_addr, res->ai_addrlen);
            sslen = res->ai_addrlen;
        }
    }
    if (res) freeaddrinfo(res);
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd;
        if (sslen) {
            fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        } else {  // the wildcard: IPv6 that also takes IPv4, else IPv4
            int v6 = attempt == 0;
            memset(&ss, 0, sizeof(ss));
            if (v6) {
                ((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
                ((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_any;
            } else {
                ((struct sockaddr_in *)&ss)->sin_family = AF_INET;
                ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_ANY);
            }
            fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd >= 0 && v6) {
                int zero = 0;
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
            }
            if (fd < 0 && v6) continue;
        }
        if (fd < 0) return job_fail(j, "", "bootstrap: socket: %s", strerror(errno));
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (ss.ss_family == AF_INET6) ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)j->port);
        else ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)j->port);
        socklen_t len = ss.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
        if (bind(fd, (struct sockaddr *)&ss, len) == 0 && listen(fd, 128) == 0) return fd;
        int e = errno;
        close(fd);
        if (!sslen && attempt == 0 && e != EADDRINUSE && e != EACCES) continue;  // no IPv6 here: IPv4
        return job_fail(j,
                        e == EADDRINUSE ? "MLP_BOOTSTRAP_PORT=a free port on every rank (torchrun's agent holds "
                                          "MASTER_PORT; the bootstrap takes MASTER_PORT + 1 unless told)"
                                        : "MLP_BOOTSTRAP_PORT=a port above 1023",
                        "bootstrap: rank 0 cannot listen on port %d: %s", j->port, strerror(e));
    }
    return job_fail(j, "", "bootstrap: rank 0 cannot listen on port %d", j->port);
}

// "2, 5 and 7": the ranks 1..world-1 whose link has no socket yet
static void job_missing(const Job *j, char *out, size_t n) {
    size_t k = 0;
    int count = 0, total = 0;
    out[0] = '\0';
    for (int i = 0; i < j->nlinks; i++) total += j->links[i].fd < 0;
    for (int i = 0; i < j->nlinks && k + 24 < n; i++) {
        if (j->links[i].fd >= 0) continue;
        count++;
        k += (size_t)snprintf(out + k, n - k, "%s%d", count == 1 ? "" : count == total ? " and " : ", ", i + 1);
    }
    if (count < total && k + 8 < n) snprintf(out + k, n - k, ", ...");
}

// REFUSE to fd: rank 0's failure (j->err without its "rank 0 of N: "), then its hint
static void job_refuse(Job *j, int fd) {
    char text[1000];
    int n = snprintf(text, sizeof(text), "%s\n%s", j->err + j->err_at, j->hint);
    job_send_fd(fd, JOB_REFUSE, 0, 0, text, n < (int)sizeof(text) ? (size_t)n : sizeof(text) - 1);
}

// Rank 0's side: every other rank connects and says HELLO; returns 0 once all have, with a WELCOME
// sent to each, or -1 (j->err), with the reason sent to those that came (REFUSE)
static int job_accept_all(Job *j) {
    int lfd = job_listen(j);
    if (lfd < 0) return -1;
    const double deadline = now_seconds() + j->timeout_s;
    int arrived = 0, failed = 0;
    while (arrived < j->world - 1 && !failed) {
        double left = deadline - now_seconds();
        if (left <= 0 || job_poll1(lfd, POLLIN, left) == 0) {
            char missing[200];
            job_missing(j, missing, sizeof(missing));
            job_fail(j, "start every rank with the same MASTER_ADDR and MASTER_PORT; under Slurm, start them with "
                        "srun; MLP_BOOTSTRAP_TIMEOUT=seconds waits longer",
                     "bootstrap: waited %.0f s for rank%s %s to connect to port %d; %d of %d ranks came", j->timeout_s,
                     j->world - 1 - arrived > 1 ? "s" : "", missing, j->port, arrived + 1, j->world);
            failed = 1;
            break;
        }
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) continue;  // (EINTR, or a connection that went away before it was taken)
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        job_nodelay(fd);
        // a rank says HELLO as soon as it is connected: a connection that does not within a few
        // seconds is not a rank of this job, and is dropped
        double wait = deadline - now_seconds();
        job_set_timeouts(fd, wait < 5 ? (wait > 0.1 ? wait : 0.1) : 5);
        JobFrame f;
        unsigned char *host = NULL;
        int rc = job_recv_fd(fd, &f, &host);
        if (rc == 0 || rc == -1 || rc == -2 || (rc == 1 && f.type != JOB_HELLO)) {  // not a rank: a port scanner
            free(host);
            close(fd);
            continue;
        }
        const char *h = host ? (const char *)host : "?";
        char why[700];
        why[0] = '\0';
        if (rc == -3)
            snprintf(why, sizeof(why), "a rank speaks bootstrap version %u, rank 0 version %d: different builds of the "
                                       "program", f.version, JOB_VERSION);
        else if (f.b != (uint32_t)j->world)
            snprintf(why, sizeof(why), "rank %u (host %s) says the job has %u ranks, rank 0 says %d: the launcher's "
                                       "world size differs between ranks", f.a, h, f.b, j->world);
        else if (f.a == 0 || f.a >= (uint32_t)j->world)
            snprintf(why, sizeof(why), "a process on host %s says it is rank %u of %d, which is not a rank rank 0 waits for",
                     h, f.a, j->world);
        else if (j->links[f.a - 1].fd >= 0)
            snprintf(why, sizeof(why), "two processes say they are rank %u (hosts %s and %s): each rank must be started "
                                       "once", f.a, j->links[f.a - 1].host, h);
        if (why[0]) {
            job_fail(j, "the same launcher command for every rank (and the same build of the program)", "bootstrap: %s",
                     why);
            job_refuse(j, fd);
            close(fd);
            free(host);
            failed = 1;
            break;
        }
        JobLink *l = &j->links[f.a - 1];
        l->fd = fd;
        snprintf(l->host, sizeof(l->host), "%s", h);
        free(host);
        arrived++;
    }
    close(lfd);
    // (a rank that left before its WELCOME is lost to the watcher, which says so on every rank)
    for (int i = 0; i < j->nlinks; i++) {
        if (j->links[i].fd < 0) continue;
        if (failed) job_refuse(j, j->links[i].fd);
        else job_send_fd(j->links[i].fd, JOB_WELCOME, (uint32_t)j->world, 0, NULL, 0);
    }
    if (failed) job_close_links(j);
    return failed ? -1 : 0;
}

// One attempt to connect to addr within `seconds`: the socket, or -1 with errno
static int job_connect_once(const struct addrinfo *ai, double seconds) {
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int flags = fcntl(fd, F_GETFL, 0);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
        rc = job_poll1(fd, POLLOUT, seconds);
        if (rc == 0) errno = ETIMEDOUT, rc = -1;
        else if (rc > 0) {
            int e = 0;
            socklen_t el = sizeof(e);
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
            if (e) errno = e, rc = -1;
            else rc = 0;
        }
    }
    if (rc != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    fcntl(fd, F_SETFL, flags);
    return fd;
}

// A rank's side: connects to rank 0 (retrying until it listens), says HELLO, and waits for the
// WELCOME. Returns 0, or -1 (j->err).
static int job_join(Job *j) {
    char port[16];
    snprintf(port, sizeof(port), "%d", j->port);
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    const double deadline = now_seconds() + j->timeout_s;
    double pause = 0.05;
    int fd = -1, last_errno = 0;
    char last_what[400] = "no attempt";
    while (fd < 0) {
        struct addrinfo *res = NULL;
        int g = getaddrinfo(j->master_addr, port, &hints, &res);
        if (g == EAI_NONAME || g == EAI_FAIL || g == EAI_SERVICE || g == EAI_FAMILY)
            return job_fail(j, "MASTER_ADDR=the host name or address of rank 0's machine",
                            "bootstrap: cannot resolve MASTER_ADDR=%s: %s", j->master_addr, gai_strerror(g));
        if (g != 0) snprintf(last_what, sizeof(last_what), "resolving %s: %s", j->master_addr, gai_strerror(g));
        for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
            double left = deadline - now_seconds();
            fd = job_connect_once(ai, left < 2 ? left : 2);
            if (fd < 0) last_errno = errno, snprintf(last_what, sizeof(last_what), "%s", strerror(last_errno));
        }
        if (res) freeaddrinfo(res);
        if (fd >= 0) break;
        double left = deadline - now_seconds();
        if (left <= 0)
            return job_fail(j, "is rank 0 running? the same MASTER_ADDR, MASTER_PORT and MLP_BOOTSTRAP_PORT on every "
                               "rank; the port open between the machines; MLP_BOOTSTRAP_TIMEOUT=seconds waits longer",
                            "bootstrap: could not reach rank 0 at %s port %d for %.0f s (%s)", j->master_addr, j->port,
                            j->timeout_s, last_what);
        job_sleep(pause < left ? pause : left);
        pause = pause * 2 < 1 ? pause * 2 : 1;
    }
    job_nodelay(fd);
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    job_set_timeouts(fd, 5);
    if (job_send_fd(fd, JOB_HELLO, (uint32_t)j->rank, (uint32_t)j->world, host, strlen(host)) != 0) {
        int e = errno;
        close(fd);
        return job_fail(j, "rank 0's own output says why", "bootstrap: rank 0 at %s port %d closed the connection: %s",
                        j->master_addr, j->port, strerror(e));
    }
    // rank 0 welcomes every rank once all have come: it gives up first (its timeout began before
    // this rank could connect) and says why, so this wait, a little longer, is only the backstop
    JobFrame f;
    unsigned char *bytes = NULL;
    int rc = job_poll1(fd, POLLIN, j->timeout_s + 5);
    rc = rc > 0 ? job_recv_fd(fd, &f, &bytes) : -4;
    const int e = errno;
    if (rc == 1 && f.type == JOB_WELCOME) {
        free(bytes);
        j->links[0].fd = fd;
        return 0;
    }
    close(fd);
    if (rc == 1 && f.type == JOB_REFUSE && bytes) {  // rank 0's line, then its hint
        char *why = (char *)bytes, *hint = strchr(why, '\n');
        if (hint) *hint++ = '\0';
        if (strncmp(why, "bootstrap: ", 11) == 0) why += 11;
        job_fail(j, hint ? hint : "", "bootstrap: rank 0 ended it: %s", why);
    } else if (rc == 0 || rc == -1) {
        job_fail(j, "rank 0's own output says why", "bootstrap: rank 0 at %s port %d closed the connection before "
                 "the bootstrap ended (%s)", j->master_addr, j->port, rc == 0 ? "it ended" : strerror(e));
    } else if (rc == -4) {
        job_fail(j, "rank 0's own output; MLP_BOOTSTRAP_TIMEOUT=seconds waits longer", "bootstrap: rank 0 at %s port %d "
                 "took this rank's HELLO but did not end the bootstrap within %.0f s", j->master_addr, j->port,
                 j->timeout_s + 5);
    } else {
        job_fail(j, "MLP_BOOTSTRAP_PORT=a port no other program uses, the same on every rank", "bootstrap: what listens "
                 "at %s port %d is not rank 0 of this program (another program, or another build)", j->master_addr,
                 j->port);
    }
    free(bytes);
    return -1;
}

// ----------------------------------------------------------------------------
// liveness: the watcher thread

static double job_ping_every(const Job *j) {
    double p = j->liveness_s / 8;
    return p < 0.05 ? 0.05 : p > 1 ? 1 : p;
}

static int job_lock_within(pthread_mutex_t *mu, double seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)seconds;
    return pthread_mutex_timedlock(mu, &ts) == 0;
}

// The end of this process, from the watcher: one line on stderr, and exit JOB_EXIT_LOST (not 1, so
// that a launcher, -g's spawner among them, tells the lost rank from those it took along). Rank 0 first tells
// the other ranks which one it lost (LOST: its host, why, what to try), so that every rank's line
// names the same rank. The main thread may be anywhere, blocked on the GPU or holding a lock: the
// watcher takes locks only with a time limit, and ends with _exit (the top of the file says why).
static void job_lost(Job *j, int who, const char *host, const char *why, const char *hint) __attribute__((noreturn));
static void job_lost(Job *j, int who, const char *host, const char *why, const char *hint) {
    if (j->rank == 0 && job_lock_within(&j->send_mu, 1)) {
        char note[1400];
        int n = snprintf(note, sizeof(note), "%s\n%s\n%s", host, why, hint);
        for (int i = 0; i < j->nlinks; i++) {
            JobLink *l = &j->links[i];
            if (l->rank != who && l->fd >= 0 && !l->bye) {
                job_set_timeouts(l->fd, 1);
                job_send_fd(l->fd, JOB_LOST, (uint32_t)who, 0, note, n < (int)sizeof(note) ? (size_t)n : sizeof(note) - 1);
            }
        }
        pthread_mutex_unlock(&j->send_mu);
    }
    char line[2000];
    int n = snprintf(line, sizeof(line), "error: rank %d of %d: lost rank %d (host %s): %s ---> try: %s\n", j->rank,
                     j->world, who, host[0] ? host : "?", why, hint);
    if (ftrylockfile(stdout) == 0) {  // what the trainer printed so far, unless it is printing now
        fflush(stdout);
        funlockfile(stdout);
    }
    if (n > 0 && write(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0) {}
    _exit(JOB_EXIT_LOST);
}

// One frame from link l, read by the watcher: the mailboxes, or the end of the process
static void job_take_frame(Job *j, JobLink *l) {
    JobFrame f;
    unsigned char *bytes = NULL;
    int rc = job_recv_fd(l->fd, &f, &bytes);
    if (rc != 1) {
        int e = errno;
        if (l->bye || j->stopping) {  // the normal end: it said BYE, or every rank is stopping
            pthread_mutex_lock(&j->mu);
            l->bye = 1;
            pthread_cond_broadcast(&j->cv);
            pthread_mutex_unlock(&j->mu);
            return;
        }
        char why[300];
        if (rc == 0 || (rc == -1 && (e == ECONNRESET || e == EPIPE)))
            snprintf(why, sizeof(why), "its connection closed without a word: the process ended (killed, crashed, or "
                                       "out of memory)");
        else if (rc == -1 && (e == EAGAIN || e == EWOULDBLOCK))
            snprintf(why, sizeof(why), "a frame from it stalled for %.0f s", j->liveness_s);
        else if (rc == -1) snprintf(why, sizeof(why), "reading from it failed: %s", strerror(e));
        else snprintf(why, sizeof(why), "it sent something that is not a frame of this job");
        char hint[400];
        snprintf(hint, sizeof(hint), "rank %d's own output; dmesg on host %s for the out-of-memory killer", l->rank,
                 l->host);
        job_lost(j, l->rank, l->host, why, hint);
    }
    l->last_heard = now_seconds();
    switch (f.type) {
    case JOB_VOTE:    // (rank 0) this rank's vote
    case JOB_RESULT:  // (the others) the vote's outcome
        pthread_mutex_lock(&j->mu);
        if (f.type == JOB_RESULT && f.b) j->stopping = 1;  // before anyone can see a socket close
        l->vote_seq = f.a;
        l->vote = (int)f.b;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
        break;
    case JOB_BCAST: {  // (the others) queued for job_broadcast
        JobBlob *b = (JobBlob *)calloc(1, sizeof(JobBlob));
        if (!b) job_lost(j, j->rank, "", "out of host memory for rank 0's broadcast", "a smaller broadcast");
        b->seq = f.a, b->len = f.len, b->bytes = bytes;
        bytes = NULL;
        pthread_mutex_lock(&j->mu);
        JobBlob **tail = &l->blobs;
        while (*tail) tail = &(*tail)->next;
        *tail = b;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
        break;
    }
    case JOB_BYE:
        pthread_mutex_lock(&j->mu);
        l->bye = 1;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
        break;
    case JOB_QUIT: {
        char hint[200];
        snprintf(hint, sizeof(hint), "rank %d's own error line", l->rank);
        job_lost(j, l->rank, l->host, "it ended early, with an error of its own", hint);
    }
    case JOB_LOST: {  // (the others) rank 0 lost a rank: host, why and hint, one a line
        char *host = bytes ? (char *)bytes : (char *)"?", *why = strchr(host, '\n'), *hint = NULL;
        if (why) *why++ = '\0', hint = strchr(why, '\n');
        if (hint) *hint++ = '\0';
        char said[600];
        snprintf(said, sizeof(said), "%s (rank 0 saw it)", why ? why : "rank 0 lost it");
        job_lost(j, (int)f.a, host, said, hint ? hint : "");
    }
    default:  // JOB_PING, and anything a later version adds
        break;
    }
    free(bytes);
}

// The watcher: reads every socket of the job, pings along each, and ends the process when a rank
// is lost; job_finish ends it through the wake pipe
static void *job_watch(void *arg) {
    Job *j = (Job *)arg;
    const double every = job_ping_every(j);
    struct pollfd *p = (struct pollfd *)calloc((size_t)j->nlinks + 1, sizeof(struct pollfd));
    int *which = (int *)calloc((size_t)j->nlinks + 1, sizeof(int));
    if (!p || !which) job_lost(j, j->rank, "", "out of host memory for the watcher", "");
    double last_ping = 0;
    for (;;) {
        int n = 0;
        p[n].fd = j->wake[0], p[n].events = POLLIN, p[n].revents = 0, n++;
        for (int i = 0; i < j->nlinks; i++)
            if (j->links[i].fd >= 0 && !j->links[i].bye) p[n].fd = j->links[i].fd, p[n].events = POLLIN, p[n].revents = 0,
                                                        which[n++] = i;
        int rc = poll(p, (nfds_t)n, (int)(every * 1e3));
        if (rc < 0 && errno != EINTR) job_lost(j, j->rank, "", "poll failed in the watcher", "");
        if (rc > 0 && p[0].revents) break;  // job_finish
        for (int k = 1; rc > 0 && k < n; k++)
            if (p[k].revents) job_take_frame(j, &j->links[which[k]]);
        const double now = now_seconds();
        for (int i = 0; i < j->nlinks; i++) {
            JobLink *l = &j->links[i];
            if (l->fd < 0 || l->bye || j->stopping || now - l->last_heard <= j->liveness_s) continue;
            char why[200], hint[400];
            snprintf(why, sizeof(why), "nothing heard from it for %.0f s (its machine or the network is down, or the "
                                       "process is stopped)", now - l->last_heard);
            snprintf(hint, sizeof(hint), "is host %s up and reachable? MLP_LIVENESS_TIMEOUT=seconds waits longer",
                     l->host);
            job_lost(j, l->rank, l->host, why, hint);
        }
        // pings: skipped while the main thread is sending (its frames are heard too)
        if (now - last_ping >= every && pthread_mutex_trylock(&j->send_mu) == 0) {
            for (int i = 0; i < j->nlinks; i++)
                if (j->links[i].fd >= 0 && !j->links[i].bye) job_send_fd(j->links[i].fd, JOB_PING, 0, 0, NULL, 0);
            pthread_mutex_unlock(&j->send_mu);
            last_ping = now;
        }
    }
    free(p);
    free(which);
    return NULL;
}

// ----------------------------------------------------------------------------
// the job's life: connect, broadcast, agree, finish

static Job *job_live = NULL;  // the job this process is a rank of, for the exit handler
static int job_finish(Job *j);

// At exit, a rank that did not call job_finish: after a vote to stop, or with exit status 0, it
// ends the job as job_finish does (every rank waits at its exit for the others, so rank 0's
// checkpoint is written before any rank's launcher sees a rank end); after an error, it tells
// the others (QUIT), who end with a line saying so.
static void job_on_exit(int status, void *arg) {
    (void)arg;
    Job *j = job_live;
    if (!j || !j->connected || j->finished) return;
    if (status == 0 || j->stopping) {
        job_finish(j);
        return;
    }
    if (!job_lock_within(&j->send_mu, 1)) return;
    for (int i = 0; i < j->nlinks; i++)
        if (j->links[i].fd >= 0 && !j->links[i].bye) {
            job_set_timeouts(j->links[i].fd, 1);
            job_send_fd(j->links[i].fd, JOB_QUIT, 0, 0, NULL, 0);
        }
    pthread_mutex_unlock(&j->send_mu);
}
#ifndef __GLIBC__
static void job_at_exit(void) { job_on_exit(job_live && job_live->stopping ? 0 : 1, NULL); }
#endif

// The bootstrap: every rank of the job calls it once, before anything else talks between ranks.
// Returns 0 when all ranks have joined (the watcher then runs until job_finish), or -1 (j->err,
// j->hint; every rank then fails, each with a line). A job of one rank joins nothing.
static int job_connect(Job *j) {
    if (j->connected) return 0;
    if (j->world <= 1) {
        j->connected = 1;
        return 0;
    }
    j->nlinks = j->rank == 0 ? j->world - 1 : 1;
    j->links = (JobLink *)calloc((size_t)j->nlinks, sizeof(JobLink));
    if (!j->links) return job_fail(j, "", "out of host memory for %d links", j->nlinks);
    for (int i = 0; i < j->nlinks; i++) {
        j->links[i].fd = -1;
        j->links[i].rank = j->rank == 0 ? i + 1 : 0;
        snprintf(j->links[i].host, sizeof(j->links[i].host), "%s", j->rank == 0 ? "?" : j->master_addr);
    }
    if ((j->rank == 0 ? job_accept_all(j) : job_join(j)) != 0) {
        free(j->links);
        j->links = NULL;
        return -1;
    }
    const double now = now_seconds();
    for (int i = 0; i < j->nlinks; i++) {
        j->links[i].last_heard = now;
        job_set_timeouts(j->links[i].fd, j->liveness_s);  // a frame that stalls this long is a lost rank
    }
    pthread_mutex_init(&j->mu, NULL);
    pthread_mutex_init(&j->send_mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    if (pipe(j->wake) != 0) return job_fail(j, "", "pipe: %s", strerror(errno));
    fcntl(j->wake[0], F_SETFD, FD_CLOEXEC);
    fcntl(j->wake[1], F_SETFD, FD_CLOEXEC);
    int rc = pthread_create(&j->watcher, NULL, job_watch, j);
    if (rc != 0) return job_fail(j, "", "cannot start the watcher thread: %s", strerror(rc));
    j->watching = 1;
    j->connected = 1;
    static int registered = 0;
    if (!registered) {
#ifdef __GLIBC__
        on_exit(job_on_exit, NULL);
#else
        atexit(job_at_exit);
#endif
        registered = 1;
    }
    job_live = j;
    return 0;
}

// waits for the watcher to change a mailbox (the caller holds mu); a lost rank ends the process
static void job_wait(Job *j) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 1;
    pthread_cond_timedwait(&j->cv, &j->mu, &ts);
}

// len bytes at buf from rank 0 to every rank: rank 0 sends its bytes, the others receive them
// into buf. Every rank calls it at the same point with the same len (a rank given another len fails:
// different builds). Returns 0, or -1 (j->err).
static int job_broadcast(Job *j, void *buf, size_t len) {
    if (len > JOB_MAX_BYTES)
        return job_fail(j, "a smaller broadcast", "a broadcast of %zu bytes is more than the %u a rank accepts", len,
                        JOB_MAX_BYTES);
    if (j->world <= 1) return 0;
    if (!j->connected || j->finished) return job_fail(j, "job_connect first", "a broadcast outside the job");
    const uint32_t seq = ++j->bcast_seq;
    if (j->rank == 0) {
        for (int i = 0; i < j->nlinks; i++) {
            JobLink *l = &j->links[i];
            if (job_send(j, l, JOB_BCAST, seq, 0, buf, len) != 0)
                return job_fail(j, "that rank's own output says why it ended", "cannot send the broadcast to rank %d "
                                "(host %s): %s", l->rank, l->host, strerror(errno));
        }
        return 0;
    }
    JobLink *l = &j->links[0];
    pthread_mutex_lock(&j->mu);
    while (!l->blobs && !l->bye) job_wait(j);
    JobBlob *b = l->blobs;
    if (b) l->blobs = b->next;
    pthread_mutex_unlock(&j->mu);
    if (!b) return job_fail(j, "the same program and steps on every rank", "rank 0 ended the job before its broadcast");
    int ok = b->seq == seq && b->len == len;
    if (ok && len) memcpy(buf, b->bytes, len);
    if (!ok)
        job_fail(j, "the same build of the program on every rank", "rank 0's broadcast %u has %zu bytes where this rank "
                 "expects broadcast %u of %zu: different builds of the program?", b->seq, b->len, seq, len);
    free(b->bytes);
    free(b);
    return ok ? 0 : -1;
}

// A vote: every rank calls it at the same point (a log line) with a value >= 0, and every rank
// gets the same answer, the largest value given. With the stop signal as the value (0: none) it
// stops every rank at the same step; with 0 it is a barrier. Returns the answer, or -1 (j->err).
static int job_agree(Job *j, int value) {
    if (value < 0) value = 0;
    if (j->world <= 1) {
        if (value) j->stopping = 1;
        return value;
    }
    if (!j->connected || j->finished) return job_fail(j, "job_connect first", "a vote outside the job");
    const uint32_t seq = ++j->vote_seq;
    int result = value;
    if (j->rank == 0) {
        pthread_mutex_lock(&j->mu);
        for (;;) {
            int all = 1;
            for (int i = 0; i < j->nlinks; i++) {
                JobLink *l = &j->links[i];
                if (l->vote_seq >= seq) continue;
                if (l->bye) {
                    pthread_mutex_unlock(&j->mu);
                    return job_fail(j, "the same number of steps and log lines on every rank", "rank %d ended the job "
                                    "while rank 0 waited for its vote %u", l->rank, seq);
                }
                all = 0;
            }
            if (all) break;
            job_wait(j);
        }
        for (int i = 0; i < j->nlinks; i++)
            if (j->links[i].vote > result) result = j->links[i].vote;
        if (result) j->stopping = 1;  // before any rank hears the answer and ends
        pthread_mutex_unlock(&j->mu);
        for (int i = 0; i < j->nlinks; i++)
            if (job_send(j, &j->links[i], JOB_RESULT, seq, (uint32_t)result, NULL, 0) != 0 && !j->stopping)
                return job_fail(j, "that rank's own output says why it ended", "cannot send the vote to rank %d: %s",
                                j->links[i].rank, strerror(errno));
        return result;
    }
    JobLink *l = &j->links[0];
    if (job_send(j, l, JOB_VOTE, seq, (uint32_t)value, NULL, 0) != 0)
        return job_fail(j, "rank 0's own output says why it ended", "cannot send this rank's vote to rank 0: %s",
                        strerror(errno));
    pthread_mutex_lock(&j->mu);
    while (l->vote_seq < seq && !l->bye) job_wait(j);
    int got = l->vote_seq >= seq;
    result = l->vote;
    pthread_mutex_unlock(&j->mu);
    if (!got)
        return job_fail(j, "the same number of steps and log lines on every rank", "rank 0 ended the job while this "
                        "rank waited for vote %u", seq);
    return result;
}

// The normal end of the job, on every rank: waits until every rank has come here too (rank 0
// last: it may still be writing its checkpoint), then closes the sockets. After it no socket
// closing is a lost rank. Returns 0.
static int job_finish(Job *j) {
    if (!j->connected || j->finished) return 0;
    j->finished = 1;
    if (j->world > 1) {
        if (j->rank == 0) {
            pthread_mutex_lock(&j->mu);
            for (;;) {  // every rank's BYE (one waiting for a vote rank 0 will not take is told so by the BYE)
                int all = 1;
                for (int i = 0; i < j->nlinks; i++)
                    if (!j->links[i].bye && j->links[i].vote_seq <= j->vote_seq) all = 0;
                if (all) break;
                job_wait(j);
            }
            pthread_mutex_unlock(&j->mu);
            for (int i = 0; i < j->nlinks; i++) job_send(j, &j->links[i], JOB_BYE, 0, 0, NULL, 0);
        } else {
            job_send(j, &j->links[0], JOB_BYE, 0, 0, NULL, 0);
            pthread_mutex_lock(&j->mu);
            while (!j->links[0].bye) job_wait(j);
            pthread_mutex_unlock(&j->mu);
        }
        if (write(j->wake[1], "x", 1) < 0) {}
        pthread_join(j->watcher, NULL);
        j->watching = 0;
        // a graceful close: no more from this side, then what the other side still sends, until it
        // closes too (or a second passes), so that no frame is cut off by a reset
        for (int i = 0; i < j->nlinks; i++)
            if (j->links[i].fd >= 0) shutdown(j->links[i].fd, SHUT_WR);
        const double until = now_seconds() + 1;
        for (int i = 0; i < j->nlinks; i++) {
            JobLink *l = &j->links[i];
            char sink[256];
            while (l->fd >= 0 && job_poll1(l->fd, POLLIN, until - now_seconds()) > 0 && recv(l->fd, sink, sizeof(sink), 0) > 0) {}
            while (l->blobs) {
                JobBlob *b = l->blobs;
                l->blobs = b->next;
                free(b->bytes);
                free(b);
            }
        }
        job_close_links(j);
        close(j->wake[0]);
        close(j->wake[1]);
        free(j->links);
        j->links = NULL;
        j->nlinks = 0;
    }
    j->connected = 0;
    if (job_live == j) job_live = NULL;
    return 0;
}

// ----------------------------------------------------------------------------
// -g N: N ranks of this program on this machine

#define JOB_MAX_SPAWN 1024
#define JOB_SPAWN_GRACE 5.0  // seconds the other ranks have to end by themselves after one is lost

static volatile pid_t job_children[JOB_MAX_SPAWN];
static volatile int job_nchildren = 0;

// SIGINT, SIGTERM and SIGHUP to the spawner go on to every rank (each is in its own process
// group, so a Ctrl-C at the terminal reaches them through here, once)
static void job_forward_signal(int sig) {
    int saved = errno;
    for (int r = 0; r < job_nchildren; r++)
        if (job_children[r] > 0) kill(job_children[r], sig);
    errno = saved;
}

// a TCP port free on 127.0.0.1 now (the kernel's pick), or -1
static int job_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

// argv without `flag` (and its other spelling `alt`, may be NULL) and the value after it, as a
// NULL-terminated array for job_spawn (the strings are argv's). Every flag of the command line
// takes one value, so the arguments are walked in pairs: a value that looks like the flag is
// not taken for it.
static char **job_argv_without(int argc, char **argv, const char *flag, const char *alt) {
    char **out = (char **)calloc((size_t)argc + 1, sizeof(char *));
    if (!out) return NULL;
    int n = 0;
    if (argc > 0) out[n++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], flag) == 0 || (alt && strcmp(argv[i], alt) == 0)) {
            i++;  // and its value
            continue;
        }
        out[n++] = argv[i];
        if (argv[i][0] == '-' && i + 1 < argc) out[n++] = argv[++i];
    }
    out[n] = NULL;
    return out;
}

static const char *job_signal_name(int sig) {
    switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    default: return "a signal";
    }
}

// An exit status with which a rank ended of its own accord, not lost: 0; a stop on a signal, which
// every rank votes for and ends with (128 + SIGINT, SIGTERM, SIGHUP or SIGPIPE); or a usage error,
// which every rank finds alike before the ranks meet (rank 0 says it, the others end quietly)
static int job_ended_itself(int status) {
    return status == 0 || status == EXIT_USAGE || status == 128 + SIGINT || status == 128 + SIGTERM ||
           status == 128 + SIGHUP || status == 128 + SIGPIPE;
}

// -g N: starts n ranks of this program (this executable, /proc/self/exe, with argv: the command
// line without -g), each with the environment torchrun would give it (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT and MLP_BOOTSTRAP_PORT a free
// port) and NCCL_NVLS_ENABLE=0; forwards SIGINT, SIGTERM and SIGHUP to them; waits for them all.
// When one ends abnormally (a signal, or an exit status other than 0 and 130), the others get
// JOB_SPAWN_GRACE seconds to end by themselves (the liveness watch ends them) before SIGKILL, and
// one line names the rank. Returns the exit status for this process: the largest of the ranks'
// own endings (job_ended_itself: 0, a stop on a signal, a usage error), else the lost rank's (its
// status, or 128 + its signal).
static int job_spawn(int n, char **argv) {
    if (n < 1 || n > JOB_MAX_SPAWN) {
        fprintf(stderr, "error: -g %d: between 1 and %d ranks\n", n, JOB_MAX_SPAWN);
        return EXIT_USAGE;
    }
    if (!argv) {  // (job_argv_without's answer when out of memory)
        fprintf(stderr, "error: -g %d: out of host memory for the ranks' command line\n", n);
        return EXIT_RUNTIME;
    }
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    const int port = job_free_port();
    if (port < 0) {
        fprintf(stderr, "error: -g %d: no free TCP port on 127.0.0.1 for the ranks to meet: %s\n", n, strerror(errno));
        return EXIT_RUNTIME;
    }
    // each rank's environment: this one's, less the variables a launcher sets, plus its own
    static const char *const drop[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                       "MASTER_PORT", "MLP_BOOTSTRAP_PORT", "MLP_JOB_SPAWNED", "NCCL_NVLS_ENABLE"};
    const int ndrop = (int)(sizeof(drop) / sizeof(drop[0])), nown = 9;
    int count = 0;
    while (environ[count]) count++;
    char ***envs = (char ***)calloc((size_t)n, sizeof(char **));
    char *own = (char *)calloc((size_t)n * nown, 64);
    if (!envs || !own) {
        fprintf(stderr, "error: -g %d: out of host memory\n", n);
        return EXIT_RUNTIME;
    }
    for (int r = 0; r < n; r++) {
        char **e = envs[r] = (char **)calloc((size_t)count + nown + 1, sizeof(char *));
        if (!e) {
            fprintf(stderr, "error: -g %d: out of host memory\n", n);
            return EXIT_RUNTIME;
        }
        int k = 0;
        for (int i = 0; i < count; i++) {
            int keep = 1;
            for (int d = 0; d < ndrop && keep; d++) {
                size_t dl = strlen(drop[d]);
                if (strncmp(environ[i], drop[d], dl) == 0 && environ[i][dl] == '=') keep = 0;
            }
            if (keep) e[k++] = environ[i];
        }
        char *o = own + (size_t)r * nown * 64;
        const char *fmt[] = {"RANK=%d", "WORLD_SIZE=%d", "LOCAL_RANK=%d", "LOCAL_WORLD_SIZE=%d", "MASTER_ADDR=127.0.0.1",
                             "MASTER_PORT=%d", "MLP_BOOTSTRAP_PORT=%d", "MLP_JOB_SPAWNED=1", "NCCL_NVLS_ENABLE=0"};
        const int val[] = {r, n, r, n, 0, port, port, 0, 0};
        for (int v = 0; v < nown; v++) {
            snprintf(o + v * 64, 64, fmt[v], val[v]);
            e[k++] = o + v * 64;
        }
        e[k] = NULL;
    }

    // the signals wait while the ranks start, so that each child is in the table before any
    // signal is forwarded, and no child runs the forwarding handler before its exec
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &old);
    struct sigaction fwd, prev[3], dfl;
    memset(&fwd, 0, sizeof(fwd));
    fwd.sa_handler = job_forward_signal;
    sigemptyset(&fwd.sa_mask);
    fwd.sa_flags = SA_RESTART;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
    for (int s = 0; s < 3; s++) sigaction(sigs[s], &fwd, &prev[s]);
    const pid_t parent = getpid();
    job_nchildren = 0;
    int started = 0;
    for (int r = 0; r < n; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            for (int s = 0; s < 3; s++) sigaction(sigs[s], &dfl, NULL);
            sigprocmask(SIG_SETMASK, &old, NULL);
            setpgid(0, 0);
#ifdef __linux__
            prctl(PR_SET_PDEATHSIG, SIGKILL);  // the spawner killed by SIGKILL takes its ranks with it
            if (getppid() != parent) _exit(EXIT_RUNTIME);
#endif
            execve("/proc/self/exe", argv, envs[r]);
            fprintf(stderr, "error: -g %d: cannot start rank %d (exec /proc/self/exe): %s\n", n, r, strerror(errno));
            _exit(127);
        }
        if (pid < 0) {
            fprintf(stderr, "error: -g %d: cannot start rank %d: fork: %s\n", n, r, strerror(errno));
            break;
        }
        setpgid(pid, pid);  // (also in the child: whichever runs first)
        job_children[r] = pid;
        job_nchildren = r + 1;
        started++;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    for (int r = 0; r < n; r++) free(envs[r]);
    free(envs);
    free(own);

    // wait for every rank; the lost one is the first to end abnormally, other than by losing a rank
    // (JOB_EXIT_LOST: those end a moment after it, maybe before this loop has seen it end)
    // A usage error that one rank alone found (rank 0's outputs, say) leaves the others waiting for
    // it at the bootstrap: they are ended after the grace too, without a word (its line said why).
    int alive = started, lost = started < n ? started : -1, lost_status = 0, code = 0, quiet = 0;
    double kill_at = started < n ? now_seconds() : 0, quiet_at = 0;
    while (alive > 0) {
        int reaped = 0;
        for (int r = 0; r < started; r++) {
            int st;
            if (job_children[r] <= 0 || waitpid(job_children[r], &st, WNOHANG) != job_children[r]) continue;
            job_children[r] = 0;
            alive--, reaped++;
            if (quiet) continue;  // (ended by the spawner after a usage error)
            if (WIFEXITED(st) && job_ended_itself(WEXITSTATUS(st))) {
                if (WEXITSTATUS(st) > code) code = WEXITSTATUS(st);
                if (WEXITSTATUS(st) == EXIT_USAGE && !quiet_at) quiet_at = now_seconds() + JOB_SPAWN_GRACE;
            } else if (lost < 0 || (WIFEXITED(lost_status) && WEXITSTATUS(lost_status) == JOB_EXIT_LOST &&
                                    !(WIFEXITED(st) && WEXITSTATUS(st) == JOB_EXIT_LOST))) {
                if (lost < 0) kill_at = now_seconds() + JOB_SPAWN_GRACE;
                lost = r, lost_status = st;
            }
        }
        if (lost >= 0 && alive > 0 && now_seconds() >= kill_at) {
            for (int r = 0; r < started; r++)
                if (job_children[r] > 0) kill(job_children[r], SIGKILL);
            kill_at = now_seconds() + 3600;
        }
        if (lost < 0 && quiet_at && alive > 0 && now_seconds() >= quiet_at) {
            for (int r = 0; r < started; r++)
                if (job_children[r] > 0) kill(job_children[r], SIGKILL);
            quiet = 1, quiet_at = now_seconds() + 3600;
        }
        if (alive > 0 && !reaped) job_sleep(0.02);
    }
    job_nchildren = 0;
    for (int s = 0; s < 3; s++) sigaction(sigs[s], &prev[s], NULL);
    if (lost < 0) return code;
    fflush(stdout);
    if (lost == started) return EXIT_RUNTIME;  // (a fork failed: said above)
    if (WIFSIGNALED(lost_status)) {
        int sig = WTERMSIG(lost_status);
        fprintf(stderr, "error: -g %d: rank %d was killed by %s (signal %d); the other ranks were ended ---> try: "
                "rank %d's output above%s\n", n, lost, job_signal_name(sig), sig, lost,
                sig == SIGKILL ? "; dmesg for the out-of-memory killer" : "");
        return 128 + sig;
    }
    fprintf(stderr, "error: -g %d: rank %d exited with status %d; the other ranks were ended ---> try: rank %d's "
            "error line above\n", n, lost, WEXITSTATUS(lost_status), lost);
    return WEXITSTATUS(lost_status);
}

#endif // MLP_JOB_H
