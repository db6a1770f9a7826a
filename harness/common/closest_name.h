/* "Did you mean": the name among candidates nearest a mistyped word, by edit
 * distance (insertions, deletions, substitutions), at most about a third of
 * the word's length away, so "jsno" finds "json" and a wild guess finds
 * nothing.  Every "did you mean" of the command line, the suites and the
 * gate's filters asks this one function. */
#ifndef KR_CLOSEST_NAME_H
#define KR_CLOSEST_NAME_H

/* The candidate closest to word (the first of equals), or NULL when none is
 * within (strlen(word) + 2) / 3 edits (at least 1). */
const char *closest_name(const char *word, const char *const *candidates, int n);

#endif
