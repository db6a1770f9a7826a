#include "cli_patterns_check.h"

#include <stdio.h>

#include "kernel_selection.h"

static void left_out(const cli_command_t *cmd, const replay_options_t *opt, const char *option, const char *what,
                     const char *kernel)
{
    fprintf(stderr,
            "kreplay %s: --%s %s: its kernel %s is not run: --kernels '%s' leaves it out; add it "
            "(--kernels '%s,%s') or drop --%s\n",
            cmd->name, option, what, kernel, opt->kernel_patterns, opt->kernel_patterns, kernel, option);
}

int cli_check_named_kernels(const cli_command_t *cmd, const replay_options_t *opt, kr_plugin_t *const *plugins,
                            int n_plugins, const kr_plugin_t *py, const char *const *py_specs)
{
    int bad = 0;
    for (int i = 0; i < n_plugins; i++) {
        const kr_plugin_t *p = plugins[i];
        if (p == py || plugin_kernel_count(p) == 0)
            continue;
        int any = 0;
        for (int j = 0; j < plugin_kernel_count(p) && !any; j++)
            any = kernel_selected(opt, plugin_kernel_at(p, j));
        if (!any) {
            left_out(cmd, opt, "plugin", plugin_path(p), plugin_kernel_at(p, 0)->name);
            bad = 1;
        }
    }
    /* Each --py is one kernel the user named: each must run. */
    for (int j = 0; py && j < plugin_kernel_count(py); j++) {
        if (!kernel_selected(opt, plugin_kernel_at(py, j))) {
            left_out(cmd, opt, "py", py_specs[j], plugin_kernel_at(py, j)->name);
            bad = 1;
        }
    }
    kr_error_t err = {{0}};
    if (kernel_selection_check(opt, "--inject", opt->fault_kernels, &err)) {
        fprintf(stderr, "kreplay %s: %s\n", cmd->name, err.msg);
        bad = 1;
    }
    return bad ? -1 : 0;
}
