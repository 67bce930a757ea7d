/*
dev/persistent/persistent_check.cu: runs the persistent kernel (persistent.cuh) on the small model
(784,128,10, sigmoid, batch 64) on synthetic data, checks it against the CPU reference
(train_mlp_cpu.c) after 10 steps, then times it.

    1. the same initial weights (model_init_params_cpu, copied to the GPU), the same permutation;
    2. 10 steps in one launch on the GPU; 10 steps of model_forward_cpu, model_loss_cpu,
       model_backward_cpu, model_update_cpu on the CPU;
    3. every step's loss, and every layer's weights and biases after the 10 steps, compared;
    4. a run of STEPS_TIMED steps in one launch, timed with CUDA events (median of 5), printed as
       ms per step: compare with the fast trainer's step time on the same model,
       ./train_mlp_fast -m 784,128,10 -a sigmoid -b 64 (its "ms/step" lines).

Tolerances: relative to the largest value of each tensor. The GPU sums in other orders than the
CPU (tiles, split-K), so float32 rounding differs in the last bits of each sum and ten SGD steps
with momentum carry it along: 1e-4 for the weights and the losses leaves two orders of magnitude of
margin over what such rounding gives, and catches any wrong sum.

Build: make -C dev/persistent GPU_ARCH=90     Run: dev/persistent/bin/persistent_check
*/
#define TESTING  // train_mlp_cpu.c without its main
#include "../../train_mlp_cpu.c"
#include "persistent.cuh"

#define CHECK_STEPS 10
#define STEPS_TIMED 200
#define TOL 1e-4

// max |a - b| over max |b|, over n floats
static double rel_diff(const float *a, const float *b, size_t n) {
    double d = 0.0, m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        d = e > d || e != e ? e : d;
        m = fabs(b[i]) > m ? fabs(b[i]) : m;
    }
    return m > 0 ? d / m : d;
}

static int check(const char *what, double rel) {
    const int ok = rel < TOL;
    printf("  %-34s relative difference %.2e (tolerance %.0e) %s\n", what, rel, TOL, ok ? "ok" : "FAIL");
    return ok;
}

int main(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("persistent_check: no CUDA GPU here, nothing to run\n");
        return 0;
    }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    if (!prop.cooperativeLaunch) die("a GPU with cooperative launch", "%s cannot launch cooperative kernels", prop.name);
    printf("GPU: %s, %d SMs\n", prop.name, prop.multiProcessorCount);

    // the model and the data: STEPS_TIMED batches of random pixels and labels
    const int L = 2, sizes[L + 1] = {784, 128, 10}, act = ACT_SIGMOID, B = 64, D = sizes[0], C = sizes[L];
    const float lr = 0.1f, mu = 0.9f, wd = 5e-4f;
    const int n = B * STEPS_TIMED;
    uint8_t *images = (uint8_t *)mallocCheck((size_t)n * D), *labels = (uint8_t *)mallocCheck((size_t)n);
    Rng rng;
    rng_seed(&rng, 42, 1);
    for (size_t i = 0; i < (size_t)n * D; i++) images[i] = (uint8_t)rng_below(&rng, 256);
    for (int i = 0; i < n; i++) labels[i] = (uint8_t)rng_below(&rng, (uint32_t)C);
    int *perm = (int *)mallocCheck(sizeof(int) * (size_t)n);
    rng_permutation(&rng, perm, n);

    ModelCPU c;
    model_build_cpu(&c, sizes, L, act, B);
    model_init_params_cpu(&c, 1337);

    // the GPU's buffers, as the fast trainer lays them out
    PersistentArgs a;
    memset(&a, 0, sizeof(a));
    a.L = L;
    memcpy(a.sizes, sizes, sizeof(sizes));
    a.act = act;
    a.B = B;
    a.last_bs = B;
    a.steps_per_epoch = STEPS_TIMED;
    a.num_params = param_layout(sizes, L, a.w_off, a.b_off);
    const size_t pbytes = a.num_params * sizeof(float);
    a.params = (float *)cudaMallocCheck(pbytes, "the parameters");
    a.grads = (float *)cudaMallocCheck(pbytes, "the gradients");
    a.mbuf = (float *)cudaMallocCheck(pbytes, "the momentum buffer");
    for (int l = 0; l <= L; l++) {
        a.acts[l] = (float *)cudaMallocCheck((size_t)B * sizes[l] * sizeof(float), "the activations");
        a.dacts[l] = (float *)cudaMallocCheck((size_t)B * sizes[l] * sizeof(float), "the activation gradients");
    }
    a.losses = (float *)cudaMallocCheck((size_t)B * sizeof(float), "the losses");
    a.step_losses = (float *)cudaMallocCheck((size_t)STEPS_TIMED * sizeof(float), "the step losses");
    int widest = 0;
    for (int l = 1; l <= L; l++) widest = sizes[l] > widest ? sizes[l] : widest;
    a.scratch = (float *)cudaMallocCheck((size_t)MAX_SPLITS * B * widest * sizeof(float), "the split-K scratch");
    a.labels = (int *)cudaMallocCheck((size_t)B * sizeof(int), "the labels");
    a.step = (int *)cudaMallocCheck(sizeof(int), "the step counter");
    uint8_t *d_images = (uint8_t *)cudaMallocCheck((size_t)n * D, "the images");
    uint8_t *d_labels = (uint8_t *)cudaMallocCheck((size_t)n, "the labels");
    int *d_perm = (int *)cudaMallocCheck(sizeof(int) * (size_t)n, "the permutation");
    cudaCheck(cudaMemcpy(d_images, images, (size_t)n * D, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_labels, labels, (size_t)n, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d_perm, perm, sizeof(int) * (size_t)n, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(a.params, c.params, pbytes, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(a.mbuf, 0, pbytes));
    a.images = d_images;
    a.all_labels = d_labels;
    a.perm = d_perm;
    a.D = D;
    a.lr = lr;
    a.momentum = mu;
    a.weight_decay = wd;
    const int grid = persistent_grid_size();
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));

    // 1-3. CHECK_STEPS steps in one launch, against the CPU
    a.first_step = 0;
    a.nsteps = CHECK_STEPS;
    train_steps_persistent(&a, grid, stream);
    cudaCheck(cudaStreamSynchronize(stream));
    float gpu_losses[CHECK_STEPS], cpu_losses[CHECK_STEPS];
    cudaCheck(cudaMemcpy(gpu_losses, a.step_losses, sizeof(gpu_losses), cudaMemcpyDeviceToHost));
    float *gpu_params = (float *)mallocCheck(pbytes);
    cudaCheck(cudaMemcpy(gpu_params, a.params, pbytes, cudaMemcpyDeviceToHost));
    for (int t = 0; t < CHECK_STEPS; t++) {
        gather_batch_cpu(c.acts[0], c.labels, images, labels, perm, t * B, B, D);
        model_forward_cpu(&c, B);
        cpu_losses[t] = (float)model_loss_cpu(&c, B);
        model_backward_cpu(&c, B);
        model_update_cpu(&c, lr, mu, wd);
    }
    printf("\n%s, batch %d, %d steps in one launch of %d blocks, against train_mlp_cpu.c:\n", "784,128,10 sigmoid", B,
           CHECK_STEPS, grid);
    int passed = 0, failed = 0;
    char what[64];
    int ok = check("each step's loss", rel_diff(gpu_losses, cpu_losses, CHECK_STEPS));
    passed += ok;
    failed += !ok;
    for (int l = 0; l < L; l++) {
        snprintf(what, sizeof(what), "layer %d weights after %d steps", l, CHECK_STEPS);
        ok = check(what, rel_diff(gpu_params + a.w_off[l], c.params + a.w_off[l], (size_t)sizes[l + 1] * sizes[l]));
        passed += ok;
        failed += !ok;
        snprintf(what, sizeof(what), "layer %d biases after %d steps", l, CHECK_STEPS);
        ok = check(what, rel_diff(gpu_params + a.b_off[l], c.params + a.b_off[l], (size_t)sizes[l + 1]));
        passed += ok;
        failed += !ok;
    }

    // 4. the time of a step: STEPS_TIMED steps in one launch, median of 5
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    a.first_step = 0;
    a.nsteps = STEPS_TIMED;
    float ms[5];
    for (int r = 0; r < 5; r++) {
        cudaCheck(cudaEventRecord(e0, stream));
        train_steps_persistent(&a, grid, stream);
        cudaCheck(cudaEventRecord(e1, stream));
        cudaCheck(cudaEventSynchronize(e1));
        cudaCheck(cudaEventElapsedTime(&ms[r], e0, e1));
    }
    for (int i = 1; i < 5; i++)  // insertion sort, for the median
        for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
            float t = ms[j];
            ms[j] = ms[j - 1];
            ms[j - 1] = t;
        }
    printf("\ntime: %.4f ms per step (%d steps per launch, median of 5 launches, %s)\n", ms[2] / STEPS_TIMED, STEPS_TIMED,
           prop.name);
    printf("compare: ./train_mlp_fast -m 784,128,10 -a sigmoid -b 64 (its ms/step lines, CUDA graphs)\n");

    cudaCheck(cudaEventDestroy(e0));
    cudaCheck(cudaEventDestroy(e1));
    cudaCheck(cudaStreamDestroy(stream));
    cudaCheck(cudaFree(a.params));
    cudaCheck(cudaFree(a.grads));
    cudaCheck(cudaFree(a.mbuf));
    for (int l = 0; l <= L; l++) {
        cudaCheck(cudaFree(a.acts[l]));
        cudaCheck(cudaFree(a.dacts[l]));
    }
    cudaCheck(cudaFree(a.losses));
    cudaCheck(cudaFree(a.step_losses));
    cudaCheck(cudaFree(a.scratch));
    cudaCheck(cudaFree(a.labels));
    cudaCheck(cudaFree(a.step));
    cudaCheck(cudaFree(d_images));
    cudaCheck(cudaFree(d_labels));
    cudaCheck(cudaFree(d_perm));
    free(gpu_params);
    free(images);
    free(labels);
    free(perm);
    model_free_cpu(&c);
    printf("\n%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
