/* OpenBLAS core detection (see blas_info.h). */
#include "blas_info.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "kr_string.h"

/* Set in the environment of the restarted process, so a core that still does
 * not fit after the restart (an OpenBLAS built without it) is warned about
 * instead of restarting again. */
#define BLAS_RESTART_MARK "KREPLAY_BLAS_CORE_RESTARTED"

typedef struct {
    const char *name;
    blas_isa_t isa;
} core_isa_t;

/* OpenBLAS' x86-64 DYNAMIC_ARCH core names, by the widest instructions of
 * their sgemm kernels. */
static const core_isa_t CORES[] = {
    {"Prescott", BLAS_ISA_SSE3},     {"Core2", BLAS_ISA_SSE3},        {"Penryn", BLAS_ISA_SSE3},
    {"Dunnington", BLAS_ISA_SSE3},   {"Nehalem", BLAS_ISA_SSE3},      {"Atom", BLAS_ISA_SSE3},
    {"Opteron", BLAS_ISA_SSE3},      {"Opteron_SSE3", BLAS_ISA_SSE3}, {"Barcelona", BLAS_ISA_SSE3},
    {"Nano", BLAS_ISA_SSE3},         {"Katmai", BLAS_ISA_SSE3},       {"Coppermine", BLAS_ISA_SSE3},
    {"Northwood", BLAS_ISA_SSE3},    {"Banias", BLAS_ISA_SSE3},       {"Athlon", BLAS_ISA_SSE3},
    {"Sandybridge", BLAS_ISA_AVX},   {"Bulldozer", BLAS_ISA_AVX},     {"Piledriver", BLAS_ISA_AVX},
    {"Steamroller", BLAS_ISA_AVX},   {"Excavator", BLAS_ISA_AVX2},    {"Haswell", BLAS_ISA_AVX2},
    {"Zen", BLAS_ISA_AVX2},          {"SkylakeX", BLAS_ISA_AVX512},   {"Cooperlake", BLAS_ISA_AVX512},
    {"SapphireRapids", BLAS_ISA_AVX512},
};

blas_isa_t blas_core_isa(const char *core_name)
{
    if (!core_name)
        return BLAS_ISA_UNKNOWN;
    for (size_t i = 0; i < sizeof CORES / sizeof CORES[0]; i++)
        if (!strcasecmp(core_name, CORES[i].name))
            return CORES[i].isa;
    return BLAS_ISA_UNKNOWN;
}

/* Per ISA, indexed by it: its name, and the OPENBLAS_CORETYPE value whose
 * kernels use it ("" when none is known). */
static const struct {
    const char *name;
    const char *core;
} ISAS[] = {
    [BLAS_ISA_UNKNOWN] = {"unknown", ""},  [BLAS_ISA_SSE3] = {"SSE3", "Prescott"},
    [BLAS_ISA_AVX] = {"AVX", "Sandybridge"}, [BLAS_ISA_AVX2] = {"AVX2", "Haswell"},
    [BLAS_ISA_AVX512] = {"AVX-512", "SkylakeX"},
};

static size_t isa_index(blas_isa_t isa)
{
    return (unsigned)isa < sizeof ISAS / sizeof ISAS[0] ? (size_t)isa : (size_t)BLAS_ISA_UNKNOWN;
}

const char *blas_core_for_isa(blas_isa_t isa)
{
    return ISAS[isa_index(isa)].core;
}

const char *blas_isa_name(blas_isa_t isa)
{
    return ISAS[isa_index(isa)].name;
}

static blas_isa_t cpu_isa(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    /* SkylakeX kernels need F, CD, BW, DQ and VL (OpenBLAS' own test) */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return BLAS_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return BLAS_ISA_AVX2;
    if (__builtin_cpu_supports("avx"))
        return BLAS_ISA_AVX;
    if (__builtin_cpu_supports("sse3"))
        return BLAS_ISA_SSE3;
#endif
    return BLAS_ISA_UNKNOWN;
}

void blas_info_get(blas_info_t *b)
{
    memset(b, 0, sizeof *b);
    const char *core = openblas_get_corename();
    const char *config = openblas_get_config();
    kr_strlcpy(b->core, core ? core : "unknown", sizeof b->core);
    kr_strlcpy(b->config, config ? config : "unknown", sizeof b->config);
    /* the config string ends with a space in some builds */
    size_t n = strlen(b->config);
    while (n > 0 && b->config[n - 1] == ' ')
        b->config[--n] = '\0';
    b->threads = openblas_get_num_threads();
    b->core_isa = blas_core_isa(b->core);
    b->cpu_isa = cpu_isa();
    kr_strlcpy(b->best_core, blas_core_for_isa(b->cpu_isa), sizeof b->best_core);
    const char *env = getenv("OPENBLAS_CORETYPE");
    kr_str_printable(env ? env : "", b->env_core, sizeof b->env_core);
    /* OpenBLAS matches the variable against its core names regardless of
     * case, and quietly keeps its own choice for a name it does not take. */
    b->core_from_env = env && *env && !strcasecmp(env, b->core);
    b->core_env_ignored = env && *env && !b->core_from_env;
    b->restart_marked = getenv(BLAS_RESTART_MARK) != NULL;
    b->core_from_restart = b->core_from_env && b->restart_marked;
}

int blas_info_core_mismatch(const blas_info_t *b)
{
    return b->core_isa != BLAS_ISA_UNKNOWN && b->cpu_isa != BLAS_ISA_UNKNOWN &&
           b->core_isa < b->cpu_isa;
}

void blas_info_fix_core(char **argv, int quiet)
{
    blas_info_t b;
    blas_info_get(&b);
    if (!blas_info_core_mismatch(&b))
        return;
    const int restarted = b.restart_marked;
    /* KREPLAY_BLAS_CORE_AS_DETECTED: tests take an OPENBLAS_CORETYPE they set
     * for the core OpenBLAS detected, to reach the restart on any CPU. */
    if (b.core_from_env && !restarted && !getenv("KREPLAY_BLAS_CORE_AS_DETECTED"))
        return; /* the user chose the core */
    if (!restarted && argv && argv[0]) {
        setenv("OPENBLAS_CORETYPE", b.best_core, 1);
        setenv(BLAS_RESTART_MARK, b.core, 1);
        unsetenv("KREPLAY_BLAS_CORE_AS_DETECTED");
        execv("/proc/self/exe", argv);
        /* exec failed: carry on with the core we have */
        unsetenv("OPENBLAS_CORETYPE");
        unsetenv(BLAS_RESTART_MARK);
    }
    if (!quiet)
        fprintf(stderr,
                "kreplay: warning: OpenBLAS runs its %s kernels (%s) on a CPU with %s; sgemm "
                "may be several times slower and the references' last bits those of another "
                "core.  Set OPENBLAS_CORETYPE=%s to choose the right kernels.\n",
                b.core, blas_isa_name(b.core_isa), blas_isa_name(b.cpu_isa), b.best_core);
}

void blas_info_format(const blas_info_t *b, char *buf, int cap)
{
    char how[160] = "";
    if (b->core_env_ignored)
        snprintf(how, sizeof how, "; OPENBLAS_CORETYPE=%s ignored by OpenBLAS, which chose %s",
                 b->env_core, b->core);
    else if (b->core_from_restart || b->core_from_env)
        snprintf(how, sizeof how, "; %s OPENBLAS_CORETYPE",
                 b->core_from_restart ? "set by kreplay through" : "chosen by");
    snprintf(buf, (size_t)cap, "%s core (%s; CPU has %s%s), %d thread%s, %s", b->core,
             blas_isa_name(b->core_isa), blas_isa_name(b->cpu_isa), how, b->threads,
             b->threads == 1 ? "" : "s", b->config);
}
