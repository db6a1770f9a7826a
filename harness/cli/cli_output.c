/* cli_output: stdout and stderr checked at the end of a command
 * (cli_output.h). */
#include "cli_output.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cli_close_output(int status)
{
    errno = 0;
    const int lost_before = ferror(stdout);
    int saved = errno;
    const int flush_failed = fflush(stdout) != 0;
    if (flush_failed)
        saved = errno;
    const int close_failed = fclose(stdout) != 0;
    if (close_failed && !saved)
        saved = errno;
    if (lost_before || flush_failed || close_failed) {
        fprintf(stderr, "kreplay: error: writing standard output: %s; the output is incomplete\n",
                saved ? strerror(saved) : "write error");
        status = EXIT_USAGE;
    }
    if (ferror(stderr) || fflush(stderr) != 0)
        status = EXIT_USAGE;
    return status;
}
