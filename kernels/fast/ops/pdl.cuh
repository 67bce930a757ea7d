/*
kernels/fast/ops/pdl.cuh: programmatic dependent launch, the fast tier's way to hide the gap between
two kernels of one stream.
*/
#ifndef MLP_FAST_PDL_CUH
#define MLP_FAST_PDL_CUH

#include "../../common.cuh"

// Programmatic dependent launch (PDL, sm_90 and later). Normally a kernel starts only after the
// previous kernel in its stream has finished and its writes are flushed: the GPU sits idle for
// the launch latency and the new kernel's start-up at every boundary. Launched with PDL, the next
// kernel is launched as the previous one's blocks exit, and its blocks run up to pdl_wait(), which
// returns when the previous kernel has completed and its memory is visible. So a PDL kernel reads
// and writes nothing before pdl_wait(); here every PDL kernel calls it first thing. In a kernel
// launched without PDL it does nothing, so the same kernels serve every path.
// (A kernel may also let its dependents launch earlier, with griddepcontrol.launch_dependents at
// its start. That makes the wide model's step slower: the early blocks sit on SM
// slots while they wait, slots that the kernels of the backward pass's other streams need. So the
// dependents launch as the blocks exit.)
// launch_pdl() uses it only where the GPU and the compiled code support it and pdl_allowed is set
// (dev/cuda/softmax_xent.cu clears it, to time the kernels without it). The launchers that use it
// say so, and the caller keeps two rules:
//   - the previous operation in the stream is a kernel (not a wait for another stream's event);
//   - no event that another stream waits on is recorded between that kernel and this one. To start
//     the PDL kernel early the stream has to pass the event early, and whether the event then still
//     waits for the previous kernel's writes is not something the programming guide promises.
// The fast trainer uses PDL in the forward pass, the fused softmax and the fused head
// (kernels/fast/ops/head.cuh); the backward pass records events between all its kernels
// (train_mlp_fast.cu model_backward_update). One event sits before a PDL kernel: ev_step, before a
// step's first forward kernel, in train_mlp_fast.cu's train_steps, which only runs inside a graph
// capture. There an event is no object that is passed at run time: the kernel that waits for it
// (the gather of the next batch, launched plainly) gets ordinary edges from the nodes before it, so
// it waits for them to finish.
__device__ __forceinline__ void pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// its attributes tell what this file was compiled for (static: every object that includes this
// header has its own, and the link sees no second definition)
static __global__ void pdl_probe_kernel(void) {}

static int pdl_allowed = 1;  // 0: launch_pdl launches plainly (in the file that sets it)

static inline int pdl_available(void) {
    static int available = -1;
    if (available < 0) {
        int dev = 0, major = 0;
        cudaFuncAttributes fa;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        cudaCheck(cudaFuncGetAttributes(&fa, pdl_probe_kernel));
        available = major >= 9 && fa.ptxVersion >= 90 && fa.binaryVersion >= 90;
    }
    return available && pdl_allowed;
}

// kernel<<<grid, block, smem, stream>>>(args...), with PDL when available
template <typename... KArgs, typename... Args>
static inline void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                              Args... args) {
    cudaLaunchConfig_t lc = {};
    cudaLaunchAttribute attr[1];
    lc.gridDim = grid;
    lc.blockDim = block;
    lc.dynamicSmemBytes = smem;
    lc.stream = stream;
    if (pdl_available()) {
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        lc.attrs = attr;
        lc.numAttrs = 1;
    }
    cudaCheck(cudaLaunchKernelEx(&lc, kernel, args...));
}

#endif // MLP_FAST_PDL_CUH
