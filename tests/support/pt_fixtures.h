/* The torch.save fixtures under tests/fixtures/pt (written by
 * scripts/fixtures/make_pt_fixtures.py with a real torch) for the .pt
 * reader's tests (test_torch_pt.c, test_torch_pt_refusals.c): their folder,
 * what both mains do first (are the fixtures all there?), and the check of
 * a message's phrase. */
#ifndef KR_PT_FIXTURES_H
#define KR_PT_FIXTURES_H

#define FIX KREPLAY_SOURCE_DIR "/tests/fixtures/pt"

/* Fails the test, printing both, unless hay contains needle. */
void assert_contains(const char *hay, const char *needle);

/* What a .pt test's main does before its tests: 0, with a line naming TEST
 * on stderr, when a fixture is missing (the test is skipped, not failed);
 * else 1, HDF5's own error stack silenced (the tests assert its failures). */
int pt_tests_ready(const char *test);

#endif
