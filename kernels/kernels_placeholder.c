int kr_kernels_placeholder(void) { return 0; }
