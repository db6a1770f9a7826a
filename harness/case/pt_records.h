/* pt_records: why a torch.save file took too long to read.
 *
 * A dump whose storage record stays under the size limit (torch_pt.h: 1 GiB
 * by default) but inflates ~1000:1 (a 1.1 MB file holding a 1000 MiB
 * storage of zeros) takes the reading process seconds; when that runs past
 * the read's time limit, "did not finish" alone would not say why.  So the
 * file's largest record is found from the zip's central directory alone
 * (nothing inflated), in a child process of its own since the zip is
 * untrusted, and named with the size limit. */
#ifndef KR_PT_RECORDS_H
#define KR_PT_RECORDS_H

#include <stddef.h>

/* note: "; its largest record, NAME, inflates to N MiB from M bytes (the
 * size limit is L MiB: KREPLAY_PT_MAX_MB=N refuses such a file at once,
 * KREPLAY_READ_TIMEOUT=S gives the read more time)", or "" when path is no
 * readable zip. */
void pt_records_timeout_note(const char *path, char *note, size_t cap);

#endif
