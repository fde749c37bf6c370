/* SPDX-License-Identifier: ISC */
/*
 * iniedit: a byte-preserving editor for the operator's INI file, and the
 * locked, atomic replacement of that file. The editor splits the file into
 * lines and classifies each one exactly as inih does (comments, blank
 * lines, section headers, keys, indented continuation lines); an edit
 * rewrites only the lines of the keys it must change and keeps every other
 * byte (comments, blank lines, order, unrelated sections, line endings).
 * The editor decides nothing about meaning: callers validate the whole
 * result with conf_load_buffer() before they write it.
 */
#ifndef EGRESS_INIEDIT_H
#define EGRESS_INIEDIT_H

#include <stddef.h>
#include <sys/stat.h>

#define INIEDIT_LINE_MAX 200 /* bytes per written line, no newline */
#define INIEDIT_FILE_MAX (16 * 1024 * 1024)
#define INIEDIT_WRAP	 78 /* a list longer than this wraps */

struct iniedit;

/*
 * Parse buf (len bytes, not NUL-terminated) into a new document. Return 0
 * and write *ret, EGRESS_ERR_TOO_BIG over INIEDIT_FILE_MAX, or
 * EGRESS_ERR_NOMEM. Never fails on content: unparseable lines are kept.
 */
int iniedit_parse(const char *buf, size_t len, struct iniedit **ret);

/* Free a document. NULL is a no-op. */
void iniedit_free(struct iniedit *d);

/* Answer whether a section [name] exists. Return 1 or 0. */
int iniedit_section_exists(const struct iniedit *d, const char *name);

/*
 * Append an empty section [name] at the end of the file, after one blank
 * line. Return 0, EGRESS_ERR_EXISTS if it is already there,
 * EGRESS_ERR_INVALID for a name holding ']', a newline or ';', or
 * EGRESS_ERR_NOMEM.
 */
int iniedit_section_add(struct iniedit *d, const char *name);

/*
 * Remove every [name] section: its header, its keys and comments up to
 * its last key, and the comment block attached directly above the header;
 * one of two blank lines left adjacent by the removal goes too. Return 0
 * or EGRESS_ERR_NOT_FOUND.
 */
int iniedit_section_remove(struct iniedit *d, const char *name);

/*
 * Set the scalar key in [section] to value. An existing key keeps its
 * spelling, spacing and inline comment; only the value changes (later
 * repeats and continuation lines of it are removed). A new key goes after
 * the section's last key. Return 0, EGRESS_ERR_NOT_FOUND without the
 * section, EGRESS_ERR_INVALID for a value holding a newline,
 * EGRESS_ERR_TOO_BIG for a line over INIEDIT_LINE_MAX, or NOMEM.
 */
int iniedit_set(struct iniedit *d, const char *section, const char *key,
    const char *value);

/*
 * Set the list key in [section] to items (n of them, each without commas
 * or whitespace). The first occurrence of the key is rewritten in place
 * ("key = a, b" when it fits in INIEDIT_WRAP bytes, otherwise one item a
 * line on indented continuation lines); its other occurrences are removed;
 * comment and blank lines inside its span are kept. Errors as for
 * iniedit_set(), plus EGRESS_ERR_INVALID for an empty or spaced item.
 */
int iniedit_set_list(struct iniedit *d, const char *section, const char *key,
    const char *const *items, size_t n);

/*
 * Render the document. Write a malloc'd buffer (NUL-terminated, owned by
 * the caller) to *ret_buf and its length to *ret_len. Return 0 or NOMEM.
 */
int iniedit_render(const struct iniedit *d, char **ret_buf, size_t *ret_len);

/* ---- The file: lock, read, replace ----------------------------------- */

/*
 * An open edit of one file: the exclusive lock on ".BASENAME.lock" beside
 * it, and the bytes and identity read under that lock.
 */
struct iniedit_file {
	char *path;
	char *dir; /* the file's folder */
	int lockfd;
	char *buf; /* the bytes as read, NUL-terminated */
	size_t len;
	struct stat st;
};

/*
 * Take the exclusive lock beside path (creating the lock file, mode 0600),
 * waiting for any other holder, then read the whole file. Return 0 and fill
 * *f; return a negative error with a message in err (errlen bytes)
 * otherwise, holding nothing. Release with iniedit_file_close().
 */
int iniedit_file_open(const char *path, struct iniedit_file *f, char *err,
    size_t errlen);

/*
 * Replace the file with len bytes of buf: write a temporary file in the
 * same folder with the original's mode and owner, fsync it, rename it over
 * the original and fsync the folder. On any failure the original is
 * untouched and the temporary file removed. Return 0, or a negative error
 * with a message in err.
 *
 * Test hook: when EGRESSCTL_TEST_PAUSE=after-temp is set in the
 * environment (and the process is not set-id), the process stops itself
 * with SIGSTOP after the temporary file is complete and before the rename,
 * so a test can kill it there. The hook only ever pauses.
 */
int iniedit_file_replace(struct iniedit_file *f, const char *buf, size_t len,
    char *err, size_t errlen);

/* Release the lock and free f's fields. Safe on a zeroed or closed f. */
void iniedit_file_close(struct iniedit_file *f);

/*
 * Write len bytes of buf to path atomically (temporary file in the same
 * folder, fsync, rename, fsync of the folder) with the given mode; the same
 * hook as iniedit_file_replace() applies. Return 0 or a negative error with
 * a message in err.
 */
int iniedit_write_atomic(const char *path, const char *buf, size_t len,
    mode_t mode, char *err, size_t errlen);

#endif /* EGRESS_INIEDIT_H */
