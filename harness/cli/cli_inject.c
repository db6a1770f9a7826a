#include "cli_inject.h"

#include <stdio.h>
#include <string.h>

#include "kr_string.h"

int cli_parse_inject(const cli_command_t *cmd, const char *arg, char *buf, size_t cap, fault_t *fault,
                     const char **kernels)
{
    if (!strcmp(arg, "help")) {
        printf("--inject [KERNELS=]FAULT: run the kernels matching KERNELS (default all) as if they\n"
               "had FAULT.  Faults:\n%s", fault_usage());
        return 1;
    }
    kr_strlcpy(buf, arg, cap);
    const char *spec = buf;
    char *eq = strchr(buf, '=');
    *kernels = NULL;
    if (eq) { /* KERNELS=FAULT: only matching kernels get it */
        *eq = '\0';
        *kernels = buf;
        spec = eq + 1;
    }
    kr_error_t err = {{0}};
    if (fault_parse(spec, fault, &err)) {
        fprintf(stderr, "kreplay %s: --inject: %s\n%s", cmd->name, err.msg, fault_usage());
        return -1;
    }
    return 0;
}
