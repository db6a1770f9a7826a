/* An enum's names as a table indexed by its values, and the two lookups
 * every such table needs (value -> name, name -> value), written once. */
#ifndef KR_NAME_TABLE_H
#define KR_NAME_TABLE_H

/* names[v] for 0 <= v < count, else "unknown". */
const char *name_table_name(const char *const *names, int count, int v);
/* The v with names[v] equal to name, or -1 (also for a NULL name). */
int name_table_find(const char *const *names, int count, const char *name);

/* Defines `const char *PREFIX_name(TYPE v)` and
 * `int PREFIX_from_name(const char *name, TYPE *out)` (0, or -1 leaving *out
 * alone) over the array NAMES, which has one entry per value. */
#define NAME_TABLE_LOOKUPS(prefix, type, names)                                               \
    const char *prefix##_name(type v)                                                         \
    {                                                                                         \
        return name_table_name(names, (int)(sizeof names / sizeof names[0]), (int)v);         \
    }                                                                                         \
    int prefix##_from_name(const char *name, type *out)                                       \
    {                                                                                         \
        const int v = name_table_find(names, (int)(sizeof names / sizeof names[0]), name);    \
        if (v < 0)                                                                            \
            return -1;                                                                        \
        *out = (type)v;                                                                       \
        return 0;                                                                             \
    }

#endif
