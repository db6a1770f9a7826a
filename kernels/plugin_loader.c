/* MAP_ANONYMOUS is not POSIX. */
#define _DEFAULT_SOURCE

#include "plugin_loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "act_prepare.h"
#include "kr_string.h"
#include "mxfp4_weight.h"
#include "plugin_operands.h"
#include "plugin_probe.h"

/* Guard bytes on each side of a plugin's output, and their pattern.  A
 * tiled kernel that mishandles its last tile writes up to a whole tile past
 * the last row and column: the guards cover PLUGIN_GUARD_ROWS rows and
 * PLUGIN_GUARD_COLS columns beyond [M, N] (and at least 4 KiB), so such a
 * write lands on a canary and not in memory nobody watches. */
#define PLUGIN_GUARD_MIN_BYTES 4096
#define PLUGIN_GUARD_ROWS 128
#define PLUGIN_GUARD_COLS 128

typedef struct plugin_kernel {
    kernel_desc_t desc;         /* first: a kernel_desc_t * of a plugin kernel is one of these */
    const struct kr_plugin *owner;
    const kreplay_kernel_t *entry;
    int index;                  /* in the plugin's kernels array */
    const kernel_desc_t *operands_of;   /* the registry kernel whose operands it takes, or NULL */
    int n_multiple;
    char name[64];
    char summary[256];
    char act_format[128];
    char weight_format[192];
    char accumulation[512];
} plugin_kernel_t;

struct kr_plugin {
    char path[1024];
    char name[64];
    void *handle;
    const kreplay_plugin_t *sym;
    const kreplay_plugin_operands_t *ops;   /* KREPLAY_OPERANDS_SYMBOL, or NULL */
    int gpu;
    int persistent;             /* KREPLAY_PLUGIN_PERSISTENT */
    int count;
    plugin_kernel_t *kernels;
};

static int plugin_prepare_act(const kernel_desc_t *k, const kernel_inputs_t *in,
                              const kernel_options_t *opt, kernel_act_t *act, kr_error_t *err);
static int plugin_run(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                      const kernel_options_t *opt, uint16_t *out, kernel_run_info_t *info,
                      kr_error_t *err);

/* ------------------------------------------------------------------ accessors */

const char *plugin_path(const kr_plugin_t *p) { return p->path; }
const char *plugin_name(const kr_plugin_t *p) { return p->name; }
int plugin_is_gpu(const kr_plugin_t *p) { return p->gpu; }
int plugin_kernel_count(const kr_plugin_t *p) { return p ? p->count : 0; }

const kernel_desc_t *plugin_kernel_at(const kr_plugin_t *p, int i)
{
    return (p && i >= 0 && i < p->count) ? &p->kernels[i].desc : NULL;
}

const kernel_desc_t *plugin_kernel_find(const kr_plugin_t *p, const char *name)
{
    for (int i = 0; p && i < p->count; i++)
        if (strcmp(p->kernels[i].name, name) == 0)
            return &p->kernels[i].desc;
    return NULL;
}

int kernel_is_plugin(const kernel_desc_t *k)
{
    return k && k->run_cpu == plugin_run;
}

int plugin_kernel_is_gpu(const kernel_desc_t *k)
{
    return kernel_is_plugin(k) && ((const plugin_kernel_t *)k)->owner->gpu;
}

int plugin_kernel_is_persistent(const kernel_desc_t *k)
{
    return kernel_is_plugin(k) && ((const plugin_kernel_t *)k)->owner->persistent;
}

const kreplay_kernel_t *plugin_kernel_entry(const kernel_desc_t *k)
{
    return kernel_is_plugin(k) ? ((const plugin_kernel_t *)k)->entry : NULL;
}

/* ------------------------------------------------------------------ loading */

static int name_is_valid(const char *s)
{
    if (!s || !*s || strlen(s) > 63)
        return 0;
    for (const char *c = s; *c; c++) {
        const int ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                       (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '+' ||
                       *c == '-';
        if (!ok)
            return 0;
    }
    return 1;
}

static int lcm_int(int a, int b)
{
    int x = a, y = b;
    while (y) {
        int t = x % y;
        x = y;
        y = t;
    }
    return a / x * b;
}

/* A kernel that takes the operands of registry kernel K (plugin.h's
 * operands_of) is prepared, weighed and judged as K is: K's activations and
 * R_exact, K's weight, K's thresholds unless the plugin set its own. */
static int adopt_operands_of(const struct kr_plugin *p, plugin_kernel_t *pk, kr_error_t *err)
{
    const char *of = p->ops && p->ops->operands_of ? p->ops->operands_of(pk->index) : NULL;
    if (!of || !*of)
        return 0;
    const kernel_desc_t *K = kernel_find(of);
    if (!K || K->op != KERNEL_OP_GEMM)
        return kr_fail(err, "%s: kernel \"%s\": operands of \"%s\": expected a GEMM kernel of "
                            "the registry (`kreplay list kernels`)", p->path, pk->name, of);
    pk->operands_of = K;
    kernel_desc_t *d = &pk->desc;
    d->rules_of = K;
    d->weight_kind = K->weight_kind;
    d->act = K->act;
    d->weight = K->weight;
    d->refs = K->refs;
    d->k_multiple = lcm_int(d->k_multiple, K->k_multiple > 0 ? K->k_multiple : 1);
    if (pk->entry->rel_tol_exact <= 0)
        d->rel_tol_exact = K->rel_tol_exact;
    if (pk->entry->rel_tol_source <= 0)
        d->rel_tol_source = K->rel_tol_source;
    snprintf(pk->act_format, sizeof pk->act_format, "%.80s (as %.30s)", K->act_format, K->name);
    snprintf(pk->weight_format, sizeof pk->weight_format, "%.150s (as %.30s)", K->weight_format,
             K->name);
    return 0;
}

/* Checks one kernel entry and fills its descriptor. */
static int build_kernel(struct kr_plugin *p, int i, plugin_kernel_t *pk, kr_error_t *err)
{
    const kreplay_kernel_t *e = &p->sym->kernels[i];
    const char *path = p->path;
    if (!name_is_valid(e->name))
        return kr_fail(err,
                       "%s: kernel %d: name %s%s%s is not 1-63 characters of [A-Za-z0-9._+-]",
                       path, i, e->name ? "\"" : "", e->name ? e->name : "NULL",
                       e->name ? "\"" : "");
    if (kernel_find(e->name))
        return kr_fail(err, "%s: kernel \"%s\" has the name of a registry kernel; rename it",
                       path, e->name);
    for (int j = 0; j < i; j++)
        if (strcmp(p->kernels[j].name, e->name) == 0)
            return kr_fail(err, "%s: kernel name \"%s\" appears twice", path, e->name);
    if (!e->launch)
        return kr_fail(err, "%s: kernel \"%s\": launch is NULL", path, e->name);
    if (e->act_format != KREPLAY_ACT_FP8_E4M3FN_TOKEN)
        return kr_fail(err, "%s: kernel \"%s\": unknown act_format %u (ABI %u knows %u)", path,
                       e->name, e->act_format, KREPLAY_PLUGIN_ABI_VERSION,
                       KREPLAY_ACT_FP8_E4M3FN_TOKEN);
    if (e->weight_order != KREPLAY_WEIGHT_CHECKPOINT && e->weight_order != KREPLAY_WEIGHT_FRAGMENT)
        return kr_fail(err, "%s: kernel \"%s\": unknown weight_order %u", path, e->name,
                       e->weight_order);
    if (e->scale_layout != KREPLAY_SCALES_KN && e->scale_layout != KREPLAY_SCALES_NK)
        return kr_fail(err, "%s: kernel \"%s\": unknown scale_layout %u", path, e->name,
                       e->scale_layout);
    if (e->weight_ref != KREPLAY_WREF_NONE && e->weight_ref != KREPLAY_WREF_ROW_MAX)
        return kr_fail(err, "%s: kernel \"%s\": unknown weight_ref %u", path, e->name,
                       e->weight_ref);
    if (e->k_multiple < 0 || e->n_multiple < 0 || e->k_multiple > (1 << 20) ||
        e->n_multiple > (1 << 20))
        return kr_fail(err, "%s: kernel \"%s\": k_multiple %d / n_multiple %d out of range", path,
                       e->name, e->k_multiple, e->n_multiple);
    if (e->m_min < 0 || e->m_max < 0 || (e->m_max > 0 && e->m_max < e->m_min))
        return kr_fail(err, "%s: kernel \"%s\": bad M band [%lld, %lld]", path, e->name,
                       (long long)e->m_min, (long long)e->m_max);
    if (!(e->rel_tol_exact >= 0) || !(e->rel_tol_source >= 0) || isinf(e->rel_tol_exact) ||
        isinf(e->rel_tol_source))
        return kr_fail(err, "%s: kernel \"%s\": thresholds must be finite and >= 0", path,
                       e->name);

    memset(pk, 0, sizeof *pk);
    pk->owner = p;
    pk->entry = e;
    kr_strlcpy(pk->name, e->name, sizeof pk->name);
    snprintf(pk->summary, sizeof pk->summary, "[plugin %s%s] %s", p->name,
             p->gpu ? ", GPU" : "", e->summary ? e->summary : "(no summary)");
    kr_strlcpy(pk->act_format, "e4m3fn per-token (fp32 scale per row)", sizeof pk->act_format);
    snprintf(pk->weight_format, sizeof pk->weight_format,
             "mxfp4: e2m1 [N,K/2] %s + e8m0 [%s]; weight_ref %s",
             e->weight_order == KREPLAY_WEIGHT_FRAGMENT ? "fragment order" : "checkpoint order",
             e->scale_layout == KREPLAY_SCALES_KN ? "K/32,N" : "N,K/32",
             e->weight_ref == KREPLAY_WREF_ROW_MAX ? "[N] row max (folded)" : "NULL (per-block)");
    kr_strlcpy(pk->accumulation, e->accumulation ? e->accumulation : "(not declared by the plugin)",
               sizeof pk->accumulation);
    pk->n_multiple = e->n_multiple;

    kernel_desc_t *d = &pk->desc;
    d->name = pk->name;
    d->family = "plugin";
    d->summary = pk->summary;
    d->act_format = pk->act_format;
    d->weight_format = pk->weight_format;
    d->act = (operand_format_t)OPERAND_E4M3FN_PER_TOKEN;
    d->weight = (operand_format_t)OPERAND_MXFP4;
    d->accumulation = pk->accumulation;
    d->k_multiple = lcm_int(e->k_multiple > 0 ? e->k_multiple : 32, 32);
    d->n_multiple = e->n_multiple;
    d->m_min = e->m_min > 0 ? e->m_min : 1;
    d->m_max = e->m_max;
    d->refs = REF_EXACT | REF_SOURCE;
    d->rel_tol_exact = e->rel_tol_exact > 0 ? e->rel_tol_exact : 0.01;
    d->rel_tol_source = e->rel_tol_source > 0 ? e->rel_tol_source : 0.08;
    d->op = KERNEL_OP_GEMM;
    d->weight_kind = WEIGHT_KIND_MXFP4;
    d->config = 0;
    d->prepare_act = plugin_prepare_act;
    d->run_cpu = plugin_run;
    /* the family's model it is judged as: the folded production path for a
     * row-max weight reference, the per-block model otherwise */
    d->rules_of = kernel_for_role(e->weight_ref == KREPLAY_WREF_ROW_MAX ? COMPARE_ROLE_W4A8_PRODUCTION
                                                                       : COMPARE_ROLE_W4A8_MODEL);
    pk->index = i;
    return adopt_operands_of(p, pk, err);
}

int plugin_load(const char *path, kr_plugin_t **out, kr_error_t *err)
{
    *out = NULL;
    if (!path || !*path)
        return kr_fail(err, "plugin: no path given");
    struct stat st;
    if (stat(path, &st) != 0)
        return kr_fail(err, "%s: cannot open plugin: %s", path, strerror(errno));
    /* Not even opened otherwise: a FIFO would block the loader. */
    if (!S_ISREG(st.st_mode))
        return kr_fail(err, "%s: is %s, not a plugin shared library", path,
                       S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
                                              : "not a regular file");

    struct kr_plugin *p = calloc(1, sizeof *p);
    if (!p)
        return kr_fail(err, "%s: out of memory", path);
    kr_strlcpy(p->path, path, sizeof p->path);
    /* dlopen searches the library path for a name without '/': never do that. */
    char open_path[1040];
    snprintf(open_path, sizeof open_path, "%s%s", strchr(path, '/') ? "" : "./", path);

    /* Constructors run at dlopen: let a crashing or exiting one end a probe
     * process, not kreplay. */
    if (plugin_probe_load(path, open_path, PLUGIN_PROBE_TIMEOUT_S, err)) {
        free(p);
        return -1;
    }
    dlerror();
    p->handle = dlopen(open_path, RTLD_NOW | RTLD_LOCAL);
    if (!p->handle) {
        const char *why = dlerror();
        kr_fail(err, "%s: not a loadable shared library: %s", path, why ? why : "dlopen failed");
        free(p);
        return -1;
    }
    dlerror();
    const void *sym = dlsym(p->handle, KREPLAY_PLUGIN_SYMBOL);
    const char *why = dlerror();
    if (!sym || why) {
        kr_fail(err,
                "%s: no symbol \"%s\": not a kreplay plugin (a plugin exports "
                "`const kreplay_plugin_t %s`, see kernels/plugin.h)",
                path, KREPLAY_PLUGIN_SYMBOL, KREPLAY_PLUGIN_SYMBOL);
        goto fail;
    }
    p->sym = sym;
    /* abi_version is at offset 0 in every version of the ABI. */
    uint32_t version;
    memcpy(&version, sym, sizeof version);
    if (version != KREPLAY_PLUGIN_ABI_VERSION) {
        kr_fail(err,
                "%s: plugin ABI version %u, but this kreplay implements ABI version %u "
                "(kernels/plugin.h): rebuild the plugin against this kreplay's plugin.h",
                path, version, KREPLAY_PLUGIN_ABI_VERSION);
        goto fail;
    }
    if (p->sym->struct_size < sizeof(kreplay_plugin_t)) {
        kr_fail(err,
                "%s: plugin structure is %u bytes, ABI version %u's is %zu: the plugin was built "
                "against a different kernels/plugin.h",
                path, p->sym->struct_size, KREPLAY_PLUGIN_ABI_VERSION, sizeof(kreplay_plugin_t));
        goto fail;
    }
    const uint32_t known = KREPLAY_PLUGIN_GPU | KREPLAY_PLUGIN_PERSISTENT;
    if (p->sym->flags & ~known) {
        kr_fail(err, "%s: unknown plugin flags 0x%x (ABI %u knows 0x%x)", path,
                p->sym->flags, KREPLAY_PLUGIN_ABI_VERSION, known);
        goto fail;
    }
    if (p->sym->kernel_count < 1 || p->sym->kernel_count > 256 || !p->sym->kernels) {
        kr_fail(err, "%s: kernel_count %d (must be 1-256, with a kernels array)", path,
                p->sym->kernel_count);
        goto fail;
    }
    p->gpu = (p->sym->flags & KREPLAY_PLUGIN_GPU) != 0;
    p->persistent = (p->sym->flags & KREPLAY_PLUGIN_PERSISTENT) != 0;
    dlerror();
    p->ops = dlsym(p->handle, KREPLAY_OPERANDS_SYMBOL);
    dlerror();
    if (p->ops && (p->ops->struct_size < sizeof(kreplay_plugin_operands_t) ||
                   !p->ops->launch_named || p->gpu)) {
        kr_fail(err, "%s: \"%s\" is %u bytes with launch_named %s%s; expected %zu bytes, a "
                     "launch_named, and a CPU plugin (kernels/plugin.h)",
                path, KREPLAY_OPERANDS_SYMBOL, p->ops->struct_size,
                p->ops->launch_named ? "set" : "NULL", p->gpu ? " in a GPU plugin" : "",
                sizeof(kreplay_plugin_operands_t));
        goto fail;
    }
    if (p->sym->name && *p->sym->name) {
        kr_strlcpy(p->name, p->sym->name, sizeof p->name);
    } else {
        const char *base = strrchr(path, '/');
        kr_strlcpy(p->name, base ? base + 1 : path, sizeof p->name);
    }
    p->kernels = calloc((size_t)p->sym->kernel_count, sizeof *p->kernels);
    if (!p->kernels) {
        kr_fail(err, "%s: out of memory", path);
        goto fail;
    }
    for (int i = 0; i < p->sym->kernel_count; i++) {
        if (build_kernel(p, i, &p->kernels[i], err))
            goto fail;
        p->count = i + 1;
    }
    *out = p;
    return 0;
fail:
    dlclose(p->handle);
    free(p->kernels);
    free(p);
    return -1;
}

void plugin_unload(kr_plugin_t *p)
{
    if (!p)
        return;
    if (p->handle)
        dlclose(p->handle);
    free(p->kernels);
    free(p);
}

/* ------------------------------------------------------------------ running */

/* The activations as the operands-of kernel prepares them. */
static int prepare_act_as(const plugin_kernel_t *pk, const kernel_inputs_t *in,
                          const kernel_options_t *opt, kernel_act_t *act, kr_error_t *err)
{
    const kernel_desc_t *K = pk->operands_of;
    if (pk->n_multiple > 0 && in->N % pk->n_multiple != 0)
        return kr_fail(err, "N=%lld is not a multiple of %d", (long long)in->N, pk->n_multiple);
    if (K->prepare_act(K, in, opt, act, err))
        return -1;
    if (act->kind == ACT_FP8_PER_TOKEN && act->codes && act->fp8_format != FP8_E4M3FN) {
        kernel_act_free(act);
        return kr_fail(err, "the plugin kernel takes e4m3fn activations; the recorded x_fp8 are "
                            "e4m3fnuz (replay with --act-source quantize)");
    }
    return 0;
}

static int plugin_prepare_act(const kernel_desc_t *k, const kernel_inputs_t *in,
                              const kernel_options_t *opt, kernel_act_t *act, kr_error_t *err)
{
    const plugin_kernel_t *pk = (const plugin_kernel_t *)k;
    if (pk->operands_of)
        return prepare_act_as(pk, in, opt, act, err);
    if (!in->weight.packed || !in->weight.scales)
        return kr_fail(err, "the case has no MXFP4 weight");
    if (pk->n_multiple > 0 && in->N % pk->n_multiple != 0)
        return kr_fail(err, "N=%lld is not a multiple of %d", (long long)in->N, pk->n_multiple);
    if (pk->entry->weight_order == KREPLAY_WEIGHT_FRAGMENT && (in->N % 16 || in->K % 16))
        return kr_fail(err, "fragment-order weights need N %% 16 == 0 and K %% 16 == 0 (N=%lld)",
                       (long long)in->N);
    if (act_prepare_fp8_token(k, in, opt, act, err))
        return -1;
    if (act->fp8_format != FP8_E4M3FN) {
        kernel_act_free(act);
        return kr_fail(err, "the plugin kernel takes e4m3fn activations; the recorded x_fp8 are "
                            "e4m3fnuz (replay with --act-source quantize)");
    }
    return 0;
}

void plugin_layout_free(plugin_layout_t *h)
{
    for (int i = 0; i < 3; i++)
        free(h->owned[i]);
    memset(h, 0, sizeof *h);
}

int plugin_layout(const kernel_desc_t *k, const kernel_inputs_t *in, plugin_layout_t *h,
                  kr_error_t *err)
{
    const plugin_kernel_t *pk = (const plugin_kernel_t *)k;
    memset(h, 0, sizeof *h);
    const int64_t N = in->N, K = in->K;
    const mxfp4_weight_t *w = &in->weight;
    h->weight = w->packed;
    if (pk->entry->weight_order == KREPLAY_WEIGHT_FRAGMENT) {
        h->owned[0] = malloc((size_t)N * (size_t)(K / 2));
        if (!h->owned[0])
            return kr_fail(err, "out of memory permuting the weight");
        if (wperm_permute(w->packed, N, K, h->owned[0])) {
            plugin_layout_free(h);
            return kr_fail(err, "fragment order needs N %% 16 == 0 and K %% 16 == 0");
        }
        h->weight = h->owned[0];
    }
    const scale_layout_t want =
        pk->entry->scale_layout == KREPLAY_SCALES_KN ? SCALE_LAYOUT_KN : SCALE_LAYOUT_NK;
    h->scales = w->scales;
    if (w->layout != want) {
        h->owned[1] = malloc((size_t)N * (size_t)(K / 32));
        if (!h->owned[1]) {
            plugin_layout_free(h);
            return kr_fail(err, "out of memory transposing the weight scales");
        }
        mxfp4_scales_transpose(w->scales, w->layout, N, K, h->owned[1]);
        h->scales = h->owned[1];
    }
    if (pk->entry->weight_ref == KREPLAY_WREF_ROW_MAX) {
        if (in->weight_ref && in->weight_ref_len == N) {
            h->ref = in->weight_ref;
        } else {
            h->owned[2] = malloc((size_t)N);
            if (!h->owned[2]) {
                plugin_layout_free(h);
                return kr_fail(err, "out of memory for weight_ref");
            }
            for (int64_t n = 0; n < N; n++) {
                uint8_t r = 0;
                for (int64_t b = 0; b < K / 32; b++) {
                    uint8_t e = mxfp4_scale_at(w->scales, w->layout, N, K, n, b);
                    if (e > r)
                        r = e;
                }
                h->owned[2][n] = r;
            }
            h->ref = h->owned[2];
        }
    }
    return 0;
}

const char *plugin_kernel_last_error(const kernel_desc_t *k)
{
    const plugin_kernel_t *pk = (const plugin_kernel_t *)k;
    const char *(*last)(void) = pk->owner->sym->last_error;
    const char *s = last ? last() : NULL;
    return s && *s ? s : "no message (the plugin has no last_error, or it is empty)";
}

void plugin_note_unwritten(int64_t count, int64_t first, int64_t M, int64_t N,
                           kernel_run_info_t *info)
{
    if (count)
        snprintf(info->note, sizeof info->note,
                 "%lld of %lld output elements unwritten (poison 0x7FC1 left), first at [%lld, %lld]",
                 (long long)count, (long long)(M * N), (long long)(first / N),
                 (long long)(first % N));
}

/* Elements still holding the poison: the note says how many and where. */
static void note_unwritten(const uint16_t *out, int64_t M, int64_t N, kernel_run_info_t *info)
{
    int64_t count = 0, first = -1;
    for (int64_t i = 0; i < M * N; i++) {
        if (out[i] == PLUGIN_POISON_BF16) {
            if (first < 0)
                first = i;
            count++;
        }
    }
    plugin_note_unwritten(count, first, M, N, info);
}

size_t plugin_guard_bytes(int64_t N)
{
    size_t g = ((size_t)PLUGIN_GUARD_ROWS * (size_t)N + PLUGIN_GUARD_COLS) * sizeof(uint16_t);
    if (g < PLUGIN_GUARD_MIN_BYTES)
        g = PLUGIN_GUARD_MIN_BYTES;
    return (g + 63) / 64 * 64;
}

int plugin_guard_report(const char *what, const char *name, const plugin_guard_scan_t *g,
                        int64_t M, int64_t N, kr_error_t *err)
{
    if (!g->n_before && !g->n_after)
        return 0;
    char a[224] = "none after its end", b[96] = "none before its start";
    if (g->n_after) {
        const int64_t e = M * N + g->first_after / 2;
        snprintf(a, sizeof a,
                 "%lld after its end, bytes +%lld to +%lld past it (the first is element [%lld, "
                 "%lld] of an [M, N] grid run on)",
                 (long long)g->n_after, (long long)g->first_after, (long long)g->last_after,
                 (long long)(e / N), (long long)(e % N));
    }
    if (g->n_before)
        snprintf(b, sizeof b, "%lld before its start, the nearest %lld bytes before it",
                 (long long)g->n_before, (long long)(g->guard - (size_t)g->last_before));
    kr_fail(err, "%s %s: out-of-bounds write: %lld of the %zu canary bytes around out changed: %s; %s",
            what, name, (long long)(g->n_before + g->n_after), 2 * g->guard, a, b);
    return PLUGIN_RUN_OUT_OF_BOUNDS;
}

/* Checks both guards of buf = [guard | out | guard] (plugin_guard_report). */
static int check_guards(const char *what, const char *name, const uint8_t *buf, size_t guard,
                        int64_t M, int64_t N, kr_error_t *err)
{
    const uint8_t *after = buf + guard + (size_t)M * (size_t)N * sizeof(uint16_t);
    plugin_guard_scan_t g = {.guard = guard, .last_before = -1, .first_after = -1, .last_after = -1};
    for (size_t i = 0; i < guard; i++) {
        if (buf[i] != PLUGIN_GUARD_BYTE) {
            g.n_before++;
            g.last_before = (int64_t)i;
        }
        if (after[i] != PLUGIN_GUARD_BYTE) {
            if (g.first_after < 0)
                g.first_after = (int64_t)i;
            g.last_after = (int64_t)i;
            g.n_after++;
        }
    }
    return plugin_guard_report(what, name, &g, M, N, err);
}

/* named: launch_named on that source, else the ABI's launch. */
static int run_host(const plugin_kernel_t *pk, const kernel_inputs_t *in, const kernel_act_t *act,
                    const plugin_layout_t *h, const kreplay_operand_source_t *named,
                    uint16_t *out, kernel_run_info_t *info, kr_error_t *err)
{
    const int64_t M = in->M, N = in->N;
    const size_t out_bytes = (size_t)M * (size_t)N * sizeof(uint16_t);
    const size_t guard = plugin_guard_bytes(N), buf_bytes = out_bytes + 2 * guard;
    /* Mapped, not malloc'd: a stray write lands on the canaries whatever
     * the allocator (or a sanitizer's) keeps around its blocks. */
    void *map = mmap(NULL, buf_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        return kr_fail(err, "out of memory for the plugin's output (%zu bytes)", buf_bytes);
    uint8_t *buf = map;
    memset(buf, PLUGIN_GUARD_BYTE, guard);
    memset(buf + guard + out_bytes, PLUGIN_GUARD_BYTE, guard);
    uint16_t *o = (uint16_t *)(void *)(buf + guard);
    for (int64_t i = 0; i < M * N; i++)
        o[i] = PLUGIN_POISON_BF16;
    const int rc = named ? pk->owner->ops->launch_named(pk->index, named, plugin_operands_get, o,
                                                        M, N, in->K, NULL)
                         : pk->entry->launch(act->codes, h->weight, h->scales, h->ref,
                                             act->token_scale, o, M, N, in->K, NULL);
    int result = -1;
    if (rc != 0) {
        kr_fail(err, "plugin kernel %s: launch returned %d: %s", pk->name, rc,
                plugin_kernel_last_error(&pk->desc));
    } else if ((result = check_guards("plugin kernel", pk->name, buf, guard, M, N, err)) == 0) {
        memcpy(out, o, out_bytes);
        note_unwritten(out, M, N, info);
    }
    munmap(map, buf_bytes);
    return result;
}

/* A plugin with named operands: the weight laid out as declared when the
 * case has one, everything else computed on the kernel's request. */
static int run_named(const plugin_kernel_t *pk, const kernel_inputs_t *in, const kernel_act_t *act,
                     uint16_t *out, kernel_run_info_t *info, kr_error_t *err)
{
    plugin_layout_t h;
    memset(&h, 0, sizeof h);
    if (in->weight.packed && in->weight.scales && plugin_layout(&pk->desc, in, &h, err))
        return -1;
    const plugin_weight_view_t view = {h.weight, h.scales, h.ref};
    kreplay_operand_source_t src;
    plugin_operand_cache_t cache;
    plugin_operands_init(&src, &cache, in, act, &view);
    const int rc = run_host(pk, in, act, &h, &src, out, info, err);
    plugin_operands_free(&src);
    plugin_layout_free(&h);
    return rc;
}

static int plugin_run(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                      const kernel_options_t *opt, uint16_t *out, kernel_run_info_t *info,
                      kr_error_t *err)
{
    (void)opt;
    const plugin_kernel_t *pk = (const plugin_kernel_t *)k;
    if (pk->owner->ops)
        return run_named(pk, in, act, out, info, err);
    if (act->kind != ACT_FP8_PER_TOKEN || act->fp8_format != FP8_E4M3FN)
        return kr_fail(err, "plugin kernel %s takes e4m3fn per-token activations", pk->name);
    plugin_layout_t h;
    if (plugin_layout(&pk->desc, in, &h, err))
        return -1;
    /* A GPU plugin's kernels take device operands: the GPU worker launches
     * them (harness/engine/gpu_session.h), never this host path. */
    const int rc = pk->owner->gpu ? kr_fail(err, "GPU plugin kernel %s: its launches go through "
                                                 "the GPU worker, not a host run", pk->name)
                                  : run_host(pk, in, act, &h, NULL, out, info, err);
    plugin_layout_free(&h);
    if (rc == 0 && in->weight.e8m0_mode == E8M0_ZERO_IS_ZERO) {
        const size_t len = strlen(info->note);
        snprintf(info->note + len, sizeof info->note - len, "%sthe plugin decodes e8m0 itself "
                 "(--e8m0-zero not applied to it)", len ? "; " : "");
    }
    return rc;
}
