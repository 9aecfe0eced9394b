/* Declarations only; the driver comes from libFuzzer. */
