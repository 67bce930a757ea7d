/*
tests/fuzz/fuzz.c: one libFuzzer target, the entry point of tests/fuzz/fuzz.h named by FUZZ_TARGET
when it is compiled (make fuzz builds them all):

    clang -g -O1 -fsanitize=fuzzer,address,undefined -DFUZZ_TARGET=fuzz_idx_gz -I/usr/include/stb \
        tests/fuzz/fuzz.c -lz -lm -o build/fuzz/idx_gz
    build/fuzz/idx_gz build/fuzz/corpus/idx_gz tests/fuzz/corpus/idx_gz -dict=tests/fuzz/dict/idx_gz.dict

Every input must come back accepted or refused with a message; anything else (a sanitizer's
report, a fuzz_require that fails, a timeout) is a bug to fix, and its input is kept in
tests/fuzz/regressions/TARGET/, which make test runs (tests/test_fuzz_regressions.c).
*/
#include "fuzz.h"

#ifndef FUZZ_TARGET
#error "compile with -DFUZZ_TARGET=fuzz_idx_raw (or another entry point of fuzz.h)"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char msg[2048];
    FUZZ_TARGET(data, size, msg, sizeof(msg));
    return 0;
}
