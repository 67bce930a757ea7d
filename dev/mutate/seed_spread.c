/*
The spread over seeds of tests/test_cpu.c's end-to-end run (784,128,10 sigmoid, batch 64, 300 steps
of SGD at lr 0.1, momentum 0.9, on Fashion-MNIST): that test's bounds are the mean of seeds 1..N
plus or minus 5 standard deviations, so that any healthy seed passes and a model that learns markedly
worse fails. Prints the mean and standard deviation of the first step's loss (less ln 10), of the
mean loss of the last 30 steps, and of the test loss and accuracy.

    cc -O3 -fopenmp -I/usr/include/stb dev/mutate/seed_spread.c -lz -lm -o /tmp/seed_spread
    /tmp/seed_spread [DATA_DIR [N]]     (default /usr/share/datasets/fashion-mnist, 40 seeds)
*/
#define TESTING
#include "../../train_mlp_cpu.c"

typedef struct { double sum, sq; } Moments;
static void add(Moments *m, double x) { m->sum += x; m->sq += x * x; }
static void show(const char *name, const Moments *m, int n) {
    double mean = m->sum / n;
    printf("%-22s %.4f +- %.4f\n", name, mean, sqrt(fmax(0.0, m->sq / n - mean * mean)));
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
    int n_seeds = argc > 2 ? atoi(argv[2]) : 40;
    if (n_seeds < 2) die("", "N must be at least 2, not %s", argv[2]);
    Dataset train, test;
    char err[1400];
    if (dataset_load_both(dir, &train, &test, err, sizeof(err))) die("", "%s", err);
    const int sizes[] = {784, 128, 10}, B = 64, steps = 300;
    Moments first = {0, 0}, last30 = {0, 0}, test_loss = {0, 0}, test_acc = {0, 0};
    for (int seed = 1; seed <= n_seeds; seed++) {
        // exactly what the test does, with the seed in place of its 1337
        ModelCPU m;
        model_build_cpu(&m, sizes, 2, ACT_SIGMOID, B);
        model_init_params_cpu(&m, (uint64_t)seed);
        Rng rng;
        rng_seed(&rng, (uint64_t)seed, 1);
        int *perm = (int *)mallocCheck(sizeof(int) * (size_t)train.n);
        rng_permutation(&rng, perm, train.n);
        double l0 = 0, last = 0;
        for (int s = 0; s < steps; s++) {
            gather_batch_cpu(m.acts[0], m.labels, train.images, train.labels, perm, s * B, B, 784);
            model_forward_cpu(&m, B);
            double loss = model_loss_cpu(&m, B);
            model_backward_cpu(&m, B);
            model_update_cpu(&m, 0.1f, 0.9f, 0.0f);
            if (s == 0) l0 = loss;
            if (s >= steps - 30) last += loss / 30;
        }
        double tl, ta;
        evaluate_cpu(&m, &test, &tl, &ta);
        add(&first, l0 - log(10.0));
        add(&last30, last);
        add(&test_loss, tl);
        add(&test_acc, ta);
        free(perm);
        model_free_cpu(&m);
    }
    printf("%s, seeds 1..%d (mean +- standard deviation)\n", train.name, n_seeds);
    show("first loss - ln 10", &first, n_seeds);
    show("last 30 steps' loss", &last30, n_seeds);
    show("test loss", &test_loss, n_seeds);
    show("test accuracy", &test_acc, n_seeds);
    dataset_free(&train);
    dataset_free(&test);
    return 0;
}
