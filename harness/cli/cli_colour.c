#include "cli_colour.h"

#include <stdlib.h>
#include <unistd.h>

int cli_colour_wanted(FILE *fp)
{
    const char *no = getenv("NO_COLOR");
    if (no && *no)
        return 0;
    return isatty(fileno(fp));
}

const char *cli_colour_of(verdict_t v, int colour)
{
    if (!colour)
        return "";
    if (v == VERDICT_PASS)
        return "\033[32m";
    if (v == VERDICT_UNSUPPORTED || v == VERDICT_POISONED_INPUT)
        return "\033[33m";
    return verdict_is_failure(v) ? "\033[1;31m" : "";
}

const char *cli_colour_reset(int colour)
{
    return colour ? "\033[0m" : "";
}
