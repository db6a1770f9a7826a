/* Colour on a terminal: on when the stream is a terminal and NO_COLOR is not
 * set (https://no-color.org), off otherwise, so pipes and logs stay plain. */
#ifndef KR_CLI_COLOUR_H
#define KR_CLI_COLOUR_H

#include <stdio.h>

#include "result.h"

int cli_colour_wanted(FILE *fp);
/* The escape that starts a verdict's colour ("" without colour), and the reset. */
const char *cli_colour_of(verdict_t v, int colour);
const char *cli_colour_reset(int colour);

#endif
