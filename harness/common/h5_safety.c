#include "h5_safety.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if H5_VERSION_GE(1, 12, 0)
typedef H5L_info2_t link_info_t;
#define LINK_VISIT H5Lvisit2
#define LINK_INFO H5Lget_info2
#define OBJ_INFO_BY_NAME(loc, name, info) H5Oget_info_by_name3(loc, name, info, H5O_INFO_BASIC, H5P_DEFAULT)
#define OBJ_INFO_BY_NAME_LAPL(loc, name, info, lapl) H5Oget_info_by_name3(loc, name, info, H5O_INFO_BASIC, lapl)
#define OBJ_INFO(loc, info) H5Oget_info3(loc, info, H5O_INFO_BASIC)
typedef H5O_info2_t obj_info_t;
#define SAME_FILE(a, b) ((a).fileno == (b).fileno)
#else
typedef H5L_info_t link_info_t;
#define LINK_VISIT H5Lvisit
#define LINK_INFO H5Lget_info
#if H5_VERSION_GE(1, 10, 3)
#define OBJ_INFO_BY_NAME(loc, name, info) H5Oget_info_by_name2(loc, name, info, H5O_INFO_BASIC, H5P_DEFAULT)
#define OBJ_INFO_BY_NAME_LAPL(loc, name, info, lapl) H5Oget_info_by_name2(loc, name, info, H5O_INFO_BASIC, lapl)
#define OBJ_INFO(loc, info) H5Oget_info2(loc, info, H5O_INFO_BASIC)
#else
#define OBJ_INFO_BY_NAME(loc, name, info) H5Oget_info_by_name(loc, name, info, H5P_DEFAULT)
#define OBJ_INFO_BY_NAME_LAPL(loc, name, info, lapl) H5Oget_info_by_name(loc, name, info, lapl)
#define OBJ_INFO(loc, info) H5Oget_info(loc, info)
#endif
typedef H5O_info_t obj_info_t;
#define SAME_FILE(a, b) ((a).fileno == (b).fileno)
#endif

typedef struct {
    hid_t root;
    const char *path;
    kr_error_t *err;
    int soft_pass;          /* 0: external links, user links, datasets; 1: soft links */
    obj_info_t root_info;
} walk_t;

/* A link's value (target path, or packed external-link value) as a string;
 * "?" when it cannot be read.  buf holds at least 2 bytes. */
static void link_value(hid_t root, const char *name, size_t size, char *buf, size_t cap)
{
    snprintf(buf, cap, "?");
    if (size == 0 || size >= cap)
        return;
    if (H5Lget_val(root, name, buf, size, H5P_DEFAULT) < 0)
        snprintf(buf, cap, "?");
    else
        buf[size] = '\0';
}

static int refuse_external_link(walk_t *w, const char *name, size_t size)
{
    char val[2048];
    link_value(w->root, name, size, val, sizeof val);
    const char *file = "?", *obj = "?";
    unsigned flags = 0;
    if (strcmp(val, "?") != 0 && H5Lunpack_elink_val(val, size, &flags, &file, &obj) < 0) {
        file = "?";
        obj = "?";
    }
    kr_fail(w->err, "%s: /%s is an external link (to %s:%s); refused: a case or results file "
                    "must hold all its data itself",
            w->path, name, file, obj);
    return 1;
}

static int check_dataset(walk_t *w, const char *name)
{
    hid_t obj = H5Oopen(w->root, name, H5P_DEFAULT);
    if (obj < 0)
        return 0;           /* unreadable objects are reported by the reader that needs them */
    int bad = 0;
    if (H5Iget_type(obj) == H5I_DATASET) {
        hid_t dcpl = H5Dget_create_plist(obj);
        if (dcpl < 0) {
            kr_fail(w->err, "%s: dataset /%s: cannot read its creation properties (corrupt "
                            "file?); refused", w->path, name);
            bad = 1;
        } else {
            int next = H5Pget_external_count(dcpl);
            H5D_layout_t layout = H5Pget_layout(dcpl);
            if (next > 0) {
                char ext[1024] = "?";
                off_t off = 0;
                hsize_t size = 0;
                if (H5Pget_external(dcpl, 0, sizeof ext, ext, &off, &size) < 0)
                    snprintf(ext, sizeof ext, "?");
                ext[sizeof ext - 1] = '\0';
                if (next > 1)
                    kr_fail(w->err, "%s: dataset /%s uses external raw storage (%s and %d more "
                                    "files); refused", w->path, name, ext, next - 1);
                else
                    kr_fail(w->err, "%s: dataset /%s uses external raw storage (%s); refused",
                            w->path, name, ext);
                bad = 1;
            } else if (next < 0) {
                kr_fail(w->err, "%s: dataset /%s: cannot read its storage properties (corrupt "
                                "file?); refused", w->path, name);
                bad = 1;
            } else if (layout == H5D_VIRTUAL) {
                size_t nmap = 0;
                char src[1024] = "?";
                if (H5Pget_virtual_count(dcpl, &nmap) >= 0 && nmap > 0 &&
                    H5Pget_virtual_filename(dcpl, 0, src, sizeof src) < 0)
                    snprintf(src, sizeof src, "?");
                src[sizeof src - 1] = '\0';
                kr_fail(w->err, "%s: dataset /%s is a virtual dataset (data mapped from %s); "
                                "refused", w->path, name, src);
                bad = 1;
            }
            H5Pclose(dcpl);
        }
    }
    H5Oclose(obj);
    return bad;
}

/* A soft link is checked once no external link exists anywhere in the file:
 * it must then resolve inside the file (or dangle, which readers report). */
static int check_soft_link(walk_t *w, const char *name, size_t size)
{
    obj_info_t info;
    if (OBJ_INFO_BY_NAME(w->root, name, &info) < 0)
        return 0;
    if (SAME_FILE(info, w->root_info))
        return 0;
    char val[2048];
    link_value(w->root, name, size, val, sizeof val);
    kr_fail(w->err, "%s: /%s is a soft link (to %s) that leaves the file; refused", w->path, name,
            val);
    return 1;
}

/* Traversal of any external link fails: resolving a soft link with this
 * callback on its access list never opens another file. */
static herr_t deny_elink(const char *parent_file, const char *parent_group, const char *child_file,
                         const char *child_object, unsigned *acc_flags, hid_t fapl, void *data)
{
    (void)parent_file;
    (void)parent_group;
    (void)child_file;
    (void)child_object;
    (void)acc_flags;
    (void)fapl;
    (void)data;
    return -1;
}

int h5_safety_check_object(hid_t loc, const char *name, const char *path, kr_error_t *err)
{
    link_info_t info;
    if (LINK_INFO(loc, name, &info, H5P_DEFAULT) < 0)
        return 0;           /* no such link: the reader says so itself */
    walk_t w = {.root = loc, .path = path, .err = err};
    if (info.type == H5L_TYPE_EXTERNAL)
        return refuse_external_link(&w, name, info.u.val_size) ? -1 : 0;
    if (info.type != H5L_TYPE_HARD && info.type != H5L_TYPE_SOFT)
        return kr_fail(err, "%s: /%s is a user-defined link (type %d); refused: only hard and "
                            "soft links inside the file are followed", path, name, (int)info.type);
    if (info.type == H5L_TYPE_SOFT) {
        hid_t lapl = H5Pcreate(H5P_LINK_ACCESS);
        if (lapl < 0 || H5Pset_elink_cb(lapl, deny_elink, NULL) < 0) {
            if (lapl >= 0)
                H5Pclose(lapl);
            return kr_fail(err, "%s: /%s: cannot set up an HDF5 link access list; expected a "
                                "working HDF5 library", path, name);
        }
        obj_info_t target, here;
        herr_t r = OBJ_INFO_BY_NAME_LAPL(loc, name, &target, lapl);
        H5Pclose(lapl);
        if (r < 0 || OBJ_INFO(loc, &here) < 0 || !SAME_FILE(target, here)) {
            char val[2048];
            link_value(loc, name, info.u.val_size, val, sizeof val);
            return kr_fail(err, "%s: /%s is a soft link (to %s) that does not resolve inside the "
                                "file; refused", path, name, val);
        }
    }
    return check_dataset(&w, name) ? -1 : 0;
}

static herr_t visit_link(hid_t group, const char *name, const link_info_t *info, void *data)
{
    (void)group;
    walk_t *w = data;
    if (w->soft_pass)
        return info->type == H5L_TYPE_SOFT ? check_soft_link(w, name, info->u.val_size) : 0;
    switch (info->type) {
    case H5L_TYPE_HARD:
        return check_dataset(w, name);
    case H5L_TYPE_SOFT:
        return 0;
    case H5L_TYPE_EXTERNAL:
        return refuse_external_link(w, name, info->u.val_size);
    default:
        kr_fail(w->err, "%s: /%s is a user-defined link (type %d); refused: only hard and soft "
                        "links inside the file are followed", w->path, name, (int)info->type);
        return 1;
    }
}

int h5_safety_check(hid_t file, const char *path, kr_error_t *err)
{
    walk_t w = {.path = path, .err = err};
    w.root = H5Gopen2(file, "/", H5P_DEFAULT);
    if (w.root < 0)
        return kr_fail(err, "%s: /: cannot open the root group (corrupt file?); expected a "
                            "readable root group", path);
    int rc = 0;
    if (OBJ_INFO(w.root, &w.root_info) < 0) {
        kr_fail(err, "%s: /: cannot read the root group's object header (corrupt file?); "
                     "expected a readable root group", path);
        rc = 1;
        goto done;
    }
    for (w.soft_pass = 0; w.soft_pass < 2 && rc == 0; w.soft_pass++) {
        herr_t r = LINK_VISIT(w.root, H5_INDEX_NAME, H5_ITER_NATIVE, visit_link, &w);
        if (r > 0)
            rc = -1;
        else if (r < 0) {
            kr_fail(err, "%s: cannot walk the file's links (corrupt file?); expected readable "
                         "groups", path);
            rc = 1;
        }
    }
done:
    H5Gclose(w.root);
    return rc;
}

int h5_check_written(hid_t ds, const char *name, const char *path, kr_error_t *err)
{
    const hid_t space = H5Dget_space(ds);
    const hssize_t n = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    if (space >= 0)
        H5Sclose(space);
    if (n <= 0)
        return 0;   /* an empty dataset has nothing to write; the reader checks shapes */
    H5D_space_status_t status;
    if (H5Dget_space_status(ds, &status) < 0)
        return kr_fail(err, "%s: dataset /%s: cannot tell whether its data was written (corrupt "
                            "file?); expected written data", path, name);
    if (status == H5D_SPACE_STATUS_NOT_ALLOCATED)
        return kr_fail(err, "%s: dataset /%s: no storage allocated for its %lld elements (never "
                            "written: it would read as its fill value); refused, expected written "
                            "data", path, name, (long long)n);
    if (status == H5D_SPACE_STATUS_PART_ALLOCATED)
        return kr_fail(err, "%s: dataset /%s: only some of its chunks were ever written (the rest "
                            "would read as its fill value); refused, expected written data",
                       path, name);
    return 0;
}
