/* Which OpenBLAS kernels this process runs, and whether they fit the CPU.
 *
 * OpenBLAS picks its kernels ("core") at load time from the CPU id.  On CPUs
 * whose id it does not know it can fall back to its oldest x86-64 kernels
 * (Prescott, SSE3) on a machine with AVX-512: sgemm then runs about 6x
 * slower, and the references' last bits are those of another core.  The
 * variable OPENBLAS_CORETYPE chooses the core; it is read once, when the
 * library loads, so the only way to change the core of a running process is
 * to start it again (blas_info_fix_core).
 *
 * Cores are compared by the widest vector instructions their kernels use:
 * SSE3 < AVX < AVX2 < AVX-512. */
#ifndef KR_BLAS_INFO_H
#define KR_BLAS_INFO_H

typedef enum {
    BLAS_ISA_UNKNOWN = 0,
    BLAS_ISA_SSE3,
    BLAS_ISA_AVX,
    BLAS_ISA_AVX2,
    BLAS_ISA_AVX512,
} blas_isa_t;

typedef struct {
    char core[32];         /* openblas_get_corename(), e.g. "Zen" */
    char config[256];      /* openblas_get_config(): version and build options */
    int threads;           /* openblas_get_num_threads() */
    blas_isa_t core_isa;   /* what the core's kernels use (UNKNOWN: a name not in the table) */
    blas_isa_t cpu_isa;    /* what this CPU offers */
    char best_core[32];    /* the OPENBLAS_CORETYPE value for cpu_isa, "" when none is known */
    int core_from_env;     /* OPENBLAS_CORETYPE named the running core (set by the user, or
                              by the restart, and taken by OpenBLAS) */
    int core_env_ignored;  /* OPENBLAS_CORETYPE is set but OpenBLAS runs another core (a name
                              it does not know, or a core it cannot run here) */
    char env_core[32];     /* OPENBLAS_CORETYPE's value, control characters as '?' */
    int core_from_restart; /* kreplay restarted itself to set it (blas_info_fix_core) */
    int restart_marked;    /* this process is that restart (BLAS_RESTART_MARK is set) */
} blas_info_t;

void blas_info_get(blas_info_t *b);

/* The instruction set of an OpenBLAS core name (case-insensitive), and the
 * core to ask for on a CPU with a given instruction set. */
blas_isa_t blas_core_isa(const char *core_name);
const char *blas_core_for_isa(blas_isa_t isa);
const char *blas_isa_name(blas_isa_t isa);

/* Whether the running core uses narrower instructions than the CPU has. */
int blas_info_core_mismatch(const blas_info_t *b);

/* At program start: when the core does not fit the CPU and the user has not
 * chosen one (OPENBLAS_CORETYPE unset), starts this program again with
 * OPENBLAS_CORETYPE set to the right core (marking the environment so it
 * happens at most once); returns only when it did not.  When it cannot fix
 * the core, prints one warning naming the variable to set, unless quiet. */
void blas_info_fix_core(char **argv, int quiet);

/* "Zen, 2 threads, OpenBLAS 0.3.21 ..." for --version and provenance. */
void blas_info_format(const blas_info_t *b, char *buf, int cap);

#endif
