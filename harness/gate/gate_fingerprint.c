#include "gate_fingerprint.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kr_string.h"
#include "run_options.h"

/* 64-bit FNV-1a of the file's bytes, hex, or "unread". */
static void file_digest(const char *path, char out[17])
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        kr_strlcpy(out, "unread", 17);
        return;
    }
    uint64_t h = 1469598103934665603ull;
    unsigned char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, fp)) > 0)
        for (size_t i = 0; i < got; i++)
            h = (h ^ buf[i]) * 1099511628211ull;
    fclose(fp);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

void gate_fingerprint(const char *cli_fingerprint, const suite_t *s, char *buf, size_t cap)
{
    kr_strlcpy(buf, cli_fingerprint ? cli_fingerprint : "", cap);
    for (int i = 0; i < s->n_python; i++) {
        /* MODULE:FUNCTION[@KERNEL]: MODULE a path when it ends in .py */
        char module[512];
        kr_strlcpy(module, s->python[i], sizeof module);
        char *colon = strrchr(module, ':');
        if (colon)
            *colon = '\0';
        size_t len = strlen(module);
        if (len < 4 || strcmp(module + len - 3, ".py") != 0)
            continue;
        char name[600], digest[17];
        snprintf(name, sizeof name, "python kernel %s", s->python[i]);
        file_digest(module, digest);
        run_options_append(buf, cap, name, digest);
    }
}
