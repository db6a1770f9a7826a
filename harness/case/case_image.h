/* case_image: a case_t as one flat binary image in a file descriptor, the
 * form in which case_load_safe hands a case from the reading child back to
 * its parent.  It replaces a second HDF5 file: writing and re-reading HDF5
 * cost more than the read itself, and the parent must not run libhdf5 on
 * anything it did not write anyway.
 *
 * Layout (native byte order and sizes: an image never leaves the host, nor
 * the binary, that wrote it):
 *
 *     header    magic "KRCASEIM", version, header and image sizes (the
 *               image may be followed by unrelated bytes), M, N, K,
 *               weight_ref_len and the four enums, every field 64-bit
 *     table     one entry per field of case_t that owns memory (arrays and
 *               strings, in case.h's order): field index, presence (0
 *               absent, 1 in the image, 2 an array the case file holds as
 *               it is), offset (in the image, or in the case file) and byte
 *               count of its data
 *
 * The header also identifies the case file the presence-2 arrays are in:
 * the writer's case had them in its mapping of that file (case_mapping.h),
 * and the reader maps them from there instead of copying them twice.
 *     data      each present field's bytes, 8-byte aligned, in table order
 *
 * An array's byte count is fixed by M, N, K (or weight_ref_len); a string is
 * stored without its NUL.  The reader treats the image as untrusted bytes:
 * every size is checked against M, N, K and against the image's real size,
 * without overflow, before anything is allocated, and the case it builds
 * goes through case_validate.  Any problem is one line in err. */
#ifndef KR_CASE_IMAGE_H
#define KR_CASE_IMAGE_H

#include "case.h"

#define CASE_IMAGE_MAGIC "KRCASEIM"
#define CASE_IMAGE_VERSION 3

/* What happens to the source as it is copied. */
typedef enum {
    CASE_IMAGE_KEEP_SOURCE = 0,
    /* case_image_write: each array is freed as soon as it is written, and
     * the case is left empty (case_free'd) whether or not the write
     * succeeded.  case_image_read: each part of the image is discarded from
     * the file (a punched hole) as soon as it has been read.  Either way the
     * case and its image never both exist in full: they overlap by one
     * array when writing and by a few MiB when reading. */
    CASE_IMAGE_CONSUME_SOURCE,
} case_image_mode_t;

/* Writes c's image at offset 0 of fd with pwrite (fd's own offset is
 * neither used nor moved).  The file is not truncated: what lies past the
 * image (the tail of a longer one written before) is not part of it, so a
 * file can be reused without giving its pages back and taking them again.
 * c must be valid (case_validate).  Returns 0, or -1 with err set. */
int case_image_write(int fd, case_t *c, case_image_mode_t mode, kr_error_t *err);

/* Reads the image at offset 0 of fd into *c, each field straight into its
 * own buffer, and the arrays the image says are in the case file into a
 * private mapping of source_path (refused unless the file is still the one
 * the writer read: same device, inode, size, modification and change
 * times).  `what` names the case in messages (e.g. the file the image was
 * made from); c->path is the path stored in the image.  Returns 0, or -1
 * with err set and *c left empty. */
int case_image_read(int fd, case_t *c, case_image_mode_t mode, const char *what,
                    const char *source_path, kr_error_t *err);

/* A descriptor for an image that lives only as long as it is open: an
 * anonymous memory file (memfd_create) or, where that is unavailable, a
 * temporary file in $TMPDIR (else /tmp) unlinked at once.  Close-on-exec.
 * Returns the descriptor, or -1 with err set. */
int case_image_open_anonymous(kr_error_t *err);

#endif
