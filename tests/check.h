/*
The tiny test harness every test binary of mlp.cu uses: count checks, print one line per
failure (and per pass when verbose), and end with the line CI reads:

    12 passed, 0 failed, 3 skipped

test_exit() returns the process exit code: non-zero when anything failed.
*/
#ifndef MLP_CHECK_H
#define MLP_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

static int checks_passed = 0, checks_failed = 0, checks_skipped = 0;

// check(cond, "what is checked", ...): prints "  ok   what" or "  FAIL what"
static int check(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int check(int cond, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("  %s ", cond ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (cond) checks_passed++;
    else checks_failed++;
    fflush(stdout);
    return cond;
}

static void skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("  skip ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    checks_skipped++;
    fflush(stdout);
}

// Compares n floats elementwise: passes when every |got - want| <= atol + rtol * |want|.
// Prints one line with the max absolute and max relative difference and OK / NOT OK.
// A NaN anywhere fails.
static int compare_floats(const char *name, const float *got, const float *want, size_t n, double atol,
                          double rtol) {
    double max_abs = 0, max_rel = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i], d = fabs(g - w);
        if (!(d <= atol + rtol * fabs(w))) ok = 0;  // written so that NaN fails
        if (d > max_abs || d != d) max_abs = d;
        double rel = d / (fabs(w) > 1e-30 ? fabs(w) : 1e-30);
        if (fabs(w) > atol && rel > max_rel) max_rel = rel;
    }
    printf("  %-4s %-28s max abs %.2e  max rel %.2e  (atol %.0e, rtol %.0e, %zu values)\n", ok ? "OK" : "NOT OK",
           name, max_abs, max_rel, atol, rtol, n);
    if (ok) checks_passed++;
    else checks_failed++;
    fflush(stdout);
    return ok;
}

static void section(const char *name) { printf("\n== %s\n", name); }

static int test_exit(void) {
    printf("\n%d passed, %d failed", checks_passed, checks_failed);
    if (checks_skipped) printf(", %d skipped", checks_skipped);
    printf("\n");
    return checks_failed ? 1 : 0;
}

#endif // MLP_CHECK_H
