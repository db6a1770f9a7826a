/* cli_output: a command whose output was lost does not succeed.
 *
 * stdout is buffered: `kreplay replay CASE > /dev/full` fails only when the
 * buffer is flushed, after the command has returned 0.  So once a command
 * is done its streams are flushed and closed here, and a write that failed
 * at any point (ferror), in the flush or in the close, turns its exit
 * status into 2 with one line on stderr naming the stream and the cause
 * ("kreplay: error: writing standard output: No space left on device").
 * A failure on stderr itself cannot be said anywhere: the status alone
 * tells it. */
#ifndef KR_CLI_OUTPUT_H
#define KR_CLI_OUTPUT_H

/* status, or EXIT_USAGE when a write to stdout or stderr was lost.  Closes
 * stdout; nothing may print to it afterwards. */
int cli_close_output(int status);

#endif
