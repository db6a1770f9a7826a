#include "cli.h"

#include <stdio.h>

int kreplay_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "kreplay: under construction\n");
    return 2;
}
