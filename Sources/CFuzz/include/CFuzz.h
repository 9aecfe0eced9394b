#ifndef VAULT_CFUZZ_H
#define VAULT_CFUZZ_H
#include <stddef.h>
#include <stdint.h>

/* libFuzzer's driver (compiler-rt), linked in by -sanitize=fuzzer. SwiftPM
   aliases an executable's main to MODULE_main, so the fuzz target starts
   libFuzzer through this instead of libFuzzer's own main. */
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
