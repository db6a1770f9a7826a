#include "kernel_selection.h"

#include <stdio.h>
#include <string.h>

#include "closest_name.h"

int kernel_selected(const replay_options_t *opt, const kernel_desc_t *k)
{
    return kernel_name_matches(k->name, opt->kernel_patterns);
}

/* Every kernel the replay knows: the registry's, then the extra ones. */
static const kernel_desc_t *known_kernel(const replay_options_t *opt, int i)
{
    return i < kernel_count() ? kernel_at(i) : opt->extra_kernels[i - kernel_count()];
}

static int check_one(const replay_options_t *opt, const char *option, const char *glob_, kr_error_t *err)
{
    const int n = kernel_count() + opt->n_extra_kernels;
    const char *selected[512];
    int n_selected = 0;
    const char *left_out = NULL;
    for (int i = 0; i < n; i++) {
        const kernel_desc_t *k = known_kernel(opt, i);
        const int runs = kernel_selected(opt, k);
        if (kernel_name_matches(k->name, glob_)) {
            if (runs)
                return 0;
            if (!left_out)
                left_out = k->name;
        }
        if (runs && n_selected < 512)
            selected[n_selected++] = k->name;
    }
    const char *near = closest_name(glob_, selected, n_selected);
    char hint[256] = "";
    if (left_out)
        snprintf(hint, sizeof hint, "; it names %s, which --kernels '%.100s' leaves out", left_out,
                 opt->kernel_patterns);
    else if (near)
        snprintf(hint, sizeof hint, " (did you mean %s?)", near);
    return kr_fail(err, "%s: '%s' matches none of the kernels this run replays%s; see 'kreplay list kernels'",
                   option, glob_, hint);
}

int kernel_selection_check(const replay_options_t *opt, const char *option, const char *globs, kr_error_t *err)
{
    /* Each glob of the comma-separated list, as kernel_name_matches reads it. */
    for (const char *p = globs; p && *p;) {
        p += strspn(p, ", ");
        const size_t len = strcspn(p, ",");
        char glob_[256];
        snprintf(glob_, sizeof glob_, "%.*s", (int)len, p);
        if (len > 0 && check_one(opt, option, glob_, err))
            return -1;
        p += len;
    }
    return 0;
}
