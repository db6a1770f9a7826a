/* Case images for the case image tests: see case_images.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "case_image.h"
#include "case_images.h"

static void assert_array_equal(const void *a, const void *b, size_t bytes, const char *name)
{
    if (!a || !b) {
        if (a != b)
            fail_msg("%s: present on one side only", name);
        return;
    }
    if (memcmp(a, b, bytes) != 0)
        fail_msg("%s: %zu bytes differ after the round trip", name, bytes);
}

static void assert_string_same(const char *a, const char *b, const char *name)
{
    if (!a || !b) {
        if (a != b)
            fail_msg("%s: present on one side only", name);
        return;
    }
    if (strcmp(a, b) != 0)
        fail_msg("%s: \"%s\" came back as \"%s\"", name, a, b);
}

/* Field by field, in case.h's order. */
void assert_cases_equal(const case_t *a, const case_t *b)
{
    assert_string_same(a->path, b->path, "path");
    assert_int_equal(a->M, b->M);
    assert_int_equal(a->N, b->N);
    assert_int_equal(a->K, b->K);
    const size_t MK = (size_t)(a->M * a->K), MN = (size_t)(a->M * a->N),
                 NK = (size_t)(a->N * a->K);
    assert_array_equal(a->x, b->x, MK * sizeof(float), "x");
    assert_int_equal(a->x_storage, b->x_storage);
    assert_array_equal(a->x_fp8, b->x_fp8, MK, "x_fp8");
    assert_int_equal(a->x_fp8_format, b->x_fp8_format);
    assert_array_equal(a->x_scale, b->x_scale, (size_t)a->M * sizeof(float), "x_scale");
    assert_array_equal(a->weight, b->weight, NK / 2, "weight");
    assert_int_equal(a->weight_order, b->weight_order);
    assert_array_equal(a->weight_scale, b->weight_scale, NK / 32, "weight_scale");
    assert_int_equal(a->scale_layout, b->scale_layout);
    assert_int_equal(a->weight_ref_len, b->weight_ref_len);
    assert_array_equal(a->weight_ref, b->weight_ref, (size_t)a->weight_ref_len, "weight_ref");
    assert_array_equal(a->out, b->out, MN * 2, "out");
    assert_array_equal(a->out_rerun, b->out_rerun, MN * 2, "out_rerun");
    assert_array_equal(a->aiter, b->aiter, MN * 2, "aiter");
    assert_string_same(a->kernel_path, b->kernel_path, "kernel_path");
    assert_string_same(a->layer, b->layer, "layer");
    assert_string_same(a->model, b->model, "model");
    assert_string_same(a->capture_time, b->capture_time, "capture_time");
    assert_string_same(a->env_flags, b->env_flags, "env_flags");
    assert_string_same(a->route, b->route, "route");
    assert_string_same(a->tp_rank, b->tp_rank, "tp_rank");
    assert_string_same(a->versions, b->versions, "versions");
    assert_string_same(a->gpu_arch, b->gpu_arch, "gpu_arch");
    assert_string_same(a->extension_path, b->extension_path, "extension_path");
    assert_string_same(a->capture_time_source, b->capture_time_source, "capture_time_source");
    assert_array_equal(a->weight_bf16, b->weight_bf16, NK * 2, "weight_bf16");
    assert_array_equal(a->ref_recorded, b->ref_recorded, MN * sizeof(float), "ref_recorded");
}

int image_fd(void)
{
    kr_error_t err = {{0}};
    int fd = case_image_open_anonymous(&err);
    if (fd < 0)
        fail_msg("%s", err.msg);
    return fd;
}

off_t file_size(int fd)
{
    struct stat sb;
    assert_int_equal(fstat(fd, &sb), 0);
    return sb.st_size;
}

/* The image's bytes, read back into memory (for corrupting). */
uint8_t *image_bytes(int fd, size_t *n)
{
    *n = (size_t)file_size(fd);
    uint8_t *p = malloc(*n);
    assert_non_null(p);
    assert_int_equal(pread(fd, p, *n, 0), (ssize_t)*n);
    return p;
}

int fd_with(const uint8_t *bytes, size_t n)
{
    int fd = image_fd();
    if (n)
        assert_int_equal(pwrite(fd, bytes, n, 0), (ssize_t)n);
    return fd;
}

size_t entry_at(int field, int word)
{
    return (size_t)H_END + (size_t)field * 32 + (size_t)word * 8;
}

uint64_t get_u64(const uint8_t *b, size_t off)
{
    uint64_t v;
    memcpy(&v, b + off, sizeof v);
    return v;
}

void set_u64(uint8_t *b, size_t off, uint64_t v)
{
    memcpy(b + off, &v, sizeof v);
}
