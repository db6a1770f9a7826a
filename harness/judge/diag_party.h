/* diag_party: the party a matched diagnosis blames -- the kernel that made
 * the output, the case's input (its values, or how the case labels them), or
 * the reference -- stored in result_t.diag_party beside the diagnosis line,
 * so that readers (the case headline, reports/case_headline.h) never parse
 * the line.
 *
 * It is the party the diagnosis itself claims, by the hypothesis that
 * matched (the headline decides whether the verdicts bear it out):
 *   rows-poisoned                the input (its poison, propagated)
 *   ref-rows-poisoned            the kernel against a reference built from its
 *                                own operands (R_exact, model:): it masked the
 *                                poison; else the input (the reference
 *                                propagates it, the kernel's codes are finite)
 *   wperm-undone, wperm-applied, the input when the output is a recorded one
 *   scale-layout                 (the production kernel read its own weight; the
 *                                case holds it in another order or layout than
 *                                it says), or when the case's provenance says so
 *                                (the diagnosis's "case side"); else the kernel
 *                                (it misread)
 *   unsanitized, quant-variant   the reference on a recorded output (kreplay
 *                                built it from other activations than the
 *                                production kernel used); else the kernel
 *   any other                    the kernel (a factor, places, K blocks,
 *                                misreads, accumulation precision, sanitizing)
 * where "the kernel" of a recorded reference (recorded.ref, the serve's
 * in-process reference) is that reference's own computation: the reference.
 * A new hypothesis gets its line in diag_party.c's switch. */
#ifndef KR_DIAG_PARTY_H
#define KR_DIAG_PARTY_H

#include "diagnose.h"
#include "result.h"

/* The party r blames (PARTY_NONE when r matched nothing or the output was
 * clean); d: the input r was diagnosed from. */
party_t diag_party_of(const diag_input_t *d, const diag_result_t *r);

#endif
