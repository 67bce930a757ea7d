/*
dev/timeline.c: every kernel a CUDA program runs, with its start and end on the GPU, as a CSV, for
dev/timeline.py to read. ncu times each kernel alone (serialised, caches flushed); inside a CUDA
graph the step's kernels overlap on three streams and find their operands in L2, so their times
there differ, and the step's length is set by its critical path, which ncu cannot see. This is
what Nsight Systems would show, for machines that do not have it.

How: a CUDA injection library. The CUDA driver loads the shared library named by
CUDA_INJECTION64_PATH into any program and calls its InitializeInjection(); that asks CUPTI (the
toolkit's profiling interface) to record every kernel's execution (the "concurrent kernel"
activity: start and end timestamps in ns, stream, grid, and the graph node it was launched from),
and writes the records out as CUPTI hands over its buffers, and at exit.

    make dev/bin/libtimeline.so
    CUDA_INJECTION64_PATH=$PWD/dev/bin/libtimeline.so TIMELINE_CSV=/tmp/t.csv ./train_mlp_fast ...
    python3 dev/timeline.py /tmp/t.csv

TIMELINE_CSV: where the CSV goes (default timeline.csv); a "%p" in it becomes the process id, so
that each rank of a -g N run writes its own file. Columns: name (mangled), start_ns, end_ns,
stream, graph_id, graph_node, grid (x*y*z blocks), block (threads).
*/
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUF_BYTES (8u << 20)  // each activity buffer CUPTI fills; records are a few hundred bytes

static FILE *out = NULL;

#define CUPTI_CHECK(call)                                                                  \
    do {                                                                                   \
        CUptiResult r_ = (call);                                                           \
        if (r_ != CUPTI_SUCCESS) {                                                         \
            const char *s_ = NULL;                                                         \
            cuptiGetResultString(r_, &s_);                                                 \
            fprintf(stderr, "timeline: %s failed: %s\n", #call, s_ ? s_ : "unknown error"); \
            return 0;                                                                      \
        }                                                                                  \
    } while (0)

// CUPTI asks for an empty buffer to fill
static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = (uint8_t *)aligned_alloc(8, BUF_BYTES);
    *size = *buffer ? BUF_BYTES : 0;
    *max_records = 0;  // as many as fit
}

// CUPTI hands back a filled buffer: one CSV row per kernel record
static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *rec = NULL;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        if (out)
            fprintf(out, "%s,%llu,%llu,%u,%u,%llu,%d,%d\n", k->name ? k->name : "?", (unsigned long long)k->start,
                    (unsigned long long)k->end, k->streamId, k->graphId, (unsigned long long)k->graphNodeId,
                    k->gridX * k->gridY * k->gridZ, k->blockX * k->blockY * k->blockZ);
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS && dropped)
        fprintf(stderr, "timeline: CUPTI dropped %zu records\n", dropped);
    free(buffer);
}

static void finish(void) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (out) fclose(out);
    out = NULL;
}

// called by the CUDA driver when it loads this library (CUDA_INJECTION64_PATH); 1: success
int InitializeInjection(void) {
    const char *path = getenv("TIMELINE_CSV");
    if (!path || !*path) path = "timeline.csv";
    char named[4096];   // "%p" in the name: this process's id (each rank of a -g N run writes its own)
    const char *p = strstr(path, "%p");
    if (p) {
        snprintf(named, sizeof(named), "%.*s%d%s", (int)(p - path), path, (int)getpid(), p + 2);
        path = named;
    }
    out = fopen(path, "w");
    if (!out) {
        fprintf(stderr, "timeline: cannot write %s\n", path);
        return 0;
    }
    fprintf(out, "name,start_ns,end_ns,stream,graph_id,graph_node,grid,block\n");
    CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    atexit(finish);
    fprintf(stderr, "timeline: recording every kernel into %s\n", path);
    return 1;
}
