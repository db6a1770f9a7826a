#include "row_blocks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_grow.h"
#include "kr_string.h"

row_block_acc_t *row_blocks_find(row_blocks_t *b, const char *kernel, const char *reference)
{
    for (int64_t i = 0; i < b->count; i++)
        if (!strcmp(b->accs[i].first.kernel, kernel) && !strcmp(b->accs[i].first.reference, reference))
            return &b->accs[i];
    row_block_acc_t *acc = ARRAY_APPEND_ZEROED(b->accs, b->count, b->cap, 16);
    if (!acc)
        return NULL;
    kr_strlcpy(acc->first.kernel, kernel, sizeof acc->first.kernel);
    kr_strlcpy(acc->first.reference, reference, sizeof acc->first.reference);
    metrics_merge_init(&acc->metrics, &acc->sums);
    acc->digest = BF16_DIGEST_SEED;
    return acc;
}

int row_blocks_fold(row_blocks_t *b, const result_t *r, row_kind_t kind,
                    const metrics_sums_t *sums, int64_t cols, int input_nf_blockwise,
                    const uint16_t *out_bits, int64_t n_out)
{
    row_block_acc_t *acc = row_blocks_find(b, r->kernel, r->reference);
    if (!acc)
        return -1;
    if (acc->blocks == 0) {
        acc->kind = kind;
        acc->first = *r;
        acc->first.diagnosis[0] = acc->first.diagnosis_family[0] = acc->first.diag_party[0] = '\0';
        acc->first_block_offset = b->block_offset;
        acc->input_nf_blockwise = input_nf_blockwise;
    }
    if (r->diagnosis[0] && !acc->first.diagnosis[0]) {
        /* The first block that failed says what it matched, with its rows
         * when there are several blocks: the diagnosis saw those only. */
        char *d = acc->first.diagnosis;
        const size_t cap = sizeof acc->first.diagnosis;
        d[0] = '\0';
        if (b->block_rows < b->full_M)
            snprintf(d, cap, "(rows %lld-%lld) ", (long long)b->block_offset,
                     (long long)(b->block_offset + b->block_rows - 1));
        const size_t len = strlen(d);
        kr_strlcpy(d + len, r->diagnosis, cap - len);
        kr_strlcpy(acc->first.diagnosis_family, r->diagnosis_family, sizeof acc->first.diagnosis_family);
        kr_strlcpy(acc->first.diag_party, r->diag_party, sizeof acc->first.diag_party);
    }
    acc->blocks++;
    acc->seconds += r->seconds;
    if (kind != ROW_KIND_NOTE) {
        metrics_merge_rows(&acc->metrics, &acc->sums, &r->metrics, sums, b->block_offset, cols);
        ulp_stats_merge(&acc->ulp, &r->ulp);
    }
    if (input_nf_blockwise) {
        acc->input_nf.nan += r->input_nf.nan;
        acc->input_nf.pos_inf += r->input_nf.pos_inf;
        acc->input_nf.neg_inf += r->input_nf.neg_inf;
    }
    if (out_bits) {
        acc->digest = bf16_digest_update(acc->digest, out_bits, n_out);
        acc->has_digest = 1;
    }
    return 0;
}

void row_blocks_extra_note(row_blocks_t *b, const result_t *r, const char *text, int rows_scoped)
{
    row_block_acc_t *acc = row_blocks_find(b, r->kernel, r->reference);
    if (!acc || acc->first_block_offset != b->block_offset || !text || !text[0])
        return;
    char *note = acc->extra_note;
    const size_t cap = sizeof acc->extra_note;
    size_t len = strlen(note);
    if (len + 3 >= cap)
        return;
    if (len) {
        kr_strlcpy(note + len, "; ", cap - len);
        len += 2;
    }
    if (rows_scoped && b->block_rows < b->full_M) {
        snprintf(note + len, cap - len, "(rows %lld-%lld) ", (long long)b->block_offset,
                 (long long)(b->block_offset + b->block_rows - 1));
        len += strlen(note + len);
    }
    kr_strlcpy(note + len, text, cap - len);
}

void row_blocks_add_counts(row_blocks_t *b, const result_t *r, const int64_t *counts, int n)
{
    row_block_acc_t *acc = row_blocks_find(b, r->kernel, r->reference);
    for (int i = 0; acc && i < n && i < ROW_BLOCK_COUNTS; i++)
        acc->counts[i] += counts[i];
}

void row_blocks_free(row_blocks_t *b)
{
    free(b->accs);
    memset(b, 0, sizeof *b);
}
