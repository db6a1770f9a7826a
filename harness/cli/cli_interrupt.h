/* SIGINT / SIGTERM during a gate: the finished cases are in RUNDIR/partial/
 * already (each written atomically when its case ends), so the handler says
 * how many are kept there and the exact command that finishes the run, then
 * ends the process by the same signal (exit status 130 for SIGINT, 143 for
 * SIGTERM in a shell), as an interrupted program should.
 *
 * The handler may only make async-signal-safe calls: cli_interrupt_arm
 * prepares the message, and the handler counts the partial files with
 * open(2) and getdents64(2) and writes with write(2). */
#ifndef KR_CLI_INTERRUPT_H
#define KR_CLI_INTERRUPT_H

/* Installs the handlers for a gate writing run_dir, started as argv (the
 * subcommand's argc/argv, argv[0] "gate"): the resume command is argv
 * without --force, with --resume. */
void cli_interrupt_arm(const char *run_dir, int argc, char **argv);

/* The default handlers back (the run ended by itself). */
void cli_interrupt_disarm(void);

#endif
