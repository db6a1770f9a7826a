#include "cli_kernel_patterns.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_string.h"

/* The registry's names and the plugins', for suggestions. */
static int kernel_names(const char **names, int cap, const kernel_desc_t *const *extra, int n_extra)
{
    int n = 0;
    for (int i = 0; i < kernel_count() && n < cap; i++)
        names[n++] = kernel_at(i)->name;
    for (int i = 0; i < n_extra && n < cap; i++)
        names[n++] = extra[i]->name;
    return n;
}

void cli_kernel_typo(const cli_command_t *cmd, const char *option, const char *word,
                     const kernel_desc_t *const *extra, int n_extra)
{
    const char *names[512];
    int n = kernel_names(names, 512, extra, n_extra);
    const char *near = cli_closest(word, names, n);
    fprintf(stderr, "kreplay %s: --%s: '%s' matches no kernel", cmd->name, option, word);
    if (near)
        fprintf(stderr, " (did you mean %s?)", near);
    fprintf(stderr, "; see 'kreplay list kernels'\n");
}

int cli_check_kernel_patterns(const cli_command_t *cmd, const char *patterns,
                              const kernel_desc_t *const *extra, int n_extra)
{
    char buf[1024];
    kr_strlcpy(buf, patterns, sizeof buf);
    int bad = 0;
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        while (*p == ' ')
            p++;
        int any = 0;
        for (int i = 0; i < kernel_count() && !any; i++)
            any = kernel_name_matches(kernel_at(i)->name, p);
        for (int i = 0; i < n_extra && !any; i++)
            any = kernel_name_matches(extra[i]->name, p);
        if (!any) {
            cli_kernel_typo(cmd, "kernels", p, extra, n_extra);
            bad = 1;
        }
    }
    return bad ? -1 : 0;
}
