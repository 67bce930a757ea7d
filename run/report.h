/*
run/report.h: what -e FILE prints about a model on a test set, and what -p IMAGE prints about
one picture. Pure functions of their inputs that print to a FILE*, so the tests compare their
text exactly; the trainers compute the predictions (argmax of the logits) and the loss.

    Fashion-MNIST test set: 10000 images, 10 classes
    test loss 0.3871 | test accuracy 86.12% (8612 of 10000)

    per class:
      #  class        accuracy  correct  items  most often predicted instead
      0  T-shirt/top    81.20%      812   1000  Shirt (103, 10.30%)
      ...
    confusion matrix: one row per true class, one column per predicted class
              T-shi Trous Pullo ...
      T-shi     812     2    15 ...
    key: T-shi T-shirt/top | Trous Trouser | ...

The matrix is printed for up to EVAL_MATRIX_MAX_CLASSES classes; its labels are the class names
cut to the width of a column (5 characters, or the widest count), with a key for the ones cut, or
the class numbers when two cut names would look the same. With more classes only the per-class
table is printed, and a line says the matrix is left out.

    predict.png: 1. Sneaker 93.1%  2. Sandal 5.2%  3. Ankle boot 1.1%

Class names are given as C rows of CLASS_NAME_LEN bytes (Dataset's and CheckpointMeta's
class_names, passed as &names[0][0]), or NULL for the class numbers. Names are UTF-8 (an image
folder's sub-folder names may not be ASCII): widths count code points, and cuts never split one.
*/
#ifndef MLP_REPORT_H
#define MLP_REPORT_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/dataset.h"  // Dataset, MAX_CLASSES, CLASS_NAME_LEN

#define EVAL_MATRIX_MAX_CLASSES 20  // wider than this, the matrix no longer fits a terminal
#define EVAL_KEY_WIDTH 100          // the key wraps at about this many columns

// ----------------------------------------------------------------------------
// text in columns

// display width of UTF-8 text: its code points (every byte but the continuation bytes 10xxxxxx)
static inline int utf8_width(const char *s) {
    int w = 0;
    for (; *s; s++) w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

// the first w code points of s into out (of n bytes)
static inline void utf8_cut(const char *s, int w, char *out, size_t n) {
    size_t k = 0;
    int seen = 0;
    for (; s[k]; k++) {
        if (((unsigned char)s[k] & 0xC0) != 0x80 && seen++ == w) break;  // the code point after the w-th
        if (k + 1 >= n) break;
    }
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;  // never end inside a code point
    memcpy(out, s, k);
    out[k] = '\0';
}

// s padded with spaces to width w, on the left (right = 1: numbers) or on the right (names)
static inline void eval_cell(FILE *f, const char *s, int w, int right) {
    int pad = w - utf8_width(s);
    if (right)
        for (int i = 0; i < pad; i++) fputc(' ', f);
    fputs(s, f);
    if (!right)
        for (int i = 0; i < pad; i++) fputc(' ', f);
}

// the name of class c: names' row c, or its number when there are no names (or the name is empty)
static inline void eval_class_name(const char *names, int c, char *out, size_t n) {
    if (names && names[(size_t)c * CLASS_NAME_LEN]) snprintf(out, n, "%s", names + (size_t)c * CLASS_NAME_LEN);
    else snprintf(out, n, "%d", c);
}

static inline int eval_digits(long x) {
    int d = 1;
    while (x >= 10) {
        x /= 10;
        d++;
    }
    return d;
}

// ----------------------------------------------------------------------------
// the evaluation report

// counts (C x C, zeroed here): counts[t * C + p] = the items of true class t predicted as p.
// Returns the number of items whose label or prediction is outside [0, C): those are not counted.
static inline long confusion_matrix(const uint8_t *labels, const int *pred, int n, int C, long *counts) {
    long outside = 0;
    memset(counts, 0, sizeof(long) * (size_t)C * (size_t)C);
    for (int i = 0; i < n; i++) {
        if (labels[i] >= C || pred[i] < 0 || pred[i] >= C) outside++;
        else counts[(size_t)labels[i] * C + pred[i]]++;
    }
    return outside;
}

// Labels of at most w code points for the matrix's rows and columns: each name cut to w, or every
// class's number when two of the cuts are the same. Returns 1 when some label is not the whole
// name (then a key is printed).
static inline int eval_matrix_tags(const char *names, int C, int w, char (*labels)[CLASS_NAME_LEN]) {
    char name[CLASS_NAME_LEN];
    int cut = 0, numbers = 0;
    for (int c = 0; c < C; c++) {
        eval_class_name(names, c, name, sizeof(name));
        utf8_cut(name, w, labels[c], CLASS_NAME_LEN);
        cut |= strcmp(labels[c], name) != 0;
        for (int d = 0; d < c && !numbers; d++) numbers = strcmp(labels[c], labels[d]) == 0;
    }
    if (numbers)
        for (int c = 0; c < C; c++) snprintf(labels[c], CLASS_NAME_LEN, "%d", c);
    return cut || numbers;
}

// The report of -e: title (e.g. "Fashion-MNIST test set"), the test loss, then from the true
// labels and predicted classes of n items: accuracy, per-class accuracy, the confusion matrix.
static inline void eval_report_print(FILE *f, const char *title, double loss, const uint8_t *labels, const int *pred,
                                     int n, int C, const char *names) {
    long *counts = (long *)calloc((size_t)C * (size_t)C, sizeof(long));
    if (!counts) {
        fprintf(f, "(no report: out of memory for a %d x %d confusion matrix)\n", C, C);
        return;
    }
    long outside = confusion_matrix(labels, pred, n, C, counts), correct = 0;
    for (int c = 0; c < C; c++) correct += counts[(size_t)c * C + c];
    fprintf(f, "%s: %d images, %d classes\n", title, n, C);
    fprintf(f, "test loss %.4f | test accuracy %.2f%% (%ld of %d)\n", loss, n ? 100.0 * correct / n : 0.0, correct, n);
    if (outside) fprintf(f, "warning: %ld items with a label or prediction outside the %d classes were not counted\n",
                         outside, C);

    // per class: accuracy, and the class it is most often taken for
    char name[CLASS_NAME_LEN], cell[64];
    int name_w = (int)strlen("class"), idx_w = eval_digits(C - 1);
    int correct_w = eval_digits(n) > 7 ? eval_digits(n) : 7, items_w = eval_digits(n) > 5 ? eval_digits(n) : 5;
    for (int c = 0; c < C; c++) {
        eval_class_name(names, c, name, sizeof(name));
        if (utf8_width(name) > name_w) name_w = utf8_width(name);
    }
    fprintf(f, "\nper class:\n  ");
    eval_cell(f, "#", idx_w, 1);
    fputs("  ", f);
    eval_cell(f, "class", name_w, 0);
    fputs("  accuracy  ", f);
    eval_cell(f, "correct", correct_w, 1);
    fputs("  ", f);
    eval_cell(f, "items", items_w, 1);
    fputs("  most often predicted instead\n", f);
    for (int c = 0; c < C; c++) {
        long items = 0, worst = -1;
        int worst_c = -1;
        for (int p = 0; p < C; p++) {
            long k = counts[(size_t)c * C + p];
            items += k;
            if (p != c && k > 0 && k > worst) {
                worst = k;
                worst_c = p;
            }
        }
        long right = counts[(size_t)c * C + c];
        fputs("  ", f);
        snprintf(cell, sizeof(cell), "%d", c);
        eval_cell(f, cell, idx_w, 1);
        fputs("  ", f);
        eval_class_name(names, c, name, sizeof(name));
        eval_cell(f, name, name_w, 0);
        if (items) snprintf(cell, sizeof(cell), "%.2f%%", 100.0 * right / items);
        else snprintf(cell, sizeof(cell), "-");
        fputs("  ", f);
        eval_cell(f, cell, 8, 1);
        fputs("  ", f);
        snprintf(cell, sizeof(cell), "%ld", right);
        eval_cell(f, cell, correct_w, 1);
        fputs("  ", f);
        snprintf(cell, sizeof(cell), "%ld", items);
        eval_cell(f, cell, items_w, 1);
        fputs("  ", f);
        if (!items) {
            fputs("(no test items)", f);
        } else if (worst_c < 0) {
            fputs("-", f);
        } else {
            eval_class_name(names, worst_c, name, sizeof(name));
            fprintf(f, "%s (%ld, %.2f%%)", name, worst, 100.0 * worst / items);
        }
        fputs("\n", f);
    }

    // the confusion matrix
    if (C > EVAL_MATRIX_MAX_CLASSES) {
        fprintf(f, "\nconfusion matrix omitted: %d classes (it is printed for up to %d)\n", C, EVAL_MATRIX_MAX_CLASSES);
        free(counts);
        return;
    }
    long most = 0;
    for (size_t i = 0; i < (size_t)C * C; i++) most = counts[i] > most ? counts[i] : most;
    int w = eval_digits(most) > 5 ? eval_digits(most) : 5;
    char tags[EVAL_MATRIX_MAX_CLASSES][CLASS_NAME_LEN];
    int key = eval_matrix_tags(names, C, w, tags);
    fprintf(f, "\nconfusion matrix: one row per true class, one column per predicted class\n  ");
    eval_cell(f, "", w, 0);
    for (int p = 0; p < C; p++) {
        fputc(' ', f);
        eval_cell(f, tags[p], w, 1);
    }
    fputc('\n', f);
    for (int t = 0; t < C; t++) {
        fputs("  ", f);
        eval_cell(f, tags[t], w, 0);
        for (int p = 0; p < C; p++) {
            snprintf(cell, sizeof(cell), "%ld", counts[(size_t)t * C + p]);
            fputc(' ', f);
            eval_cell(f, cell, w, 1);
        }
        fputc('\n', f);
    }
    if (key) {  // "key: T-shi T-shirt/top | Trous Trouser | ...", wrapped
        char entry[2 * CLASS_NAME_LEN + 2];
        int col = fprintf(f, "key:"), any = 0;
        for (int c = 0; c < C; c++) {
            eval_class_name(names, c, name, sizeof(name));
            if (strcmp(tags[c], name) == 0) continue;  // shown whole: nothing to explain
            snprintf(entry, sizeof(entry), "%s %s", tags[c], name);
            if (any && col + 3 + utf8_width(entry) > EVAL_KEY_WIDTH) {
                col = fprintf(f, "\n    ") - 1;
                any = 0;
            }
            col += fprintf(f, any ? " | " : " ") + utf8_width(entry);
            fputs(entry, f);
            any = 1;
        }
        fputc('\n', f);
    }
    free(counts);
}

// The same for a loaded test set: its name, labels, classes and class names.
static inline void eval_report_print_dataset(FILE *f, const Dataset *test, const int *pred, double loss) {
    char title[96];
    snprintf(title, sizeof(title), "%s test set", test->name);
    eval_report_print(f, title, loss, test->labels, pred, test->n, test->num_classes, &test->class_names[0][0]);
}

// ----------------------------------------------------------------------------
// one picture's prediction

// probs(C) = softmax(logits(C)), in double inside
static inline void softmax_probs(const float *logits, int C, float *probs) {
    double top = logits[0], sum = 0;
    for (int c = 1; c < C; c++) top = logits[c] > top ? logits[c] : top;
    for (int c = 0; c < C; c++) sum += exp((double)logits[c] - top);
    for (int c = 0; c < C; c++) probs[c] = (float)(exp((double)logits[c] - top) / sum);
}

// "label: 1. Sneaker 93.1%  2. Sandal 5.2%  3. Ankle boot 1.1%": the k most probable classes
// (fewer when there are fewer classes; the lower class first on a tie)
static inline void print_top_classes(FILE *f, const char *label, const float *probs, int C, const char *names, int k) {
    int chosen[MAX_CLASSES] = {0};
    char name[CLASS_NAME_LEN];
    fprintf(f, "%s:", label);
    for (int r = 0; r < k && r < C && r < MAX_CLASSES; r++) {
        int best = -1;
        for (int c = 0; c < C && c < MAX_CLASSES; c++)
            if (!chosen[c] && (best < 0 || probs[c] > probs[best])) best = c;
        chosen[best] = 1;
        eval_class_name(names, best, name, sizeof(name));
        fprintf(f, "%s%d. %s %.1f%%", r ? "  " : " ", r + 1, name, 100.0 * probs[best]);
    }
    fputc('\n', f);
}

#endif // MLP_REPORT_H
