/* Case images for the case image tests (test_case_image.c,
 * test_case_image_safe_read.c): two cases compared field by field, a fresh
 * anonymous image, an image's bytes read back or written to a fresh one, and
 * the layout's offsets with the 64-bit words at them (for corrupting). */
#ifndef KR_CASE_IMAGES_H
#define KR_CASE_IMAGES_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "case_io.h"

/* Field by field, in case.h's order; fails the test naming the first that
 * differs. */
void assert_cases_equal(const case_t *a, const case_t *b);

/* A fresh anonymous image file (case_image_open_anonymous); fails the test
 * when there is none. */
int image_fd(void);

/* The size of the file open as fd. */
off_t file_size(int fd);

/* The image's bytes, read back into memory (for corrupting). */
uint8_t *image_bytes(int fd, size_t *n);

/* A fresh image holding the n bytes given. */
int fd_with(const uint8_t *bytes, size_t n);

/* The layout's offsets (case_image.c): a 144-byte header of 18 64-bit
 * words, then 23 table entries of 4 words (field, present, offset, bytes). */
enum {
    H_MAGIC = 0, H_VERSION = 8, H_HEADER_BYTES = 16, H_IMAGE_BYTES = 24, H_FIELD_COUNT = 32,
    H_M = 40, H_N = 48, H_K = 56, H_WEIGHT_REF_LEN = 64, H_X_STORAGE = 72, H_X_FP8_FORMAT = 80,
    H_WEIGHT_ORDER = 88, H_SCALE_LAYOUT = 96, H_SOURCE_DEV = 104, H_SOURCE_INO = 112,
    H_SOURCE_SIZE = 120, H_SOURCE_MTIME = 128, H_SOURCE_CTIME = 136, H_END = 144,
    FIELD_COUNT = 23,
};

/* The offset of 64-bit word `word` of table entry `field`. */
size_t entry_at(int field, int word);

/* The 64-bit word at off in b, read and set. */
uint64_t get_u64(const uint8_t *b, size_t off);
void set_u64(uint8_t *b, size_t off, uint64_t v);

#endif
