/* How much memory a replay may hold at once when the user does not say
 * (--block-mb): a fraction of the memory the machine has available now.
 *
 * A fixed small default (it was 16 MiB) cut a prefill-sized case into many
 * row blocks, and every block repeats the reference's pass over the weight;
 * a fraction of MemAvailable keeps the whole case in one block where the
 * machine has the memory and still bounds it where memory is short.  The
 * budget never changes a bit of the outputs or references (row blocks are
 * whole reference panels, replay.h), only how much is held at once. */
#ifndef KR_MEM_BUDGET_H
#define KR_MEM_BUDGET_H

#include <stdint.h>

/* The default budget is MEM_BUDGET_FRACTION of MemAvailable, clamped to
 * [MEM_BUDGET_MIN_BYTES, MEM_BUDGET_MAX_BYTES]: a quarter leaves room for the
 * case itself (held whole, next to the budget) and for other processes;
 * the ceiling keeps one replay from claiming a large host; the floor is the
 * old fixed default, used also when MemAvailable cannot be read. */
#define MEM_BUDGET_FRACTION 4
#define MEM_BUDGET_MIN_BYTES ((int64_t)16 << 20)
#define MEM_BUDGET_MAX_BYTES ((int64_t)4 << 30)

/* MemAvailable in bytes from a file in /proc/meminfo's format, or -1 when
 * the file cannot be read or has no well-formed MemAvailable line. */
int64_t mem_available_from_file(const char *meminfo_path);

/* The default budget for a given MemAvailable (< 0: unknown). */
int64_t mem_budget_for_available(int64_t available_bytes);

/* The default budget on this machine now (/proc/meminfo). */
int64_t mem_budget_default(void);

#endif
