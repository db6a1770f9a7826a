/* The kreplay command line: one function per subcommand, dispatched by name. */
#ifndef KR_CLI_H
#define KR_CLI_H

int kreplay_main(int argc, char **argv);

#endif
