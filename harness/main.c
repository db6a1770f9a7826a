#include "cli.h"

int main(int argc, char **argv)
{
    return kreplay_main(argc, argv);
}
